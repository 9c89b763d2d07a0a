"""mask and padding: attention_mask values and shape, what padded positions hold, eos supervision."""
from __future__ import annotations

from typing import Any, Iterable

import polars as pl

from datacheck.checks._expr import first_bad, positions_count, supervised_per_row
from datacheck.checks.registry import FlatView, RowCheck, ShardContext, ShardItem, Stat, check, measure
from datacheck.checks.roledtype import problem, problems
from datacheck.model.findings import Finding, Skipped
from datacheck.model.roles import inner_dtype, is_list

__all__ = ["non_binary", "not_contiguous", "token_not_pad", "label_not_ignored", "padding_stats", "eos_unsupervised"]


def _aligned(*cols: str) -> pl.Expr:
    lens = [pl.col(c).list.len() for c in cols]
    return pl.all_horizontal([x == lens[0] for x in lens[1:]])


def positions_view(ctx: ShardContext) -> FlatView:
    """The shard's position-wise view: input_ids, attention_mask, labels, assistant_mask,
    position_ids and document_ids (those present, list typed) exploded together. Rows where their lengths differ (``length.mismatch``) or the mask is
    not binary (``mask.non_binary``) are left out of the position-wise checks: they are reported as
    those errors instead."""
    r = ctx.roles
    bad = {p.column for p in problems(ctx)}
    group = tuple(c for c in dict.fromkeys((r.input_ids, r.attention_mask, r.labels, r.assistant_mask,
                                            r.position_ids, r.document_ids))
                  if c is not None and c not in bad and is_list(ctx.schema[c]))
    binary = None
    if r.attention_mask in group:
        binary = _binary(r.attention_mask, inner_dtype(ctx.schema[r.attention_mask]))
    return FlatView(key="positions:" + ",".join(group), cols=group, where=binary)


def _binary(col: str, inner: pl.DataType) -> pl.Expr:
    """Per row: every mask value is 0 or 1 (a null element is not). Native list kernels for integer
    and boolean masks (min/max, ``count_matches(None)``); per-element evaluation for float masks."""
    m = pl.col(col)
    no_null = m.list.count_matches(None) == 0
    if inner == pl.Boolean:
        return no_null
    if inner.is_integer():
        return (m.list.min() >= 0) & (m.list.max() <= 1) & no_null
    return m.list.eval(((pl.element() == 0) | (pl.element() == 1)).fill_null(False)).list.all()


def _mask_int(ctx: ShardContext) -> tuple[str, pl.DataType, pl.DataType, pl.Expr, pl.Expr]:
    """(mask column, dtype, element dtype, the mask as an integer list, the per-row "binary" test):
    the one reading of ``attention_mask`` the mask and padding checks share."""
    mcol = ctx.roles.attention_mask
    t = ctx.schema[mcol]
    inner = inner_dtype(t)
    m = pl.col(mcol)
    mi = m.cast(pl.List(pl.Int8)) if inner == pl.Boolean else (m if inner.is_integer() else
                                                               m.list.eval(pl.element().cast(pl.Int64)))
    return mcol, t, inner, mi, _binary(mcol, inner)


@check("mask.non_binary", roles=("attention_mask",))
def non_binary(ctx: ShardContext) -> Iterable[ShardItem]:
    """``mask.non_binary``: an ``attention_mask`` value (list of ints/bools/floats, shape (rows,
    seq_len), 1 = real token, 0 = padding) is not 0 or 1; a null element is neither."""
    mcol, t, inner, _mi, binary = _mask_int(ctx)
    m = pl.col(mcol)
    kind = "" if inner.is_integer() else f" ({inner})"
    yield RowCheck(
        check="mask.non_binary", column=mcol, fails=binary.not_(),
        example=first_bad(mcol, t, (lambda x: x.is_null()) if inner == pl.Boolean
                          else (lambda x: ((x != 0) & (x != 1)).fill_null(True)), null_text="null"),
        details={"nulls": m.list.count_matches(None).sum()},
        message=lambda n, d, kind=kind: (f"{n} row(s) of attention_mask{kind} hold values other than 0 and 1"
                                         + (f" ({d['nulls']} null value(s))" if d.get("nulls") else "")),
    )


@check("mask.not_contiguous", roles=("attention_mask",))
def not_contiguous(ctx: ShardContext) -> Iterable[ShardItem]:
    """``mask.not_contiguous``: a binary mask whose 1s are not one block against ``padding_side``
    (right: a 1 after a 0; left: a 0 after a 1)."""
    mcol, _t, _inner, mi, binary = _mask_int(ctx)
    side = ctx.cfg.tokens.padding_side
    # For a binary mask with s ones: right padding is contiguous iff the first 0 sits at index s
    # (or there is no 0); left padding iff the first 1 sits at index len - s (or there is no 1).
    # Native list kernels only (arg_min/arg_max/sum), no per-row evaluation.
    s_ones = mi.list.sum()
    if side == "right":
        holes = (mi.list.min() == 0) & (mi.list.arg_min() != s_ones)
    else:
        holes = (mi.list.max() == 1) & (mi.list.arg_max() != mi.list.len() - s_ones)
    yield RowCheck(
        check="mask.not_contiguous", column=mcol, fails=binary & holes, example=pl.col(mcol),
        message=lambda n, d, side=side: (f"{n} row(s) have an attention_mask that is not one block of 1s "
                                         f"against padding_side={side} (holes, or padding on the other side)"),
    )


_NEEDS_PAD = "needs input_ids and [tokens] pad_token_id"


@check("padding.token_not_pad", roles=("attention_mask", "input_ids"), facts=("tokens.pad_token_id",),
       reasons={"input_ids": _NEEDS_PAD, "tokens.pad_token_id": _NEEDS_PAD}, dtype_roles=("attention_mask",))
def token_not_pad(ctx: ShardContext) -> Iterable[ShardItem]:
    """``padding.token_not_pad`` (warn): a position with mask 0 holds an id other than
    ``pad_token_id``. Only rows whose input_ids, attention_mask and labels (those present) have
    equal lengths and whose mask is binary are looked at (others are ``length.mismatch`` /
    ``mask.non_binary``)."""
    if problem(ctx, "input_ids") is not None:
        yield Skipped("padding.token_not_pad", _NEEDS_PAD)
        return
    mcol, ids, pad = ctx.roles.attention_mask, ctx.roles.input_ids, ctx.cfg.tokens.pad_token_id
    nz = positions_count([mcol, ids], lambda mm, x, pad=pad: (mm == 0) & (x != pad))
    bad = (pl.col(mcol) == 0) & (pl.col(ids) != pad)
    yield RowCheck(
        check="padding.token_not_pad", column=ids, fails=bad, view=positions_view(ctx),
        example=pl.format("{} masked position(s) hold non-pad ids", nz),
        details={"positions": bad.sum()},
        message=lambda n, d, pad=pad: (f"{n} row(s) hold ids other than pad_token_id {pad} at positions "
                                       f"with attention_mask 0 ({d.get('positions')} positions)"),
    )


_NEEDS_IGNORE = "needs a token labels column and [labels] ignore_index"


@check("padding.label_not_ignored", roles=("attention_mask", "labels"), facts=("labels.ignore_index",),
       reasons={"labels": _NEEDS_IGNORE, "labels.ignore_index": _NEEDS_IGNORE}, dtype_roles=("attention_mask",))
def label_not_ignored(ctx: ShardContext) -> Iterable[ShardItem]:
    """``padding.label_not_ignored``: a position with mask 0 has a label other than ``ignore_index``
    (the loss trains on padding). Skipped in a seq2seq layout (labels follow the decoder)."""
    if problem(ctx, "labels") is not None:
        yield Skipped("padding.label_not_ignored", _NEEDS_IGNORE)
        return
    if "decoder_input_ids" in ctx.schema or "decoder_attention_mask" in ctx.schema:
        yield Skipped("padding.label_not_ignored", "seq2seq layout: labels follow the decoder, not attention_mask")
        return
    mcol, labels, ign = ctx.roles.attention_mask, ctx.roles.labels, ctx.cfg.labels.ignore
    nz = positions_count([mcol, labels], lambda mm, y, ign=ign: (mm == 0) & (y != ign))
    bad = (pl.col(mcol) == 0) & (pl.col(labels) != ign)
    yield RowCheck(
        check="padding.label_not_ignored", column=labels, fails=bad, view=positions_view(ctx),
        example=pl.format("{} padded position(s) are supervised", nz),
        details={"positions": bad.sum()},
        message=lambda n, d, ign=ign: (f"{n} row(s) carry labels other than ignore_index {ign} at padded "
                                       f"positions (attention_mask 0; {d.get('positions')} positions): "
                                       "the loss trains on padding. Set labels to ignore_index where the mask is 0"),
    )


@measure("padding")
def padding_stats(ctx: ShardContext) -> Iterable[Stat]:
    """``padding_fraction`` (share of mask-0 positions), ``eos`` (eos tokens inside real content,
    and how many are supervised: for ``padding.eos_unsupervised``) and ``supervised_fraction``."""
    r, tok, lab = ctx.roles, ctx.cfg.tokens, ctx.cfg.labels
    mcol = r.attention_mask
    if mcol is not None and problem(ctx, "attention_mask") is None:
        _mcol, _t, _inner, mi, _binary = _mask_int(ctx)
        yield Stat(key="padding_fraction", expr=1 - mi.list.sum().sum() / mi.list.len().sum())
    # eos supervision stats (for padding.eos_unsupervised, decided across the dataset)
    usable = {c for c in (r.labels, r.input_ids, mcol) if c is not None} - {p.column for p in problems(ctx)}
    labels = r.labels if r.labels in usable else None
    ids = r.input_ids if r.input_ids in usable else None
    if labels is not None and ids is not None and lab.ignore is not None and tok.eos_token_id is not None:
        eos, ign = tok.eos_token_id, lab.ignore
        in_content = pl.col(ids) == eos
        if mcol in usable:
            in_content = in_content & (pl.col(mcol) != 0)
        in_content = in_content.fill_null(False)
        yield Stat(key="eos", view=positions_view(ctx), expr=pl.struct(
            total=in_content.sum(), supervised=(in_content & (pl.col(labels) != ign)).sum(),
            rows_with_eos=pl.col("__row").filter(in_content).n_unique()),
            post=lambda v: dict(v) if v else {"total": 0, "supervised": 0, "rows_with_eos": 0})
    if labels is not None and lab.ignore is not None:
        ign = lab.ignore
        yield Stat(key="supervised_fraction",
                   expr=supervised_per_row(labels, ign, None, tok.truncation_side).sum() / pl.col(labels).list.len().sum())


@check("padding.eos_unsupervised", level="dataset")
def eos_unsupervised(dctx: Any) -> Iterable[Finding | Skipped]:
    """``padding.eos_unsupervised``: ``pad_token_id == eos_token_id`` and no eos inside real content
    (attention_mask 1) carries a label other than ``ignore_index`` in any sample: the collator masked
    every eos as padding, so the model never learns to stop. Reports the eos-supervision ratio."""
    tok = dctx.cfg.tokens
    if tok.pad_token_id is None or tok.eos_token_id is None:
        yield Skipped("padding.eos_unsupervised", "needs [tokens] pad_token_id and eos_token_id")
        return
    if tok.pad_token_id != tok.eos_token_id:
        return
    total = sup = rows = 0
    shards = []
    measured = 0
    for s in dctx.readable_shards():
        e = s.stats.get("eos")
        if not e:
            continue
        measured += 1
        total += e.get("total") or 0
        sup += e.get("supervised") or 0
        rows += e.get("rows_with_eos") or 0
        if e.get("total"):
            shards.append(s.path)
    if not measured:
        yield Skipped("padding.eos_unsupervised",
                      "needs input_ids, a token labels column and [labels] ignore_index in some shard")
        return
    if total and sup == 0:
        yield Finding(
            check="padding.eos_unsupervised", severity="error", count=rows, ratio=0.0,
            shards=tuple(shards),
            message=(f"pad_token_id == eos_token_id ({tok.eos_token_id}) and none of the {total} eos tokens in "
                     f"{rows} row(s) is supervised (eos-supervision ratio 0): the collator masked eos as padding, "
                     "so the model never learns to stop. Keep the label of the eos that ends each sample"),
            details={"eos_tokens": total, "eos_supervised": sup, "ratio": 0.0},
        )
