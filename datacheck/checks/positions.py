"""Position-wise token rules of CHECKS.md's "more label, token and target rules": position ids
against the model's position table, and the label-shift convention (``padding.pad_attended`` is in
:mod:`datacheck.checks.mask`, with the other padding rules).

Kept in one module (rather than appended to ``tokens``/``labels``/``mask``) because they share the
flat position view helpers of :mod:`datacheck.checks._pos`; each ID still has one producer.
"""
from __future__ import annotations

from typing import Iterable

import polars as pl

from datacheck.checks._pos import nxt
from datacheck.checks.mask import position_pass, positions_view
from datacheck.checks.registry import (
    FlatView,
    RowAgg,
    RowCheck,
    ShardContext,
    ShardItem,
    check,
    derives,
    max_parts,
    min_parts,
)
from datacheck.checks.roledtype import problem
from datacheck.derive.read import CHAT
from datacheck.model import layouts as lay
from datacheck.model.findings import Skipped
from datacheck.model.roles import seq2seq_layout

__all__ = ["position_out_of_range", "shift_mismatch", "SHIFT_MATCH_SHARE"]

#: the read path's derivations this family reads: the token columns a chat template's rendering
#: gives (``[tokens] tokenizer``)
derives(__name__, CHAT)

#: share of supervised positions whose label matches the other convention (CHECKS.md: "at least 90%")
SHIFT_MATCH_SHARE = 0.9


@check("tokens.position_out_of_range", layouts=lay.TOKENIZED, roles=("position_ids|input_ids",), facts=("tokens.max_position_embeddings",))
def position_out_of_range(ctx: ShardContext) -> Iterable[ShardItem]:
    """``tokens.position_out_of_range``: a ``position_ids`` value (list of int) outside
    ``[0, max_position_embeddings)`` or null; without position ids, an ``input_ids`` sequence longer
    than ``max_position_embeddings`` (positions 0..len-1 are used). The position embedding (or RoPE
    cache) has ``max_position_embeddings`` rows. Native list kernels (``list.min``/``list.max``)."""
    k = ctx.cfg.tokens.max_position_embeddings
    r = ctx.roles
    if r.position_ids is not None and problem(ctx, "position_ids") is None:
        c = pl.col(r.position_ids)
        yield RowCheck(
            check="tokens.position_out_of_range", column=r.position_ids,
            fails=(c.list.max() >= k) | (c.list.min() < 0) | (c.list.count_matches(None) > 0),
            example=pl.format("min {} max {}", c.list.min(), c.list.max()),
            details={"max": c.list.max().max(), "min": c.list.min().min()},
            details_merge={"max": max_parts, "min": min_parts},
            message=lambda n, d, k=k: (f"{n} row(s) hold position_ids outside [0, max_position_embeddings={k}) "
                                       f"(range {d.get('min')}..{d.get('max')}): the position table has no row for them"))
        return
    if r.input_ids is None or problem(ctx, "input_ids") is not None:
        yield Skipped("tokens.position_out_of_range", "no usable position_ids or input_ids column")
        return
    n_tok = pl.col(r.input_ids).list.len()
    yield RowCheck(
        check="tokens.position_out_of_range", column=r.input_ids, fails=n_tok > k,
        example=pl.format("{} tokens", n_tok), details={"longest": n_tok.max()}, details_merge={"longest": max_parts},
        message=lambda n, d, k=k: (f"{n} row(s) are longer than max_position_embeddings={k} (longest "
                                   f"{d.get('longest')}): their positions run past the position table"))


@check("labels.shift_mismatch", layouts=lay.LM | lay.SFT | lay.PACKED, roles=("labels", "input_ids"), facts=("labels.ignore_index",))
def shift_mismatch(ctx: ShardContext) -> Iterable[ShardItem]:
    """``labels.shift_mismatch``: a row's labels follow the other shift convention than ``[labels]
    shifted`` says.

    Over the supervised positions ``i`` (label other than ``ignore_index``) of a row: ``next`` = the
    share with ``labels[i] == input_ids[i+1]`` (among those with an ``i+1``), ``same`` = the share
    with ``labels[i] == input_ids[i]``. With ``shifted = false`` a row fails when ``next >= 0.9``
    and ``same < 0.9`` (the labels are pre-shifted and the model shifts again: next-next-token
    prediction); with ``shifted = true`` when ``same >= 0.9`` and ``next < 0.9`` (the model learns to
    copy its input). Rows where both hold (e.g. one repeated token) are ambiguous and never fail.
    Only candidate rows are exploded (rows holding a supervised label that breaks the configured
    convention, from the pass over the flat buffers shared with the sft rules,
    :func:`datacheck.checks.mask.position_pass`; else :func:`_shift_candidates`, list kernels: a
    necessary condition); in their flat position view the four per-row counts are :class:`RowAgg` sums the
    engine computes once per shard (no per-row window)."""
    s2s = seq2seq_layout(ctx.cfg.dataset.schema_, ctx.schema, ctx.layout)
    if s2s is not None:  # only with [dataset] layout naming another layout: labels follow the decoder
        yield Skipped("labels.shift_mismatch", f"seq2seq layout ({s2s}): labels follow the decoder, not input_ids")
        return
    r, ign, shifted = ctx.roles, ctx.cfg.labels.ignore, ctx.cfg.labels.shifted
    lab, ids = pl.col(r.labels), pl.col(r.input_ids)
    full = positions_view(ctx)
    fast = position_pass(ctx)
    # candidates: from the shared pass over the flat buffers (exact: a row without a supervised
    # label breaking the convention cannot fail), else from list kernels (a necessary condition)
    cand = fast[0].struct.field("shift") > 0 if fast is not None else _shift_candidates(ctx, ign, shifted)
    view = full if cand is None else FlatView(key=full.key + "|shift-candidates", cols=full.cols,
                                              where=cand if full.where is None else (full.where & cand),
                                              drop_others=True)
    sup = (lab != ign).fill_null(False)
    nx = nxt(ids)
    has_next = sup & nx.is_not_null()
    aggs = (RowAgg("__shift_sup", sup), RowAgg("__shift_has_next", has_next),
            RowAgg("__shift_next", (has_next & (lab == nx)).fill_null(False)),
            RowAgg("__shift_same", (sup & (lab == ids)).fill_null(False)))
    n_sup, n_has_next, n_next, n_same = (pl.col(a.name) for a in aggs)
    p_next = pl.when(n_has_next > 0).then(n_next / n_has_next)
    p_same = pl.when(n_sup > 0).then(n_same / n_sup)
    t = SHIFT_MATCH_SHARE
    wrong = (p_next >= t) & (p_same < t) if not shifted else (p_same >= t) & (p_next < t)
    said = "true" if shifted else "false"
    found = "unshifted (labels[i] == input_ids[i])" if shifted else "already shifted (labels[i] == input_ids[i+1])"
    fix = ("set [labels] shifted = false, or shift the labels" if shifted
           else "set [labels] shifted = true if the trainer does not shift, else store unshifted labels")
    yield RowCheck(
        check="labels.shift_mismatch", column=r.labels, fails=wrong, view=view, per_row=aggs,
        message=lambda n, d: (f"{n} row(s) have labels {found} on at least {t:.0%} of their supervised positions "
                              f"while [labels] shifted = {said}: the model learns "
                              f"{'to copy its input' if shifted else 'next-next-token prediction'}; {fix}"))


def _exact_ints(dtype: pl.DataType) -> bool:
    """A list of integers that Int64 holds exactly (every integer type but UInt64)."""
    return isinstance(dtype, pl.List) and dtype.inner.is_integer() and dtype.inner != pl.UInt64


def _shift_candidates(ctx: ShardContext, ign: int, shifted: bool) -> pl.Expr | None:
    """Per row, by list kernels (no explode): False where ``labels.shift_mismatch`` cannot fire, so
    only the other rows are exploded for the exact shares. None when no such bound is cheap (labels
    or input_ids not a list of integers Int64 holds), then every row is checked exactly.

    ``eq`` = positions with ``labels[i] == input_ids[i]`` (zeros of the list difference; rows whose
    lengths differ are null: the view leaves them out anyway). The exact count of supervised
    matches ``same`` lies in ``[eq - count(input_ids == ignore_index), eq]``, and ``sup`` (supervised
    positions) is at most ``len - count(labels == ignore_index)`` and exactly that minus the null
    labels. With ``shifted = false`` a row fails only if ``same / sup < 0.9``: rows whose lower bound
    already reaches 0.9 cannot fail (ordinary unshifted labels are copies of input_ids: none is a
    candidate). With ``shifted = true`` a row fails only if ``same / sup >= 0.9``: rows whose upper
    bound stays below cannot fail."""
    r = ctx.roles
    if not (_exact_ints(ctx.schema[r.labels]) and _exact_ints(ctx.schema[r.input_ids])):
        return None
    lab = pl.col(r.labels).cast(pl.List(pl.Int64))
    ids = pl.col(r.input_ids).cast(pl.List(pl.Int64))
    same_len = lab.list.len() == ids.list.len()
    eq = (pl.when(same_len).then(lab) - ids).list.count_matches(0).cast(pl.Int64)
    n = lab.list.len().cast(pl.Int64)
    n_ign = lab.list.count_matches(ign).cast(pl.Int64)
    t = SHIFT_MATCH_SHARE
    if not shifted:
        low = eq - ids.list.count_matches(ign).cast(pl.Int64)
        return ~(low / (n - n_ign) >= t).fill_null(False)
    exact_sup = n - n_ign - lab.list.count_matches(None).cast(pl.Int64)
    return (eq / exact_sup >= t).fill_null(True)
