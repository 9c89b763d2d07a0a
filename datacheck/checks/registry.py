"""Check registry. A check family is a module with one function per concern, registered with
:func:`shard_checks` (per shard: returns named polars expressions) or :func:`dataset_checks`
(after all shards: works on shard results).

A shard check function receives a :class:`ShardContext` and yields any of:

- :class:`RowCheck`: a boolean polars expression per row (True = the row fails), fused by the
  runner with every other check of the shard into ONE lazy query;
- :class:`Stat`: an aggregate expression whose value goes to the shard's ``stats``;
- :class:`Payload`: an aggregate kept on the shard result for the merge, not in the report;
- :class:`~datacheck.findings.Finding`: a shard-level finding decided from the schema alone;
- :class:`~datacheck.findings.Skipped`: the check cannot run here, and why.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Union

import polars as pl

from datacheck.model.config import Config
from datacheck.model.findings import Finding, Skipped
from datacheck.model.roles import Roles

__all__ = [
    "ShardContext",
    "RowCheck",
    "FlatView",
    "Stat",
    "Payload",
    "ShardItem",
    "shard_checks",
    "dataset_checks",
    "SHARD_CHECKS",
    "DATASET_CHECKS",
    "load_families",
]


@dataclass(frozen=True)
class ShardContext:
    """What a shard check may know before reading data: config facts, roles, and the schema."""

    cfg: Config
    roles: Roles
    schema: dict[str, pl.DataType]
    shard: str
    #: False when the audit has a single shard and no splits or --against: nothing can repeat across
    #: shards, so the row-hash payload for the merge is not computed (it is the costliest item).
    cross_shard: bool = True


@dataclass(frozen=True)
class FlatView:
    """A position-wise view of list columns that must align (e.g. input_ids, attention_mask, labels).

    The runner builds it once per shard from the same scan (polars shares the scan between the
    queries of one ``collect_all``): each list column exploded jointly, one row per position, plus
    ``__row`` (the 0-based row of the position). Rows where the lists differ in length, or where
    ``where`` is not true, contribute one null position (so they never fail a position-wise check).
    Checks and stats that carry this view are evaluated in it: their expressions see the columns
    as scalars (one element each).

    Attributes:
        key: identity of the view (items with equal keys share one exploded frame).
        cols: the list columns, exploded together.
        where: optional per-row condition (e.g. the mask is binary).
    """

    key: str
    cols: tuple[str, ...]
    where: pl.Expr | None = None

    def frame(self, lf: pl.LazyFrame) -> pl.LazyFrame:
        """The exploded frame of ``lf`` (columns ``__row`` and ``cols``)."""
        first = pl.col(self.cols[0]).list.len()
        same = pl.all_horizontal([first == pl.col(c).list.len() for c in self.cols[1:]]) if len(self.cols) > 1 else first.is_not_null()
        if self.where is not None:
            same = same & self.where
        return (lf.select([pl.int_range(pl.len(), dtype=pl.UInt32).alias("__row")]
                          + [pl.when(same).then(pl.col(c)).alias(c) for c in self.cols])
                .explode(list(self.cols), empty_as_null=True))


@dataclass(frozen=True)
class RowCheck:
    """A row-level check as polars expressions.

    Attributes:
        check: check ID.
        column: the column concerned (None when several).
        fails: Boolean expression per row; True = the row fails; null counts as not failing.
            (May be None when ``rows`` is given.)
        message: ``f(count, details) -> str``; ``details`` holds the evaluated ``details`` exprs.
        example: per-row expression of the value to show; evaluated only on example rows.
        details: name -> aggregate expression, evaluated in the second pass over this check's
            failing rows only (never when nothing failed), so it costs nothing on clean data.
        severity: overrides the catalog's default severity.
        refine: ``f(lf, candidate_rows) -> exact_rows``; for checks whose fused expression only
            yields candidates (e.g. duplicates by a 64-bit in-memory hash, verified exactly here).
        rows: instead of ``fails``, an aggregate expression giving the sorted failing row indices
            (UInt32).
        view: a :class:`FlatView`: ``fails`` (and ``details``) are then evaluated per position in
            that view, and a row fails when any of its positions does.
        from_payload: instead of ``fails``, ``f(payload) -> rows``: the failing rows decided after
            the fused query from the shard's :class:`Payload` values (e.g. in-shard duplicates from
            the 128-bit row hashes the query already computed for the merge).
    """

    check: str
    column: str | None
    fails: pl.Expr | None
    message: Callable[[int, dict[str, Any]], str]
    example: pl.Expr | None = None
    details: dict[str, pl.Expr] = field(default_factory=dict)
    severity: str | None = None
    refine: Callable[[pl.LazyFrame, list[int]], list[int]] | None = None
    rows: pl.Expr | None = None
    view: FlatView | None = None
    from_payload: Callable[[dict[str, Any]], list[int]] | None = None


@dataclass(frozen=True)
class Stat:
    """An aggregate that goes into the shard's ``stats`` under ``key`` (after ``post``)."""

    key: str
    expr: pl.Expr
    post: Callable[[Any], Any] = lambda v: v
    view: FlatView | None = None


@dataclass(frozen=True)
class Payload:
    """An aggregate computed in the fused query and kept on the shard result (``ShardResult.payload``)
    for the merge, but never written into the report (e.g. 128-bit row content hashes)."""

    key: str
    expr: pl.Expr
    post: Callable[[Any], Any] = lambda v: v


ShardItem = Union[RowCheck, Stat, Payload, Finding, Skipped]
ShardFn = Callable[[ShardContext], Iterable[ShardItem]]
DatasetFn = Callable[[Any], Iterable[Union[Finding, Skipped]]]

SHARD_CHECKS: list[tuple[str, ShardFn]] = []
DATASET_CHECKS: list[tuple[str, DatasetFn]] = []


def shard_checks(family: str) -> Callable[[ShardFn], ShardFn]:
    """Register a per-shard check function of ``family``."""

    def deco(fn: ShardFn) -> ShardFn:
        SHARD_CHECKS.append((family, fn))
        return fn

    return deco


def dataset_checks(family: str) -> Callable[[DatasetFn], DatasetFn]:
    """Register a dataset-level check function (runs in the merge, on shard results)."""

    def deco(fn: DatasetFn) -> DatasetFn:
        DATASET_CHECKS.append((family, fn))
        return fn

    return deco


def load_families() -> None:
    """Import every family module so that its checks register (idempotent)."""
    from datacheck.checks import dup, empty, finite, index, labels, length, mask, schema, tokens  # noqa: F401
    from datacheck.checks import crossdup, dist, roledtype  # noqa: F401
