"""batch: what the trainer's batching makes of the data (CHECKS.md ``batch.*``; needs ``[batch]``).

The shard pass stores, when ``[batch] batch_size`` is set and the shard has a token ``labels`` list,
the supervised-token count of every row as a :class:`Payload` (:data:`SUPERVISED_KEY`: a UInt32
Series, one value per row: labels other than ``ignore_index`` after truncation to ``max_seq_len`` on
``truncation_side``; every token when ``ignore_index`` is unset). The dataset stage then simulates
the trainer's order over the shards in index order (the audit's shard order: relative paths
sorted) with torch's own ``DistributedSampler`` and ``BatchSampler``
(:mod:`datacheck.torch.order`) from the shards' row counts and these payloads; no shard is read again.

- ``batch.no_batches`` (error): with ``drop_last``, a rank's share (``ceil(rows / world_size)``) is
  under one ``batch_size``, so each rank gets 0 micro-batches; also any dataset of 0 rows.
- ``batch.singleton_tail`` (error): each rank's last micro-batch holds exactly 1 row (batch norm on
  one sample fails in training mode: "Expected more than 1 value per channel").
- ``batch.small_tail`` (warn): each rank's last micro-batch holds at least 2 and fewer than
  ``batch_size / 2`` rows (a 1-row tail is ``batch.singleton_tail`` only).
- ``batch.wraparound`` (info): ``DistributedSampler`` pads each epoch by repeating
  ``ceil(rows / world_size) * world_size - rows`` rows (those rows get extra weight).
- ``batch.no_supervised_tokens`` (error): some (epoch, step, rank, micro-batch) of the simulated
  order has 0 supervised tokens: a mean cross-entropy over that micro-batch is 0/0 = NaN. Every
  epoch of ``[batch] epochs`` is simulated (``set_epoch`` reseeds the shuffle).

Every check is skipped with the reason when torch is missing (the install command), when a shard
cannot be read (its row count is unknown), or when ``max_tokens`` is set (token-budget batching is
not simulated in this version).
"""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np
import polars as pl

from datacheck.checks._expr import supervised_per_row
from datacheck.checks.registry import Payload, ShardContext, check, measure
from datacheck.model.errors import OptionalDependencyError
from datacheck.model.findings import Finding, Skipped
from datacheck.model.roles import is_list
from datacheck.torch.order import EpochOrder, epoch_order

__all__ = ["SUPERVISED_KEY", "supervised_expr", "batch_payload", "dataset_order"]

#: the payload key of the per-row supervised-token counts
SUPERVISED_KEY = "batch.supervised"
_FACTS = ("batch.batch_size",)
_MAX_LISTED = 20


def supervised_expr(ctx_cfg: Any, labels_col: str) -> pl.Expr:
    """Per row (UInt32, 0 for a null list): supervised token labels after truncation (see the module)."""
    tok, ign = ctx_cfg.tokens, ctx_cfg.labels.ignore
    if ign is None:
        e = supervised_per_row(labels_col, -(2 ** 62), tok.max_seq_len, tok.truncation_side)
    else:
        e = supervised_per_row(labels_col, ign, tok.max_seq_len, tok.truncation_side)
    return e.fill_null(0).cast(pl.UInt32)


@measure("batch")
def batch_payload(ctx: ShardContext) -> Iterable[Payload]:
    """The supervised-token count of every row, for ``batch.no_supervised_tokens`` (when ``[batch]
    batch_size`` is set and the shard has a list ``labels`` column)."""
    lab = ctx.roles.labels
    if ctx.cfg.batch.batch_size is None or lab is None or not is_list(ctx.schema.get(lab, pl.Null())):
        return
    yield Payload(key=SUPERVISED_KEY, expr=supervised_expr(ctx.cfg, lab).implode(),
                  post=lambda v: v if isinstance(v, pl.Series) else pl.Series(v, dtype=pl.UInt32))


def dataset_order(dctx: Any, cid: str, epoch: int = 0) -> tuple[EpochOrder | None, Skipped | None]:
    """The simulated order of ``epoch`` over the audited shards, or why it cannot be simulated."""
    bad = [s.path for s in dctx.shards if not s.readable]
    if bad:
        return None, Skipped(cid, f"shard {bad[0]} is unreadable: its row count is unknown, so the batch "
                                  "order cannot be simulated")
    if dctx.cfg.batch.max_tokens is not None:
        return None, Skipped(cid, "[batch] max_tokens: token-budget batching is not simulated in this version")
    n = sum(int(s.rows) for s in dctx.shards)
    try:
        return epoch_order(n, dctx.cfg.batch, epoch), None
    except OptionalDependencyError as exc:
        return None, Skipped(cid, str(exc))


def _tails(order: EpochOrder) -> list[int]:
    """The size of each rank's last micro-batch (0 when the rank has none)."""
    return [len(mbs[-1]) if mbs else 0 for mbs in order.ranks]


def _setup(dctx: Any) -> str:
    b = dctx.cfg.batch
    return (f"batch_size {b.batch_size} x world_size {b.world_size} x grad_accum {b.grad_accum}, "
            f"drop_last {str(b.drop_last).lower()}")


@check("batch.no_batches", level="dataset", facts=_FACTS)
def no_batches(dctx: Any) -> Iterable[Finding | Skipped]:
    """``batch.no_batches``: each rank gets 0 micro-batches per epoch."""
    order, skip = dataset_order(dctx, "batch.no_batches")
    if order is None:
        yield skip  # type: ignore[misc]
        return
    if order.micro_batches == 0:
        b = dctx.cfg.batch
        why = ("the dataset has 0 rows" if order.n_rows == 0 else
               f"each of {b.world_size} rank(s) gets {order.per_rank} row(s), under one batch of "
               f"{b.batch_size}, and drop_last drops it")
        yield Finding(check="batch.no_batches", severity="error", count=order.n_rows,
                      message=f"no batch at all per epoch: {why} ({_setup(dctx)}); the trainer runs 0 steps",
                      details={"rows": order.n_rows, "rows_per_rank": order.per_rank})


@check("batch.singleton_tail", level="dataset", facts=_FACTS)
def singleton_tail(dctx: Any) -> Iterable[Finding | Skipped]:
    """``batch.singleton_tail``: the last micro-batch of a rank holds exactly 1 row."""
    order, skip = dataset_order(dctx, "batch.singleton_tail")
    if order is None:
        yield skip  # type: ignore[misc]
        return
    tails = _tails(order)
    ranks = [r for r, t in enumerate(tails) if t == 1]
    if ranks:
        yield Finding(check="batch.singleton_tail", severity="error", count=len(ranks),
                      message=(f"the last micro-batch of {len(ranks)} rank(s) holds 1 row ({_setup(dctx)}; "
                               f"{order.n_rows} rows): batch norm fails on it in training mode; "
                               "set drop_last or change the batch size"),
                      details={"ranks": ranks[:1000], "last_batch_rows": 1, "micro_batches_per_rank": order.micro_batches})


@check("batch.small_tail", level="dataset", facts=_FACTS)
def small_tail(dctx: Any) -> Iterable[Finding | Skipped]:
    """``batch.small_tail``: the last micro-batch of a rank has 2 .. ceil(batch_size/2)-1 rows."""
    order, skip = dataset_order(dctx, "batch.small_tail")
    if order is None:
        yield skip  # type: ignore[misc]
        return
    bs = int(dctx.cfg.batch.batch_size)
    tails = _tails(order)
    ranks = [r for r, t in enumerate(tails) if 1 < t and 2 * t < bs]
    if ranks:
        sizes = sorted({tails[r] for r in ranks})
        yield Finding(check="batch.small_tail", severity="warn", count=len(ranks),
                      message=(f"the last micro-batch of {len(ranks)} rank(s) holds {sizes[0]} row(s), under half "
                               f"of batch_size {bs} ({_setup(dctx)}; {order.n_rows} rows): its gradient is noisier "
                               "and weighs each row more"),
                      details={"ranks": ranks[:1000], "last_batch_rows": sizes})


@check("batch.wraparound", level="dataset", facts=_FACTS)
def wraparound(dctx: Any) -> Iterable[Finding | Skipped]:
    """``batch.wraparound``: DistributedSampler repeats rows to pad the epoch."""
    order, skip = dataset_order(dctx, "batch.wraparound")
    if order is None:
        yield skip  # type: ignore[misc]
        return
    if order.repeats:
        ws = dctx.cfg.batch.world_size
        yield Finding(check="batch.wraparound", severity="info", count=order.repeats,
                      message=(f"DistributedSampler repeats {order.repeats} row(s) per epoch to split {order.n_rows} "
                               f"rows evenly over {ws} ranks ({order.per_rank} each)"),
                      details={"repeats_per_epoch": order.repeats, "rows_per_rank": order.per_rank})


def _supervised(dctx: Any) -> np.ndarray | None:
    parts = []
    for s in dctx.shards:
        v = s.payload.get(SUPERVISED_KEY)
        if v is None:
            return None
        parts.append(v.to_numpy() if isinstance(v, pl.Series) else np.asarray(v))
    return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, dtype=np.int64)


def zero_micro_batches(order: EpochOrder, supervised: np.ndarray) -> list[tuple[int, int, int, int]]:
    """``(epoch, in-epoch step, rank, micro_batch)`` of every micro-batch of ``order`` whose rows
    hold 0 supervised tokens in total (``supervised``: int array, one count per global row)."""
    ga = order.grad_accum
    out = []
    for r, mbs in enumerate(order.ranks):
        for m, idx in enumerate(mbs):
            if len(idx) and int(supervised[idx].sum()) == 0:
                out.append((order.epoch, m // ga, r, m % ga))
    return out


@check("batch.no_supervised_tokens", level="dataset", facts=_FACTS)
def no_supervised_batches(dctx: Any) -> Iterable[Finding | Skipped]:
    """``batch.no_supervised_tokens``: a (step, rank, micro-batch) of the simulated order with 0
    supervised tokens, over every epoch of ``[batch] epochs``."""
    cid = "batch.no_supervised_tokens"
    order, skip = dataset_order(dctx, cid)
    if order is None:
        yield skip  # type: ignore[misc]
        return
    sup = _supervised(dctx)
    if sup is None:
        yield Skipped(cid, "no token labels list column (set [columns] labels): supervised tokens per row are unknown")
        return
    zeros = zero_micro_batches(order, sup)
    for e in range(1, dctx.cfg.batch.epochs):
        zeros += zero_micro_batches(epoch_order(order.n_rows, dctx.cfg.batch, e), sup)
    if zeros:
        spe = order.steps
        listed = ", ".join(f"epoch {e} step {s} (global {e * spe + s}) rank {r} micro-batch {m}"
                           for e, s, r, m in zeros[:5])
        yield Finding(check=cid, severity="error", count=len(zeros),
                      message=(f"{len(zeros)} micro-batch(es) of the simulated order have 0 supervised tokens "
                               f"(mean loss 0/0 = NaN): {listed}{' ...' if len(zeros) > 5 else ''}; "
                               "see them with datacheck plan --step N"),
                      details={"micro_batches": [list(z) for z in zeros[:_MAX_LISTED]],
                               "rows_with_zero": int((sup == 0).sum()), "steps_per_epoch": spe})
