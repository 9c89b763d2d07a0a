"""RowAgg: per-row aggregates of a flat view, computed by the engine once per view (one grouped
aggregation by ``__row``) and read by a row check's ``fails``; rows the view leaves out never fail."""
from __future__ import annotations

import polars as pl
import pytest

from datacheck.checks.registry import FlatView, RowAgg, RowCheck
from datacheck.engine.shard import _collect, _queries, _run_batch
from datacheck.model.errors import InternalError

VIEW = FlatView(key="t", cols=("a", "b"), where=pl.col("a").list.len() > 1)
DF = pl.DataFrame({"a": [[1, 2, 3], [5], [4, 4], [], None, [7, 8]],
                   "b": [[1, 0, 1], [1], [1, 1], [], None, [0, 0]]}).lazy()


def _check(name: str, fails: pl.Expr, aggs: tuple[RowAgg, ...]) -> RowCheck:
    return RowCheck(check=name, column=None, fails=fails, view=VIEW, per_row=aggs, message=lambda n, d: "")


def test_sums_and_max_per_row_shared_between_checks():
    ones = RowAgg("__ones", pl.col("b") == 1)
    last_one = RowAgg("__last_one", pl.when(pl.col("b") == 1).then(pl.col("a")), how="max")
    both = _check("x.both", pl.col("__ones") >= 2, (ones,))
    high = _check("x.high", pl.col("__last_one") >= 3, (ones, last_one))  # shares __ones
    b = _run_batch(DF, [both, high], [], [0, 1])
    assert not b.broken_checks and b.n == 6
    # rows 1 ([5]), 3 ([]), 4 (null) are left out by the view's `where`: one null position, never failing
    assert b.rows[0].tolist() == [0, 2]        # two ones in rows 0 and 2
    assert b.rows[1].tolist() == [0, 2]        # last a under b == 1: row 0 -> 3, row 2 -> 4, row 5 -> none


def test_same_name_two_expressions_is_an_internal_error():
    a = _check("x.a", pl.col("__n") > 0, (RowAgg("__n", pl.col("b") == 1),))
    b = _check("x.b", pl.col("__n") > 0, (RowAgg("__n", pl.col("b") == 0),))
    with pytest.raises(InternalError, match="defined twice"):
        _collect(_queries(DF, [a, b], [], [0, 1], []))


def test_declaration_errors():
    with pytest.raises(InternalError, match="how must be one of"):
        RowAgg("__n", pl.col("b"), how="mean")
    with pytest.raises(InternalError, match="need a flat view"):
        RowCheck(check="x.a", column=None, fails=pl.col("__n") > 0, message=lambda n, d: "",
                 per_row=(RowAgg("__n", pl.col("b")),))


def test_probe_gathers_rows_only_for_failing_checks():
    """The fused query first probes each ``fails`` check (any row failing?), then gathers the row
    numbers of the failing ones only: a check that never fails gives no rows, the others their rows."""
    flat = RowCheck(check="x.big", column="c", fails=pl.col("c") > 2, message=lambda n, d: "")
    never = RowCheck(check="x.never", column="c", fails=pl.col("c") > 100, message=lambda n, d: "")
    view = RowCheck(check="x.pos", column="a", fails=pl.col("a") == 4, view=VIEW, message=lambda n, d: "")
    df = DF.with_columns(c=pl.Series([1, 3, None, 5, 0, 2]))
    b = _run_batch(df, [flat, never, view], [], [0, 1, 2])
    assert not b.broken_checks and b.n == 6
    assert {i: r.tolist() for i, r in b.rows.items()} == {0: [1, 3], 1: [], 2: [2]}
