"""mask and padding: attention_mask values and shape, what padded positions hold, eos supervision."""
from __future__ import annotations

from typing import Any, Iterable

import polars as pl

from datacheck.checks._expr import first_bad, positions_count, supervised_count
from datacheck.checks._flat import fast_dtype, position_counts
from datacheck.checks.registry import (
    FlatView,
    RowCheck,
    ShardContext,
    ShardItem,
    Stat,
    check,
    derives,
    fields_parts,
    measure,
    sum_parts,
)
from datacheck.checks.registry import ratio as _div
from datacheck.checks.roledtype import problem, problems
from datacheck.derive.read import CHAT
from datacheck.model.findings import Finding, Skipped
from datacheck.model.roles import inner_dtype, is_list, seq2seq_layout
from datacheck.model.stats import EOS, EosSupervision

__all__ = ["non_binary", "not_contiguous", "token_not_pad", "pad_attended", "label_not_ignored", "padding_stats",
           "eos_unsupervised"]

#: the read path's derivations this family reads: the token columns a chat template's rendering
#: gives (``[tokens] tokenizer``)
derives(__name__, CHAT)


def _aligned(*cols: str) -> pl.Expr:
    lens = [pl.col(c).list.len() for c in cols]
    return pl.all_horizontal([x == lens[0] for x in lens[1:]])


def positions_view(ctx: ShardContext) -> FlatView:
    """The shard's position-wise view: input_ids, attention_mask, labels, assistant_mask,
    position_ids and document_ids (those present, list typed) exploded together. Rows where their lengths differ (``length.mismatch``) or the mask is
    not binary (``mask.non_binary``) are left out of the position-wise checks: they are reported as
    those errors instead. In a seq2seq layout (:func:`~datacheck.model.roles.seq2seq_layout`) labels
    are the decoder's target and are not part of the view."""
    r = ctx.roles
    bad = {p.column for p in problems(ctx)}
    labels = None if seq2seq_layout(ctx.cfg.dataset.schema_, ctx.schema) else r.labels
    group = tuple(c for c in dict.fromkeys((r.input_ids, r.attention_mask, labels, r.assistant_mask,
                                            r.position_ids, r.document_ids))
                  if c is not None and c not in bad and is_list(ctx.schema[c]))
    binary = None
    if r.attention_mask in group:
        binary = _binary(r.attention_mask, inner_dtype(ctx.schema[r.attention_mask]))
    return FlatView(key="positions:" + ",".join(group), cols=group, where=binary)


def position_pass(ctx: ShardContext) -> tuple[pl.Expr, str | None] | None:
    """The shared numpy pass over the flat buffers of the positions view
    (:func:`datacheck.checks._flat.position_counts`: per-row counts of ``sft.prompt_supervised``,
    ``sft.eot_unsupervised`` and the ``eos`` stat), with the assistant mask it reads (None: none
    usable by it). None when the view lacks input_ids or labels, ``[labels] ignore_index`` is unset,
    or a column it would read is not a list of integers (masks: or booleans) Int64 holds: the rules
    then run in the view itself. Every caller gets the same pass for the same shard."""
    r, cfg = ctx.roles, ctx.cfg
    view = positions_view(ctx)
    ign = cfg.labels.ignore
    if ign is None or r.input_ids not in view.cols or r.labels not in view.cols:
        return None
    if not (fast_dtype(ctx.schema[r.input_ids]) and fast_dtype(ctx.schema[r.labels])):
        return None
    att = r.attention_mask if r.attention_mask in view.cols else None
    if (att is not None) != (r.attention_mask is not None and problem(ctx, "attention_mask") is None):
        return None
    if att is not None and not fast_dtype(ctx.schema[att], mask=True):
        return None
    am = r.assistant_mask if r.assistant_mask in view.cols else None
    if am is not None and not fast_dtype(ctx.schema[am], mask=True):
        am = None
    tok = cfg.tokens
    return position_counts(r.input_ids, r.labels, view.row_ok(), view.key, ign, cfg.labels.shifted, tok.stop_ids,
                           tok.eos_token_id, am, att), am


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
                                                               m.list.eval(pl.element().cast(pl.Int64, strict=False)))
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
        details={"positions": bad.sum()}, details_merge={"positions": sum_parts},
        message=lambda n, d, pad=pad: (f"{n} row(s) hold ids other than pad_token_id {pad} at positions "
                                       f"with attention_mask 0 ({d.get('positions')} positions)"),
    )


@check("padding.pad_attended", roles=("attention_mask", "input_ids"), facts=("tokens.pad_token_id",),
       reasons={"input_ids": _NEEDS_PAD, "tokens.pad_token_id": _NEEDS_PAD}, dtype_roles=("attention_mask",))
def pad_attended(ctx: ShardContext) -> Iterable[ShardItem]:
    """``padding.pad_attended``: ``pad_token_id != eos_token_id`` and a position holding
    ``pad_token_id`` in ``input_ids`` (list of ints) has ``attention_mask`` 1 (list of 0/1 ints,
    bools or floats): the model attends to padding, as when the mask was built as all ones.

    Skipped when ``pad_token_id == eos_token_id`` (GPT-2 style: an attended pad id is the eos
    that ends the text). With ``eos_token_id`` unset, pad is taken to differ from eos. Only rows
    whose input_ids, attention_mask and labels (those present) have equal lengths and whose mask is
    binary are looked at (others are ``length.mismatch`` / ``mask.non_binary``)."""
    tok = ctx.cfg.tokens
    if problem(ctx, "input_ids") is not None:
        yield Skipped("padding.pad_attended", _NEEDS_PAD)
        return
    if tok.eos_token_id is not None and tok.eos_token_id == tok.pad_token_id:
        yield Skipped("padding.pad_attended", f"pad_token_id == eos_token_id ({tok.pad_token_id}): an attended "
                                              "pad id is the eos that ends the text")
        return
    mcol, ids, pad = ctx.roles.attention_mask, ctx.roles.input_ids, tok.pad_token_id
    nz = positions_count([mcol, ids], lambda mm, x, pad=pad: (mm == 1) & (x == pad))
    bad = (pl.col(mcol).cast(pl.Int64) == 1) & (pl.col(ids) == pad)
    yield RowCheck(
        check="padding.pad_attended", column=ids, fails=bad, view=positions_view(ctx),
        example=pl.format("{} attended position(s) hold pad_token_id", nz),
        details={"positions": bad.sum()}, details_merge={"positions": sum_parts},
        message=lambda n, d, pad=pad: (f"{n} row(s) hold pad_token_id {pad} at positions with attention_mask 1 "
                                       f"({d.get('positions')} positions): the model attends to padding. Set the "
                                       "mask to 0 at padded positions (if pad_token_id is also your eos, set "
                                       "[tokens] eos_token_id)"),
    )


_NEEDS_IGNORE = "needs a token labels column and [labels] ignore_index"


@check("padding.label_not_ignored", roles=("attention_mask", "labels"), facts=("labels.ignore_index",),
       reasons={"labels": _NEEDS_IGNORE, "labels.ignore_index": _NEEDS_IGNORE}, dtype_roles=("attention_mask",))
def label_not_ignored(ctx: ShardContext) -> Iterable[ShardItem]:
    """``padding.label_not_ignored``: a position with mask 0 has a label other than ``ignore_index``
    (the loss trains on padding). Skipped in a seq2seq layout (labels follow the decoder).

    The rule is the same whatever ``[labels] shifted`` says: unshifted, ``labels[i]`` at a padded
    position is the target predicted from position i-1 (the model learns to emit padding);
    shifted, it is the target predicted from the padded position i itself (loss on padding input)."""
    if problem(ctx, "labels") is not None:
        yield Skipped("padding.label_not_ignored", _NEEDS_IGNORE)
        return
    s2s = seq2seq_layout(ctx.cfg.dataset.schema_, ctx.schema)
    if s2s is not None:
        yield Skipped("padding.label_not_ignored", f"seq2seq layout ({s2s}): labels follow the decoder, not attention_mask")
        return
    mcol, labels, ign = ctx.roles.attention_mask, ctx.roles.labels, ctx.cfg.labels.ignore
    nz = positions_count([mcol, labels], lambda mm, y, ign=ign: (mm == 0) & (y != ign))
    bad = (pl.col(mcol) == 0) & (pl.col(labels) != ign)
    yield RowCheck(
        check="padding.label_not_ignored", column=labels, fails=bad, view=positions_view(ctx),
        example=pl.format("{} padded position(s) are supervised", nz),
        details={"positions": bad.sum()}, details_merge={"positions": sum_parts},
        message=lambda n, d, ign=ign: (f"{n} row(s) carry labels other than ignore_index {ign} at padded "
                                       f"positions (attention_mask 0; {d.get('positions')} positions): "
                                       "the loss trains on padding. Set labels to ignore_index where the mask is 0"),
    )


def label_of_token(ctx: ShardContext, labels: str) -> pl.Expr:
    """In :func:`positions_view`: the label that supervises the token at each position.

    ``[labels] shifted = false`` (Hugging Face; the model shifts): ``labels[i]``. ``shifted = true``
    (nanoGPT, Megatron: ``labels[i] == input_ids[i+1]``): ``labels[i-1]``, the target predicted at
    the position before (null at position 0, which no label supervises)."""
    if ctx.cfg.labels.shifted:
        return pl.col(labels).shift(1).over("__row")
    return pl.col(labels)


@measure("padding")
def padding_stats(ctx: ShardContext) -> Iterable[Stat]:
    """``padding_fraction`` (share of mask-0 positions), ``eos`` (eos tokens inside real content,
    and how many are supervised: for ``padding.eos_unsupervised``; with ``[labels] shifted`` the eos
    at position i is supervised by ``labels[i-1]``, see :func:`label_of_token`) and
    ``supervised_fraction``."""
    r, tok, lab = ctx.roles, ctx.cfg.tokens, ctx.cfg.labels
    mcol = r.attention_mask
    if mcol is not None and problem(ctx, "attention_mask") is None:
        _mcol, _t, _inner, mi, _binary = _mask_int(ctx)
        yield Stat(key="padding_fraction", expr=pl.struct(real=mi.list.sum().sum(), slots=mi.list.len().sum()),
                   merge=fields_parts(real=sum_parts, slots=sum_parts),
                   post=lambda v: None if v is None else 1 - _div(v["real"], v["slots"]))
    # eos supervision stats (for padding.eos_unsupervised, decided across the dataset)
    usable = {c for c in (r.labels, r.input_ids, mcol) if c is not None} - {p.column for p in problems(ctx)}
    labels = r.labels if r.labels in usable and seq2seq_layout(ctx.cfg.dataset.schema_, ctx.schema) is None else None
    ids = r.input_ids if r.input_ids in usable else None
    if labels is not None and ids is not None and lab.ignore is not None and tok.eos_token_id is not None:
        eos, ign = tok.eos_token_id, lab.ignore
        in_content = pl.col(ids) == eos
        if mcol in usable:
            in_content = in_content & (pl.col(mcol) != 0)
        in_content = in_content.fill_null(False)
        merge = fields_parts(total=sum_parts, supervised=sum_parts, rows_with_eos=sum_parts)  # rows never span batches
        fast = position_pass(ctx)
        if fast is not None:  # per-row counts from the shared pass over the flat buffers
            total, sup = fast[0].struct.field("eos_total"), fast[0].struct.field("eos_sup")
            yield Stat(key=EOS, expr=pl.struct(total=total.sum(), supervised=sup.sum(), rows_with_eos=(total > 0).sum()),
                       merge=merge, post=lambda v: dict(v) if v else {"total": 0, "supervised": 0, "rows_with_eos": 0})
        else:
            yield Stat(key=EOS, view=positions_view(ctx), expr=pl.struct(
                total=in_content.sum(), supervised=(in_content & (label_of_token(ctx, labels) != ign).fill_null(False)).sum(),
                rows_with_eos=pl.col("__row").filter(in_content).n_unique()),
                merge=merge, post=lambda v: dict(v) if v else {"total": 0, "supervised": 0, "rows_with_eos": 0})
    if labels is not None and lab.ignore is not None:
        ign = lab.ignore
        yield Stat(key="supervised_fraction",
                   expr=pl.struct(sup=supervised_count(labels, ign).sum(),
                                  slots=pl.col(labels).list.len().sum()),
                   merge=fields_parts(sup=sum_parts, slots=sum_parts),
                   post=lambda v: None if v is None else _div(v["sup"], v["slots"]))


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
        e = EosSupervision.of(s.stats)
        if e is None:
            continue
        measured += 1
        total += e.total
        sup += e.supervised
        rows += e.rows_with_eos
        if e.total:
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
