"""dup: repeated rows within a shard (cross-shard duplicates are decided in the merge).

Content: the role columns together (all columns when no role is declared or inferred); columns with
no role (an ``idx``) never make rows distinct. Null equals null; values are compared exactly.
The fused query finds candidates with polars' in-memory 64-bit hash (never stored); candidates are
then verified by exact comparison, so a hash collision can never create a finding.
"""
from __future__ import annotations

from functools import reduce
from typing import Iterable

import polars as pl

from datacheck.checks import RowCheck, ShardContext, ShardItem, shard_checks

__all__ = ["dup_checks", "content_columns"]


def content_columns(ctx: ShardContext) -> list[str]:
    cols = ctx.roles.columns()
    return cols if cols else list(ctx.schema)


def _key_column(cols: list[str], schema: dict[str, pl.DataType]) -> str:
    """The content column that best tells rows apart (token ids, else text, else the first):
    equal rows have equal values here, so hashing it alone finds every duplicate candidate."""
    for c in cols:
        if c in ("input_ids",) or (schema.get(c) == pl.String):
            return c
    for c in cols:
        if isinstance(schema.get(c), (pl.List, pl.Array)):
            return c
    return cols[0]


def _fingerprint(col: str, dtype: pl.DataType | None) -> pl.Expr:
    """A cheap per-row key with equal values for equal rows. Lists: (length, sum, min, max, first,
    last) from native list kernels (hashing whole lists costs ~20x more); other types: the value."""
    c = pl.col(col)
    if isinstance(dtype, pl.Array):
        c = c.arr.to_list()
        dtype = pl.List(dtype.inner)
    if isinstance(dtype, pl.List) and dtype.inner.is_numeric():
        return pl.struct(c.list.len().alias("n"), c.list.sum().alias("s"), c.list.min().alias("lo"),
                         c.list.max().alias("hi"), c.list.first().alias("a"), c.list.last().alias("z")).hash(seed=7)
    return c.hash(seed=7)


def _row_key(cols: list[str], schema: dict[str, pl.DataType] | None = None) -> pl.Expr:
    schema = schema or {}
    return reduce(lambda a, b: a ^ b, [_fingerprint(c, schema.get(c)).hash(seed=i + 1) for i, c in enumerate(cols)])


def _refine(cols: list[str], key_cols: list[str], schema: dict[str, pl.DataType]):
    def refine(lf: pl.LazyFrame, _candidates: list[int]) -> list[int]:
        key = _row_key(key_cols, schema)
        cand = (lf.with_row_index("__row").filter(key.is_duplicated())
                .select(["__row", *cols]).collect())
        exact = cand.filter(pl.struct(cols).is_first_distinct().not_())
        return exact["__row"].cast(pl.Int64).to_list()

    return refine


@shard_checks("dup")
def dup_checks(ctx: ShardContext) -> Iterable[ShardItem]:
    """``dup.exact_in_shard``: a row whose content repeats an earlier row of the same shard.
    count = extra copies; rows = the copies (never the first occurrence)."""
    cols = content_columns(ctx)
    if not cols:
        return
    key_cols = [_key_column(cols, ctx.schema)]
    shown = [c for c in cols if ctx.schema[c] == pl.String][:1] or key_cols
    yield RowCheck(
        check="dup.exact_in_shard", column=cols[0] if len(cols) == 1 else None,
        fails=_row_key(key_cols, ctx.schema).is_first_distinct().not_(),
        example=pl.col(shown[0]),
        refine=_refine(cols, key_cols, ctx.schema),
        message=lambda n, d, cols=cols: (f"{n} row(s) repeat an earlier row of this shard exactly "
                                         f"(content: {', '.join(cols)})"),
    )
