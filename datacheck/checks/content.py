"""content: what the tokens say.

``content.periodic_tokens`` follows OLMo-core's instance filter (``repetition_max_period = 13``,
``repetition_min_period = 1``, ``repetition_max_count = 32``; OLMo 2 ties such runs to grad-norm
spikes). It runs in the shard's flat position view, fused into the shard's one query.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np
import polars as pl

from datacheck.checks._flat import MAX_PERIOD, MIN_PERIOD, MIN_REPEATS, by_chunks, periodic_flat, periodic_runs
from datacheck.checks._pos import nxt
from datacheck.checks.mask import position_pass, positions_view
from datacheck.checks.registry import FlatView, RowCheck, ShardContext, ShardItem, check, derives
from datacheck.derive.read import ALPACA, CHAT
from datacheck.model import layouts as lay
from datacheck.model.roles import inner_dtype

__all__ = ["periodic_tokens", "periodic_rows", "MIN_PERIOD", "MAX_PERIOD", "MIN_REPEATS"]

#: the read path's derivations this family reads: the Alpaca layout's messages and the chat
#: template's token columns are role columns like the shard's own
derives(__name__, ALPACA, CHAT)


def _eq(ids: str, p: int, mask: str | None = None, pad: int | None = None) -> pl.Expr:
    """Per position: the id equals the id ``p`` positions later in the same row, both real content:
    attention mask 1 where there is a mask, else an id other than ``pad`` (None: every id): runs of
    padding are not content."""
    x = pl.col(ids)
    eq = x == nxt(x, p)
    if mask is not None:
        real = pl.col(mask).cast(pl.Int64) == 1
        eq = eq & real & nxt(real, p)
    elif pad is not None:
        eq = eq & (x != pad)  # x == its next: the next is no pad either
    return eq.fill_null(False)


#: the details' dtype: per row, the first run found with the smallest period
_RUNS = pl.List(pl.Struct({"row": pl.Int64, "run": pl.Struct({"start": pl.Int64, "period": pl.Int64, "repeats": pl.Int64})}))


def _runs_detail(ids: str, mask: str | None, pad: int | None) -> pl.Expr:
    """Aggregate over the failing rows' positions (the flat view: one row per position, ``__row`` the
    shard row, a row's positions consecutive): per row, the first run found with the smallest period:
    {row, run: {start (0-based position in the row), period, repeats}}, first 20 rows. Positions
    with ``mask`` not 1 (when given) or ids equal to ``pad`` (when not None) and null ids are never
    in a run, as in the check. Computed by :func:`~datacheck.checks._flat.periodic_runs` over the
    view's numpy buffers: memory a few bytes a position (per-position expressions for each of the
    13 periods held about 700 bytes a position: 3 GB for a row of 4 million ids of one value)."""
    cols = [pl.col(ids), pl.col("__row")] + ([pl.col(mask)] if mask is not None else [])
    return pl.map_batches(cols, lambda s: _runs_of(s, pad), return_dtype=_RUNS, returns_scalar=True)


def _runs_of(s: list[pl.Series], pad: int | None) -> pl.Series:
    """:func:`_runs_detail` on the view's columns ``[ids, __row(, mask)]``."""
    x, row = s[0], s[1].to_numpy()  # the view's UInt32 row numbers, zero-copy (no 8 bytes a position)
    ok = x.is_not_null().to_numpy() if x.null_count() else None
    vals = x.fill_null(0).to_numpy() if ok is not None else x.to_numpy()
    if len(s) > 2:
        real = (s[2].cast(pl.Int64, strict=False) == 1).fill_null(False).to_numpy()
        ok = real if ok is None else (ok & real)
    elif pad is not None:
        real = vals != pad
        ok = real if ok is None else (ok & real)
    cut = np.flatnonzero(row[1:] != row[:-1]) + 1  # each row's first position (rows are consecutive)
    offsets = np.concatenate(([0], cut, [len(row)])).astype(np.int64)
    runs = periodic_runs(vals, ok, offsets, 20)
    got = [{"row": int(row[offsets[r]]), "run": {"start": st, "period": p, "repeats": k}} for r, st, p, k in runs]
    return pl.Series([got], dtype=_RUNS)


@check("content.periodic_tokens", layouts=lay.TOKENIZED, roles=("input_ids",))
def periodic_tokens(ctx: ShardContext) -> Iterable[ShardItem]:
    """``content.periodic_tokens`` (warn): ``input_ids`` (list of int) hold a run in which a period of
    1 to 13 tokens repeats at least 32 times: positions ``t .. t + 32p - 1`` with
    ``ids[j] == ids[j + p]`` for every ``j`` in ``[t, t + 31p)`` (positions with attention_mask 0 are
    padding and never part of a run; without an attention mask, positions holding ``[tokens]
    pad_token_id`` are, when it is set: rows padded by the tokenizer and stored without their mask).
    In the flat view: for each period
    ``p``, a rolling minimum over ``31 p`` positions of that equality (O(positions) each). The
    details give per row the start position, the smallest such period and the repeats."""
    ids = ctx.roles.input_ids
    full = positions_view(ctx)
    mask = ctx.roles.attention_mask if ctx.roles.attention_mask in full.cols else None
    pad = ctx.cfg.tokens.pad_token_id if mask is None else None
    fast = position_pass(ctx)  # reads the same mask (without one, the pad id) (None: no shared pass)
    cand = fast[0].struct.field("periodic") > 0 if fast is not None else _candidates(ctx, ids, mask, pad)
    view = FlatView(key=full.key + "|periodic-candidates", cols=full.cols,
                    where=cand if full.where is None else (full.where & cand), drop_others=True)
    hits = [_eq(ids, p, mask, pad).cast(pl.UInt8).rolling_min(window_size=(MIN_REPEATS - 1) * p) == 1
            for p in range(MIN_PERIOD, MAX_PERIOD + 1)]
    bad = pl.any_horizontal(hits).fill_null(False)
    yield RowCheck(
        check="content.periodic_tokens", column=ids, fails=bad, view=view,
        details={"runs": _runs_detail(ids, mask, pad)},
        message=lambda n, d: _message(n, d),
    )


def _candidates(ctx: ShardContext, ids: str, mask: str | None, pad: int | None = None) -> pl.Expr:
    """Per row (Boolean, one per row), where the shard has no shared position pass
    (:func:`~datacheck.checks.mask.position_pass`: there the pass's ``periodic`` field, from the same
    buffers it reads for the other position rules): the row holds a run, decided exactly by :func:`periodic_rows`
    over the flat buffers of ``ids`` (and the mask), so only the rows that fail are exploded for the
    rolling windows of the check (the second pass reads their runs there). Without ``mask``, ids
    equal to ``pad`` (when not None) are padding (:func:`periodic_rows`). Rows whose ids and mask
    lengths differ are False here (the view leaves them out); a mask that is not binary is left out
    by the view's own ``where``. Chunk by chunk (:func:`~datacheck.checks._flat.by_chunks`): the
    buffers of a column of several chunks are not copied into one."""
    x = pl.col(ids)
    if mask is None:
        return pl.map_batches([x], lambda s: by_chunks(list(s), lambda c: periodic_rows(c[0], None, pad)),
                              return_dtype=pl.Boolean)
    m = pl.col(mask)
    if not inner_dtype(ctx.schema[mask]).is_integer():  # boolean, or a float mask that is 0/1 (else not in the view)
        m = m.cast(pl.List(pl.Int8), strict=False)
    same = x.list.len() == m.list.len()
    return pl.map_batches([pl.when(same).then(x), pl.when(same).then(m)],
                          lambda s: by_chunks(list(s), lambda c: periodic_rows(c[0], c[1])), return_dtype=pl.Boolean)


def periodic_rows(ids: pl.Series, mask: pl.Series | None = None, pad: int | None = None) -> pl.Series:
    """Per row of ``ids`` (list of int, one row per row, nulls allowed): True when the row holds a
    run of ``content.periodic_tokens``: for some period ``p`` in ``MIN_PERIOD..MAX_PERIOD``,
    ``L = (MIN_REPEATS - 1) p`` consecutive positions ``j`` of the row with ``ids[j] == ids[j + p]``
    (``j + p`` in the row, both ids not null, and with ``mask`` (list of int, same lengths; 1 = real
    token) both positions real; without ``mask``, with ``pad`` not None, both ids other than ``pad``:
    padding stored without its mask). Null rows are False. The rows' flat buffers through
    :func:`~datacheck.checks._flat.periodic_flat` (one pass, no loop over rows: in C where built). Exact: equals
    the rolling-window definition of the check (tests/unit/checks/test_content.py)."""
    n = ids.len()
    if n == 0:
        return pl.Series(ids.name, np.zeros(0, dtype=bool), dtype=pl.Boolean)
    lens = ids.list.len().fill_null(0).to_numpy().astype(np.int64)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    flat = ids.explode(empty_as_null=False, keep_nulls=False)
    ok: np.ndarray | None = None  # per flat position: the id is not null (and the position is real)
    if flat.null_count():
        ok = flat.is_not_null().to_numpy()
        flat = flat.fill_null(0)
    vals = flat.to_numpy()
    if mask is not None:
        real = mask.explode(empty_as_null=False, keep_nulls=False).fill_null(0).to_numpy() == 1
        ok = real if ok is None else (ok & real)
    elif pad is not None:
        real = vals != pad
        ok = real if ok is None else (ok & real)
    out = periodic_flat(vals, ok, offsets)
    out &= ids.is_not_null().to_numpy()
    return pl.Series(ids.name, out, dtype=pl.Boolean)  # with the dtype: 0.02 ms, without 0.65 (polars 2.1)


def _message(n: int, d: dict) -> str:
    runs = d.get("runs") or []
    shown = "; ".join(f"row {r['row']}: from position {r['run']['start']}, period {r['run']['period']} x "
                      f"{r['run']['repeats']}" for r in runs[:5] if r.get("run"))
    return (f"{n} row(s) hold a run of 1 to {MAX_PERIOD} tokens repeated at least {MIN_REPEATS} times"
            + (f" ({shown})" if shown else "") + ": OLMo-core filters such instances (they cause loss/grad-norm spikes)")
