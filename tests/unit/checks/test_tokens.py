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


@pytest.mark.parametrize("ids, ignore_index", [
    ([[1, 2, -100, -100], [3, 4]], None),  # the default ignore_index -100 written into input_ids
    ([[5, -1], [-1, -1, 2]], None),  # a -1 pad
    ([[5, -1, -100], [7]], None),
    ([[5, -7], [-7, 2]], -7),  # a configured ignore_index
])
def test_out_of_vocab_advice_for_sentinel_ids_names_the_sentinel_not_vocab_size(tmp_path, ids, ignore_index):
    vocab = 50
    cfg = {"tokens": {"vocab_size": vocab}, **({"labels": {"ignore_index": ignore_index}} if ignore_index else {})}
    f = one(audit_df(tmp_path, {"input_ids": ids}, cfg), "tokens.out_of_vocab")
    bad = [i for row in ids for i in row if not 0 <= i < vocab]
    assert f.count == sum(any(not 0 <= i < vocab for i in row) for row in ids)
    shown = (f"the offending id is {bad[0]}" if min(bad) == max(bad)
             else f"offending ids range from {min(bad)} to {max(bad)}")
    values = " and ".join(str(v) for v in sorted({min(bad), max(bad)}))
    assert f"({len(bad)} ids; {shown}): {values} {'is a label sentinel' if len(set(bad)) == 1 else 'are label sentinels'}" \
        f" ([labels] ignore_index {ignore_index or -100} or -1), not token ids" in f.message
    assert "vocab mismatch" not in f.message


@pytest.mark.parametrize("ids", [[[1, -100], [3, 70, 2]], [[1, -15536]], [[1, 70]]])
def test_out_of_vocab_other_ids_keep_the_vocab_advice(tmp_path, ids):
    f = one(audit_df(tmp_path, {"input_ids": ids}, {"tokens": {"vocab_size": 50}}), "tokens.out_of_vocab")
    assert f.message.endswith(": a tokenizer/model vocab mismatch or a wrong vocab_size")
