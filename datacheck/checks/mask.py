"""mask: attention_mask values and shape (``mask.*``), and the shard's position-wise view the token
rules share (:func:`positions_view`, :func:`position_pass`). What padded positions hold is
:mod:`datacheck.checks.padding`'s."""
from __future__ import annotations

from typing import Iterable

import polars as pl

from datacheck.checks._expr import first_bad
from datacheck.checks._flat import fast_dtype, position_counts
from datacheck.checks.registry import (
    FlatView,
    RowCheck,
    ShardContext,
    ShardItem,
    check,
    derives,
)
from datacheck.checks.roledtype import problem, problems
from datacheck.derive.read import CHAT
from datacheck.model import layouts as lay
from datacheck.model.findings import EXAMPLE_LENGTH, EXAMPLE_POSITION, EXAMPLE_TEXT
from datacheck.model.roles import inner_dtype, is_list, seq2seq_layout

__all__ = ["non_binary", "not_contiguous", "positions_view", "position_pass", "mask_int"]

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
    labels = None if seq2seq_layout(ctx.cfg.dataset.schema_, ctx.schema, ctx.layout) else r.labels
    group = tuple(c for c in dict.fromkeys((r.input_ids, r.attention_mask, labels, r.assistant_mask,
                                            r.position_ids, r.document_ids))
                  if c is not None and c not in bad and is_list(ctx.schema[c]))
    binary = None
    if r.attention_mask in group:
        binary = _binary(r.attention_mask, inner_dtype(ctx.schema[r.attention_mask]))
    # the key names the row condition too: it differs by the mask's dtype (a boolean mask is binary
    # when it has no null), and the shared pass keyed by it lives as long as the process
    key = "positions:" + ",".join(group) + ("" if binary is None else f"|where:{binary}")
    return FlatView(key=key, cols=group, where=binary)


def position_pass(ctx: ShardContext) -> tuple[pl.Expr, str | None] | None:
    """The shared numpy pass over the flat buffers of the positions view
    (:func:`datacheck.checks._flat.position_counts`: per-row counts of ``sft.prompt_supervised``,
    ``sft.eot_unsupervised``, the ``eos`` stat, the ``labels.shift_mismatch`` candidates, when
    it reads the attention mask ``padding.token_not_pad`` and ``padding.label_not_ignored``, and
    over every row ``labels.unexpected_sentinel``, ``labels.out_of_range`` (bound: ``vocab_size``,
    else ``num_classes``), ``empty.no_supervised_tokens`` and ``mask.not_contiguous``), with
    the assistant mask it reads (None: none
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
                           tok.eos_token_id, am, att, tok.pad_token_id, ctx.token_label_bound[0],
                           tok.max_seq_len, tok.truncation_side, ctx.padding_side), am


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


def mask_int(ctx: ShardContext) -> tuple[str, pl.DataType, pl.DataType, pl.Expr, pl.Expr]:
    """(mask column, dtype, element dtype, the mask as an integer list, the per-row "binary" test):
    the one reading of ``attention_mask`` the mask and padding checks share."""
    mcol = ctx.roles.attention_mask
    t = ctx.schema[mcol]
    inner = inner_dtype(t)
    m = pl.col(mcol)
    mi = m.cast(pl.List(pl.Int8)) if inner == pl.Boolean else (m if inner.is_integer() else
                                                               m.list.eval(pl.element().cast(pl.Int64, strict=False)))
    return mcol, t, inner, mi, _binary(mcol, inner)


@check("mask.non_binary", layouts=lay.TOKENIZED, roles=("attention_mask",))
def non_binary(ctx: ShardContext) -> Iterable[ShardItem]:
    """``mask.non_binary``: an ``attention_mask`` value (list of ints/bools/floats, shape (rows,
    seq_len), 1 = real token, 0 = padding) is not 0 or 1; a null element is neither."""
    mcol, t, inner, _mi, binary = mask_int(ctx)
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


def _hole_example(mcol: str, side: str) -> pl.Expr:
    """Example of ``mask.not_contiguous``: the first position that breaks the block of 1s (right
    padding: a 1 after a 0; left padding: a 0 after a 1), with the mask around it."""
    def one(m: list | None) -> dict | None:
        if not m:
            return None
        on = side if side != "either" else "left" if m[0] == 0 else "right"
        before, after = (0, 1) if on == "right" else (1, 0)
        for k in range(1, len(m)):
            if m[k] == after and before in m[:k]:
                return {EXAMPLE_TEXT: f"first at position {k} of {len(m)}: {after} after a {before} "
                                      f"(padding_side={on}); mask[{max(0, k - 4)}:{k + 4}] = {m[max(0, k - 4):k + 4]}",
                        EXAMPLE_POSITION: k, EXAMPLE_LENGTH: len(m)}
        return None

    return pl.struct(pl.col(mcol).alias("m")).map_elements(lambda r: one(r["m"]), return_dtype=pl.Struct(
        {EXAMPLE_TEXT: pl.String, EXAMPLE_POSITION: pl.Int64, EXAMPLE_LENGTH: pl.Int64}))


@check("mask.not_contiguous", layouts=lay.TOKENIZED, roles=("attention_mask",))
def not_contiguous(ctx: ShardContext) -> Iterable[ShardItem]:
    """``mask.not_contiguous``: a binary mask whose 1s are not one block against the shard's padding
    side (right: a 1 after a 0; left: a 0 after a 1): ``[tokens] padding_side``, or where unset the
    side the shard's first rows are padded on (:attr:`ShardContext.padding_side`); when none of
    them is padded (``"either"``: a shard sorted by length, or whose full-length rows come first),
    a row fails only when its 1s are one block at neither end (a hole, or padding at both ends). Where the shared pass over the flat buffers reads
    the mask (:func:`position_pass`) it decides which rows fail; else list kernels."""
    mcol, _t, _inner, mi, binary = mask_int(ctx)
    side = ctx.padding_side
    # For a binary mask with s ones: right padding is contiguous iff the first 0 sits at index s
    # (or there is no 0); left padding iff the first 1 sits at index len - s (or there is no 1).
    # Native list kernels only (arg_min/arg_max/sum), no per-row evaluation.
    s_ones = mi.list.sum()
    right = (mi.list.min() == 0) & (mi.list.arg_min() != s_ones)
    left = (mi.list.max() == 1) & (mi.list.arg_max() != mi.list.len() - s_ones)
    holes = right if side == "right" else left if side == "left" else right & left
    fails = binary & holes
    how = (" (recognized: the shard's first rows are padded on that side; set [tokens] padding_side if they are not "
           "the rule)") if ctx.padding_recognized else ""

    fast = position_pass(ctx)
    if fast is not None and mcol in positions_view(ctx).cols:  # the same rows, from the shared flat pass
        fails = fast[0].struct.field("mask_hole") > 0
    yield RowCheck(
        check="mask.not_contiguous", column=mcol, fails=fails, example=_hole_example(mcol, side),
        message=lambda n, d, side=side, how=how: (
            f"{n} row(s) have an attention_mask that is not one block of 1s against padding_side={side}{how} (holes, "
            "or padding on the other side)" if side != "either" else
            f"{n} row(s) have an attention_mask whose 1s are one block at neither end (a hole, or padding at both "
            "ends); the padding side is not recognized (none of the shard's first rows is padded), so each row is "
            "judged against the side it is padded on: set [tokens] padding_side to hold every row to one side"),
    )
