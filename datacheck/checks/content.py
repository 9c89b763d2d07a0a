"""content: what the tokens say.

``content.periodic_tokens`` follows OLMo-core's instance filter (``repetition_max_period = 13``,
``repetition_min_period = 1``, ``repetition_max_count = 32``; OLMo 2 ties such runs to grad-norm
spikes). It runs in the shard's flat position view, fused into the shard's one query.
"""
from __future__ import annotations

from typing import Iterable

import polars as pl

from datacheck.checks._pos import nxt
from datacheck.checks.mask import positions_view
from datacheck.checks.registry import FlatView, RowCheck, ShardContext, ShardItem, check
from datacheck.model.roles import inner_dtype

__all__ = ["periodic_tokens", "MIN_PERIOD", "MAX_PERIOD", "MIN_REPEATS"]

#: OLMo-core ``InstanceFilterConfig`` defaults (repetition_min_period, repetition_max_period, repetition_max_count)
MIN_PERIOD, MAX_PERIOD, MIN_REPEATS = 1, 13, 32


def _eq(ids: str, p: int, mask: str | None = None) -> pl.Expr:
    """Per position: the id equals the id ``p`` positions later in the same row (both real content
    when there is an attention mask: runs of padding are not content)."""
    x = pl.col(ids)
    eq = x == nxt(x, p)
    if mask is not None:
        real = pl.col(mask).cast(pl.Int64) == 1
        eq = eq & real & nxt(real, p)
    return eq.fill_null(False)


def _runs_detail(ids: str, mask: str | None) -> pl.Expr:
    """Aggregate over the failing rows' positions: per row, the first run found with the smallest
    period: {row, start (0-based position in the row), period, repeats}, first 20 rows."""
    idx = pl.int_range(pl.len(), dtype=pl.Int64)
    row_start = idx.min().over("__row")
    cands = []
    for p in range(MIN_PERIOD, MAX_PERIOD + 1):
        eq = _eq(ids, p, mask)
        last_false = pl.when(~eq).then(idx).forward_fill().fill_null(-1)
        next_false = pl.when(~eq).then(idx).backward_fill().fill_null(pl.len())
        length = next_false - last_false - 1
        start = last_false + 1
        hit = eq & (length >= (MIN_REPEATS - 1) * p)
        cands.append(pl.when(hit).then(pl.struct(
            start=start - row_start, period=pl.lit(p, pl.Int64), repeats=length // p + 1)))
    best = pl.coalesce(cands)
    found = best.is_not_null()
    first_in_row = found & (found.cast(pl.UInt32).cum_sum().over("__row") == 1)
    return pl.struct(row=pl.col("__row").cast(pl.Int64), run=best).filter(first_in_row).head(20).implode()


@check("content.periodic_tokens", roles=("input_ids",))
def periodic_tokens(ctx: ShardContext) -> Iterable[ShardItem]:
    """``content.periodic_tokens`` (warn): ``input_ids`` (list of int) hold a run in which a period of
    1 to 13 tokens repeats at least 32 times: positions ``t .. t + 32p - 1`` with
    ``ids[j] == ids[j + p]`` for every ``j`` in ``[t, t + 31p)`` (positions with attention_mask 0 are
    padding and never part of a run). In the flat view: for each period
    ``p``, a rolling minimum over ``31 p`` positions of that equality (O(positions) each). The
    details give per row the start position, the smallest such period and the repeats."""
    ids = ctx.roles.input_ids
    full = positions_view(ctx)
    mask = ctx.roles.attention_mask if ctx.roles.attention_mask in full.cols else None
    cand = _candidates(ctx, ids, mask)
    view = FlatView(key=full.key + "|periodic-candidates", cols=full.cols,
                    where=cand if full.where is None else (full.where & cand))
    hits = [_eq(ids, p, mask).cast(pl.UInt8).rolling_min(window_size=(MIN_REPEATS - 1) * p) == 1
            for p in range(MIN_PERIOD, MAX_PERIOD + 1)]
    bad = pl.any_horizontal(hits).fill_null(False)
    yield RowCheck(
        check="content.periodic_tokens", column=ids, fails=bad, view=view,
        details={"runs": _runs_detail(ids, mask)},
        message=lambda n, d: _message(n, d),
    )


def _candidates(ctx: ShardContext, ids: str, mask: str | None) -> pl.Expr:
    """Per row, by list kernels (no explode): False where no run can exist, so only the other rows
    are exploded for the rolling windows. A run of 32 repeats of a period ``p`` covers ``32 p``
    attended positions holding at most ``p`` distinct ids, so the row's attended ids have at most
    ``attended - 31`` distinct values. With a mask, ``input_ids * attention_mask`` maps every
    padding position to 0 and keeps the attended ids (an attended 0 may merge with it: fewer
    distinct values, never more), so ``n_unique(ids * mask) - [some position has mask 0]`` is at
    most the distinct attended ids: rows where it exceeds ``attended - 31`` cannot hold a run. On
    ordinary token rows that is every row. (The view leaves out rows whose lengths differ or whose
    mask is not binary; they are null here.) A null id counts as one more value, as in the view."""
    x = pl.col(ids)
    if mask is None:
        return x.list.n_unique() <= x.list.len() - (MIN_REPEATS - 1)
    m = pl.col(mask)
    if not inner_dtype(ctx.schema[mask]).is_integer():  # boolean, or a float mask that is 0/1 (else not in the view)
        m = m.cast(pl.List(pl.Int8), strict=False)
    masked = pl.when(x.list.len() == m.list.len()).then(x) * m
    # the padding adds at most one value (0), and a null id at a padding position one more (null)
    extra = ((m.list.min() == 0).fill_null(False).cast(pl.Int64)
             + (x.list.count_matches(None) > 0).fill_null(False).cast(pl.Int64))
    return masked.list.n_unique().cast(pl.Int64) - extra <= m.list.sum().cast(pl.Int64) - (MIN_REPEATS - 1)


def _message(n: int, d: dict) -> str:
    runs = d.get("runs") or []
    shown = "; ".join(f"row {r['row']}: from position {r['run']['start']}, period {r['run']['period']} x "
                      f"{r['run']['repeats']}" for r in runs[:5] if r.get("run"))
    return (f"{n} row(s) hold a run of 1 to {MAX_PERIOD} tokens repeated at least {MIN_REPEATS} times"
            + (f" ({shown})" if shown else "") + ": OLMo-core filters such instances (they cause loss/grad-norm spikes)")
