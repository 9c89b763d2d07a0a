"""The built-in layouts, each against a matching frame and against broken ones; the sample_data
sets audited with their layout."""
from __future__ import annotations

import polars as pl
import pytest
from conftest import ROOT
from schemahelp import audit, found, summary, write

from datacheck.contracts import LAYOUTS, layout_text, load_contract

L = pl.List


def _lm(**over):
    d = {"input_ids": pl.Series([[5, 6, 7], [8, 9, 0], [1, 2, 3]], dtype=L(pl.Int32)),
         "attention_mask": pl.Series([[1, 1, 1], [1, 1, 0], [1, 1, 1]], dtype=L(pl.Int8)),
         "labels": pl.Series([[-100, 6, 7], [-100, 9, -100], [1, 2, 3]], dtype=L(pl.Int64))}
    d.update(over)
    return pl.DataFrame(d)


def test_every_layout_loads_by_name():
    for name in LAYOUTS:
        c = load_contract(name)
        assert c.name == name
        assert c.schema.columns, name
        assert "schema_type: polars_dataframe" in layout_text(name)


def test_layout_files_are_the_top_level_schemas_folder():
    for name in LAYOUTS:
        assert layout_text(name) == (ROOT / "schemas" / f"{name}.yaml").read_text(encoding="utf-8")


def test_causal_lm_matching(tmp_path):
    assert found(audit(write(tmp_path, _lm()), "causal_lm")) == []


def test_causal_lm_broken(tmp_path):
    df = _lm(
        input_ids=pl.Series([[5, 6, 7], [], [1, -2, 3]], dtype=L(pl.Int32)),
        attention_mask=pl.Series([[1, 1, 1], None, [1, 3, 1]], dtype=L(pl.Int8)),
    )
    got = summary(audit(write(tmp_path, df), "causal_lm"))
    assert ("schema.nullable", "attention_mask", 1, (1,)) in got
    assert ("schema.check", "input_ids", 1, (1,)) in got  # length 0 < min_length 1
    assert ("schema.check", "input_ids", 1, (2,)) in got  # id -2 < 0
    assert ("schema.check", "attention_mask", 1, (2,)) in got  # 3 not in [0, 1]


def test_causal_lm_wrong_kind_and_missing(tmp_path):
    df = pl.DataFrame({"input_ids": pl.Series([[0.5, 1.0]], dtype=L(pl.Float32)), "labels": [[1, 2]]})
    got = summary(audit(write(tmp_path, df), "causal_lm"))
    assert ("schema.dtype", "input_ids", 0, ()) in got
    assert ("schema.missing_column", "attention_mask", 0, ()) in got


def test_seq2seq(tmp_path):
    ok = pl.DataFrame({"input_ids": [[1, 2, 3]], "attention_mask": [[1, 1, 1]], "labels": [[4, 5]],
                       "decoder_input_ids": [[0, 4]], "decoder_attention_mask": [[1, 1]]})
    assert found(audit(write(tmp_path, ok, "ok.parquet"), "seq2seq")) == []
    bad = ok.vstack(pl.DataFrame({"input_ids": [[1]], "attention_mask": [[1]], "labels": [[]],
                                  "decoder_input_ids": [[0, 4, 5]], "decoder_attention_mask": [[1, 1]]}))
    got = summary(audit(write(tmp_path / "b", bad.drop("attention_mask"), "bad.parquet"), "seq2seq"))
    assert ("schema.missing_column", "attention_mask", 0, ()) in got
    assert ("schema.check", "labels", 1, (1,)) in got  # empty target
    assert ("schema.check", None, 1, (1,)) in got  # decoder ids and decoder mask not aligned


def test_text_classification(tmp_path):
    ok = pl.DataFrame({"sentence": ["a", "b"], "label": ["pos", "neg"], "idx": [0, 1]})
    assert found(audit(write(tmp_path, ok, "ok.parquet"), "text_classification")) == []
    bad = pl.DataFrame({"body": ["a"], "label": [[1]]})
    got = summary(audit(write(tmp_path / "b", bad, "bad.parquet"), "text_classification"))
    assert got == {("schema.missing_column", None, 0, ()),  # neither a text column nor token ids
                   ("schema.dtype", "label", 0, ())}
    # an encoder's tokenized rows hold the text as token ids (Hugging Face's classification examples)
    ids = pl.DataFrame({"input_ids": [[101, 7, 102], [101, 102]], "attention_mask": [[1, 1, 1], [1, 1]],
                        "token_type_ids": [[0, 0, 0], [0, 0]], "label": [1, 0]})
    assert found(audit(write(tmp_path / "ids", ids, "ok.parquet"), "text_classification")) == []
    bad_ids = pl.DataFrame({"input_ids": [[101, 7, 102], []], "attention_mask": [[1, 1, 1], [2]], "label": [1, 0]})
    got = summary(audit(write(tmp_path / "bi", bad_ids, "bad.parquet"), "text_classification"))
    assert ("schema.check", "input_ids", 1, (1,)) in got and ("schema.check", "attention_mask", 1, (1,)) in got


def test_token_classification(tmp_path):
    ok = pl.DataFrame({"tokens": [["EU", "rejects"], ["Peter"]], "ner_tags": [[3, 0], [1]]})
    assert found(audit(write(tmp_path, ok, "ok.parquet"), "token_classification")) == []
    bad = pl.DataFrame({"tokens": [["EU", "rejects"], ["Peter"], []], "ner_tags": [[3, 0], [1, 2], []]})
    rep = audit(write(tmp_path / "b", bad, "bad.parquet"), "token_classification")
    assert summary(rep) == {("schema.check", "tokens", 1, (2,))}  # no token
    # tags not aligned with tokens: tokens + ner_tags are an inferred aligned group,
    # so length.mismatch reports it and the contract does not compare it twice
    assert summary(rep, "length.") == {("length.mismatch", None, 1, (1,))}
    none = pl.DataFrame({"words": [["a"]], "ner_tags": [[0]]})
    got = summary(audit(write(tmp_path / "n", none, "none.parquet"), "token_classification"))
    assert got == {("schema.missing_column", None, 0, ())}


def test_tabular(tmp_path):
    ok = pl.DataFrame({"x1": [1.0, 2.0], "x2": [3, 4], "emb": [[0.1, 0.2], [0.3, 0.4]], "y": [0.5, 1.5]})
    assert found(audit(write(tmp_path, ok, "ok.parquet"), "tabular")) == []
    bad = pl.DataFrame({"x1": [1.0, None], "city": ["Oslo", "Rome"]})
    got = summary(audit(write(tmp_path / "b", bad, "bad.parquet"), "tabular"))
    assert got == {("schema.missing_column", "^(target|targets|label|y)$", 0, ()),
                   ("schema.dtype", "city", 0, ()),
                   ("schema.nullable", "x1", 1, (1,))}


SAMPLE = ROOT / "sample_data"


@pytest.mark.parametrize("folder,layout", [("lm_clean", "causal_lm"), ("cls_clean", "text_classification")])
def test_sample_data_clean_sets_pass_their_layout(folder, layout):
    if not (SAMPLE / folder).is_dir():
        pytest.skip("sample_data not generated")
    report = audit(SAMPLE / folder, layout)
    assert found(report) == []
    assert report.passed


def test_sample_data_token_defects_against_causal_lm():
    p = SAMPLE / "defects" / "empty" / "tokens.parquet"
    if not p.is_file():
        pytest.skip("sample_data not generated")
    got = summary(audit(p, "causal_lm"))
    # row 1: input_ids is [] (also empty.sequence); nothing else breaks the layout
    assert got == {("schema.check", "input_ids", 1, (1,))}


def test_tabular_column_matched_by_two_keys_is_reported_once(tmp_path):
    df = pl.DataFrame({"x": [1.0, 2.0], "target": pl.Series([None, "a"], dtype=pl.String)})
    got = summary(audit(write(tmp_path, df), "tabular"))
    assert got == {("schema.dtype", "target", 0, ())}
    df = pl.DataFrame({"x": [1.0, 2.0], "y": [None, 1.0]})
    got = summary(audit(write(tmp_path / "b", df), "tabular"))
    assert got == {("schema.nullable", "y", 1, (0,))}


def test_raw_text(tmp_path):
    """A corpus before tokenization: one text column (text, content, txt, ...), metadata allowed; the
    real WebDataset shards (txt.gz members, PROVENANCE.md) pass it as they are."""
    ok = pl.DataFrame({"text": ["a page", "Ein Satz.", "中文"], "url": ["u1", "u2", "u3"]})
    assert found(audit(write(tmp_path, ok, "ok.parquet"), "raw_text")) == []
    bad = pl.DataFrame({"text": ["a", None], "id": [1, 2]})
    rep = audit(write(tmp_path / "b", bad, "bad.parquet"), "raw_text")  # a null text is empty.text, once
    assert found(rep) == [] and summary(rep, "empty.") == {("empty.text", "text", 1, (1,))}
    none = pl.DataFrame({"body": ["a"]})
    got = summary(audit(write(tmp_path / "n", none, "none.parquet"), "raw_text"))
    assert {g[0] for g in got} == {"schema.missing_column"}
    wds = ROOT.parent / "shared" / "realdata" / "webdataset_text"
    if wds.is_dir():
        rep = audit(wds, "raw_text")
        assert found(rep) == [] and sum(s.rows for s in rep.shards) == 1003
