"""finite: NaN, inf and values that overflow the compute dtype, in every float column (scalar or list).

Thresholds: fp16 max 65504 (IEEE 754 binary16), bf16 max 3.3895e38, fp32 max 3.4028e38 (IEEE 754
binary32). A finite value whose magnitude exceeds the compute dtype's maximum becomes inf when cast.
"""
from __future__ import annotations

from typing import Iterable

import polars as pl

from datacheck.checks._expr import any_element, count_elements, first_bad, flat_list, struct_float_fields
from datacheck.checks.registry import RowCheck, ShardContext, ShardItem, check, max_parts
from datacheck.model import layouts as lay
from datacheck.model.constants import BF16_MAX, FP16_MAX, FP32_MAX
from datacheck.model.roles import inner_dtype

__all__ = ["finite_nan", "finite_inf", "fp16_overflow", "DTYPE_MAX"]

DTYPE_MAX = {"fp16": FP16_MAX, "bf16": BF16_MAX, "fp32": FP32_MAX}
_STORAGE_MAX = {pl.Float16: FP16_MAX, pl.Float32: FP32_MAX}


def _storage_max(t: pl.DataType) -> float:
    for k, v in _STORAGE_MAX.items():
        if t == k:
            return v
    return float("inf")


def _max_abs(col: str, t: pl.DataType) -> pl.Expr:
    """Aggregate: the largest finite |value| of the column (NaN and +/-inf left out: they have their own checks)."""
    if t.is_float():
        return pl.col(col).filter(pl.col(col).is_finite()).abs().max()
    return flat_list(col, t).list.eval(pl.element().filter(pl.element().is_finite()).abs()).list.max().max()


def _float_columns(ctx: ShardContext) -> Iterable[tuple[str, pl.DataType, pl.DataType]]:
    """(column, dtype, element dtype) of every float column (scalar or list) of the shard: the
    columns all three ``finite.*`` checks look at."""
    for col, t in ctx.schema.items():
        inner = inner_dtype(t)
        if inner.is_float():
            yield col, t, inner


def _struct_fields(ctx: ShardContext, cid: str, pred, what: str) -> Iterable[RowCheck]:
    """The ``finite.*`` rule ``pred`` on float fields inside structs (any depth of lists and
    structs, e.g. a chat column's per-turn ``loss_weight``): one RowCheck per field path, on the
    column; the example gives the path, the 0-based element and the value."""
    for col, t in ctx.schema.items():
        for path, vals, scalar in struct_float_fields(col, t):
            if scalar:
                fails, count, pos = pred(vals), pred(vals).sum(), pl.lit(0)
            else:
                fails = vals.list.eval(pred(pl.element())).list.any()
                count = vals.list.eval(pred(pl.element()).cast(pl.UInt32)).list.sum().sum()
                pos = vals.list.eval(pl.arg_where(pred(pl.element())).first()).list.first()
            yield RowCheck(
                check=cid, column=col, fails=fails, example=pl.format("{} element {}", pl.lit(path), pos),
                details={"values": count},
                message=lambda n, d, p=path: f"{n} row(s) hold {what} in {p!r} ({d.get('values', n)} value(s))",
            )


@check("finite.nan", layouts=lay.ANY)
def finite_nan(ctx: ShardContext) -> Iterable[ShardItem]:
    """``finite.nan``: a row fails when its float value (or any element of its float list, or a
    float field inside its structs, e.g. ``messages[].loss_weight``) is NaN. Nulls are not NaN here
    (a null float is reported by the null/schema checks)."""
    nan = lambda x: x.is_nan()  # noqa: E731
    for col, t, _inner in _float_columns(ctx):
        yield RowCheck(
            check="finite.nan", column=col, fails=any_element(col, t, nan),
            example=first_bad(col, t, nan), details={"values": count_elements(col, t, nan)},
            message=lambda n, d, c=col: f"{n} row(s) hold NaN in {c!r} ({d.get('values', n)} value(s)); the loss will be NaN",
        )
    yield from _struct_fields(ctx, "finite.nan", nan, "NaN")


@check("finite.inf", layouts=lay.ANY)
def finite_inf(ctx: ShardContext) -> Iterable[ShardItem]:
    """``finite.inf``: a row fails when its float value (or any list element, or a float field
    inside its structs) is +inf or -inf."""
    inf = lambda x: x.is_infinite()  # noqa: E731
    for col, t, _inner in _float_columns(ctx):
        yield RowCheck(
            check="finite.inf", column=col, fails=any_element(col, t, inf),
            example=first_bad(col, t, inf), details={"values": count_elements(col, t, inf)},
            message=lambda n, d, c=col: f"{n} row(s) hold +/-inf in {c!r} ({d.get('values', n)} value(s))",
        )
    yield from _struct_fields(ctx, "finite.inf", inf, "+/-inf")


@check("finite.fp16_overflow", layouts=lay.ANY)
def fp16_overflow(ctx: ShardContext) -> Iterable[ShardItem]:
    """``finite.fp16_overflow``: a finite value whose magnitude exceeds the maximum of
    ``[numeric] compute_dtype`` (error), or ``overflow_warn_fraction`` of it (warn; not for fp32).
    Columns whose storage type cannot hold a value that large are not evaluated."""
    cd = ctx.cfg.numeric.compute_dtype
    limit = DTYPE_MAX[cd]
    warn_at = limit * ctx.cfg.numeric.overflow_warn_fraction
    for col, t, inner in _float_columns(ctx):
        if _storage_max(inner) <= warn_at:
            continue  # the storage type cannot hold a value that large
        over = lambda x, m=limit: x.is_finite() & (x.abs() > m)  # noqa: E731
        near = lambda x, m=limit, w=warn_at: x.is_finite() & (x.abs() > w) & (x.abs() <= m)  # noqa: E731
        if _storage_max(inner) > limit:
            yield RowCheck(
                check="finite.fp16_overflow", column=col, fails=any_element(col, t, over),
                example=first_bad(col, t, over), details={"max_abs": _max_abs(col, t)},
                details_merge={"max_abs": max_parts},
                message=lambda n, d, c=col, m=limit: (f"{n} row(s) of {c!r} hold finite values above the {cd} maximum {m:g} "
                                                      f"(largest |value| {d.get('max_abs')}); they become inf when cast to {cd}"),
            )
        if cd != "fp32":
            yield RowCheck(
                check="finite.fp16_overflow", column=col, fails=any_element(col, t, near), severity="warn",
                example=first_bad(col, t, near),
                message=lambda n, d, c=col, w=warn_at: (f"{n} row(s) of {c!r} hold values above {w:g} "
                                                        f"({ctx.cfg.numeric.overflow_warn_fraction:g} x the {cd} maximum): "
                                                        "sums and products of them overflow"),
            )
