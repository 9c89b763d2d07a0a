"""Token-budget batching (``[batch] max_tokens``): fairseq's ``batch_by_size`` as a batch sampler.

The precedent is fairseq (``fairseq/data/data_utils.py batch_by_size`` over
``FairseqDataset.ordered_indices``, sharded by ``EpochBatchIterator``), the usual way trainers fill
micro-batches up to a token budget instead of a fixed row count:

1. **Order** (once): rows sorted by length, shortest first (bucketing: rows of similar length share a
   batch, so little padding); ties are broken by a random permutation seeded with ``seed`` when
   ``shuffle`` (fairseq: ``np.lexsort((permutation, sizes))``), by row index otherwise.
2. **Fill**: walk that order; a row joins the current batch unless the batch's *padded* size would
   exceed ``max_tokens`` (``(rows + 1) x max(longest row so far, this row) > max_tokens``: fairseq's
   ``num_tokens`` = longest row x rows, every row padded to the longest) or the batch already holds
   ``max_rows`` rows (``[batch] batch_size``, fairseq's ``max_sentences``; None: no row cap).
   **A row longer than ``max_tokens`` is put in a batch of its own** (fairseq asserts instead, unless
   ``skip_invalid_size_inputs_valid_test`` drops it): its padded size exceeds the budget, so a trainer
   may run out of memory on it. :attr:`TokenBudgetBatchSampler.over_budget` lists those rows and
   ``datacheck plan`` reports them; nothing is dropped silently.
3. **Shuffle** (every epoch): with ``shuffle``, the batches' order is permuted with a
   ``torch.Generator`` seeded ``seed + epoch`` (``set_epoch``; fairseq: ``numpy_seed(seed + epoch)``,
   torch's ``DistributedSampler`` seeds the same way). Rows never move between batches.
4. **Shard across ranks**: torch's own ``DistributedSampler(batches, num_replicas=world_size,
   rank=r, shuffle=False, drop_last=drop_last)`` over the list of batches: rank ``r`` gets batches
   ``r, r + world_size, ...``; without ``drop_last`` the list is padded by repeating batches from
   its start (wraparound: every rank gets the same number of micro-batches), with it the batches
   that do not divide evenly are dropped.

Lengths are tokens per row (``input_ids`` list length, capped at ``[tokens] max_seq_len`` when set,
as the audit counts them). The sampler needs torch only when iterated (the generator, the
``DistributedSampler``); it follows torch's batch-sampler protocol (an iterable of index lists with
``__len__`` and ``set_epoch``), which ``DataLoader(batch_sampler=...)`` takes as it takes its own
``BatchSampler``.
"""
from __future__ import annotations

from typing import Any, Iterator, Sequence

import numpy as np

from datacheck.model.errors import UsageError
from datacheck.model.torchdep import require_torch

__all__ = ["TokenBudgetBatchSampler", "token_budget_batches", "length_order"]


class _Items:
    """A sized stand-in for a list (``DistributedSampler`` only needs ``len``)."""

    def __init__(self, n: int):
        self.n = n

    def __len__(self) -> int:
        return self.n


def length_order(lengths: np.ndarray, shuffle: bool, seed: int) -> np.ndarray:
    """Row indices (int64) sorted by length, shortest first; ties in a ``seed``-ed random order when
    ``shuffle``, else by index (step 1 of the module docstring)."""
    n = len(lengths)
    if shuffle and n:
        torch = require_torch("token-budget batching")
        g = torch.Generator()
        g.manual_seed(seed)
        perm: np.ndarray = torch.randperm(n, generator=g).numpy()
        return perm[np.argsort(lengths[perm], kind="stable")].astype(np.int64)
    return np.argsort(lengths, kind="stable").astype(np.int64)


def token_budget_batches(lengths: np.ndarray, order: np.ndarray, max_tokens: int,
                         max_rows: int | None = None) -> tuple[list[np.ndarray], list[int]]:
    """Fill batches along ``order`` up to ``max_tokens`` padded tokens (step 2 of the module docstring).

    Args:
        lengths: tokens per row (int array, one per row).
        order: the row indices to batch, in order.
        max_tokens: the budget: rows x longest row of a batch stays <= it (unless one row exceeds it alone).
        max_rows: at most this many rows per batch (None: no cap).

    Returns:
        (the batches as int64 index arrays, the rows longer than ``max_tokens``, each alone in a batch).
    """
    batches: list[np.ndarray] = []
    over: list[int] = []
    cur: list[int] = []
    longest = 0
    for i in order.tolist():
        n = int(lengths[i])
        m = max(longest, n)
        if cur and ((len(cur) + 1) * m > max_tokens or (max_rows is not None and len(cur) >= max_rows)):
            batches.append(np.asarray(cur, dtype=np.int64))
            cur, m = [], n
        if n > max_tokens:
            over.append(i)
        cur.append(i)
        longest = m
    if cur:
        batches.append(np.asarray(cur, dtype=np.int64))
    return batches, over


class TokenBudgetBatchSampler:
    """Micro-batches of at most ``max_tokens`` padded tokens for one rank (see the module docstring).

    Use it as ``DataLoader(dataset, batch_sampler=TokenBudgetBatchSampler(lengths, max_tokens,
    num_replicas=world_size, rank=rank, seed=seed))`` and call ``set_epoch(e)`` before each epoch,
    as with ``DistributedSampler``. ``datacheck plan`` with ``[batch] max_tokens`` simulates exactly
    this sampler.

    Args:
        lengths: tokens per row of the dataset (a sequence of ints, one per row, in dataset order).
        max_tokens: padded-token budget per micro-batch (> 0).
        max_rows: rows per micro-batch at most (``[batch] batch_size``); None: no cap.
        num_replicas: data-parallel ranks (``world_size``).
        rank: this process's rank (0 .. num_replicas-1).
        shuffle: shuffle ties in the length order (once) and the batches (every epoch).
        seed: the seed (same on every rank).
        drop_last: drop the batches that do not divide evenly over the ranks (else repeat batches).

    Attributes:
        batches: every batch of the current epoch before sharding (int64 arrays), in epoch order.
        over_budget: rows longer than ``max_tokens`` (each alone in its batch).
        epoch: the epoch set by :meth:`set_epoch`.

    Raises:
        UsageError: ``max_tokens`` or ``max_rows`` < 1, a negative length, or ``rank`` outside
            ``[0, num_replicas)``.
        OptionalDependencyError: torch is not installed (when shuffling or iterating).
    """

    def __init__(self, lengths: Sequence[int] | np.ndarray, max_tokens: int, *, max_rows: int | None = None,
                 num_replicas: int = 1, rank: int = 0, shuffle: bool = True, seed: int = 0,
                 drop_last: bool = False):
        if max_tokens < 1:
            raise UsageError(f"max_tokens must be >= 1, got {max_tokens}")
        if max_rows is not None and max_rows < 1:
            raise UsageError(f"max_rows must be >= 1, got {max_rows}")
        if not 0 <= rank < num_replicas:
            raise UsageError(f"rank {rank} is outside 0..{num_replicas - 1} (num_replicas {num_replicas})")
        self.lengths = np.asarray(lengths, dtype=np.int64)
        if self.lengths.ndim != 1:
            raise UsageError(f"lengths must be one int per row, got shape {self.lengths.shape}")
        if self.lengths.size and int(self.lengths.min()) < 0:
            raise UsageError(f"lengths must be >= 0; row {int(self.lengths.argmin())} has {int(self.lengths.min())}")
        self.max_tokens, self.max_rows = int(max_tokens), max_rows
        self.num_replicas, self.rank = num_replicas, rank
        self.shuffle, self.seed, self.drop_last = shuffle, seed, drop_last
        self.epoch = 0
        order = length_order(self.lengths, shuffle, seed)
        self._base, self.over_budget = token_budget_batches(self.lengths, order, self.max_tokens, max_rows)

    @property
    def n_batches(self) -> int:
        """Batches per epoch before sharding over the ranks."""
        return len(self._base)

    def set_epoch(self, epoch: int) -> None:
        """The epoch of the next iteration (reseeds the batch shuffle: ``seed + epoch``)."""
        self.epoch = epoch

    @property
    def batches(self) -> list[np.ndarray]:
        """Every batch of the current epoch (before sharding over ranks), in epoch order."""
        if not self.shuffle or len(self._base) < 2:
            return list(self._base)
        torch = require_torch("token-budget batching")
        g = torch.Generator()
        g.manual_seed(self.seed + self.epoch)
        return [self._base[i] for i in torch.randperm(len(self._base), generator=g).tolist()]

    def _rank_batch_ids(self, torch: Any, n_batches: int, rank: int) -> list[int]:
        if n_batches == 0:
            return []
        ds = torch.utils.data.DistributedSampler(_Items(n_batches), num_replicas=self.num_replicas, rank=rank,
                                                 shuffle=False, drop_last=self.drop_last)
        return list(ds)

    def rank_batches(self, rank: int | None = None) -> list[np.ndarray]:
        """The micro-batches of ``rank`` (default: this sampler's) in the current epoch (int64 index
        arrays), in order: what iterating a sampler of that rank yields."""
        torch = require_torch("token-budget batching")
        all_batches = self.batches
        r = self.rank if rank is None else rank
        return [all_batches[i] for i in self._rank_batch_ids(torch, len(all_batches), r)]

    def __iter__(self) -> Iterator[list[int]]:
        for b in self.rank_batches():
            yield b.tolist()

    def __len__(self) -> int:
        n, ws = len(self._base), self.num_replicas
        return n // ws if self.drop_last else -(-n // ws)
