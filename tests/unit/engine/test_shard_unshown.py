"""A finding whose details or example values raise while they are computed says so in its message
(which of them, and the error), keeps its exact count and rows, and a ``MemoryError`` there is the
machine's (OutOfMemory), never swallowed."""
from __future__ import annotations

import dataclasses

import polars as pl
import pytest

from datacheck.checks.merge import sum_parts
from datacheck.engine import shard as engine
from datacheck.engine.shard import audit_frame
from datacheck.model.config import config_from_dict
from datacheck.model.errors import OutOfMemory

CHECK = "labels.out_of_range"
LABELS = [0, 7, 1, 9, 2, 5]
NUM_CLASSES = 3
BAD_ROWS = [r for r, v in enumerate(LABELS) if not 0 <= v < NUM_CLASSES]


def _boom(s: pl.Series) -> pl.Series:
    raise pl.exceptions.ComputeError("the kernel fails on these rows")


def _oom(s: pl.Series) -> pl.Series:
    raise MemoryError


def _frame() -> pl.DataFrame:
    return pl.DataFrame({"text": [f"row {i}" for i in range(len(LABELS))], "label": LABELS})


def _patched(monkeypatch, **change) -> None:
    """Every plan built from now on has ``CHECK``'s RowCheck with ``change`` applied."""
    real = engine.shard_plan

    def plan(ctx, *a, **k):
        got = real(ctx, *a, **k)
        rcs = [dataclasses.replace(rc, **change) if rc.check == CHECK else rc for rc in got.row_checks]
        assert any(rc.check == CHECK for rc in rcs)
        return dataclasses.replace(got, row_checks=rcs)

    monkeypatch.setattr(engine, "shard_plan", plan)


def _finding(monkeypatch, batch_rows: int | None = None, **change):
    if batch_rows is not None:
        monkeypatch.setenv("DATACHECK_BATCH_ROWS", str(batch_rows))
    _patched(monkeypatch, **change)
    res = audit_frame(_frame(), config_from_dict({"labels": {"num_classes": NUM_CLASSES}}))
    (f,) = [f for f in res.findings if f.check == CHECK]
    return f


def test_plain_finding_says_nothing_extra(monkeypatch):
    f = _finding(monkeypatch)
    assert f.count == len(BAD_ROWS) and list(f.rows) == BAD_ROWS
    assert "could not be computed" not in f.message
    assert all(e.value for e in f.examples)


@pytest.mark.parametrize("batch_rows", [None, 2])
def test_raising_example_is_said(monkeypatch, batch_rows):
    f = _finding(monkeypatch, batch_rows, example=pl.col("label").map_batches(_boom, return_dtype=pl.Int64))
    assert f.count == len(BAD_ROWS) and list(f.rows) == BAD_ROWS
    assert [e.value for e in f.examples] == [""] * len(BAD_ROWS)
    assert f.message.endswith(" [its example values could not be computed (ComputeError: the kernel fails on "
                              "these rows); the count and rows are exact]")


@pytest.mark.parametrize("batch_rows", [None, 2])
def test_raising_details_are_said(monkeypatch, batch_rows):
    boom = pl.col("label").map_batches(_boom, return_dtype=pl.Int64).sum()
    f = _finding(monkeypatch, batch_rows, details={"n": boom}, details_merge={"n": sum_parts})
    assert f.count == len(BAD_ROWS) and f.details == {}
    assert all(e.value for e in f.examples)  # the examples are still shown
    assert f.message.endswith(" [its details could not be computed (ComputeError: the kernel fails on these "
                              "rows); the count and rows are exact]")


def test_details_that_do_not_merge_by_batch_are_said(monkeypatch):
    boom = pl.col("label").map_batches(_boom, return_dtype=pl.Int64).sum()
    f = _finding(monkeypatch, 2, details={"n": boom}, details_merge={})
    assert f.count == len(BAD_ROWS) and f.details == {}
    assert "[its details could not be computed (ComputeError: the kernel fails on these rows)" in f.message


def test_both_raising_the_same_way_said_once(monkeypatch):
    boom = pl.col("label").map_batches(_boom, return_dtype=pl.Int64)
    f = _finding(monkeypatch, example=boom, details={"n": boom.sum()})
    assert f.message.endswith(" [its details and example values could not be computed (ComputeError: the "
                              "kernel fails on these rows); the count and rows are exact]")


@pytest.mark.parametrize("what", ["example", "details"])
def test_memory_running_out_is_the_machine(monkeypatch, what):
    oom = pl.col("label").map_batches(_oom, return_dtype=pl.Int64)
    change = {"example": oom} if what == "example" else {"details": {"n": oom.sum()}}
    with pytest.raises(OutOfMemory):
        _finding(monkeypatch, **change)
