"""mask and padding: attention_mask values and shape, what padded positions hold, eos supervision."""
from __future__ import annotations

from typing import Any, Iterable

import polars as pl

from datacheck.checks.registry import FlatView, RowCheck, ShardContext, ShardItem, Stat, dataset_checks, shard_checks
from datacheck.checks._expr import first_bad, positions_count, supervised_per_row
from datacheck.checks.roledtype import problem, problems
from datacheck.model.findings import Finding, Skipped
from datacheck.model.roles import inner_dtype, is_list

__all__ = ["mask_checks", "eos_unsupervised"]


def _aligned(*cols: str) -> pl.Expr:
    lens = [pl.col(c).list.len() for c in cols]
    return pl.all_horizontal([x == lens[0] for x in lens[1:]])


def positions_view(ctx: ShardContext) -> FlatView:
    """The shard's position-wise view: input_ids, attention_mask and labels (those present, list
    typed) exploded together. Rows where their lengths differ (``length.mismatch``) or the mask is
    not binary (``mask.non_binary``) are left out of the position-wise checks: they are reported as
    those errors instead."""
    r = ctx.roles
    bad = {p.column for p in problems(ctx)}
    group = tuple(c for c in (r.input_ids, r.attention_mask, r.labels)
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


@shard_checks("mask")
def mask_checks(ctx: ShardContext) -> Iterable[ShardItem]:
    """``mask.non_binary``, ``mask.not_contiguous``, ``padding.token_not_pad``, ``padding.label_not_ignored``.

    ``attention_mask``: list of ints/bools, shape (rows, seq_len), 1 = real token, 0 = padding.
    A row fails ``non_binary`` when a value is not 0 or 1 (a null element is neither);
    ``not_contiguous`` when (binary and) the
    1s are not one block against ``padding_side`` (right: a 1 after a 0; left: a 0 after a 1);
    ``token_not_pad`` when a position with mask 0 holds an id other than ``pad_token_id``;
    ``label_not_ignored`` when a position with mask 0 has a label other than ``ignore_index`` (the
    loss trains on padding). Position-wise checks only look at rows where input_ids, attention_mask
    and labels (those present) have equal lengths and the mask is binary (others are
    ``length.mismatch`` / ``mask.non_binary``).
    """
    r, tok, lab = ctx.roles, ctx.cfg.tokens, ctx.cfg.labels
    mcol = r.attention_mask
    bad_mask = problem(ctx, "attention_mask") if mcol is not None else None
    if mcol is None or bad_mask is not None:
        why = bad_mask.skip_reason if bad_mask is not None else "no attention_mask column (set [columns] attention_mask)"
        for cid in ("mask.non_binary", "mask.not_contiguous", "padding.token_not_pad", "padding.label_not_ignored"):
            yield Skipped(cid, why)
    else:
        t = ctx.schema[mcol]
        inner = inner_dtype(t)
        m = pl.col(mcol)
        binary = _binary(mcol, inner)
        mi = m.cast(pl.List(pl.Int8)) if inner == pl.Boolean else (m if inner.is_integer() else
                                                                   m.list.eval(pl.element().cast(pl.Int64)))
        kind = "" if inner.is_integer() else f" ({inner})"
        yield RowCheck(
            check="mask.non_binary", column=mcol, fails=binary.not_(),
            example=first_bad(mcol, t, (lambda x: x.is_null()) if inner == pl.Boolean
                              else (lambda x: ((x != 0) & (x != 1)).fill_null(True)), null_text="null"),
            details={"nulls": m.list.count_matches(None).sum()},
            message=lambda n, d, kind=kind: (f"{n} row(s) of attention_mask{kind} hold values other than 0 and 1"
                                             + (f" ({d['nulls']} null value(s))" if d.get("nulls") else "")),
        )
        side = tok.padding_side
        # For a binary mask with s ones: right padding is contiguous iff the first 0 sits at index s
        # (or there is no 0); left padding iff the first 1 sits at index len - s (or there is no 1).
        # Native list kernels only (arg_min/arg_max/sum), no per-row evaluation.
        s_ones = mi.list.sum()
        if side == "right":
            holes = (mi.list.min() == 0) & (mi.list.arg_min() != s_ones)
        else:
            holes = (mi.list.max() == 1) & (mi.list.arg_max() != mi.list.len() - s_ones)
        yield RowCheck(
            check="mask.not_contiguous", column=mcol, fails=binary & holes, example=m,
            message=lambda n, d, side=side: (f"{n} row(s) have an attention_mask that is not one block of 1s "
                                             f"against padding_side={side} (holes, or padding on the other side)"),
        )
        yield Stat(key="padding_fraction", expr=1 - mi.list.sum().sum() / mi.list.len().sum())
        ids = r.input_ids if problem(ctx, "input_ids") is None else None
        if ids is None or tok.pad_token_id is None:
            yield Skipped("padding.token_not_pad", "needs input_ids and [tokens] pad_token_id")
        else:
            pad = tok.pad_token_id
            nz = positions_count([mcol, ids], lambda mm, x, pad=pad: (mm == 0) & (x != pad))
            bad = (pl.col(mcol) == 0) & (pl.col(ids) != pad)
            yield RowCheck(
                check="padding.token_not_pad", column=ids, fails=bad, view=positions_view(ctx),
                example=pl.format("{} masked position(s) hold non-pad ids", nz),
                details={"positions": bad.sum()},
                message=lambda n, d, pad=pad: (f"{n} row(s) hold ids other than pad_token_id {pad} at positions "
                                               f"with attention_mask 0 ({d.get('positions')} positions)"),
            )
        labels = r.labels if problem(ctx, "labels") is None else None
        if labels is None or lab.ignore is None:
            yield Skipped("padding.label_not_ignored", "needs a token labels column and [labels] ignore_index")
        elif "decoder_input_ids" in ctx.schema or "decoder_attention_mask" in ctx.schema:
            yield Skipped("padding.label_not_ignored", "seq2seq layout: labels follow the decoder, not attention_mask")
        else:
            ign = lab.ignore
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


@dataset_checks("padding")
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
