"""The trainer's batch order, simulated with torch's own samplers (no data is read here).

One epoch of a data-parallel run over ``n_rows`` rows (global indices ``0 .. n_rows-1``: the rows of
the dataset's shards in index order, see :mod:`datacheck.execute.plan`) is, for each rank ``r``::

    DistributedSampler(rows, num_replicas=world_size, rank=r, shuffle=shuffle, seed=seed, drop_last=False)
    sampler.set_epoch(epoch)
    BatchSampler(sampler, batch_size, drop_last=drop_last)

exactly as torch builds it (``torch.utils.data``), so the order matches what a trainer using these
samplers does (Hugging Face ``Trainer``, Lightning, plain DDP loops). Every rank's batches are sliced
from the one ``torch.randperm`` the samplers draw (:func:`_epoch_ranks`, tested equal to a sampler
per rank), so a simulation costs one permutation an epoch whatever the number of ranks. ``DistributedSampler`` pads its
index list by repeating rows from the start until it divides by ``world_size`` (the wraparound
repeats); ``drop_last`` is the DataLoader's (it drops each rank's last micro-batch when short).

Steps: an optimizer step is ``grad_accum`` consecutive micro-batches of every rank; step ``s`` of
an epoch holds micro-batches ``s*grad_accum .. (s+1)*grad_accum - 1`` of each rank, and a last
partial step (fewer micro-batches) still counts as a step (Hugging Face ``Trainer`` and Lightning
step on the remainder). Steps are numbered from 0 over the whole run: global step ``N`` is step
``N % steps_per_epoch`` of epoch ``N // steps_per_epoch`` (every epoch has the same number of steps).

With ``[batch] loader = "accelerate"`` (a DataLoader passed to ``accelerator.prepare``) the order is
Hugging Face accelerate's (``accelerate/data_loader.py``, ``prepare_data_loader``): ONE order of all the
rows for the whole run, ``DistributedSampler(rows, num_replicas=1, rank=0, shuffle, seed)`` (the same
permutation as accelerate's ``SeedableRandomSampler`` with ``data_seed = seed``: ``randperm(n_rows)`` of a
generator seeded ``seed + epoch``; the rows in order without ``shuffle``), cut by
``BatchSampler(loader batch, drop_last)`` into the DataLoader's batches, which ``BatchSamplerShard``
deals to the ``world_size`` processes (:func:`accelerate_shards`): batch ``k`` to process ``k %
world_size`` (``split_batches`` false; the loader batch is ``batch_size``), or slice ``p`` of every batch
of ``batch_size x world_size`` rows to process ``p`` (``split_batches`` true). ``even_batches`` (accelerate's
default) completes the last round with rows from the epoch's start so every process gets as many full
batches; ``drop_last`` drops a last round that is not full. Without ``even_batches`` the processes after
the last batch's get one batch fewer: the epoch's steps (:attr:`EpochOrder.steps`) are the longest
share's (process 0's), a shorter share has no micro-batch in the epoch's last step; each process counts
its own steps over its own epochs (a process with fewer starts the next epoch sooner: what
``record_batches`` records, ``"epoch_steps": "own"``, and ``rows_of_step(own_epochs=True)`` plans). accelerate sets the sampler's epoch to the
loader's iteration count, so epoch ``e`` is seeded ``seed + e`` as with torch.

With ``[batch] sampler = "random"`` the order is a single-process ``DataLoader(rows, batch_size,
shuffle=True, drop_last, generator=torch.Generator().manual_seed(seed))`` (torch's ``RandomSampler``;
``world_size`` 1): ONE generator for the whole run, created before the first epoch. Each ``iter(loader)``
(an epoch's ``for batch in loader``) builds a ``_BaseDataLoaderIter``, whose ``__init__`` draws the
workers' base seed from that generator (``torch.empty((), dtype=torch.int64).random_(generator=...)``,
whatever ``num_workers``) before the first batch makes ``RandomSampler.__iter__`` draw
``torch.randperm(n_rows, generator=...)`` from it; ``BatchSampler`` then cuts the permutation (the
short last batch dropped with ``drop_last``), and the epoch's end runs ``RandomSampler.__iter__`` on to
its tail, a second ``torch.randperm(n_rows)`` it slices to ``num_samples % n_rows`` = 0 indices: drawn
all the same. Epoch ``e``'s permutation is so the one after ``e`` such triples of draws
(:func:`_random_sampler_perm`, replayed from the generator's seed and cached epoch to epoch); with ``persistent_workers`` the loader keeps its first iterator (``_reset`` per epoch: no new base
seed), so only epoch 0 draws one. A ``DataLoader(shuffle=True)`` without a generator seeds its
``RandomSampler`` from torch's global RNG, which the run's other draws move: no config gives it, but
``record_batches`` records each epoch's draw (the seed, or with a generator its state), from which
:func:`recorded_random_order` plans the epoch (``order verify``).

With ``[batch] max_tokens`` (token-budget batching) the micro-batches of each rank are those of
:class:`datacheck.model.budget.TokenBudgetBatchSampler` (fairseq's ``batch_by_size``: rows sorted by
length, filled up to ``max_tokens`` padded tokens, at most ``batch_size`` rows when that is set,
batches shuffled per epoch and sharded over the ranks by ``DistributedSampler``, which repeats
whole batches to even them out); the steps are grouped the same way.
"""
from __future__ import annotations

import base64
import binascii
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from datacheck.model.budget import TokenBudgetBatchSampler
from datacheck.model.config import BatchSection, random_sampler_problem
from datacheck.model.errors import UsageError
from datacheck.model.torchdep import require_torch

__all__ = ["EpochOrder", "epoch_order", "accelerate_shards", "micro_batch_sizes", "steps_text", "recorded_random_order",
           "generator_state_bytes"]


class _Rows:
    """A sized stand-in for the dataset (``DistributedSampler`` only needs ``len``)."""

    def __init__(self, n: int):
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        return i


def steps_text(first: int, last: int, noun: str = "step") -> str:
    """A range of steps in words: ``"steps 0..9"``, ``"step 5"``, or ``"no step"`` when ``last <
    first`` (an empty range: never ``"steps 0..-1"``); ``noun`` names them (``"log step"``)."""
    if last < first:
        return f"no {noun}"
    return f"{noun} {first}" if first == last else f"{noun}s {first}..{last}"


@dataclass(frozen=True)
class EpochOrder:
    """One epoch's batches per rank.

    Attributes:
        epoch: the epoch (the ``set_epoch`` value).
        n_rows: rows of the dataset.
        grad_accum: micro-batches per optimizer step per rank.
        ranks: ``ranks[r][m]`` = the global row indices (int64 array) of micro-batch ``m`` of rank ``r``.
        per_rank: rows each rank's sampler yields per epoch (``ceil(n_rows / world_size)``; with
            ``max_tokens``: the most rows any rank loads).
        repeats: rows the sampler repeated to pad its list (``per_rank * world_size - n_rows``; with
            ``max_tokens``: the rows of the repeated batches).
        max_tokens: the token budget, or None (fixed ``batch_size``).
        n_batches: with ``max_tokens``, the token batches of the epoch before sharding over ranks.
        repeated_batches: with ``max_tokens``, batches ``DistributedSampler`` repeated (without
            ``drop_last``) or dropped (with it) to give each rank as many.
        over_budget: with ``max_tokens``, the rows longer than it (each alone in a micro-batch).
    """

    epoch: int
    n_rows: int
    grad_accum: int
    ranks: tuple[tuple[np.ndarray, ...], ...]
    per_rank: int
    repeats: int
    max_tokens: int | None = None
    n_batches: int | None = None
    repeated_batches: int = 0
    over_budget: tuple[int, ...] = ()

    @property
    def micro_batches(self) -> int:
        """Micro-batches per rank in the epoch: equal on every rank, but for accelerate's
        ``even_batches = false``, where some processes get one batch fewer (the most of any rank)."""
        return max((len(mbs) for mbs in self.ranks), default=0)

    @property
    def steps(self) -> int:
        """Optimizer steps in the epoch: ``ceil(micro_batches / grad_accum)``."""
        return -(-self.micro_batches // self.grad_accum)

    def step(self, s: int) -> list[tuple[int, int, np.ndarray]]:
        """``(rank, micro_batch, global indices)`` of every micro-batch of in-epoch step ``s``
        (``micro_batch`` is the index within the step, 0 .. grad_accum-1)."""
        if not 0 <= s < self.steps:
            raise UsageError(f"step {s} is outside epoch {self.epoch}, which has {steps_text(0, self.steps - 1)}")
        lo, hi = s * self.grad_accum, (s + 1) * self.grad_accum
        return [(r, m - lo, mbs[m]) for r, mbs in enumerate(self.ranks) for m in range(lo, min(hi, len(mbs)))]


def _sampler_indices(torch: Any, n_rows: int, batch: BatchSection, rank: int, epoch: int) -> list[list[int]]:
    """Rank ``rank``'s micro-batches of one epoch from torch's own ``DistributedSampler`` and
    ``BatchSampler`` (the reference :func:`_epoch_ranks` is tested against)."""
    data = torch.utils.data
    sampler = data.DistributedSampler(_Rows(n_rows), num_replicas=batch.world_size, rank=rank,
                                 shuffle=batch.shuffle, seed=batch.seed, drop_last=False)
    sampler.set_epoch(epoch)
    return list(data.BatchSampler(sampler, batch_size=int(batch.batch_size or 1), drop_last=batch.drop_last))


def _epoch_ranks(torch: Any, n_rows: int, batch: BatchSection, epoch: int) -> tuple[tuple[np.ndarray, ...], ...]:
    """Every rank's micro-batches of one epoch (global row indices, int64), exactly as
    :func:`_sampler_indices` gives them rank by rank, from one permutation: ``DistributedSampler``
    (torch 2.x, ``drop_last=False``) draws ``torch.randperm(n_rows)`` from a generator seeded
    ``seed + epoch`` (``arange`` without shuffle), repeats its start to ``ceil(n_rows / world_size) *
    world_size`` indices and gives rank ``r`` every ``world_size``-th from ``r``; ``BatchSampler`` cuts
    them into ``batch_size`` chunks, a short last one dropped with ``drop_last``. A sampler per rank
    drew the same permutation once per rank: 512 ranks over 1M rows took minutes an epoch."""
    ws, bs = batch.world_size, int(batch.batch_size or 1)
    if batch.shuffle:
        g = torch.Generator()
        g.manual_seed(batch.seed + epoch)
        perm = torch.randperm(n_rows, generator=g).numpy().astype(np.int64, copy=False)
    else:
        perm = np.arange(n_rows, dtype=np.int64)
    per_rank = -(-n_rows // ws)
    total = per_rank * ws
    if total > n_rows:  # DistributedSampler's padding: the start repeated (cycled when it is the shorter)
        perm = np.concatenate([perm, np.resize(perm, total - n_rows)])
    grid = perm.reshape(per_rank, ws)  # rank r's indices: column r
    full, rest = divmod(per_rank, bs)
    cuts = [(k * bs, (k + 1) * bs) for k in range(full)] + ([(full * bs, per_rank)] if rest and not batch.drop_last else [])
    return tuple(tuple(np.ascontiguousarray(grid[a:b, r]) for a, b in cuts) for r in range(ws))


#: (n_rows, seed, persistent_workers) -> (the next epoch, the generator's state before it): the last
#: RandomSampler permutation drawn, so epochs asked for in turn replay one pair of draws each
_RANDOM_STATE: dict[tuple[int, int, bool], tuple[int, Any]] = {}


def _random_sampler_perm(torch: Any, n_rows: int, seed: int, epoch: int, persistent_workers: bool = False) -> np.ndarray:
    """Epoch ``epoch``'s permutation (int64, ``n_rows``) of ``DataLoader(shuffle=True,
    generator=torch.Generator().manual_seed(seed))``: per epoch from 0, the iterator's base-seed draw
    (epoch 0 only with ``persistent_workers``), then ``RandomSampler``'s ``torch.randperm(n_rows)`` and the
    empty-sliced one of its tail, all from the one generator (see the module docstring)."""
    key = (n_rows, seed, persistent_workers)
    g = torch.Generator()
    start, state = _RANDOM_STATE.get(key, (0, None))
    if state is not None and start <= epoch:
        g.set_state(state)
    else:
        g.manual_seed(seed)
        start = 0
    perm = None
    for e in range(start, epoch + 1):
        if e == 0 or not persistent_workers:
            torch.empty((), dtype=torch.int64).random_(generator=g)  # _BaseDataLoaderIter.__init__'s _base_seed
        perm = torch.randperm(n_rows, generator=g)
        # RandomSampler.__iter__ then runs on to its tail, ``torch.randperm(n)[:num_samples % n]`` (empty for
        # num_samples = n rows, but drawn: the epoch's last batch asks the sampler for more and so runs it)
        torch.randperm(n_rows, generator=g)
    if len(_RANDOM_STATE) > 16:
        _RANDOM_STATE.clear()
    _RANDOM_STATE[key] = (epoch + 1, g.get_state())
    assert perm is not None
    out: np.ndarray = perm.numpy().astype(np.int64, copy=False)
    return out


def _one_rank_order(perm: np.ndarray, n_rows: int, batch: BatchSection, epoch: int) -> EpochOrder:
    """One process's epoch: ``perm`` (the sampler's indices, int64) cut as ``BatchSampler(batch_size,
    drop_last)`` cuts them."""
    bs, total = int(batch.batch_size or 1), len(perm)
    full, rest = divmod(total, bs)
    cuts = [(k * bs, (k + 1) * bs) for k in range(full)] + ([(full * bs, total)] if rest and not batch.drop_last else [])
    return EpochOrder(epoch=epoch, n_rows=n_rows, grad_accum=batch.grad_accum,
                      ranks=(tuple(np.ascontiguousarray(perm[a:b]) for a, b in cuts),), per_rank=total,
                      repeats=max(total - n_rows, 0))


def _random_order(torch: Any, n_rows: int, batch: BatchSection, epoch: int) -> EpochOrder:
    """:func:`epoch_order` under ``[batch] sampler = "random"`` (one rank; see the module docstring)."""
    perm = _random_sampler_perm(torch, n_rows, batch.seed, epoch, batch.persistent_workers) if n_rows else \
        np.zeros(0, dtype=np.int64)
    return _one_rank_order(perm, n_rows, batch, epoch)


def generator_state_bytes(text: str) -> bytes:
    """The bytes of a ``torch.Generator`` state a ledger's ``#state`` line records as
    ``sampler_generator_state`` (``generator.get_state()``'s uint8 bytes, zlib-compressed, base64).

    Raises:
        ValueError: not base64 of zlib data (``binascii.Error`` and ``zlib.error`` are re-raised as it).
    """
    try:
        return zlib.decompress(base64.b64decode(text.encode("ascii"), validate=True))
    except (binascii.Error, zlib.error, UnicodeEncodeError) as exc:
        raise ValueError(f"not a recorded generator state ({exc})") from None


def recorded_random_order(n_rows: int, batch: BatchSection, epoch: int, *, seed: int | None = None,
                          generator_state: bytes | None = None, num_samples: int | None = None) -> EpochOrder:
    """One epoch of a single-process ``DataLoader(shuffle=True)`` (torch's ``RandomSampler``, no replacement,
    under ``BatchSampler(batch_size, drop_last)``) from what ``record_batches`` recorded when the epoch's
    iteration began: the seed ``RandomSampler`` drew from the global torch RNG (``seed``: it yields
    ``torch.randperm(n_rows)`` of a ``torch.Generator`` seeded with it), or the state of its own generator
    (``generator_state``, the bytes of ``get_state()``: it draws the permutations from that generator). The
    indices are ``num_samples // n_rows`` permutations then the first ``num_samples % n_rows`` of one more
    (``RandomSampler.__iter__``; ``num_samples`` default ``n_rows``), cut into batches.

    Args:
        n_rows: rows of the epoch's dataset (``len(data_source)``, >= 0).
        batch: ``batch_size``, ``drop_last`` and ``grad_accum`` (its ``seed``, ``world_size`` are not used).
        epoch: the plan epoch (a label).
        seed: the recorded ``sampler_seed`` (an int of 64 bits), or None.
        generator_state: the recorded ``sampler_generator_state`` decoded (:func:`generator_state_bytes`).
        num_samples: the sampler's ``num_samples`` (indices an epoch), or None.

    Raises:
        UsageError: neither or both of ``seed`` and ``generator_state``.
        RuntimeError: ``generator_state`` is not a state this torch's CPU generator takes.
        OptionalDependencyError: torch is not installed.
    """
    if (seed is None) == (generator_state is None):
        raise UsageError("a recorded RandomSampler order needs its seed or its generator's state (one of them)")
    torch = require_torch("the batch plan")
    g = torch.Generator()
    if seed is not None:
        g.manual_seed(seed)
    else:
        g.set_state(torch.frombuffer(bytearray(generator_state or b""), dtype=torch.uint8))
    total = n_rows if num_samples is None else num_samples
    parts = [np.zeros(0, dtype=np.int64)]
    if n_rows > 0:
        parts += [torch.randperm(n_rows, generator=g).numpy() for _ in range(total // n_rows)]
        parts.append(torch.randperm(n_rows, generator=g).numpy()[: total % n_rows])
    perm = np.concatenate(parts).astype(np.int64, copy=False)
    return _one_rank_order(perm, n_rows, batch, epoch)


def _token_order(n_rows: int, batch: BatchSection, epoch: int, lengths: np.ndarray) -> EpochOrder:
    ws = batch.world_size
    s = TokenBudgetBatchSampler(lengths, int(batch.max_tokens or 0), max_rows=batch.batch_size, num_replicas=ws,
                                rank=0, shuffle=batch.shuffle, seed=batch.seed, drop_last=batch.drop_last)
    s.set_epoch(epoch)
    ranks = tuple(tuple(s.rank_batches(r)) for r in range(ws))
    n_batches = s.n_batches
    loaded = [sum(len(b) for b in mbs) for mbs in ranks]
    per_rank_batches = len(ranks[0]) if ranks else 0
    return EpochOrder(epoch=epoch, n_rows=n_rows, grad_accum=batch.grad_accum, ranks=ranks,
                      per_rank=max(loaded, default=0), repeats=max(0, sum(loaded) - n_rows),
                      max_tokens=batch.max_tokens, n_batches=n_batches,
                      repeated_batches=abs(per_rank_batches * ws - n_batches), over_budget=tuple(s.over_budget))


def accelerate_shards(batches: list[list[int]], num_processes: int, process_index: int, *, batch_size: int,
                      drop_last: bool, even_batches: bool = True, split_batches: bool = False) -> list[list[int]]:
    """The batches process ``process_index`` of ``num_processes`` gets from the DataLoader's batches
    ``batches`` under accelerate's ``BatchSamplerShard`` (accelerate 1.x ``data_loader.py``,
    ``_iter_with_no_split`` / ``_iter_with_split``, followed statement by statement; pure Python, no
    accelerate import).

    Without ``split_batches``: batch ``k`` goes to process ``k % num_processes``, each round of
    ``num_processes`` batches yielded only once its last batch is full; then, unless ``drop_last``:
    with ``even_batches`` the last round is completed from the rows of the epoch's first
    ``num_processes`` batches (cycled when they hold fewer than ``num_processes x batch_size`` rows), a
    short last batch filled up to ``batch_size`` from them and every missing batch of the round made of
    them; without it the last batch (short or not) goes to its process and the others get none. With
    ``split_batches``: each full batch of ``batch_size`` rows is cut into ``num_processes`` slices,
    slice ``p`` to process ``p``; a short last batch is completed from the epoch's first batch
    (``even_batches``) or sliced as it is (a process past its end gets nothing).

    Args:
        batches: the DataLoader's batches of one epoch (lists of global row indices), in order.
        num_processes: accelerate's ``num_processes`` (>= 1).
        process_index: the process (0-based).
        batch_size: the DataLoader's batch size (the ``BatchSampler``'s: rows of a full batch).
        drop_last: the DataLoader's ``drop_last``.
        even_batches: accelerate's ``even_batches``.
        split_batches: accelerate's ``split_batches`` (``batch_size`` a multiple of ``num_processes``).

    Returns:
        The process's batches, in order (lists of global row indices; a row may repeat across them).
    """
    P, p, bs = num_processes, process_index, batch_size
    out: list[list[int]] = []
    if split_batches:
        width = bs // P
        initial: list[int] = []
        last: list[int] = []
        for idx, b in enumerate(batches):
            if idx == 0:
                initial = list(b)
            last = list(b)
            if len(b) == bs:
                out.append(last[width * p: width * (p + 1)])
        if not drop_last and initial and len(last) < bs:
            if not even_batches:
                if len(last) > width * p:
                    out.append(last[width * p: width * (p + 1)])
            else:
                while len(initial) < bs:
                    initial = initial + initial
                full = last + initial
                out.append(full[width * p: width * (p + 1)])
        return out
    first_rows: list[int] = []
    to_yield: list[int] | None = None
    batch: list[int] = []
    idx = -1
    for idx, b in enumerate(batches):
        batch = list(b)
        if not drop_last and idx < P:
            first_rows += batch
        if idx % P == p:
            to_yield = batch
        if idx % P == P - 1 and len(batch) == bs:
            out.append(to_yield if to_yield is not None else [])
            to_yield = None
    if not drop_last and first_rows:
        if not even_batches:
            if to_yield:
                out.append(to_yield)
        else:
            if to_yield and len(to_yield) == bs:
                out.append(to_yield)
            while len(first_rows) < P * bs:
                first_rows = first_rows + first_rows
            if len(batch) == bs:
                batch, idx = [], idx + 1
            cycle = 0
            while idx % P != 0 or len(batch) > 0:
                end = cycle + bs - len(batch)
                batch = batch + first_rows[cycle:end]
                if idx % P == p:
                    out.append(batch)
                cycle = end
                batch, idx = [], idx + 1
    return out


def _accelerate_order(torch: Any, n_rows: int, batch: BatchSection, epoch: int) -> EpochOrder:
    """:func:`epoch_order` under ``[batch] loader = "accelerate"`` (see the module docstring)."""
    data = torch.utils.data
    ws, bs = batch.world_size, int(batch.batch_size or 1)
    loader_batch = bs * ws if batch.split_batches else bs
    sampler = data.DistributedSampler(_Rows(n_rows), num_replicas=1, rank=0, shuffle=batch.shuffle, seed=batch.seed,
                                      drop_last=False)
    sampler.set_epoch(epoch)
    batches = list(data.BatchSampler(sampler, batch_size=loader_batch, drop_last=batch.drop_last)) if n_rows else []
    ranks = tuple(tuple(np.asarray(mb, dtype=np.int64) for mb in
                        accelerate_shards(batches, ws, p, batch_size=loader_batch, drop_last=batch.drop_last,
                                          even_batches=batch.even_batches, split_batches=batch.split_batches))
                  for p in range(ws))
    parts = [mb for mbs in ranks for mb in mbs]
    visits = np.bincount(np.concatenate(parts), minlength=n_rows) if parts else np.zeros(n_rows, dtype=np.int64)
    return EpochOrder(epoch=epoch, n_rows=n_rows, grad_accum=batch.grad_accum, ranks=ranks,
                      per_rank=max((sum(len(mb) for mb in mbs) for mbs in ranks), default=0),
                      repeats=int(np.maximum(visits - 1, 0).sum()))


def epoch_order(n_rows: int, batch: BatchSection, epoch: int = 0, lengths: np.ndarray | None = None) -> EpochOrder:
    """The batches of every rank for one epoch, from torch's samplers (with ``max_tokens``: from
    :class:`~datacheck.model.budget.TokenBudgetBatchSampler`; with ``sampler = "random"``: a seeded
    single-process ``DataLoader(shuffle=True)``'s RandomSampler).

    Args:
        n_rows: rows in the dataset (>= 0).
        batch: the ``[batch]`` facts (``batch_size`` or ``max_tokens`` must be set).
        epoch: the epoch passed to ``set_epoch`` (0-based).
        lengths: tokens per row (int array of ``n_rows``); needed with ``max_tokens`` only.

    Raises:
        UsageError: neither ``batch_size`` nor ``max_tokens`` is set, ``max_tokens`` without
            ``lengths`` (the data has no ``input_ids`` list), ``epoch`` is negative, or ``sampler =
            "random"`` with settings it cannot have (:func:`~datacheck.model.config.random_sampler_problem`:
            ``world_size`` other than 1, ...).
        OptionalDependencyError: torch is not installed.
    """
    if batch.batch_size is None and batch.max_tokens is None:
        raise UsageError("[batch] batch_size is not set: the plan needs the per-device batch size "
                         "(or max_tokens for token-budget batching)")
    if epoch < 0:
        raise UsageError(f"--epoch {epoch}: epochs are numbered from 0")
    torch = require_torch("the batch plan")
    problem = random_sampler_problem(batch)  # a model_copy skips the config's own check
    if problem:
        raise UsageError(problem)
    if batch.sampler == "random":
        return _random_order(torch, n_rows, batch, epoch)
    if batch.loader == "accelerate":
        if batch.max_tokens is not None:
            raise UsageError("[batch] loader = \"accelerate\" with max_tokens: accelerate's dealing of token-budget "
                             "batches is not simulated; leave max_tokens out (batch_size) or set loader = \"torch\"")
        if batch.split_batches and batch.batch_size is None:
            raise UsageError("[batch] split_batches needs batch_size (rows per process of each split batch)")
        return _accelerate_order(torch, n_rows, batch, epoch)
    if batch.max_tokens is not None:
        if lengths is None:
            raise UsageError("[batch] max_tokens: token-budget batching needs each row's token count, and the "
                             "data has no input_ids list column (set [columns] input_ids), or set batch_size "
                             "without max_tokens")
        if len(lengths) != n_rows:
            raise UsageError(f"token counts for {len(lengths)} rows, but the dataset has {n_rows}")
        return _token_order(n_rows, batch, epoch, np.asarray(lengths, dtype=np.int64))
    ranks = _epoch_ranks(torch, n_rows, batch, epoch) if n_rows else tuple(() for _ in range(batch.world_size))
    per_rank = -(-n_rows // batch.world_size)
    return EpochOrder(epoch=epoch, n_rows=n_rows, grad_accum=batch.grad_accum, ranks=ranks,
                      per_rank=per_rank, repeats=per_rank * batch.world_size - n_rows)


def micro_batch_sizes(order: EpochOrder) -> list[list[int]]:
    """Rows per micro-batch, per rank."""
    return [[len(mb) for mb in mbs] for mbs in order.ranks]
