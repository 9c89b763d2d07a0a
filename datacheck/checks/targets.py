"""Target rules of CHECKS.md's "more label, token and target rules": binary targets in [0, 1],
the scale of regression targets, and CTC feasibility.

Kept in one module because they are about what the loss is computed against (BCE, MSE, CTC);
each ID still has one producer.
"""
from __future__ import annotations

import math
from typing import Any, Iterable

import polars as pl

from datacheck.checks._expr import any_element, first_bad
from datacheck.checks.registry import (
    RowCheck,
    ShardContext,
    ShardItem,
    Stat,
    check,
    derives,
    finding,
    measure,
    moments_parts,
)
from datacheck.derive.read import CHAT
from datacheck.model import layouts as lay
from datacheck.model.findings import Finding, Skipped
from datacheck.model.roles import is_list

__all__ = ["binary_out_of_range", "target_moments", "target_scale", "ctc_infeasible"]

#: the read path's derivations this family reads: the token columns a chat template's rendering
#: gives (``[tokens] tokenizer``)
derives(__name__, CHAT)


@check("labels.binary_out_of_range", layouts=lay.LABELED, roles=("target",))
def binary_out_of_range(ctx: ShardContext) -> Iterable[ShardItem]:
    """``labels.binary_out_of_range``: with ``[labels] target_kind = "binary"`` (BCE / multi-label
    targets), a ``target`` value (scalar or list of numbers) outside ``[0, 1]``: BCE on 0/255 masks
    gives a negative loss. Null and NaN are not judged here (``finite.nan``). The message hints at
    {0, 255} masks. Skipped with ``target_kind = "regression"`` (the default)."""
    if ctx.cfg.labels.target_kind != "binary":
        yield Skipped("labels.binary_out_of_range", '[labels] target_kind is "regression" (set "binary" for BCE targets)')
        return
    for col in ctx.roles.target:
        t = ctx.schema[col]

        def bad(x: pl.Expr) -> pl.Expr:
            return ((x < 0) | (x > 1)).fill_null(False)

        flat = pl.col(col).explode() if is_list(t) else pl.col(col)
        yield RowCheck(
            check="labels.binary_out_of_range", column=col, fails=any_element(col, t, bad).fill_null(False),
            example=first_bad(col, t, bad),
            details={"min": flat.min(), "max": flat.max(),
                     "only_0_255": flat.cast(pl.Float64).drop_nulls().drop_nans().is_in([0.0, 255.0]).all()},
            message=lambda n, d, col=col: (f"{n} row(s) of {col!r} hold binary targets outside [0, 1] "
                                           f"(range {d.get('min')}..{d.get('max')}): BCE gives a negative loss"
                                           + ("; the values are {0, 255}: divide the masks by 255"
                                              if d.get("only_0_255") else "")))


@measure("targets")
def target_moments(ctx: ShardContext) -> Iterable[Stat]:
    """``targets``: per regression target column, ``{count, mean, std}`` of its finite values
    (list targets flattened), for ``dist.target_scale``."""
    for col in ctx.roles.target:
        t = ctx.schema[col]
        x = pl.col(col).explode() if is_list(t) else pl.col(col)
        if not (x is not None and (t.is_numeric() or is_list(t))):
            continue
        x = x.cast(pl.Float64, strict=False)
        x = x.filter(x.is_finite())
        yield Stat(key=f"targets.{col}", expr=pl.struct(count=x.count(), mean=x.mean(), std=x.std()), merge=moments_parts,
                   post=lambda v: dict(v) if v else None)


@check("dist.target_scale", layouts=frozenset({"regression"}), level="dataset", facts=("numeric.target_scale_warn",))
def target_scale(dctx: Any) -> Iterable[Finding | Skipped]:
    """``dist.target_scale`` (shard level, decided from each shard's ``targets`` stats): a regression
    target whose standard deviation or absolute mean exceeds ``[numeric] target_scale_warn``
    (default 1000): MSE on raw magnitudes explodes; standardize it. Not judged for
    ``target_kind = "binary"``."""
    cfg = dctx.cfg
    if cfg.labels.target_kind != "regression":
        yield Skipped("dist.target_scale", '[labels] target_kind is "binary"')
        return
    limit = cfg.numeric.target_scale_warn
    seen = False
    for s in dctx.readable_shards():
        for key, v in sorted(s.stats.items()):
            if not key.startswith("targets.") or not isinstance(v, dict):
                continue
            seen = True
            mean, std = v.get("mean"), v.get("std")
            big = [(name, val) for name, val in (("|mean|", abs(mean) if isinstance(mean, float) else None),
                                                 ("std", std if isinstance(std, float) else None))
                   if val is not None and math.isfinite(val) and val > limit]
            if big:
                col = key.split(".", 1)[1]
                what = ", ".join(f"{name} {val:.4g}" for name, val in big)
                yield finding("dist.target_scale", column=col, shards=(s.path,),
                              message=(f"target {col!r} in {s.path} has {what} above target_scale_warn={limit:g}: "
                                       "MSE on raw magnitudes explodes; standardize the target (z-score or log)"),
                              details={"mean": mean, "std": std, "count": v.get("count"), "limit": limit})
    if not seen:
        yield Skipped("dist.target_scale", "no regression target column (set [columns] target)")


@check("length.ctc_infeasible", layouts=frozenset({"ctc"}), roles=("input_lengths", "labels"))
def ctc_infeasible(ctx: ShardContext) -> Iterable[ShardItem]:
    """``length.ctc_infeasible``: with ``input_lengths`` (per-row encoder frames, integer) and token
    ``labels`` (list of int; ``ignore_index`` entries are padding and dropped):
    ``floor(input_length / ctc_downsample)`` is less than the label length plus its adjacent repeats
    (CTC needs a blank between two equal labels), so the CTC loss is inf."""
    r, ign, ds = ctx.roles, ctx.cfg.labels.ignore, ctx.cfg.labels.ctc_downsample
    lab = pl.col(r.labels).cast(pl.List(pl.Int64))
    if ign is not None:
        lab = lab.list.eval(pl.element().filter(pl.element() != ign))
    need = lab.list.len() + lab.list.diff().list.count_matches(0)
    frames = pl.col(r.input_lengths).cast(pl.Int64) // ds
    yield RowCheck(
        check="length.ctc_infeasible", column=r.labels, fails=(frames < need).fill_null(False),
        example=pl.format("{} output steps < {} needed", frames, need),
        message=lambda n, d, ds=ds: (f"{n} row(s) have fewer encoder output steps (input_lengths // ctc_downsample="
                                     f"{ds}) than their labels need (length + adjacent repeats): the CTC loss is inf. "
                                     "Drop them, or use zero_infinity=True"))
