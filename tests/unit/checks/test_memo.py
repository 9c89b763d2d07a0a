"""Shared columns (datacheck.checks.memo.shared_column): a per-row kernel read by several expressions
is computed once per frame the engine evaluates them on, with the values the inline kernel gives;
the shared token pass of a batch is called once by the fused query, and its findings (rows,
examples, details: the second pass reads the shared column too) are those of the data."""
from __future__ import annotations

from unittest.mock import patch

import polars as pl

from datacheck.checks import _flat, memo
from datacheck.engine.shard import audit_frame
from datacheck.model.config import config_from_dict


def _counting_kernel(calls: list[int]) -> pl.Expr:
    """Per row, a struct of the list's length and sum; counts its calls."""
    def run(ss: list[pl.Series]) -> pl.Series:
        calls.append(1)
        s = ss[0]
        return pl.DataFrame({"n": s.list.len(), "total": s.list.sum()}).to_struct("k")

    return pl.map_batches([pl.col("a")], run, return_dtype=pl.Struct({"n": pl.UInt32, "total": pl.Int64}))


def test_a_shared_column_is_computed_once_for_every_expression_reading_it():
    calls: list[int] = []
    col = memo.shared_column(("test-kernel", 1), _counting_kernel(calls))
    exprs = [col.struct.field("n").sum().alias("n"), col.struct.field("total").max().alias("mx"),
             (col.struct.field("total") > 3).any().alias("big")]
    df = pl.DataFrame({"a": [[1, 2], [], None, [5]], "b": [1, 2, 3, 4]})
    got = memo.with_shared_columns(df.lazy(), exprs).select(exprs).collect()
    assert len(calls) == 1
    assert got.row(0) == (3, 5, True)  # lengths 2 + 0 + 1 (a null row has none), sums 3, 0, 5
    names, roots = memo.shared_roots(exprs)
    assert roots == {"a"} and len(names) == 1 and next(iter(names)).startswith(memo.SHARED_PREFIX)
    # equal keys and equal expressions (a new closure prints the same): the same column; the same key
    # with another expression (an input a key forgot): another column
    assert memo.shared_column(("test-kernel", 1), _counting_kernel([])).meta.root_names() == col.meta.root_names()
    assert memo.shared_column(("test-kernel", 1), pl.lit(0)).meta.root_names() != col.meta.root_names()
    assert memo.with_shared_columns(df.lazy(), [pl.col("b")]).collect_schema().names() == ["a", "b"]


EOT, EOS, IGN = 7, 2, -100
CFG = {"tokens": {"eot_token_ids": [EOT], "eos_token_id": EOS}, "labels": {"ignore_index": IGN},
       "dataset": {"layout": "sft_tokenized"}}


def test_the_token_pass_is_called_once_per_query_and_its_findings_hold():
    # row 1 supervises a prompt token, row 2 leaves its eot unsupervised; row 0 is clean
    ids = [[1, 3, 4, EOT, EOS], [1, 5, 4, EOT, EOS], [1, 6, 4, EOT, EOS]]
    labels = [[IGN, IGN, 4, EOT, EOS], [IGN, 5, 4, EOT, EOS], [IGN, IGN, 4, IGN, EOS]]
    am = [[0, 0, 1, 1, 1]] * 3
    frame = pl.DataFrame({"input_ids": ids, "labels": labels, "assistant_mask": am})
    calls: list[int] = []
    real = _flat.shared_pass

    def counted(*a, **k):
        calls.append(1)
        return real(*a, **k)

    with patch.object(_flat, "shared_pass", counted):
        clean = audit_frame(frame.head(1), config_from_dict(CFG))
    assert not clean.failing_rows and not [s for s in clean.skipped if s.error]
    assert clean.stats["eos"] == {"total": 1, "supervised": 1, "rows_with_eos": 1}
    assert len(calls) == 1  # one fused query, one kernel call for every rule reading it
    res = audit_frame(frame, config_from_dict(CFG))
    assert res.failing_rows["sft.prompt_supervised:labels"] == [1]
    assert res.failing_rows["sft.eot_unsupervised:labels"] == [2]
    by = {f.check: f for f in res.findings}
    assert by["sft.prompt_supervised"].details["positions"] == 1
    assert by["sft.eot_unsupervised"].details["positions"] == 1
    assert [e.row for e in by["sft.eot_unsupervised"].examples] == [2]
