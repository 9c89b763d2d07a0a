"""Role columns of the wrong dtype (schema.dtype from datacheck.checks.roledtype), role inference of
float labels, class-name indices, null elements in sequences, and attended-token lengths."""
from __future__ import annotations

import polars as pl
import pytest
from checkhelp import audit_df, findings, one, skipped_reason

import datacheck

IDS_SKIP = "input_ids column 'input_ids' has dtype {t}, not a list of integers (reported as schema.dtype)"


def _no_engine_errors(rep) -> None:
    """No skip reason carries a raw polars error or contradicts a role the config set."""
    for s in rep.skipped:
        assert "could not" not in s["reason"] and "list.eval" not in s["reason"], s


def _jsonl(tmp_path, text: str, config: dict):
    (tmp_path / "s.jsonl").write_text(text)
    return datacheck.audit(str(tmp_path / "s.jsonl"), config=config)


def test_mixed_json_types_in_input_ids_are_a_dtype_error(tmp_path):
    # The reader reports the line of the other JSON type and reads it as null;
    # the other rows keep their integer ids and are audited
    rep = _jsonl(tmp_path, '{"input_ids": [1, 2, 99999]}\n{"input_ids": [5, 6, 7]}\n{"input_ids": ["1", "2"]}\n',
                 {"tokens": {"vocab_size": 100}})
    f = one(rep, "schema.dtype", "input_ids")
    assert f.severity == "error" and not rep.passed
    assert f.lines == (3,) and f.details["json_types"] == {"array<number>": [1, 2], "array<string>": [3]}
    assert "mixes JSON types: mostly array<number> (2 row(s)), but array<string> at line 3" in f.message
    assert one(rep, "tokens.out_of_vocab", "input_ids").rows == (0,)
    _no_engine_errors(rep)


def test_float_ids_are_a_dtype_error(tmp_path):
    rep = _jsonl(tmp_path, '{"input_ids": [1, 2.5, 99999]}\n', {"tokens": {"vocab_size": 100}})
    f = one(rep, "schema.dtype", "input_ids")
    assert f.details["actual"] == "List(Float64)" and "some are not integers (e.g. 2.5)" in f.message
    assert skipped_reason(rep, "tokens.out_of_vocab") == IDS_SKIP.format(t="List(Float64)")


def test_mixed_json_label_types_with_num_classes(tmp_path):
    rep = _jsonl(tmp_path, '{"label": 0}\n{"label": "1"}\n{"label": 1.5}\n{"label": null}\n',
                 {"columns": {"label": "label"}, "labels": {"num_classes": 2}})
    f = one(rep, "schema.dtype", "label")
    assert f.lines == (2,) and f.details["read_as"] == "number"
    # the missing label only: the string (read as null) is schema.dtype's, named there with its value
    assert one(rep, "labels.null").rows == (3,)


def test_roles_mapped_to_wrong_columns(tmp_path):
    df = pl.DataFrame({"text": ["a b", "c"], "label": [0, 1]})
    rep = audit_df(tmp_path, df, {"columns": {"input_ids": "text", "attention_mask": "label"},
                                  "tokens": {"vocab_size": 10, "max_seq_len": 4, "pad_token_id": 0}})
    got = {f.column: f.details["role"] for f in findings(rep, "schema.dtype")}
    assert got == {"text": "input_ids", "label": "attention_mask"}
    assert not rep.passed
    reasons = {s["check"]: s["reason"] for s in rep.skipped}
    for cid in ("tokens.out_of_vocab", "length.over_max", "empty.sequence", "empty.all_padding"):
        assert reasons[cid] == "input_ids column 'text' has dtype String, not a list of integers (reported as schema.dtype)"
    assert reasons["mask.non_binary"] == ("attention_mask column 'label' has dtype Int64, not a list of 0/1 integers "
                                          "or booleans (reported as schema.dtype)")
    assert not any("no input_ids column" in r or "no attention_mask column" in r for r in reasons.values())
    _no_engine_errors(rep)


def test_nested_input_ids(tmp_path):
    df = pl.DataFrame({"input_ids": [[[1, 2], [3]], [[4]]]})
    rep = audit_df(tmp_path, df, {"tokens": {"vocab_size": 10, "max_seq_len": 2}})
    f = one(rep, "schema.dtype", "input_ids")
    assert f.details["actual"] == "List(List(Int64))" and "list of lists" in f.message
    assert findings(rep, "length.over_max") == [] and findings(rep, "tokens.out_of_vocab") == []
    _no_engine_errors(rep)


def test_a_contract_that_reports_the_column_is_not_doubled(tmp_path):
    (tmp_path / "c.yaml").write_text("columns:\n  input_ids:\n    dtype: List(Int64)\n")
    d = tmp_path / "d"
    d.mkdir()
    rep = _jsonl(d, '{"input_ids": ["1", "2"]}\n', {"dataset": {"schema": str(tmp_path / "c.yaml")},
                                                     "tokens": {"vocab_size": 10}})
    f = one(rep, "schema.dtype", "input_ids")
    assert "source" not in f.details or f.details["source"] != "roles"  # the contract's finding


def test_valid_role_dtypes_give_no_finding(tmp_path):
    df = pl.DataFrame({"text": ["a"], "label": [1], "input_ids": [[1, 2]], "attention_mask": [[True, False]],
                       "labels": [[1, -100]], "token_type_ids": [[0, 0]]})
    rep = audit_df(tmp_path, df, {"labels": {"num_classes": 2}, "tokens": {"vocab_size": 10}})
    assert findings(rep, "schema.dtype") == []


# ------------------------------------------------------------------ Float labels are targets
def test_float_label_column_is_inferred_as_target(tmp_path):
    df = pl.DataFrame({"sentence1": ["a", "b", "c"], "label": [0.3, -1.25, float("nan")]})
    rep = audit_df(tmp_path, df)
    assert rep.roles["target"] == {"columns": ["label"], "inferred": True}
    assert "label" not in rep.roles
    assert not [f for f in rep.findings if f.check.startswith("labels.") or f.check.startswith("dist.label")]
    assert one(rep, "finite.nan", "label").rows == (2,)


def test_float_label_column_with_num_classes_is_the_class_label(tmp_path):
    # A class domain makes a float label a class label (integral floats are classes)
    df = pl.DataFrame({"sentence1": ["a", "b", "c"], "label": [0.3, -1.25, float("nan")]})
    rep = audit_df(tmp_path, df, {"labels": {"num_classes": 2}})
    assert rep.roles["label"] == {"columns": "label", "inferred": True}
    assert one(rep, "labels.out_of_range", "label").rows == (0,)
    assert one(rep, "labels.unexpected_sentinel", "label").rows == (1,)
    assert one(rep, "labels.null", "label").rows == (2,)


def test_a_column_given_as_target_is_never_the_label(tmp_path):
    df = pl.DataFrame({"text": ["a", "b"], "label": [0, 7]})
    rep = audit_df(tmp_path, df, {"columns": {"target": ["label"]}, "labels": {"num_classes": 2}})
    assert rep.roles["target"] == {"columns": ["label"], "inferred": False}
    assert "label" not in rep.roles and findings(rep, "labels.out_of_range") == []


def test_a_float_column_named_as_label_stays_the_label(tmp_path):
    df = pl.DataFrame({"label": [0.0, 1.5, 1.0]})
    rep = audit_df(tmp_path, df, {"columns": {"label": "label"}, "labels": {"num_classes": 2}})
    f = one(rep, "labels.out_of_range")  # A non-integer is no class index
    assert f.rows == (1,)
    assert f.message == "1 row(s) of 'label' hold labels not an integer class index: 1.5 x1"


# ------------------------------------------------------------------ Class names index
def test_integer_labels_index_into_class_names(tmp_path):
    df = pl.DataFrame({"label": [0, 1, 2, 0, -1]})
    rep = audit_df(tmp_path, df, {"labels": {"classes": ["NOT", "OFF"], "ignore_index": -1}})
    f = one(rep, "labels.out_of_range")
    assert f.rows == (2,)
    assert "2 (no class name; classes has 2 names) x1" in f.message
    assert findings(rep, "labels.unseen_class") == []
    rep = audit_df(tmp_path, pl.DataFrame({"label": [0, 0]}), {"labels": {"classes": ["NOT", "OFF", "X"]}})
    assert one(rep, "labels.unseen_class").details["unseen"] == ["OFF", "X"]
    assert findings(rep, "labels.out_of_range") == []


def test_string_labels_still_match_names(tmp_path):
    rep = audit_df(tmp_path, pl.DataFrame({"label": ["NOT", "OFF", "1"]}), {"labels": {"classes": ["NOT", "OFF"]}})
    assert one(rep, "labels.out_of_range").rows == (2,)


# ------------------------------------------------------------------ Null elements
def test_null_elements_inside_sequences(tmp_path):
    df = pl.DataFrame({"input_ids": [[1, None, 3], [None], [4, 5]], "attention_mask": [[1, 1, None], [1], [1, 1]]},
                      schema={"input_ids": pl.List(pl.Int64), "attention_mask": pl.List(pl.Int64)})
    rep = audit_df(tmp_path, df, {"tokens": {"vocab_size": 10}})
    f = one(rep, "tokens.out_of_vocab")
    assert f.rows == (0, 1)
    assert [e.value for e in f.examples] == ["'first at position 1 of 3: null id'", "'first at position 0 of 1: null id'"]
    assert "2 null id(s): a null id has no embedding" in f.message
    m = one(rep, "mask.non_binary")
    assert m.rows == (0,) and m.examples[0].value == "'first at position 2 of 3: null'"
    assert not rep.passed


def test_jsonl_all_null_id_lists(tmp_path):
    rep = _jsonl(tmp_path, '{"input_ids": [null]}\n{"input_ids": []}\n', {"tokens": {"vocab_size": 10}})
    assert findings(rep, "schema.dtype") == []
    assert one(rep, "tokens.out_of_vocab").rows == (0,)
    assert one(rep, "empty.sequence").rows == (1,)


# ------------------------------------------------------------------ Attended length
@pytest.mark.parametrize("mask_dtype", [pl.Int8, pl.Boolean])
def test_over_max_counts_attended_tokens(tmp_path, mask_dtype):
    ids = [[1] * 6, [1] * 6, [1] * 3]
    mask = [[1, 1, 1, 1, 0, 0], [1] * 6, [1, 1, 1]]
    df = pl.DataFrame({"input_ids": ids, "attention_mask": mask},
                      schema={"input_ids": pl.List(pl.Int64), "attention_mask": pl.List(pl.Int8)})
    df = df.with_columns(pl.col("attention_mask").cast(pl.List(mask_dtype)))
    rep = audit_df(tmp_path, df, {"tokens": {"max_seq_len": 4}})
    f = one(rep, "length.over_max")
    assert f.rows == (1,) and "(longest 6)" in f.message and "attended tokens" in f.message
    stats = rep.shards[0].stats
    assert stats["lengths"]["histogram"] == [[3, 1], [4, 1], [6, 1]]
    assert stats["truncation_rate"] == pytest.approx(1 / 3)


def test_dkhate_mbert_attended_over_max(realdata):
    """The tester's measurement: 279 train rows have more than 64 attended tokens (all 2960 are padded to 128)."""
    rep = datacheck.audit(str(realdata / "dkhate_danish_offensive" / "dkhate_mbert" / "train"),
                          config={"tokens": {"max_seq_len": 64}})
    assert one(rep, "length.over_max").count == 279


def test_csv_input_ids_held_as_text(tmp_path):
    """A column named input_ids keeps its role whatever its dtype: a CSV cell holding "[1, 2, 3]" is
    schema.dtype, and the token checks never claim there is no input_ids column."""
    (tmp_path / "s.csv").write_text('text,input_ids\nhi,"[1, 2, 3]"\n')
    rep = datacheck.audit(str(tmp_path), config={"tokens": {"vocab_size": 10}})
    f = one(rep, "schema.dtype", "input_ids")
    assert f.details["actual"] == "String" and "CSV/TSV cells hold 'input_ids' as text" in f.message
    assert rep.roles["input_ids"] == {"columns": "input_ids", "inferred": True}
    assert skipped_reason(rep, "tokens.out_of_vocab") == IDS_SKIP.format(t="String")
