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


def _row_key(cols: list[str]) -> pl.Expr:
    return reduce(lambda a, b: a ^ b, [pl.col(c).hash(seed=i + 1) for i, c in enumerate(cols)])


def _refine(cols: list[str]):
    def refine(lf: pl.LazyFrame, _candidates: list[int]) -> list[int]:
        key = _row_key(cols)
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
    shown = [c for c in cols if ctx.schema[c] == pl.String][:1] or cols[:1]
    yield RowCheck(
        check="dup.exact_in_shard", column=cols[0] if len(cols) == 1 else None,
        fails=_row_key(cols).is_first_distinct().not_(),
        example=pl.col(shown[0]),
        refine=_refine(cols),
        message=lambda n, d, cols=cols: (f"{n} row(s) repeat an earlier row of this shard exactly "
                                         f"(content: {', '.join(cols)})"),
    )
