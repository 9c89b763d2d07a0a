"""A batch's failing rows (engine.shard._batch_rows): gathered once for every check, with the shared
columns the details read taken from the batch (its shared pass is not run again over the rows), and
details that cannot be computed give none (as on one batch), never a failed shard."""
from __future__ import annotations

import numpy as np
import polars as pl

from datacheck.checks.merge import sum_parts
from datacheck.checks.registry import RowCheck, clear_shared_passes, shared_column
from datacheck.engine.shard import _Batch, _batch_rows

CALLS: list[int] = []


def _double(s: pl.Series) -> pl.Series:
    CALLS.append(s.len())
    return s * 2


def _broken(s: pl.Series) -> pl.Series:
    raise pl.exceptions.ComputeError("the kernel fails")


def _check(name: str, details: pl.Expr) -> RowCheck:
    return RowCheck(check=name, column="x", fails=pl.col("x") > 2, details={"n": details.sum()},
                    details_merge={"n": sum_parts}, example=pl.col("x"), message=lambda n, d: "")


def test_rows_gathered_once_with_the_batch_shared_columns():
    doubled = shared_column(("test", "double"), pl.col("x").map_batches(_double, return_dtype=pl.Int64))
    rc = _check("x.big", doubled)
    lf = pl.DataFrame({"x": [1, 3, 2, 5, 4]}).lazy()
    rows_acc: dict[int, list[np.ndarray]] = {0: []}
    parts: dict[int, list[dict]] = {}
    CALLS.clear()
    try:
        subs = _batch_rows(lf, _Batch(n=5, rows={0: np.array([1, 3, 4])}), 10, [rc], rows_acc, parts, max_ex=2, batched=True)
    finally:
        clear_shared_passes()
    assert [a.tolist() for a in rows_acc[0]] == [[11, 13, 14]]         # shard rows: the batch starts at row 10
    assert parts == {0: [{"n": 2 * (3 + 5 + 4)}]}     # the failing rows' doubled values
    assert CALLS == [5]                               # once, over the whole batch: not again over the rows
    # the rows of its first max_ex examples, with the batch's own columns only (no shared column)
    assert [s.columns for s in subs] == [["__row", "x"]] and subs[0]["__row"].to_list() == [11, 13]


def test_details_whose_shared_column_fails_give_none():
    broken = shared_column(("test", "broken"), pl.col("x").map_batches(_broken, return_dtype=pl.Int64))
    rc = _check("x.broken", broken)
    lf = pl.DataFrame({"x": [1, 3, 2, 5]}).lazy()
    rows_acc: dict[int, list[np.ndarray]] = {0: []}
    parts: dict[int, list[dict]] = {}
    try:
        _batch_rows(lf, _Batch(n=4, rows={0: np.array([1, 3])}), 0, [rc], rows_acc, parts, max_ex=2, batched=True)
    finally:
        clear_shared_passes()
    assert [a.tolist() for a in rows_acc[0]] == [[1, 3]] and parts == {0: [{}]}
