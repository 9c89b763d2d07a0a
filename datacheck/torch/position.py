"""Where a batch sits in the sampler's order, carried from the recording batch sampler to the collate
function (:class:`~datacheck.torch.guard.BatchGuard`), in the main process and in DataLoader workers.

:func:`~datacheck.torch.record.record_batches` yields each batch's indices as a :class:`TaggedBatch`
(a ``list`` of ints with a :class:`BatchTag`). The DataLoader hands that list to the dataset fetch and
then to ``collate_fn``:

- ``num_workers == 0``: the batch sampler is iterated right before the batch is fetched and collated,
  in the same thread; the recorder sets the current tag when it yields the batch.
- ``num_workers > 0``: the list is pickled into a worker's index queue; unpickling it there
  (:func:`_restore`) sets the worker's current tag. A worker takes one index list at a time, fetches
  and collates it before it takes the next, so the current tag is the batch being collated.

The tag is thread-local and belongs to the process that set it (a forked worker does not inherit
its parent's), and it is taken once: the collate function that reads it (:func:`take_tag`) clears it,
so a batch no recorder tagged is never named by an earlier batch's tag.
"""
from __future__ import annotations

import os
import threading
from typing import Any, Iterable, NamedTuple

__all__ = ["BatchTag", "TaggedBatch", "take_tag", "set_current_tag"]

_local = threading.local()


class BatchTag(NamedTuple):
    """One micro-batch's place in the recorded order (what the ledger line of that batch holds).

    Attributes:
        rank: the data-parallel rank that loads it.
        epoch: the sampler's epoch.
        step: the 0-based optimizer step it belongs to (the ledger's step).
        micro_batch: its micro-batch within the step (0 .. grad_accum-1).
        position: its 0-based position among the batches the sampler yielded in this epoch's iteration.
    """

    rank: int
    epoch: int
    step: int
    micro_batch: int
    position: int

    def describe(self) -> str:
        """``step 12 micro-batch 1 (rank 0, epoch 0, batch 25 of the epoch)``."""
        return (f"step {self.step} micro-batch {self.micro_batch} (rank {self.rank}, epoch {self.epoch}, "
                f"batch {self.position} of the epoch)")


def _restore(items: list[int], tag: BatchTag) -> "TaggedBatch":
    """Unpickle a :class:`TaggedBatch` and make its tag the current one (a DataLoader worker)."""
    set_current_tag(tag)
    return TaggedBatch(items, tag)


class TaggedBatch(list):  # type: ignore[type-arg]
    """A batch's row indices (a plain ``list`` of ints to the dataset) with its :class:`BatchTag`."""

    def __init__(self, items: Iterable[int], tag: BatchTag):
        super().__init__(items)
        self.tag = tag

    def __reduce__(self) -> tuple[Any, ...]:
        return (_restore, (list(self), self.tag))


def set_current_tag(tag: BatchTag | None) -> None:
    """Set this thread's current batch tag (None: no recorded position)."""
    _local.tag = None if tag is None else (os.getpid(), tag)


def take_tag() -> BatchTag | None:
    """This thread's current batch tag, cleared (None when no recorder tagged the batch being collated
    in this process)."""
    got = getattr(_local, "tag", None)
    _local.tag = None
    if got is None or got[0] != os.getpid():
        return None
    return got[1]
