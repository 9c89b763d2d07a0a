"""labels.out_of_range / labels.unexpected_sentinel / labels.null (class and token labels) and
labels.unseen_class (dataset level)."""
from __future__ import annotations

import json
import math

import polars as pl
import pytest
from checkhelp import audit_df, findings, one, skipped_reason, write_shard
from conftest import REALDATA
from hypothesis import given
from hypothesis import strategies as st
from refs import SHARD_SETTINGS as SETTINGS
from refs import int_lists, rows_where, small_ints
from refs import n_rows as _rows
from refs import shard_failing as failing

import datacheck


@pytest.mark.parametrize(
    "labels, cfg, out_rows, sentinel_rows, null_rows",
    [
        ([0, 1, 2, -1, None, 1], {"num_classes": 2}, [2], [3], [4]),
        ([0, -100, 1, -1, -1], {"num_classes": 2}, [], [3, 4], []),           # -100 is the ignore index
        ([0, -100, 1, -1], {"num_classes": 2, "ignore_index": -1}, [], [1], []),
        ([0, 255, 1, 3], {"num_classes": 3, "ignore_index": 255}, [3], [], []),
        ([0, 255, 1, 3], {"num_classes": 3}, [1, 3], [], []),
        ([0, -5, 1], {"num_classes": 2, "ignore_index": False}, [], [1], []),
        ([0, 2, 7, 3, -1], {"classes": [0, 2, 7]}, [3], [4], []),
    ],
)
def test_class_label_domain(tmp_path, labels, cfg, out_rows, sentinel_rows, null_rows):
    rep = audit_df(tmp_path, pl.DataFrame({"label": labels}, schema={"label": pl.Int64}), {"labels": cfg})
    for check, rows in (("labels.out_of_range", out_rows), ("labels.unexpected_sentinel", sentinel_rows),
                        ("labels.null", null_rows)):
        got = findings(rep, check, "label")
        assert [(f.rows, f.count, f.severity) for f in got] == (
            [(tuple(rows), len(rows), "error")] if rows else []), check


def test_off_by_one_hint(tmp_path):
    rep = audit_df(tmp_path, {"label": [0, 1, 2, 2, 5]}, {"labels": {"num_classes": 2}})
    f = one(rep, "labels.out_of_range", "label")
    assert f.rows == (2, 3, 4)
    assert "2 equal num_classes (2): an off-by-one" in f.message
    assert "outputs 0..1" in f.message
    assert "255" not in f.message


def test_void_255_hint(tmp_path):
    rep = audit_df(tmp_path, {"label": [0, 255, 1]}, {"labels": {"num_classes": 19}})
    f = one(rep, "labels.out_of_range", "label")
    assert f.rows == (1,)
    assert "ignore_index = 255" in f.message
    assert "off-by-one" not in f.message


UNLABELED = (". Every label of this shard is -1: the split is unlabeled (as GLUE's test splits on the Hugging Face "
             "hub are: their hidden labels are stored as -1), and a loss or metric over it reads -1 as a class. Leave "
             "it out of training and evaluation, or give it its real labels")


@pytest.mark.parametrize("batch_rows", [None, 2])
def test_sentinel_on_an_unlabeled_split_says_so(tmp_path, monkeypatch, batch_rows):
    """Every label -1 (GLUE's test splits as the hub stores them): one finding, same ID and count,
    whose message says the split is unlabeled instead of asking to set ignore_index."""
    if batch_rows:
        monkeypatch.setenv("DATACHECK_BATCH_ROWS", str(batch_rows))
    labels = [-1] * 5
    rep = audit_df(tmp_path, {"sentence": [f"s{i}" for i in range(len(labels))], "label": labels},
                   {"labels": {"num_classes": 2}})
    f = one(rep, "labels.unexpected_sentinel", "label")
    assert (f.count, f.rows) == (len(labels), tuple(range(len(labels))))
    assert f.message == (f"{len(labels)} row(s) of 'label' hold negative labels that are not the loss's ignore index "
                         f"(ignore_index is -100): -1 x{len(labels)}" + UNLABELED)
    assert f.details["values"] == [{"label": -1, "count": len(labels)}]


@pytest.mark.parametrize("labels", [[-1, -1, 0, -1], [-1, -2, -1], [-1, None, -1]])
def test_sentinel_hint_only_when_every_label_is_minus_one(tmp_path, labels):
    rep = audit_df(tmp_path, pl.DataFrame({"label": labels}, schema={"label": pl.Int64}), {"labels": {"num_classes": 2}})
    f = one(rep, "labels.unexpected_sentinel", "label")
    assert "unlabeled" not in f.message and "Set [labels] ignore_index" in f.message


MINUS_ONE_TOKENS = (". Every row of this shard holds -1 labels and no other negative value: -1 is likely the ignore "
                    "value the labels were written with (transformers before v2.4 masked labels with -1), and a loss "
                    "that ignores another value indexes class -1. Set [labels] ignore_index = -1 if the loss ignores "
                    "-1 (rows whose labels are all -1 then have no supervised token), else rewrite the labels with the "
                    "loss's ignore index")


@pytest.mark.parametrize("batch_rows", [None, 2])
def test_token_labels_with_minus_one_in_every_row_name_the_ignore_value(tmp_path, monkeypatch, batch_rows):
    """Token labels masked with -1 (transformers < 2.4's convention) in every row: the message says -1
    is likely the labels' ignore value and what setting ignore_index = -1 changes; the class labels'
    "unlabeled split" hint (GLUE) is not said of token labels."""
    if batch_rows:
        monkeypatch.setenv("DATACHECK_BATCH_ROWS", str(batch_rows))
    ids = [[5, 6, 7], [8, 9], [1, 2, 3, 4], [3]]
    labels = [[-1, 6, -1], [-1, -1], [-1, -1, 3, -1], [-1]]
    df = pl.DataFrame({"input_ids": ids, "labels": labels},
                      schema={"input_ids": pl.List(pl.Int64), "labels": pl.List(pl.Int64)})
    f = one(audit_df(tmp_path, df), "labels.unexpected_sentinel", "labels")
    minus = sum(row.count(-1) for row in labels)
    assert (f.count, f.rows) == (len(labels), tuple(range(len(labels))))
    assert f.message == (f"{len(labels)} row(s) of 'labels' hold negative token labels other than ignore_index -100: "
                         f"-1 x{minus}" + MINUS_ONE_TOKENS)
    assert "unlabeled" not in f.message
    with_ignore = audit_df(tmp_path / "ign", df, {"labels": {"ignore_index": -1}})
    assert findings(with_ignore, "labels.unexpected_sentinel") == []
    assert one(with_ignore, "empty.no_supervised_tokens", "labels").rows == tuple(
        r for r, row in enumerate(labels) if all(x == -1 for x in row))


@pytest.mark.parametrize("labels", [[[-1, 2], [4, 5]], [[-1, 2], [-2, -1]]])
def test_token_label_hint_only_when_every_row_holds_minus_one_only(tmp_path, labels):
    df = pl.DataFrame({"input_ids": [[1, 2]] * len(labels), "labels": labels},
                      schema={"input_ids": pl.List(pl.Int64), "labels": pl.List(pl.Int64)})
    f = one(audit_df(tmp_path, df), "labels.unexpected_sentinel", "labels")
    assert "Every row of this shard" not in f.message


def test_sentinel_lists_distinct_values_and_counts(tmp_path):
    rep = audit_df(tmp_path, {"label": [-1, 0, -1, -2, -1, 1]}, {"labels": {"num_classes": 2}})
    f = one(rep, "labels.unexpected_sentinel", "label")
    assert (f.rows, f.count) == ((0, 2, 3, 4), 4)
    assert "-1 x3, -2 x1" in f.message
    assert "ignore_index is -100" in f.message
    assert findings(rep, "labels.out_of_range") == []  # sentinels are reported only once


def test_string_labels_with_classes(tmp_path):
    rep = audit_df(tmp_path, {"label": ["NOT", "OFF", "off", None, "NOT"]}, {"labels": {"classes": ["NOT", "OFF"]}})
    f = one(rep, "labels.out_of_range", "label")
    assert f.rows == (2,)
    assert "'off' x1" in f.message
    assert one(rep, "labels.null", "label").rows == (3,)


def test_string_labels_with_num_classes_is_a_dtype_finding(tmp_path):
    # semantics changed: a string label while num_classes is set is schema.dtype, not a silent skip
    rep = audit_df(tmp_path, {"label": ["a", "b"]}, {"labels": {"num_classes": 2}})
    f = one(rep, "schema.dtype", "label")
    assert f.severity == "error" and rep.passed is False
    assert "give [labels] classes" in f.message
    assert f.details == {"role": "label", "expected": "an integer class index (num_classes is set)",
                         "actual": "String", "source": "roles"}
    assert skipped_reason(rep, "labels.out_of_range") == (
        "label column 'label' has dtype String, not an integer class index (num_classes is set) "
        "(reported as schema.dtype)")


def test_label_domain_skipped_without_num_classes(tmp_path):
    rep = audit_df(tmp_path, {"label": [0, 1, 7]})
    assert findings(rep, "labels.out_of_range") == []
    assert skipped_reason(rep, "labels.out_of_range") == "no [labels] num_classes or classes for label column 'label'"
    assert skipped_reason(rep, "labels.unseen_class") == "no [labels] num_classes or classes"


def test_no_label_column_skips_label_checks(tmp_path):
    rep = audit_df(tmp_path, {"text": ["a"]}, {"labels": {"num_classes": 2}, "dataset": {"layout": "text_classification"}})
    for cid in ("labels.out_of_range", "labels.unexpected_sentinel", "labels.null", "labels.unseen_class"):
        assert skipped_reason(rep, cid) is not None, cid


@pytest.mark.parametrize(
    "labels, cfg, out_rows, sentinel_rows",
    [
        ([[1, -100, 3], [-1, 2], [10, 0], [], None], {"tokens": {"vocab_size": 10}}, [2], [1]),
        ([[1, 255], [5, 9]], {"tokens": {"vocab_size": 10}, "labels": {"ignore_index": 255}}, [], []),
        ([[-100, 4], [1, 3]], {"labels": {"num_classes": 4}}, [0], []),
    ],
)
def test_token_labels(tmp_path, labels, cfg, out_rows, sentinel_rows):
    df = pl.DataFrame({"labels": labels}, schema={"labels": pl.List(pl.Int64)})
    rep = audit_df(tmp_path, df, cfg)
    for check, rows in (("labels.out_of_range", out_rows), ("labels.unexpected_sentinel", sentinel_rows)):
        got = findings(rep, check, "labels")
        assert [f.rows for f in got] == ([tuple(rows)] if rows else []), check


def test_token_label_examples_give_first_bad_position(tmp_path):
    rep = audit_df(tmp_path, {"labels": [[1, 2, 3], [0, 0, 0, 12, 40]]}, {"tokens": {"vocab_size": 10}})
    f = one(rep, "labels.out_of_range", "labels")
    assert f.examples[0].value == "'first at position 3 of 5: 12'"
    assert "largest 40" in f.message
    rep = audit_df(tmp_path, {"labels": [[1, -7, 3]]}, {"tokens": {"vocab_size": 10}})
    assert one(rep, "labels.unexpected_sentinel").examples[0].value == "'first at position 1 of 3: -7'"


def test_token_labels_null_list(tmp_path):
    df = pl.DataFrame({"labels": [[1], None]}, schema={"labels": pl.List(pl.Int64)})
    rep = audit_df(tmp_path, df)
    assert one(rep, "labels.null", "labels").rows == (1,)
    assert "no [tokens] vocab_size" in skipped_reason(rep, "labels.out_of_range")


@pytest.mark.parametrize("labels, null_rows, message", [
    ([[-100, None, 3], [1, 2], [None, None]], (0, 2), "2 row(s) of 'labels' hold null token labels"),
    ([[1, 2], None, [3, None]], (1, 2), "1 row(s) of 'labels' hold null token labels (a position with no label); "
                                        "1 more have no token labels (null)"),
    ([None, [1]], (0,), "1 row(s) have no token labels in 'labels' (null)"),
])
def test_a_null_token_label_inside_a_row_is_labels_null(tmp_path, labels, null_rows, message):
    """A null among a row's token labels has no class: labels.null at that row (it failed no rule),
    the example naming the first null's position."""
    df = pl.DataFrame({"input_ids": [[1] * len(r) if r is not None else [1] for r in labels], "labels": labels},
                      schema={"input_ids": pl.List(pl.Int64), "labels": pl.List(pl.Int64)})
    rep = audit_df(tmp_path, df, {"tokens": {"vocab_size": 10}})
    f = one(rep, "labels.null", "labels")
    assert f.rows == null_rows and f.message.startswith(message)
    first = labels[null_rows[0]]
    if first is not None:
        assert f.examples[0].value == f"'first at position {first.index(None)} of {len(first)}: null'"


def test_unseen_class_across_shards(tmp_path):
    write_shard(tmp_path, {"label": [0, 0, 1]}, "a.parquet")
    write_shard(tmp_path, {"label": [1, 3]}, "b.parquet")
    rep = datacheck.audit(str(tmp_path), config={"labels": {"num_classes": 5}})
    f = one(rep, "labels.unseen_class")
    assert (f.count, f.severity, f.column) == (2, "warn", "label")
    assert f.details["unseen"] == [2, 4]
    assert "[2, 4]" in f.message
    assert rep.stats["labels"]["counts"] == [[0, 2], [1, 2], [3, 1]]


def test_unseen_class_with_string_classes(tmp_path):
    rep = audit_df(tmp_path, {"label": ["NOT", "NOT"]}, {"labels": {"classes": ["NOT", "OFF"]}})
    assert one(rep, "labels.unseen_class").details["unseen"] == ["OFF"]


def test_every_class_seen_gives_no_finding(tmp_path):
    rep = audit_df(tmp_path, {"label": [0, 1]}, {"labels": {"num_classes": 2}})
    assert findings(rep, "labels.unseen_class") == []


@pytest.mark.parametrize(
    "labels, cfg, null_rows, out_rows, sentinel_rows",
    [
        # pandas writes a missing label as NaN: it is labels.null, never out_of_range
        ([0.0, float("nan"), 1.0, None, 2.0, 0.5, -1.0], {"num_classes": 2}, [1, 3], [4, 5], [6]),
        ([0.0, float("nan"), 7.0, 3.0], {"classes": [0, 7]}, [1], [3], []),
    ],
)
def test_float_class_labels(tmp_path, labels, cfg, null_rows, out_rows, sentinel_rows):
    # a float column is a class label only when [columns] names it (inferred, it is a regression target)
    rep = audit_df(tmp_path, pl.DataFrame({"label": labels}, schema={"label": pl.Float64}),
                   {"labels": cfg, "columns": {"label": "label"}})
    for check, rows in (("labels.null", null_rows), ("labels.out_of_range", out_rows),
                        ("labels.unexpected_sentinel", sentinel_rows)):
        got = findings(rep, check, "label")
        assert [f.rows for f in got] == ([tuple(rows)] if rows else []), check
    assert "(null or NaN)" in one(rep, "labels.null").message


# ---------------------------------------------------------------- property tests against a plain-Python reference
def ref_label_null(v) -> bool:
    """A missing class label: null, or NaN in a float column."""
    return v is None or (isinstance(v, float) and math.isnan(v))


def ref_label_sentinel(v, ign: int | None) -> bool:
    return not ref_label_null(v) and v < 0 and v != ign


def ref_label_out_of_range(v, k: int, ign: int | None) -> bool:
    """>= num_classes, or (float labels) a fractional value; never the ignore index or a sentinel."""
    if ref_label_null(v) or v == ign:
        return False
    return v >= k or (v >= 0 and v != math.floor(v))


def ref_label_not_in_classes(v, classes: list[int], ign: int | None) -> bool:
    return not ref_label_null(v) and v not in classes and v != ign and not ref_label_sentinel(v, ign)


def ref_token_label_null(lst) -> bool:
    """No token labels (a null row), or a null label at some position."""
    return lst is None or any(x is None for x in lst)


def ref_token_label_sentinel(lst, ign: int | None) -> bool:
    return lst is not None and any(x is not None and x < 0 and x != ign for x in lst)


def ref_token_label_out_of_range(lst, bound: int, ign: int | None) -> bool:
    return lst is not None and any(x is not None and x >= bound and x != ign for x in lst)


ignores = st.sampled_from([-100, -1, 255, None])


float_labels = st.one_of(small_ints.map(lambda v: None if v is None else float(v)),
                         st.sampled_from([float("nan"), 0.5, 1.5, -0.5, float("inf"), float("-inf")]))


@SETTINGS
@given(data=st.data(), n=_rows(), ign=ignores, k=st.integers(1, 6), sparse=st.booleans(), as_float=st.booleans())
def test_class_labels_match_reference(data, n, ign, k, sparse, as_float):
    label = data.draw(st.lists(float_labels if as_float else small_ints, min_size=n, max_size=n))
    df = pl.DataFrame({"label": label}, schema={"label": pl.Float64 if as_float else pl.Int64})
    labels_cfg: dict = {"ignore_index": ign if ign is not None else False}
    classes = [0, 2, 7, 255] if sparse else None
    if sparse:
        labels_cfg["classes"] = classes
    else:
        labels_cfg["num_classes"] = k
    # a float column is a class label when [columns] names it (inferred, it would be a regression target)
    got = failing(df, {"labels": labels_cfg, "columns": {"label": "label"}})
    assert got.get("labels.null:label", set()) == rows_where(label, ref_label_null)
    assert got.get("labels.unexpected_sentinel:label", set()) == rows_where(label, lambda v: ref_label_sentinel(v, ign))
    if sparse:
        want = rows_where(label, lambda v: ref_label_not_in_classes(v, classes, ign))
    else:
        want = rows_where(label, lambda v: ref_label_out_of_range(v, k, ign))
    assert got.get("labels.out_of_range:label", set()) == want


@SETTINGS
@given(data=st.data(), n=_rows(), ign=ignores, vocab=st.sampled_from([5, 10, 300]))
def test_token_labels_match_reference(data, n, ign, vocab):
    labels = data.draw(st.lists(int_lists, min_size=n, max_size=n))
    df = pl.DataFrame({"labels": labels}, schema={"labels": pl.List(pl.Int64)})
    got = failing(df, {"labels": {"ignore_index": ign if ign is not None else False},
                       "tokens": {"vocab_size": vocab}})
    assert got.get("labels.null:labels", set()) == rows_where(labels, ref_token_label_null)
    assert got.get("labels.unexpected_sentinel:labels", set()) == rows_where(
        labels, lambda v: ref_token_label_sentinel(v, ign))
    assert got.get("labels.out_of_range:labels", set()) == rows_where(
        labels, lambda v: ref_token_label_out_of_range(v, vocab, ign))


def test_labels_beyond_64_bits_are_reported_with_the_bound_named(tmp_path):
    # JSON integers beyond Int64 are read at Int64's nearest bound: the message must not pass the bound
    # off as the file's value, and an ordinary out-of-range label gets no such note
    values = [0, 1, 2**63, 2**64 + 5, -(2**63) - 1, 7, 1]
    lines = "".join('{"text": "row %d", "label": %d}\n' % (i, v) for i, v in enumerate(values))
    (tmp_path / "a.jsonl").write_text(lines)
    rep = datacheck.audit(str(tmp_path / "a.jsonl"), config={"labels": {"num_classes": 3}})
    i64_max, i64_min = 2**63 - 1, -(2**63)
    high = [i for i, v in enumerate(values) if v >= 3]
    low = [i for i, v in enumerate(values) if v < 0]
    out = one(rep, "labels.out_of_range", "label")
    assert (out.rows, out.count) == (tuple(high), len(high))
    assert f"{i64_max} x{sum(v > i64_max for v in values)}" in out.message
    assert f"{i64_max} is Int64's bound: an integer beyond 64 bits in the file is read at it" in out.message
    sen = one(rep, "labels.unexpected_sentinel", "label")
    assert (sen.rows, sen.count) == (tuple(low), len(low))
    assert f"{i64_min} is Int64's bound" in sen.message
    plain = one(audit_df(tmp_path, pl.DataFrame({"label": [0, 5, 1]}), {"labels": {"num_classes": 3}}),
                "labels.out_of_range", "label")
    assert plain.message == "1 row(s) of 'label' hold labels outside [0, 3): 5 x1"


_TAGS = {"input_ids": [[101, 7592, 2088, 102], [101, 2023, 2003, 102], [101, 1037, 3231, 102]],
         "attention_mask": [[1, 1, 1, 1]] * 3,
         "labels": [[-100, 1, 0, -100], [-100, 5, 0, -100], [-100, 0, 2, -100]]}


@pytest.mark.parametrize("facts, bound", [
    ({"tokens": {"vocab_size": 30522}, "labels": {"num_classes": 2}}, 2),  # a tokenizer's facts beside the tag set
    ({"tokens": {"vocab_size": 30522}, "labels": {"classes": ["O", "B-PER", "I-PER"]}}, 3),  # tag names: ids index them
    ({"labels": {"num_classes": 2}}, 2),
])
def test_token_classification_labels_are_held_to_the_classes_not_the_vocabulary(tmp_path, facts, bound):
    """NER tags are class ids: a tag >= num_classes breaks the classifier head (CUDA index error)
    whatever the vocabulary; ``vocab_size`` bounds only token labels that are token ids (LM rows)."""
    rep = audit_df(tmp_path, _TAGS, facts)
    assert rep.shards[0].layout == "token_classification"
    want = tuple(i for i, row in enumerate(_TAGS["labels"]) if any(v >= bound for v in row if v != -100))
    f = one(rep, "labels.out_of_range")
    # the fact named as the scalar label's message names it: num_classes, or the number of the classes given
    name = "num_classes" if "num_classes" in facts["labels"] else "the number of classes"
    assert f.rows == want and f"token labels >= {name} {bound} " in f.message


def test_token_classification_labels_without_classes_are_not_bounded_by_the_vocabulary(tmp_path):
    rep = audit_df(tmp_path, _TAGS, {"tokens": {"vocab_size": 30522}})
    assert findings(rep, "labels.out_of_range") == []
    assert "num_classes" in (skipped_reason(rep, "labels.out_of_range") or "")


@pytest.mark.parametrize("classes", [None, ["Business", "Science and technology"]])
def test_a_blank_text_label_is_a_missing_label(tmp_path, classes):
    """The real prompted AG News JSONL (text labels in 'targets'): a target written as "" or "  " (a
    class never filled in) trained as a class of its own and passed; it is labels.null, as null is.
    ``[labels] classes`` or not, the blank rows are missing labels, not classes out of range."""
    (src,) = (REALDATA / "agnews_prompts_jsonl").glob("*.jsonl")
    rows = [json.loads(x) for x in src.read_text(encoding="utf-8").splitlines()]
    rows[5]["targets"], rows[17]["targets"], rows[30]["targets"] = "", "  ", None
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    want = tuple(i for i, r in enumerate(rows) if r["targets"] is None or not r["targets"].strip())
    cfg = {"columns": {"text": ["inputs"], "label": "targets"}} | ({"labels": {"classes": classes}} if classes else {})
    rep = datacheck.audit([str(path)], cfg, workers=1)
    f = one(rep, "labels.null", "targets")
    assert f.rows == want == (5, 17, 30) and "empty or whitespace-only" in f.message
    assert findings(rep, "labels.out_of_range") == []


def test_a_blank_class_named_in_classes_is_a_class(tmp_path):
    rep = audit_df(tmp_path, {"label": ["a", "", "b", None]}, {"labels": {"classes": ["a", "b", ""]}})
    assert one(rep, "labels.null", "label").rows == (3,)
    assert findings(rep, "labels.out_of_range") == []
