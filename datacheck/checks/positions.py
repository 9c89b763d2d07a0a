"""Position-wise token rules of CHECKS.md's "more label, token and target rules": position ids
against the model's position table, and the label-shift convention (``padding.pad_attended`` is in
:mod:`datacheck.checks.mask`, with the other padding rules).

Kept in one module (rather than appended to ``tokens``/``labels``/``mask``) because they share the
flat position view helpers of :mod:`datacheck.checks._pos`; each ID still has one producer.
"""
from __future__ import annotations

from typing import Iterable

import polars as pl

from datacheck.checks._pos import ROW, nxt
from datacheck.checks.mask import positions_view
from datacheck.checks.registry import RowCheck, ShardContext, ShardItem, check, max_parts, min_parts
from datacheck.checks.roledtype import problem
from datacheck.model.findings import Skipped

__all__ = ["position_out_of_range", "shift_mismatch", "SHIFT_MATCH_SHARE"]

#: share of supervised positions whose label matches the other convention (CHECKS.md: "at least 90%")
SHIFT_MATCH_SHARE = 0.9


@check("tokens.position_out_of_range", roles=("position_ids|input_ids",), facts=("tokens.max_position_embeddings",))
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


@check("labels.shift_mismatch", roles=("labels", "input_ids"), facts=("labels.ignore_index",))
def shift_mismatch(ctx: ShardContext) -> Iterable[ShardItem]:
    """``labels.shift_mismatch``: a row's labels follow the other shift convention than ``[labels]
    shifted`` says.

    Over the supervised positions ``i`` (label other than ``ignore_index``) of a row: ``next`` = the
    share with ``labels[i] == input_ids[i+1]`` (among those with an ``i+1``), ``same`` = the share
    with ``labels[i] == input_ids[i]``. With ``shifted = false`` a row fails when ``next >= 0.9``
    and ``same < 0.9`` (the labels are pre-shifted and the model shifts again: next-next-token
    prediction); with ``shifted = true`` when ``same >= 0.9`` and ``next < 0.9`` (the model learns to
    copy its input). Rows where both hold (e.g. one repeated token) are ambiguous and never fail.
    Evaluated in the flat position view with running sums read at each row's end (no per-row window)."""
    r, ign, shifted = ctx.roles, ctx.cfg.labels.ignore, ctx.cfg.labels.shifted
    lab, ids = pl.col(r.labels), pl.col(r.input_ids)
    view = positions_view(ctx)
    sup = (lab != ign).fill_null(False)
    nx = nxt(ids)
    has_next = sup & nx.is_not_null()
    m_next = (has_next & (lab == nx)).fill_null(False)
    m_same = (sup & (lab == ids)).fill_null(False)
    # Per-row sums without a window over __row (the view is sorted by row): running sums read at each
    # row's last position, differenced. Rows left out of the view have one null position: sums 0.
    last = (ROW != ROW.shift(-1)).fill_null(True)

    def per_row(x: pl.Expr) -> pl.Expr:
        at_end = x.cast(pl.UInt32).cum_sum().filter(last).cast(pl.Int64)
        return at_end.diff().fill_null(at_end.first())

    n_sup, n_has_next = per_row(sup), per_row(has_next)
    p_next = pl.when(n_has_next > 0).then(per_row(m_next) / n_has_next)
    p_same = pl.when(n_sup > 0).then(per_row(m_same) / n_sup)
    t = SHIFT_MATCH_SHARE
    wrong = (p_next >= t) & (p_same < t) if not shifted else (p_same >= t) & (p_next < t)
    rows = ROW.filter(last).filter(wrong.fill_null(False)).cast(pl.UInt32)
    said = "true" if shifted else "false"
    found = "unshifted (labels[i] == input_ids[i])" if shifted else "already shifted (labels[i] == input_ids[i+1])"
    fix = ("set [labels] shifted = false, or shift the labels" if shifted
           else "set [labels] shifted = true if the trainer does not shift, else store unshifted labels")
    yield RowCheck(
        check="labels.shift_mismatch", column=r.labels, fails=None, rows=rows, view=view,
        message=lambda n, d: (f"{n} row(s) have labels {found} on at least {t:.0%} of their supervised positions "
                              f"while [labels] shifted = {said}: the model learns "
                              f"{'to copy its input' if shifted else 'next-next-token prediction'}; {fix}"))


