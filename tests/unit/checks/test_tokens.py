"""tokens.out_of_vocab / tokens.dtype_overflow."""
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
