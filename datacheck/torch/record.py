"""Record the trainer's real batch order: ``record_batches`` wraps a DataLoader or a batch sampler
and appends every batch's global row indices to the per-rank ledger (:mod:`datacheck.io.ledger`).

For trainers whose order cannot be simulated (custom samplers, resumed runs, packing on the fly).
Recording happens where the batch sampler is iterated (the main process, also with
``num_workers > 0``); a line is written per micro-batch and the file is flushed at the end of each
epoch and every ``flush_every`` batches (a crash loses at most those; the reader drops a torn tail).
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any, Iterator

from datacheck.io.ledger import LEDGER_HEADER, LedgerBatch, open_append, rank_file, read_ledger, read_lines
from datacheck.io.outputs import check_output_target, write_atomic
from datacheck.model.errors import UsageError
from datacheck.model.torchdep import require_torch

__all__ = ["RecordingBatchSampler", "record_batches"]


def _sampler_state(batch_sampler: Any) -> dict[str, Any]:
    """Plain settings of the sampler under ``batch_sampler`` (what a resumed run must match)."""
    inner = getattr(batch_sampler, "sampler", None)
    st: dict[str, Any] = {"batch_sampler": type(batch_sampler).__name__,
                          "batch_size": getattr(batch_sampler, "batch_size", None),
                          "drop_last": getattr(batch_sampler, "drop_last", None)}
    for k in ("max_tokens", "max_rows", "num_replicas", "rank", "shuffle", "seed"):  # a token-budget batch sampler
        v = getattr(batch_sampler, k, None)
        if inner is None and isinstance(v, (int, bool)):
            st[k] = v
    if inner is not None:
        st["sampler"] = type(inner).__name__
        for k in ("num_replicas", "rank", "shuffle", "seed", "epoch", "drop_last", "num_samples", "total_size"):
            v = getattr(inner, k, None)
            if isinstance(v, (int, bool)):
                st[("sampler_" + k) if k == "drop_last" else k] = v
    return st


class RecordingBatchSampler:
    """A batch sampler that yields the batches of ``inner`` unchanged and records each one.

    Micro-batch ``k`` (counted from the start, or from the resume point) belongs to step
    ``start_step + k // grad_accum``, micro-batch ``k % grad_accum``.

    Args:
        inner: an iterable of index lists (a ``BatchSampler`` or any batch sampler).
        out_dir: the ledger folder (the file is ``out_dir/data-indices/rank{rank}.tsv.gz``).
        rank: this process's data-parallel rank.
        grad_accum: micro-batches per optimizer step.
        start_step: the step of the next batch (a resumed trainer passes its restored global step);
            None: continue after the last complete step of an existing ledger, else 0.
        epoch: the epoch of the next iteration; None: the inner sampler's ``epoch`` attribute
            (``DistributedSampler.set_epoch``) when it has one, else counted from the ledger.
        flush_every: batches between flushes.
    """

    def __init__(self, inner: Any, out_dir: str | Path, *, rank: int = 0, grad_accum: int = 1,
                 start_step: int | None = None, epoch: int | None = None, flush_every: int = 256):
        if grad_accum < 1:
            raise UsageError(f"grad_accum must be >= 1, got {grad_accum}")
        self.inner = inner
        self.sampler = getattr(inner, "sampler", None)
        if self.sampler is None and hasattr(inner, "set_epoch"):  # a batch sampler that shuffles itself
            self.sampler = inner  # (TokenBudgetBatchSampler): its epoch is the one to record
        self.path = rank_file(out_dir, rank)
        self.rank, self.grad_accum, self.flush_every = rank, grad_accum, flush_every
        self._epoch = epoch
        self._iters = 0
        last: LedgerBatch | None = None
        last_epoch = None
        if self.path.exists():
            led = read_ledger(self.path.parent)
            if led.format != "datacheck":
                raise UsageError(f"{self.path}: an OLMo ledger; record into another folder")
            if led.truncated:
                self._rewrite(led)
            last = led.last(rank)
            states = led.states.get(rank) or []
            last_epoch = states[-1].get("epoch") if states else None
        if start_step is None:
            if last is None:
                start_step = 0
            else:  # after the last complete step (a partial step is re-recorded from its start)
                done = last.micro_batch is not None and last.micro_batch == grad_accum - 1
                start_step = last.step + 1 if done else last.step
        self.next_step, self.next_micro = start_step, 0
        self._resume_epoch = last_epoch
        self._new = not self.path.exists()

    def _rewrite(self, led: Any) -> None:  # noqa: ARG002 - the torn ledger (its lines are re-read)
        """Rewrite a torn ledger with its complete lines (atomically), so appends stay readable."""
        lines, _torn = read_lines(self.path)
        write_atomic(self.path, gzip.compress("".join(line + "\n" for line in lines).encode()))

    def __len__(self) -> int:
        return len(self.inner)

    def set_epoch(self, epoch: int) -> None:
        """Forward ``set_epoch`` to the inner sampler (trainers call it on the loader's sampler)."""
        if self.sampler is not None and hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)
        self._epoch = epoch

    def _current_epoch(self) -> int:
        if self.sampler is not None and isinstance(getattr(self.sampler, "epoch", None), int):
            return int(self.sampler.epoch)
        if self._epoch is not None:
            return self._epoch
        base = self._resume_epoch if isinstance(self._resume_epoch, int) else 0
        return base + self._iters

    def __iter__(self) -> Iterator[list[int]]:
        epoch = self._current_epoch()
        self._iters += 1
        state = {"epoch": epoch, "start_step": self.next_step, "rank": self.rank, "grad_accum": self.grad_accum,
                 **_sampler_state(self.inner)}
        with open_append(self.path) as f:
            if self._new:
                f.write((LEDGER_HEADER + "\n").encode())
                self._new = False
            f.write(("#state\t" + json.dumps(state, sort_keys=True) + "\n").encode())
        buf: list[str] = []
        try:
            for batch in self.inner:
                idx = [int(i) for i in batch]
                buf.append(f"{self.next_step}\t{self.rank}\t{self.next_micro}\t{epoch}\t" + "\t".join(map(str, idx)) + "\n")
                self.next_micro += 1
                if self.next_micro == self.grad_accum:
                    self.next_step, self.next_micro = self.next_step + 1, 0
                if len(buf) >= self.flush_every:
                    self._flush(buf)
                yield batch
        finally:
            self._flush(buf)
            if self.next_micro:  # an epoch ending mid-step: the trainer steps on the remainder
                self.next_step, self.next_micro = self.next_step + 1, 0

    def _flush(self, buf: list[str]) -> None:
        if buf:
            with open_append(self.path) as f:
                f.write("".join(buf).encode())
            buf.clear()


def record_batches(loader_or_sampler: Any, out_dir: str | Path, *, rank: int = 0, grad_accum: int = 1,
                   start_step: int | None = None, epoch: int | None = None) -> Any:
    """Wrap a DataLoader or a batch sampler so every batch's global indices go to the ledger.

    Args:
        loader_or_sampler: a ``torch.utils.data.DataLoader`` (a new DataLoader over the same dataset,
            collate function, workers and pinning is returned, whose batch sampler records), or a batch
            sampler (an iterable of index lists; the recording batch sampler is returned).
        out_dir: the ledger folder; ``plan --ledger out_dir`` reads it.
        rank: this process's rank.
        grad_accum: micro-batches per optimizer step.
        start_step: the step of the next batch (a resumed trainer's restored global step); default:
            continue the existing ledger after its last complete step, else 0.
        epoch: the epoch (default: the sampler's ``epoch``, else counted).

    Raises:
        UsageError: a per-index sampler (wrap it in a ``BatchSampler``), an iterable-style dataset's
            loader (no indices), an OLMo ledger in ``out_dir``, or ``out_dir`` inside a folder datacheck refuses.
        OptionalDependencyError: torch is not installed.
    """
    torch = require_torch("datacheck.torch.record_batches")
    check_output_target("record_batches out_dir", rank_file(out_dir, rank))
    DataLoader = torch.utils.data.DataLoader
    if isinstance(loader_or_sampler, DataLoader):
        dl = loader_or_sampler
        if dl.batch_sampler is None:
            raise UsageError("record_batches: this DataLoader has no batch sampler (batch_size=None or an "
                             "IterableDataset): there are no row indices to record")
        rec = RecordingBatchSampler(dl.batch_sampler, out_dir, rank=rank, grad_accum=grad_accum,
                                    start_step=start_step, epoch=epoch)
        kw: dict[str, Any] = {"num_workers": dl.num_workers, "collate_fn": dl.collate_fn, "pin_memory": dl.pin_memory,
                              "timeout": dl.timeout, "worker_init_fn": dl.worker_init_fn,
                              "generator": dl.generator}
        if dl.num_workers > 0:
            kw.update(prefetch_factor=dl.prefetch_factor, persistent_workers=dl.persistent_workers,
                      multiprocessing_context=dl.multiprocessing_context)
        return DataLoader(dl.dataset, batch_sampler=rec, **kw)
    if isinstance(loader_or_sampler, torch.utils.data.Sampler) and not hasattr(loader_or_sampler, "batch_size"):
        raise UsageError("record_batches: pass a DataLoader or a batch sampler (wrap a per-index sampler in "
                         "torch.utils.data.BatchSampler)")
    return RecordingBatchSampler(loader_or_sampler, out_dir, rank=rank, grad_accum=grad_accum,
                                 start_step=start_step, epoch=epoch)
