"""tokens.out_of_vocab / tokens.dtype_overflow, length.over_max / length.mismatch and length stats."""
from __future__ import annotations

import polars as pl
import pytest
from checkhelp import audit_df, findings, one, skipped_reason


@pytest.mark.parametrize(
    "ids, vocab, rows, n_ids",
    [
        ([[1, 2, 3], [4, 10], [-1, 0], [], None, [9]], 10, [1, 2], 2),
        ([[0, 9, 9]], 10, [], 0),
        ([[50257, 1, 50300]], 50257, [0], 2),
    ],
)
def test_out_of_vocab(tmp_path, ids, vocab, rows, n_ids):
    df = pl.DataFrame({"input_ids": ids}, schema={"input_ids": pl.List(pl.Int64)})
    rep = audit_df(tmp_path, df, {"tokens": {"vocab_size": vocab}})
    got = findings(rep, "tokens.out_of_vocab", "input_ids")
    assert [(f.rows, f.count, f.severity) for f in got] == ([(tuple(rows), len(rows), "error")] if rows else [])
    if rows:
        assert f"({n_ids} ids;" in got[0].message
        assert f"[0, vocab_size={vocab})" in got[0].message


def test_out_of_vocab_example_and_extremes(tmp_path):
    rep = audit_df(tmp_path, {"input_ids": [[1, 2], [3, 4, 120, 5, 99]]}, {"tokens": {"vocab_size": 50}})
    f = one(rep, "tokens.out_of_vocab")
    assert f.examples[0].value == "'first at position 2 of 5: 120'"
    assert "(2 ids; offending ids range from 99 to 120)" in f.message


@pytest.mark.parametrize("dtype, vocab, overflow", [
    (pl.UInt16, 119547, True), (pl.UInt16, 65536, False), (pl.Int16, 40000, True), (pl.Int32, 250002, False),
])
def test_dtype_overflow(tmp_path, dtype, vocab, overflow):
    df = pl.DataFrame({"input_ids": [[1, 2]]}, schema={"input_ids": pl.List(dtype)})
    rep = audit_df(tmp_path, df, {"tokens": {"vocab_size": vocab}})
    got = findings(rep, "tokens.dtype_overflow", "input_ids")
    assert bool(got) == overflow
    if overflow:
        assert got[0].severity == "error" and str(vocab) in got[0].message


def test_token_checks_skipped_without_vocab(tmp_path):
    rep = audit_df(tmp_path, {"input_ids": [[1, 999999]]})
    assert skipped_reason(rep, "tokens.out_of_vocab") == "[tokens] vocab_size is not set"
    assert findings(rep, "tokens.out_of_vocab") == []


@pytest.mark.parametrize(
    "ids, max_len, rows",
    [
        ([[1, 2, 3], [1], [1, 2, 3, 4, 5], [], None], 3, [2]),
        ([[1, 2], [1, 2, 3]], 2, [1]),
        ([[1]], 1, []),
    ],
)
def test_over_max(tmp_path, ids, max_len, rows):
    df = pl.DataFrame({"input_ids": ids}, schema={"input_ids": pl.List(pl.Int64)})
    rep = audit_df(tmp_path, df, {"tokens": {"max_seq_len": max_len}})
    got = findings(rep, "length.over_max", "input_ids")
    assert [(f.rows, f.severity) for f in got] == ([(tuple(rows), "warn")] if rows else [])
    if rows:
        assert f"longer than max_seq_len {max_len} (longest {max(len(x) for x in ids if x)})" in got[0].message
    shard = rep.shards[0]
    # the rate is over the rows that hold a sequence (null rows are empty.sequence)
    assert shard.stats["truncation_rate"] == pytest.approx(len(rows) / sum(x is not None for x in ids))


def test_over_max_skipped_without_max_seq_len(tmp_path):
    rep = audit_df(tmp_path, {"input_ids": [[1, 2]]})
    assert skipped_reason(rep, "length.over_max") == "[tokens] max_seq_len is not set"


@pytest.mark.parametrize(
    "cols, rows",
    [
        ({"input_ids": [[1, 2], [1, 2, 3], [1]], "attention_mask": [[1, 1], [1, 1], [1]],
          "labels": [[1, 2], [1, 2, 3], [1, 2]]}, [1, 2]),
        ({"input_ids": [[1, 2]], "attention_mask": [[1, 1]]}, []),
        ({"input_ids": [[1, 2], [3]], "token_type_ids": [[0], [0]]}, [0]),
    ],
)
def test_mismatch(tmp_path, cols, rows):
    rep = audit_df(tmp_path, cols)
    got = findings(rep, "length.mismatch")
    assert [(f.rows, f.column, f.severity) for f in got] == ([(tuple(rows), None, "error")] if rows else [])


def test_mismatch_example_names_lengths(tmp_path):
    rep = audit_df(tmp_path, {"input_ids": [[1, 2, 3]], "attention_mask": [[1, 1]]})
    assert one(rep, "length.mismatch").examples[0].value == "'input_ids=3, attention_mask=2'"


def test_mismatch_aligned_group(tmp_path):
    cols = {"tokens": [["a", "b"], ["c"]], "ner_tags": [[0, 1], [0, 0]]}
    rep = audit_df(tmp_path, cols, {"columns": {"aligned": [["tokens", "ner_tags"]]}})
    f = one(rep, "length.mismatch")
    assert f.rows == (1,)
    assert "['tokens', 'ner_tags']" in f.message


def test_mismatch_skipped_with_one_list_column(tmp_path):
    rep = audit_df(tmp_path, {"input_ids": [[1]]})
    assert skipped_reason(rep, "length.mismatch") == "fewer than two list columns that must align"


def test_length_stats_exact_histogram(tmp_path):
    ids = [[1] * n for n in (1, 2, 2, 3, 3, 3, 10)]
    rep = audit_df(tmp_path, {"input_ids": ids}, {"tokens": {"max_seq_len": 3}})
    L = rep.shards[0].stats["lengths"]
    assert L["histogram"] == [[1, 1], [2, 2], [3, 3], [10, 1]]
    assert (L["min"], L["p50"], L["p90"], L["p99"], L["max"], L["count"]) == (1, 3, 10, 10, 10, 7)
    assert L["unit"] == "tokens" and L["column"] == "input_ids"
    assert rep.stats["lengths"]["histogram"] == L["histogram"]


def test_text_length_stats_in_chars(tmp_path):
    rep = audit_df(tmp_path, {"text": ["ab", "héé", None]})
    L = rep.shards[0].stats["lengths"]
    assert (L["unit"], L["histogram"]) == ("chars", [[0, 1], [2, 1], [3, 1]])
