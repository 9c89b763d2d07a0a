"""Record the trainer's real batch order: ``record_batches`` wraps a DataLoader or a batch sampler
and appends every batch's global row indices to the per-rank ledger (:mod:`datacheck.io.ledger`).

For trainers whose order cannot be simulated (custom samplers, resumed runs, packing on the fly).
One line per micro-batch, for the batches the training loop received: the DataLoader that
``record_batches`` returns numbers each batch where its batch sampler is iterated (the main process,
also with ``num_workers > 0``) and writes the batch's line when the loader's iterator yields that batch
to the loop, so the ``num_workers x prefetch_factor`` batches the workers fetched ahead and the loop
never took are not in the ledger, and a resume continues after the last batch received. A batch
sampler passed alone (or iterated by another DataLoader, such as the one accelerate's
``skip_first_batches`` builds around it: a warning says so) records each batch as it yields it.

Several recorders on one folder (a resume's ``skip_first_batches`` loader and the full loader wrapped once
before the epoch loop, or a new recorder each epoch) share the rank's ledger: each iteration starts where
the ledger on disk ends when another recorder wrote to it since this one last did (its step, and its epoch
when counted), so no step is recorded twice; a recorder created with a ``start_step`` that another
recorder has since recorded past is refused at its first iteration (``UsageError``).
With accelerate: ``record_batches(accelerator.prepare(loader), folder)`` (each process records its own
shard under its ``process_index``; the other order is refused over several processes). Resuming with
accelerate: call ``skip_first_batches`` first and ``record_batches`` on the loader it returns (with the
resumed ``start_step``), so skipped batches are never recorded. A loop that skips them itself by ``itertools.islice``
over the recording loader receives them, as a loop that trains them again does: ``resume_skips=True`` says
the loop skips them (the first iteration's batches, from the epoch's start, whose rows are all rows the
ledger records as trained in that epoch before ``start_step`` on any rank are not recorded, whatever the
resumed batch size and world size; a batch holding some is recorded as trained, warned); without it they
are recorded as trained again, with a warning.

A recorder given no ``start_step``, in a process that has not recorded into the folder, whose first
iteration starts the ledger's first epoch over (its first batch the ledger's first, or that epoch ran to
its end) is a new run recorded into an earlier run's folder: it records from the ledger's first step, its
``#state`` line superseding the earlier run's lines (warned).

Under torch's ``RandomSampler`` (``DataLoader(shuffle=True)``, with or without a generator) each
``#state`` line records what the iteration's permutation comes from, read before the sampler draws:
``sampler_seed`` or ``sampler_generator_state`` (:func:`_random_sampler_draw`); ``order verify`` replays
it.

Epochs may differ in length (a dataset whose size changes between epochs, a batch sampler without
``__len__``, accelerate's ``even_batches=False``, where some processes get a batch fewer): an iteration
that runs to its epoch's end (every batch received by the loop) writes an ``#end`` line (the epoch, the
micro-batches observed, the epoch's longest share and ``next_step``), and the next epoch starts at that
step: each process after its own steps (``ceil(its micro-batches / grad_accum)``; the ``#state`` line
says ``"epoch_steps": "own"`` for accelerate's ``even_batches=False`` and under the Hugging Face Trainer,
``epoch_aligned``): nothing joins the processes at an epoch's end, each counts its own updates (its own
log's steps) and DDP's all-reduce pairs the ``k``-th backward of every process. Under the Trainer, once the loop reports its updates (:meth:`RecordingBatchSampler.step_taken`), micro-batches
trained with no update after them in their epoch (a shrunk epoch's last, under the Trainer, which does
not zero the gradients between epochs) are carried into the next epoch's first step: the ``#state`` line
says ``"carried": k`` and the new epoch's micro-batches of that step are numbered from k.

When the lines reach the disk:

- the lines of a step are written (one gzip member, appended) as soon as its last micro-batch is
  received by the loop (yielded, for a batch sampler alone), and at the latest every ``flush_every`` micro-batches;
- what is left (a step cut short by an early stop, ``max_steps``, a loop that breaks while the
  iterator is still referenced) is written when the iterator is closed, when the recorder is
  garbage-collected, at interpreter exit (``weakref.finalize``, an ``atexit`` hook) and by
  :func:`flush_ledgers` (call it before saving a checkpoint; the Hugging Face callback does);
- only a process killed outright (SIGKILL, ``os._exit``) loses its unwritten lines; a write cut
  mid-way leaves a torn gzip member, whose complete lines :func:`~datacheck.io.ledger.read_ledger`
  reads (the cut line dropped) and whose tear it names (``Ledger.truncated``, ``Ledger.tears``), and a step recorded with fewer micro-batches than ``grad_accum`` before its
  epoch's end is named as well (``Ledger.partial``).

Each yielded batch is a :class:`~datacheck.torch.position.TaggedBatch` (a list of ints) carrying its
step, micro-batch, epoch, rank and position in the epoch, which :class:`~datacheck.torch.guard.BatchGuard`
uses to name a failing batch as the ledger does (also inside DataLoader workers).
"""
from __future__ import annotations

import base64
import functools
import gzip
import itertools
import json
import math
import os
import sys
import warnings
import weakref
import zlib
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from datacheck.io.ledger import LEDGER_HEADER, LedgerBatch, open_append, rank_file, read_ledger, read_lines
from datacheck.io.outputs import check_output_target, write_atomic
from datacheck.model.errors import UsageError
from datacheck.model.torchdep import require_torch
from datacheck.torch.position import BatchTag, TaggedBatch, set_current_tag

__all__ = ["RecordingBatchSampler", "record_batches", "flush_ledgers", "iterable_dataset_name", "ITERABLE_ADVICE"]

#: every live recorder of this process (:func:`flush_ledgers`)
_LIVE: "weakref.WeakSet[RecordingBatchSampler]" = weakref.WeakSet()


def _write_lines(path: Path, buf: list[str], pid: int) -> None:
    """Append ``buf``'s lines to the ledger as one gzip member and empty it. Only the process that
    recorded them writes (a forked DataLoader worker holds a copy of the buffer: it never writes)."""
    if not buf or os.getpid() != pid:
        return
    data = gzip.compress("".join(buf).encode(), compresslevel=6)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as f:
        f.write(data)
        f.flush()
    buf.clear()


def _write_at_exit(path: Path, buf: list[str], issued: "deque[tuple[str | None, BatchTag]]", flight: dict[str, bool],
                   rank: int, pid: int) -> None:
    """The recorder's finalizer (garbage collection, interpreter exit): write the pending lines, then, when
    the training loop that reports what it trained (``hold``: the Hugging Face callback) never said the
    training ended (:meth:`RecordingBatchSampler.training_ended`) while batches it received wait untrained
    (an exception out of ``Trainer.train()``: an embedding's ``IndexError``, a collator's error, Ctrl-C),
    an ``#in_flight`` line naming them (``{"rank", "batches": [{"step", "micro_batch", "epoch",
    "indices"}]}``, in the order issued): the first is the micro-batch the loop was training when it
    stopped, the others were fetched ahead (accelerate's look-ahead, DataLoader workers). They are not
    trained steps (:attr:`datacheck.io.ledger.Ledger.in_flight`)."""
    _write_lines(path, buf, pid)
    if not flight.get("on") or os.getpid() != pid:
        return
    flight["on"] = False
    batches = [{"step": tag.step, "micro_batch": tag.micro_batch, "epoch": tag.epoch,
                "indices": [int(x) for x in line.rstrip("\n").split("\t")[4:]]}
               for line, tag in issued if line is not None]
    if batches:
        _write_lines(path, ["#in_flight\t" + json.dumps({"rank": rank, "batches": batches}, sort_keys=True) + "\n"],
                     pid)


def flush_ledgers() -> int:
    """Write every live recorder's pending lines (call before saving a checkpoint).

    Returns:
        How many recorders had lines to write.
    """
    n = 0
    for rec in list(_LIVE):
        if rec.pending:
            rec.flush()
            n += 1
    return n


def _accelerate_chain(batch_sampler: Any) -> tuple[Any, Any, int | None]:
    """``(shard, batch sampler under it, skipped batches)`` of a batch sampler accelerate built: its
    ``BatchSamplerShard`` (``accelerator.prepare``; None when there is none) and the DataLoader's own batch
    sampler under it, looking through the ``SkipBatchSampler`` that ``skip_first_batches`` puts on top
    (``skipped``: its ``skip_batches``; None without one). Any other batch sampler: ``(None, it, None)``."""
    skipped = None
    obj = batch_sampler
    if _accelerate_class(obj, "SkipBatchSampler"):
        skipped = getattr(obj, "skip_batches", None)
        obj = obj.batch_sampler
    if _accelerate_class(obj, "BatchSamplerShard"):
        return obj, obj.batch_sampler, skipped if isinstance(skipped, int) else None
    return None, obj, skipped if isinstance(skipped, int) else None


def _accelerate_class(obj: Any, name: str) -> bool:
    """Whether ``obj`` is (a subclass of) accelerate's class ``name`` (accelerate is never imported here)."""
    return any(c.__name__ == name and c.__module__.startswith("accelerate.") for c in type(obj).__mro__)


def _accelerate_state(batch_sampler: Any) -> dict[str, Any] | None:
    """The ``#state`` settings of a batch sampler ``accelerator.prepare`` built (None for any other): the
    order datacheck's ``[batch] loader = "accelerate"`` plan simulates.

    ``loader`` ``"accelerate"``; ``num_replicas`` the processes the batches are dealt to (accelerate's
    ``num_processes``, the ledger's data-parallel world as for torch's samplers), ``process_index``,
    ``even_batches``, ``split_batches``, ``skip_batches`` (``skip_first_batches``; 0 without it); the
    DataLoader's ``drop_last``; ``batch_size`` the rows of each process's batch (the DataLoader's batch,
    divided by ``num_processes`` with ``split_batches``); and the sampler of the one order: its class
    (``sampler``), ``shuffle``, ``seed`` (a DistributedSampler's ``seed``, a SeedableRandomSampler's
    ``initial_seed``; absent for a RandomSampler, whose generator accelerate seeds from the process's
    torch RNG), ``epoch`` (what seeds its permutation), and a DistributedSampler's own ``num_replicas``
    and ``rank`` as ``sampler_num_replicas`` and ``sampler_rank``."""
    shard, user, skipped = _accelerate_chain(batch_sampler)
    if shard is None:
        return None
    procs = getattr(shard, "num_processes", 1)
    split = bool(getattr(shard, "split_batches", False))
    size = getattr(shard, "batch_size", None)
    if isinstance(size, int) and split and isinstance(procs, int) and procs > 0:
        size //= procs
    st: dict[str, Any] = {"batch_sampler": type(batch_sampler).__name__, "loader": "accelerate",
                          "num_replicas": procs, "process_index": getattr(shard, "process_index", None),
                          "even_batches": bool(getattr(shard, "even_batches", True)), "split_batches": split,
                          "skip_batches": skipped or 0, "batch_size": size,
                          "drop_last": bool(getattr(user, "drop_last", getattr(shard, "drop_last", False)))}
    inner = getattr(user, "sampler", None)
    if inner is None:
        return st
    st["sampler"] = type(inner).__name__
    rows = _dataset_rows(inner)
    if rows is not None:
        st["dataset_rows"] = rows
    shuffle = getattr(inner, "shuffle", None)
    if isinstance(shuffle, bool):
        st["shuffle"] = shuffle
    elif type(inner).__name__ == "SequentialSampler":
        st["shuffle"] = False
    elif any(c.__name__ == "RandomSampler" for c in type(inner).__mro__):
        st["shuffle"] = True
    seed = getattr(inner, "seed", getattr(inner, "initial_seed", None))
    if isinstance(seed, int) and not isinstance(seed, bool):
        st["seed"] = seed
    for k, key in (("epoch", "epoch"), ("num_replicas", "sampler_num_replicas"), ("rank", "sampler_rank")):
        v = getattr(inner, k, None)
        if isinstance(v, int) and not isinstance(v, bool):
            st[key] = v
    return st


def _dataset_rows(sampler: Any) -> int | None:
    """The rows of the dataset a sampler draws from this epoch (``len`` of its ``data_source``: torch's
    ``RandomSampler``, ``SequentialSampler``, accelerate's ``SeedableRandomSampler``; or of its ``dataset``:
    ``DistributedSampler``), read when its iteration starts: a dataset whose size changes between epochs is
    planned with each epoch's own (``order verify``). None when the sampler has neither or the length
    cannot be taken."""
    for attr in ("data_source", "dataset"):
        ds = getattr(sampler, attr, None)
        if ds is None:
            continue
        try:
            n = len(ds)
        except (TypeError, ValueError, NotImplementedError, AttributeError):
            return None
        return n if isinstance(n, int) and not isinstance(n, bool) and n >= 0 else None
    return None


def _sampler_state(batch_sampler: Any) -> dict[str, Any]:
    """Plain settings of the sampler under ``batch_sampler`` (what a resumed run must match); for a batch
    sampler accelerate built, :func:`_accelerate_state`."""
    acc = _accelerate_state(batch_sampler)
    if acc is not None:
        return acc
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
        rows = _dataset_rows(inner)
        if rows is not None:
            st["dataset_rows"] = rows
        for k in ("num_replicas", "rank", "shuffle", "seed", "epoch", "drop_last", "num_samples", "total_size"):
            v = getattr(inner, k, None)
            if isinstance(v, (int, bool)):
                st[("sampler_" + k) if k == "drop_last" else k] = v
        if type(inner).__name__ == "SequentialSampler":  # DataLoader(shuffle=False): the rows in order
            st.setdefault("shuffle", False)
        seed = getattr(inner, "initial_seed", None)  # accelerate's SeedableRandomSampler (the HF Trainer's)
        if "seed" not in st and isinstance(seed, int) and not isinstance(seed, bool):
            st["seed"] = seed  # its order: randperm(n) of a generator seeded seed + epoch, as DistributedSampler's
            if any(c.__name__ == "RandomSampler" for c in type(inner).__mro__):
                st.setdefault("shuffle", True)
    return st


def _random_sampler_draw(batch_sampler: Any, sampler: Any) -> dict[str, Any]:
    """What the permutation of torch's ``RandomSampler`` under ``batch_sampler`` comes from this iteration:
    the ``#state`` keys ``sampler_seed`` or ``sampler_generator_state``, read when the recording batch
    sampler's iteration begins, before the ``RandomSampler`` draws anything (``{}`` for any other sampler).

    ``RandomSampler.__iter__`` (``torch/utils/data/sampler.py``, ``replacement=False``) without a generator
    draws ``seed = int(torch.empty((), dtype=torch.int64).random_().item())`` from the process's global torch
    RNG and yields ``torch.randperm(n)`` of a ``torch.Generator`` seeded ``seed`` (``num_samples // n`` of
    them, then the first ``num_samples % n`` of one more): ``sampler_seed`` is that seed, drawn the same way
    from a ``torch.Generator`` holding a copy of ``torch.get_rng_state()`` (the global RNG does not advance).
    With a generator (``DataLoader(shuffle=True, generator=g)`` gives its ``RandomSampler`` the loader's) it
    draws those permutations from that generator itself, whose state the iterator's base-seed draw, every
    earlier epoch's permutations and any other use have moved: no seed exists, and the permutation is a
    function of the generator's whole state, so ``sampler_generator_state`` is that state
    (``generator.get_state()``, 5056 bytes for a CPU generator) zlib-compressed, base64 (about 4.3 KB a
    line). The DataLoader's iterator draws its workers' ``_base_seed`` (from ``loader.generator``, or the
    global RNG) in ``__init__``, after ``iter(batch_sampler)`` (a generator function: nothing runs) and before
    the first batch is asked for, with ``num_workers > 0`` too (its ``_reset`` asks for the first batches
    after it; with ``persistent_workers`` a later epoch's ``_reset`` draws no base seed): read at the
    iteration's first step, the state is the one the sampler's draw sees.

    Not recorded: a subclass with its own ``__iter__`` (accelerate's ``SeedableRandomSampler``), sampling
    with replacement, a generator not on the CPU, a batch sampler accelerate built (its own plan)."""
    torch = sys.modules.get("torch")
    data = getattr(getattr(torch, "utils", None), "data", None)
    random_sampler = getattr(data, "RandomSampler", None)
    if random_sampler is None or not isinstance(sampler, random_sampler) or sampler.replacement \
            or type(sampler).__iter__ is not random_sampler.__iter__ or _accelerate_chain(batch_sampler)[0] is not None:
        return {}
    gen = sampler.generator
    if gen is None:
        g = torch.Generator()
        g.set_state(torch.get_rng_state())
        return {"sampler_seed": int(torch.empty((), dtype=torch.int64).random_(generator=g).item())}
    if not isinstance(gen, torch.Generator) or gen.device.type != "cpu":
        return {}
    raw = gen.get_state().numpy().tobytes()
    return {"sampler_generator_state": base64.b64encode(zlib.compress(raw, 9)).decode("ascii")}


#: the ledger files a recorder of this process wrote a ``#state`` line to (a recorder given no ``start_step``
#: that finds a ledger this process never wrote, starting its first epoch over, is a new run's)
_RECORDED: set[Path] = set()
_NONE = object()


@dataclass
class _Consumed:
    """The rows the ledger records as trained in an epoch's pass in progress before a resume (every rank's,
    with their multiplicity: a sampler's padding repeats a row), taken out as the resumed loop skips them."""

    pool: Counter = field(default_factory=Counter)
    #: row -> (step, micro-batch) it was recorded at (the first time)
    where: dict[int, tuple[int, int]] = field(default_factory=dict)
    #: the steps the rows were recorded at: ``[start, end)``
    steps: tuple[int, int] = (0, 0)

    def holds(self, idx: list[int]) -> int:
        """How many of ``idx``'s rows the pool holds (each at most as often as it holds it)."""
        need = Counter(idx)
        return sum(min(c, self.pool.get(i, 0)) for i, c in need.items())

    def take(self, idx: list[int]) -> None:
        self.pool.subtract(idx)
        self.pool += Counter()  # drop the rows used up


def _pass_start(led: Any, rank: int, epoch: int, before: int) -> tuple[int | None, bool]:
    """``(start step, ran to its end)`` of the ledger's last pass over ``epoch`` begun before step ``before``
    (the lines of iterations that start at or after it are a resumed run's own, other ranks' included): its
    first ``#state`` line's ``start_step`` (a ``#state`` of the epoch begins a pass when it is the first,
    follows one of another epoch, or follows an iteration that ran to its end: an ``#end`` line), and
    whether an iteration of the pass ran to its end or a later epoch began after it. ``rank``'s lines, else
    the lowest rank's that records the epoch (a rank the resumed world added has none). ``(None, False)``: no
    pass of the epoch."""
    for r in [rank] + [x for x in led.ranks if x != rank]:
        states = list(led.states.get(r) or [])
        cut = next((i for i, st in enumerate(states) if isinstance(st.get("start_step"), int)
                    and st["start_step"] >= before), len(states))
        states = states[:cut]
        ended = {n - 1 for n, _end in led.ends.get(r) or [] if n <= cut}
        begin = None
        for i, st in enumerate(states):
            if st.get("epoch") == epoch and isinstance(st.get("start_step"), int) and (
                    i == 0 or states[i - 1].get("epoch") != epoch or (i - 1) in ended):
                begin = i
        if begin is None:
            continue
        rest = states[begin:]
        ran_out = any(begin + k in ended for k, st in enumerate(rest) if st.get("epoch") == epoch) or any(
            isinstance(st.get("epoch"), int) and st["epoch"] > epoch for st in rest)
        return states[begin]["start_step"], ran_out
    return None, False


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
            None: continue after the last complete step of an existing ledger (an epoch's last step,
            which holds the remainder micro-batches, is complete), else 0. Either way, an iteration
            that finds the rank's ledger written by another recorder since this one last wrote or read
            it continues where the ledger now ends (a ``start_step`` not yet used and before that end
            is refused: ``UsageError`` at the first iteration).
        epoch: the epoch of the next iteration; None: the inner sampler's ``epoch`` attribute
            (``DistributedSampler.set_epoch``) when it has one, else counted from the ledger (its last
            ``#state`` line's epoch, plus one when the ledger ends with that epoch's last micro-batch).
        flush_every: the most micro-batches held before a write (a step's lines are written when the
            step is complete, or sooner with a ``grad_accum`` above this).
        epoch_aligned: each epoch's first batch starts the epoch's first step in the Hugging Face
            Trainer's numbering (an epoch's last step takes the remainder micro-batches; the resumed
            Trainer re-reads its epoch from the start and skips batches), from what was observed: the
            ``start_step`` of the ledger's ``#state`` line of that epoch, else the ``next_step`` of the
            epoch before's ``#end`` line (or this recorder's own), else ``epoch x ceil(len(inner) /
            grad_accum)`` (no earlier epoch seen). Each process counts its own steps: with accelerate's
            ``even_batches=False`` a process with a batch fewer starts its next epoch after its own
            ``ceil(batches / grad_accum)`` steps, not the longest share's (the Trainer joins no process at
            an epoch's end: its ``global_step`` counts the process's own updates, and DDP pairs the
            ``k``-th update's all-reduce of every process).
        hold: every batch's line is held until :meth:`commit_through` says the training loop has
            trained it (the Hugging Face callback calls it at each micro-batch's and step's end), so
            batches that DataLoader workers or accelerate prefetched and the loop never trained are
            not recorded.
        resume_skips: the training loop skips, in the epoch it resumes, the rows trained before the
            resume (``itertools.islice`` over the loader): in this recorder's first iteration, the batches
            from the epoch's start whose rows are all rows the ledger records as trained in that epoch's
            pass before the start step (every rank's, :meth:`_consumed`; the batching may have changed) are
            not recorded (nor counted; the ``#end`` line says how many: ``replayed``); False: every batch
            yielded is recorded as trained (a ``UserWarning`` when the first one repeats consumed rows).

    Attributes:
        pending: micro-batch lines not yet written.
    """

    def __init__(self, inner: Any, out_dir: str | Path, *, rank: int = 0, grad_accum: int = 1,
                 start_step: int | None = None, epoch: int | None = None, flush_every: int = 256,
                 epoch_aligned: bool = False, hold: bool = False, resume_skips: bool = False):
        if grad_accum < 1:
            raise UsageError(f"grad_accum must be >= 1, got {grad_accum}")
        if flush_every < 1:
            raise UsageError(f"flush_every must be >= 1, got {flush_every}")
        self.inner = inner
        self.sampler = getattr(inner, "sampler", None)
        if self.sampler is None:  # accelerate's BatchSamplerShard / SkipBatchSampler: the sampler one level down
            self.sampler = getattr(getattr(inner, "batch_sampler", None), "sampler", None)
        if self.sampler is None and hasattr(inner, "set_epoch"):  # a batch sampler that shuffles itself
            self.sampler = inner  # (TokenBudgetBatchSampler): its epoch is the one to record
        self.path = rank_file(out_dir, rank)
        self.rank, self.grad_accum, self.flush_every = rank, grad_accum, flush_every
        self.epoch_aligned = epoch_aligned
        self.hold = hold
        self.resume_skips = resume_skips
        #: under ``epoch_aligned``, the step of the first iteration's first batch when the run says so (the
        #: Hugging Face Trainer resumed with ``ignore_data_skip`` trains its epoch again from the start at
        #: the restored global step); None: from the ledger (:meth:`_aligned_start`)
        self.first_step: int | None = None
        #: under ``epoch_aligned``, with ``first_step``: how many of the first iteration's batches the training
        #: loop skips, never training them (the resumed Hugging Face Trainer's ``steps_trained_in_current_epoch``:
        #: ``(global_step % num_update_steps_per_epoch) x grad_accum``, accelerate's ``skip_first_batches``
        #: around this sampler); they are not recorded, the first trained one is step ``first_step``'s first
        self.first_skip = 0
        #: under ``epoch_aligned``, the step the run's next epoch starts at when the run says so (the Hugging
        #: Face Trainer's ``global_step`` at ``on_epoch_begin``: it takes a fixed number of steps an epoch,
        #: counted from its first epoch's length, so an epoch whose length changed does not tell it); a
        #: ``#state`` line of that epoch in the ledger (a resume re-reading it) still decides first
        self.epoch_start: int | None = None
        #: the micro-batches the training loop trains of each epoch when it says so (the Hugging Face Trainer's
        #: ``steps_in_epoch``: the length of its loader when ``train()`` began; an epoch that grew past it is
        #: cut there), recorded on the ``#state`` line as ``trainer_epoch_batches``; None: every batch
        self.trainer_epoch_batches: int | None = None
        #: ``(step, micro-batches)``: a step whose micro-batches were trained (committed) with no optimizer
        #: update taken after them, once the loop says when it takes its updates (:meth:`step_taken`); None else
        self._open: tuple[int, int] | None = None
        self._takes = hold  # the loop reports its updates (step_taken; the Hugging Face callback, which holds)
        #: ``(step, micro-batches)`` carried into this iteration's first step from the iteration before (the
        #: Hugging Face Trainer does not zero the gradients between epochs: the micro-batches an epoch that
        #: shrank trains after its last update go into the next epoch's first update); None: no carry
        self._carry: tuple[int, int] | None = None
        self._epoch = epoch
        self._iters = 0
        self._buf: list[str] = []
        self._pid = os.getpid()  # the recording process (a forked worker's copy never writes)
        # under the DataLoader record_batches returns, a batch's line waits in ``_issued`` until the loader
        # yields that batch to the training loop (:meth:`commit`); ``_claim`` marks the next iteration as one
        self._issued: deque[tuple[str | None, BatchTag]] = deque()  # None: a batch trained before a resume
        #: ``{"on": True}`` from a ``hold`` iteration's start until the loop says the training ended: batches
        #: still held when the recorder is finalized were in flight when the loop stopped (``#in_flight``)
        self._flight: dict[str, bool] = {"on": False}
        self._finalizer = weakref.finalize(self, _write_at_exit, self.path, self._buf, self._issued, self._flight,
                                           self.rank, self._pid)
        self._end: dict[str, Any] | None = None  # the #end line of an iteration that ran out, until received
        self._ended: dict[int, int] = {}  # epoch -> the step after it, for iterations that ran to the end
        self._claim = False
        self._from_loader = False
        self._warned_foreign = False
        _LIVE.add(self)
        ledger_next, self._resume_epoch = self._ledger_position()
        self._given = start_step  # the caller's start_step (None: continue the ledger), checked at the first iteration
        if start_step is None:
            start_step = ledger_next
        self.next_step, self.next_micro = start_step, 0
        self._committed = (start_step, 0)  # (step, micro-batch) after the last batch the loop received
        self._mark = self._size()  # the ledger file as this recorder last wrote or read it

    def _size(self) -> int:
        """The ledger file's size in bytes (-1 when there is none): a change this recorder did not make means
        another recorder (or process) appended to or rewrote the rank's ledger."""
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return -1

    def _ledger_position(self) -> tuple[int, int | None]:
        """Where the rank's ledger on disk ends: ``(step of the next batch, epoch of the next iteration)``.

        The step is the ``#end`` line's ``next_step`` when the last iteration ran to its epoch's end, the
        last ``#state`` line's ``start_step`` when that iteration recorded nothing, else the one after the
        last complete step (an epoch's last step, holding the remainder micro-batches, is complete; a step
        cut short is re-recorded from its start), 0 without a ledger. The epoch is the last ``#state``
        line's epoch, plus one when the last iteration ended that epoch; None without a ``#state`` line. A torn ledger is first rewritten with its complete lines.

        Raises:
            UsageError: the folder holds an OLMo ledger.
        """
        if not self.path.exists():
            return 0, None
        led = read_ledger(self.path.parent)
        if led.format != "datacheck":
            raise UsageError(f"{self.path}: an OLMo ledger; record into another folder")
        if led.truncated:
            self._rewrite(led)
        last = led.last(self.rank)
        states = led.states.get(self.rank) or []
        epoch = states[-1].get("epoch") if states else None
        ends = led.ends.get(self.rank) or []
        if ends and ends[-1][0] == len(states):  # the last iteration ran to its epoch's end (#end)
            end = ends[-1][1]
            nxt, ep = end.get("next_step"), end.get("epoch")
            if isinstance(nxt, int) and (last is None or last.step < nxt):
                return nxt, ep + 1 if isinstance(ep, int) else None
        start = states[-1].get("start_step") if states else None
        if isinstance(start, int) and last is not None and start > last.step:  # an iteration began, nothing recorded
            return start, epoch if isinstance(epoch, int) else None
        if last is None:
            return 0, epoch if isinstance(epoch, int) else None
        ended = _ends_epoch(last, states, self.grad_accum)
        done = last.micro_batch is not None and (last.micro_batch == self.grad_accum - 1 or ended)
        if isinstance(epoch, int) and ended:
            epoch += 1
        return (last.step + 1 if done else last.step), epoch if isinstance(epoch, int) else None

    def _rewrite(self, led: Any) -> None:  # noqa: ARG002 - the torn ledger (its lines are re-read)
        """Rewrite a torn ledger with its complete lines (atomically), so appends stay readable."""
        lines, _torn = read_lines(self.path)
        write_atomic(self.path, gzip.compress("".join(line + "\n" for line in lines).encode()))

    def __len__(self) -> int:
        return len(self.inner)

    @property
    def pending(self) -> int:
        return len(self._buf)

    def flush(self) -> None:
        """Write the pending micro-batch lines now (one gzip member appended to the rank's file)."""
        if self._buf:
            _write_lines(self.path, self._buf, self._pid)
            self._mark = self._size()

    def commit(self) -> None:
        """The loader yielded the oldest issued batch to the training loop: its line goes to the ledger
        (written at once when it completes its step)."""
        if not self._issued:
            return
        line, tag = self._issued.popleft()
        if line is None:  # trained before the resume: already in the ledger
            self._write_end()
            return
        self._buf.append(line)
        nxt = (tag.step, tag.micro_batch + 1)
        if self._takes:
            self._open = nxt
        if nxt[1] == self._step_size(tag.step):
            nxt = (tag.step + 1, 0)
            self.flush()
        elif len(self._buf) >= self.flush_every:
            self.flush()
        self._committed = nxt
        self._write_end()

    def _step_size(self, step: int) -> int:
        """The micro-batches of ``step`` this iteration records: ``grad_accum``, plus those carried into
        it from the iteration before when it is the carried step."""
        return self.grad_accum + (self._carry[1] if self._carry is not None and self._carry[0] == step else 0)

    def commit_through(self, step: int, micro_batch: int = 0) -> None:
        """The training loop has trained every batch before position (``step``, ``micro_batch``): the
        held lines of those batches go to the ledger (in the order they were issued); later ones stay
        held. With ``micro_batch`` 0: every batch of the steps before ``step``. ``micro_batch`` counts this
        iteration's micro-batches: those carried into the step from the iteration before come first."""
        if micro_batch and self._carry is not None and self._carry[0] == step:
            micro_batch += self._carry[1]
        while self._issued and (self._issued[0][1].step, self._issued[0][1].micro_batch) < (step, micro_batch):
            self.commit()

    def step_taken(self, step: int, micro_batches: int) -> None:
        """The training loop took optimizer ``step`` on its first ``micro_batches`` micro-batches: their held
        lines go to the ledger, and the held lines of ``step`` past them are dropped, never trained (the
        Hugging Face Trainer takes each epoch's last step on the remainder of its first epoch's length: the
        batches an epoch that grew holds past it are fetched, never trained)."""
        self._takes = True
        self.commit_through(step, micro_batches)
        if self._open is not None and self._open[0] <= step:
            self._open = None
        dropped = False
        while self._issued and self._issued[0][0] is not None and self._issued[0][1].step == step:
            self._issued.popleft()
            dropped = True
        if dropped:
            self._committed = (step + 1, 0)
            self._write_end()

    def training_ended(self) -> None:
        """The training loop ended: the micro-batches it trained with no optimizer update after them (recorded
        at the step they wait in; the Hugging Face Trainer's shrunk last epoch, whose micro-batches after its
        last update wait for a next epoch's first update that never comes, or a stop between a step's
        micro-batches) were never part of an update: an ``#untrained`` line says so (``step``, ``rank`` and
        ``micro_batches``, the step's micro-batches recorded before it), and the ledger reads them as not
        trained (:attr:`datacheck.io.ledger.Ledger.untrained`). Nothing is written when every trained
        micro-batch went into an update, or when the loop never reports its updates (:meth:`step_taken`)."""
        open_, self._open = self._open, None
        self._carry = None
        self._flight["on"] = False  # what is still held was fetched ahead, never trained: no #in_flight line
        if open_ is None or not self._takes:
            return
        self.flush()
        rec = {"step": open_[0], "rank": self.rank, "micro_batches": open_[1]}
        _write_lines(self.path, ["#untrained\t" + json.dumps(rec, sort_keys=True) + "\n"], self._pid)
        self._mark = self._size()

    def set_epoch(self, epoch: int) -> None:
        """Forward ``set_epoch`` to the inner sampler (trainers call it on the loader's sampler)."""
        if self.sampler is not None and hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)
        self._epoch = epoch

    def _follow_ledger(self) -> None:
        """At an iteration's start: when the rank's ledger changed since this recorder last wrote or read it
        (another recorder on the folder, such as the ``skip_first_batches`` loader's of a resume, trained
        batches in between), continue where the ledger now ends (its step, and its epoch when counted)
        instead of the position this recorder computed before, which would record those steps again.

        Raises:
            UsageError: the recorder's own ``start_step`` (not yet used) lies before where the ledger now
                ends: its batches would be recorded under steps another recorder recorded with other rows.
        """
        for rec in list(_LIVE):  # another recorder's lines still held here belong before this iteration's
            if rec is not self and rec.pending and rec.path == self.path:
                rec.flush()
        if self._size() == self._mark:
            return
        nxt, epoch = self._ledger_position()
        if self._iters == 0 and self._given is not None and self._given < nxt:
            raise UsageError(
                f"record_batches: {self.path} was written by another recorder after this one was created with "
                f"start_step={self._given}; the ledger now ends before step {nxt}, so this iteration would record "
                f"steps {self._given}..{nxt - 1} again with other rows. Create the recorder when its loop starts "
                f"(record_batches(loader, folder) inside the epoch loop), or leave start_step out: a recorder "
                f"without it continues the ledger where it ends at each iteration")
        if self._iters or self._given is None:
            self.next_step, self.next_micro = nxt, 0
            self._committed = (nxt, 0)
            self._resume_epoch, self._iters = epoch, 0
        self._mark = self._size()

    def _current_epoch(self) -> int:
        if self.sampler is not None and isinstance(getattr(self.sampler, "epoch", None), int):
            return int(self.sampler.epoch)
        if self._epoch is not None:
            return self._epoch
        base = self._resume_epoch if isinstance(self._resume_epoch, int) else 0
        return base + self._iters

    def _epoch_known(self) -> bool:
        """Whether the epoch of the next iteration is the run's own (the sampler's ``set_epoch`` value, or
        the ``epoch`` passed), not one counted by the recorder."""
        return self._epoch is not None or (self.sampler is not None and isinstance(getattr(self.sampler, "epoch", None), int))

    def _read_own(self) -> Any:
        """The folder's ledger as on disk now (None when this rank has none or it cannot be read)."""
        if self._size() <= 0:
            return None
        try:
            return read_ledger(self.path.parent)
        except UsageError:
            return None

    def _read_folder(self) -> Any:
        """The folder's ledger as on disk now, every rank's (None when there is none or it cannot be read): a
        rank the resumed world added has no file of its own, yet the rows the others trained count."""
        try:
            return read_ledger(self.path.parent)
        except UsageError:
            return None

    def _consumed(self, led: Any, epoch: int) -> _Consumed:
        """The rows the ledger records as trained in ``epoch``'s pass in progress before ``next_step``, on every
        rank (:func:`_pass_start`; nothing when that pass ran to its end)."""
        out = _Consumed()
        if led is None:
            return out
        start, ran_out = _pass_start(led, self.rank, epoch, self.next_step)
        if start is None or ran_out:
            return out
        out.steps = (start, self.next_step)
        for r in led.ranks:
            for s, bs in (led.batches.get(r) or {}).items():
                if not start <= s < self.next_step:
                    continue
                for b in bs:
                    if b.epoch != epoch:
                        continue
                    for i in b.indices:
                        out.pool[i] += 1
                        out.where.setdefault(i, (s, b.micro_batch or 0))
        return out

    def _restart_of_run(self, led: Any, epoch: int, head: list[int] | None) -> int | None:
        """The step a new run over an older run's ledger starts at (its first ``#state`` line's ``start_step``),
        or None when this iteration is not one: the recorder was given no ``start_step``, this process has not
        recorded into the ledger, the iteration's epoch is the run's own (:meth:`_epoch_known`) and the epoch
        the rank's ledger starts with, the ledger records batches of it, and either its first batch (``head``)
        is the one the ledger starts with (the order from its very start again) or the ledger ran that epoch
        to its end (an ``#end`` line, a later epoch): a run that stopped inside it and resumed would not
        start it over (a resume passes ``start_step``)."""
        if led is None or self._given is not None or self.path.resolve() in _RECORDED:
            return None
        states = led.states.get(self.rank) or []
        per = led.batches.get(self.rank) or {}
        if not states or states[0].get("epoch") != epoch or not isinstance(states[0].get("start_step"), int):
            return None
        start = states[0]["start_step"]
        if not any(b.epoch == epoch for bs in per.values() for b in bs):
            return None
        first = (per.get(start) or [None])[0]
        again = head is not None and first is not None and list(first.indices) == head
        done = bool(led.ends.get(self.rank)) or any(isinstance(st.get("epoch"), int) and st["epoch"] > epoch
                                                    for st in states)
        return start if again or done else None

    def _aligned_start(self, led: Any, epoch: int, batches: int | None) -> int:
        """The step of ``epoch``'s first batch under ``epoch_aligned``, from what was observed: where the
        ledger's ``#state`` of that epoch put it (a resumed Trainer re-reads its epoch), else where the
        epoch before ran out (the ledger's ``#end``, or this recorder's own), else the Trainer's arithmetic
        ``epoch x ceil(batches / grad_accum)`` (no earlier epoch seen), else the step after the last."""
        starts: dict[int, int] = {}
        nexts: dict[int, int] = {}
        if led is not None:
            states = led.states.get(self.rank) or []
            ends = led.ends.get(self.rank) or []
            for i, st in enumerate(states + [{}]):
                for n, end in ends:  # the #end lines written before this #state
                    if n == i and isinstance(end.get("epoch"), int) and isinstance(end.get("next_step"), int):
                        nexts[end["epoch"]] = end["next_step"]
                ep, start = st.get("epoch"), st.get("start_step")
                if isinstance(ep, int) and isinstance(start, int):
                    for k in [k for k in starts if k > ep]:  # a later (re)start of an earlier epoch replaces them
                        del starts[k]
                    for k in [k for k in nexts if k >= ep]:
                        del nexts[k]
                    starts.setdefault(ep, start)
        if epoch in starts:
            return starts[epoch]
        if self.epoch_start is not None:
            return self.epoch_start
        if epoch - 1 in nexts:
            return nexts[epoch - 1]
        if epoch - 1 in self._ended:
            return self._ended[epoch - 1]
        if batches is not None:
            return epoch * math.ceil(batches / self.grad_accum)
        return self.next_step + (1 if self.next_micro else 0)

    def _write_end(self) -> None:
        """Write the ``#end`` line of an iteration that ran to its epoch's end, once every batch it issued
        was received (or trained) by the loop."""
        if self._end is None or self._issued:
            return
        end, self._end = self._end, None
        self._buf.append("#end\t" + json.dumps(end, sort_keys=True) + "\n")
        self._committed = (end["next_step"], 0)
        self.flush()

    def __iter__(self) -> Iterator[list[int]]:
        deferred, self._claim = self._claim or self.hold, False
        if not deferred and self._from_loader:
            procs = _accelerate_processes()
            if procs > 1:
                raise UsageError(
                    f"record_batches: the loader record_batches returned was passed to accelerator.prepare, which "
                    f"shards its batches over {procs} processes: this process would record every process's "
                    f"batches as its own; record what it trains on with "
                    f"record_batches(accelerator.prepare(loader), folder) (the rank is its process_index)")
            if not self._warned_foreign:
                self._warned_foreign = True
                warnings.warn("record_batches: the recording batch sampler is iterated by a DataLoader other than the "
                              "one record_batches returned (accelerator.prepare or skip_first_batches applied after "
                              "record_batches?): each batch is recorded when the sampler yields it, prefetched and "
                              "skipped batches included; wrap the loader they return: "
                              "record_batches(accelerator.prepare(loader), folder), "
                              "record_batches(skip_first_batches(prepared, n), folder, start_step=...)", stacklevel=2)
        if self.hold:
            self._flight["on"] = True
        if deferred:
            self._issued.clear()  # batches of an earlier iteration the loop never received
            self._end = None
            step, micro = self._committed  # the position after the last batch the loop received
            self.next_step, self.next_micro = (step + 1, 0) if micro else (step, 0)
            self._committed = (self.next_step, 0)
        if not self.epoch_aligned:
            self._follow_ledger()
        epoch = self._current_epoch()
        # a recorder's first iteration of an epoch the ledger already holds trained batches of (a resumed run
        # re-reading its epoch from the start): those batches, yielded again with the same rows, were trained
        # before the resume; the loop skips them (itertools.islice), so they are not recorded again
        first = self._iters == 0
        self._iters += 1
        try:
            batches: int | None = len(self.inner)
        except TypeError:
            batches = None
        led = self._read_own() if self.epoch_aligned else None
        # what the RandomSampler under it draws its permutation from, before it draws (the first batch asked for)
        draw = _random_sampler_draw(self.inner, self.sampler)
        source = iter(self.inner)
        head: Any = None
        consumed = _Consumed()
        restart: int | None = None
        if first and not self.epoch_aligned and self._epoch_known():
            led = self._read_folder()
            if self._given is None and led is not None and self.path.resolve() not in _RECORDED:
                head = next(source, _NONE)  # the first batch decides whether the run starts over (a new run)
                restart = self._restart_of_run(led, epoch, None if head is _NONE else [int(i) for i in head])
            if restart is not None:
                steps = sorted(led.batches.get(self.rank) or {})
                warnings.warn(
                    f"record_batches: {self.path} holds the ledger of an earlier run (steps {steps[0]}..{steps[-1]}) "
                    f"and this process starts epoch {epoch} over from the run's start with no start_step: a new "
                    f"run. It is recorded from step {restart}, and its lines supersede the earlier run's (plan "
                    f"--ledger and order verify read this run's; order verify notes the restart). If this process "
                    f"resumed that run, pass start_step=<the restored global step> (its batches then follow step "
                    f"{steps[-1]}); to keep both runs' ledgers, record into another folder", stacklevel=2)
                self.next_step, self.next_micro = restart, 0
                self._committed = (restart, 0)
            else:
                # the rows trained in this epoch before the resume: a loop re-reading the epoch from its start
                # receives them again (in batches of the resumed batch size and world size, whatever they were)
                consumed = self._consumed(led, epoch)
        if head is _NONE:
            head = None
            source = iter(())
        elif head is not None:
            source = itertools.chain([head], source)
        skipped = _accelerate_chain(self.inner)[2] or 0  # skip_first_batches: the epoch's batches before ours
        skip_first = 0
        if self.epoch_aligned and first and self.first_step is not None:
            self.next_step, self.next_micro = self.first_step, 0
            skip_first = self.first_skip
        elif self.epoch_aligned:
            self.next_step, self.next_micro = self._aligned_start(led, epoch, batches), 0
        # the micro-batches the iteration before trained at this epoch's first step with no update after them
        # (an epoch that shrank under the Hugging Face Trainer): that step's update takes them with this
        # epoch's first micro-batches, numbered after them
        self._carry = (self._open if self.epoch_aligned and self._open is not None
                       and self._open[0] == self.next_step else None)
        self._open = None
        if self._carry is not None:
            self.next_micro = self._carry[1]
        state = {"epoch": epoch, "start_step": self.next_step, "rank": self.rank, "grad_accum": self.grad_accum,
                 "batches": batches, **_sampler_state(self.inner),
                 **({"epoch_steps": "own"} if self.epoch_aligned or _uneven_shard(self.inner) else {}),
                 **({"trainer_epoch_batches": self.trainer_epoch_batches}
                    if self.trainer_epoch_batches is not None else {}),
                 **({"carried": self._carry[1]} if self._carry is not None else {}),
                 **({"skipped": skip_first} if skip_first else {}), **draw}
        self.flush()
        new = self._size() <= 0  # no ledger yet (another recorder on the folder may have started it since)
        with open_append(self.path) as f:
            if new:
                f.write((LEDGER_HEADER + "\n").encode())
            f.write(("#state\t" + json.dumps(state, sort_keys=True) + "\n").encode())
        self._mark = self._size()
        _RECORDED.add(self.path.resolve())
        buf = self._buf
        seen, ended, replaying, replayed = 0, False, bool(consumed.pool), 0
        try:
            for pos, batch in enumerate(source):
                idx = [int(i) for i in batch]
                seen = pos + 1
                at = pos + skipped  # the batch's position in the epoch
                if pos < skip_first:  # skipped by the loop (a resumed Trainer): never trained, not recorded
                    tag = BatchTag(self.rank, epoch, self.next_step - 1, pos, at)
                    if deferred:
                        self._issued.append((None, tag))
                    yield TaggedBatch(idx, tag)
                    continue
                if replaying:
                    inside = consumed.holds(idx)
                    if inside == len(idx) and self.resume_skips:  # a batch of rows trained before the resume
                        consumed.take(idx)
                        replayed += 1
                        step0, micro0 = consumed.where[idx[0]]
                        tag = BatchTag(self.rank, epoch, step0, micro0, at)
                        if deferred:
                            self._issued.append((None, tag))
                        set_current_tag(tag)
                        yield TaggedBatch(idx, tag)
                        continue
                    if inside == len(idx) and idx:  # recorded as trained again: say how to record a skipping loop
                        warnings.warn(
                            f"record_batches: epoch {epoch} starts again with rows the ledger records as trained "
                            f"before (steps {consumed.steps[0]}..{consumed.steps[1] - 1}); each batch of them is "
                            f"recorded as trained again (order verify flags its rows as seen twice). If the loop "
                            f"skips them (itertools.islice over the loader), pass resume_skips=True", stacklevel=2)
                    elif inside and self.resume_skips:
                        warnings.warn(
                            f"record_batches: resume_skips=True, and batch {at} of epoch {epoch} holds {inside} row(s) "
                            f"the ledger records as trained before step {self.next_step} and {len(idx) - inside} it "
                            f"does not: it is recorded as trained (those {inside} rows as trained twice); the skip "
                            f"ends before it. If the loop skipped it too, its new rows were never trained: skip only "
                            f"the batches whose rows were all consumed (rows consumed // the new batch size)",
                            stacklevel=2)
                    elif pos == 0 and self.resume_skips:
                        warnings.warn(
                            f"record_batches: resume_skips=True, but epoch {epoch}'s first batch holds none of the "
                            f"rows the ledger records as trained in it before step {self.next_step}: no batch is "
                            f"taken as skipped (the loader already starts after them, or the order changed: another "
                            f"seed or dataset), every batch yielded is recorded as trained", stacklevel=2)
                replaying = False
                tag = BatchTag(self.rank, epoch, self.next_step, self.next_micro, at)
                line = f"{self.next_step}\t{self.rank}\t{self.next_micro}\t{epoch}\t" + "\t".join(map(str, idx)) + "\n"
                self.next_micro += 1
                if deferred:  # written when the loader yields it to the loop (commit)
                    self._issued.append((line, tag))
                    if self.next_micro == self._step_size(self.next_step):
                        self.next_step, self.next_micro = self.next_step + 1, 0
                else:
                    buf.append(line)
                    if self.next_micro == self._step_size(self.next_step):  # the step is complete: on disk before it is trained
                        self.next_step, self.next_micro = self.next_step + 1, 0
                        self.flush()
                    elif len(buf) >= self.flush_every:
                        self.flush()
                set_current_tag(tag)
                yield TaggedBatch(idx, tag)
            ended = True
        finally:
            set_current_tag(None)
            self.flush()
            if self.next_micro:  # an epoch ending mid-step: the trainer steps on the remainder
                self.next_step, self.next_micro = self.next_step + 1, 0
            if ended:
                own = seen + skipped
                most = max(own, _epoch_batches(self.inner, own))
                # a process that got fewer batches than another (accelerate's even_batches=False) starts the
                # next epoch after its own steps: nothing joins the processes at an epoch's end, each counts
                # its own updates and DDP's all-reduce pairs the k-th backward of every process (its own k-th
                # batch, whatever epoch it is in); a share of the longest length (every other loader) is the same
                self._ended[epoch] = self.next_step
                self._end = {"epoch": epoch, "rank": self.rank, "batches": own, "epoch_batches": most,
                             "next_step": self.next_step, **({"replayed": replayed} if replayed else {})}
                self._write_end()  # deferred: once the loop has received every batch issued (else at that commit)


def _uneven_shard(inner: Any) -> bool:
    """Whether ``inner`` is a batch sampler accelerate built with ``even_batches=False`` (``BatchSamplerShard``):
    its processes get different numbers of batches an epoch when the batches do not divide evenly (with
    ``split_batches`` a process past a short last batch's rows gets none of it), and each counts its own
    steps over its own epochs (``#state`` ``"epoch_steps": "own"``)."""
    shard = _accelerate_chain(inner)[0]
    return shard is not None and not getattr(shard, "even_batches", True)


def _epoch_batches(inner: Any, own: int) -> int:
    """The micro-batches of the epoch's longest share: for a batch sampler accelerate built with
    ``even_batches=False`` (``BatchSamplerShard``), what process 0 gets (``accelerate/data_loader.py``,
    ``BatchSamplerShard.__len__`` with ``even_batches``: ``ceil(batches / num_processes)``, ``floor`` with
    ``drop_last``; with ``split_batches`` every batch, sliced); else ``own``, what this rank was given."""
    shard = _accelerate_chain(inner)[0]
    if shard is None or getattr(shard, "even_batches", True):
        return own
    try:
        total = len(shard.batch_sampler)
    except TypeError:
        return own
    procs = getattr(shard, "num_processes", 1)
    if getattr(shard, "split_batches", False) or not isinstance(procs, int) or procs < 1:
        return total
    if total % procs == 0 or getattr(shard, "drop_last", False):
        return total // procs
    return total // procs + 1


def _ends_epoch(last: LedgerBatch, states: list[dict[str, Any]], grad_accum: int) -> bool:
    """Whether ``last`` (a rank's last recorded micro-batch) is the last micro-batch of its epoch: the
    iteration its ``#state`` line describes (``start_step``, ``batches`` micro-batches, its ``grad_accum``
    the same as ``grad_accum``) ends with it, so its step is complete though it holds fewer than
    ``grad_accum`` micro-batches (the trainer steps on the remainder)."""
    st = next((x for x in reversed(states) if isinstance(x.get("start_step"), int) and x["start_step"] <= last.step),
              None)
    if st is None or st.get("grad_accum") != grad_accum or not isinstance(st.get("batches"), int):
        return False
    batches, start = st["batches"], st["start_step"]
    steps = -(-batches // grad_accum)
    return (batches > 0 and last.step == start + steps - 1
            and last.micro_batch == batches - grad_accum * (steps - 1) - 1)


def _accelerate_processes() -> int:
    """How many processes accelerate's ``PartialState`` shards data over in this process (1 when accelerate
    was never imported or its state is not initialized; accelerate is never imported here)."""
    state = sys.modules.get("accelerate.state")
    shared = getattr(getattr(state, "PartialState", None), "_shared_state", None) or {}
    n = shared.get("num_processes", 1)
    return n if isinstance(n, int) else 1


def _accelerate_loader(dl: Any) -> str | None:
    """``"DataLoaderShard"`` or ``"DataLoaderDispatcher"`` for a loader ``accelerator.prepare`` returned (its
    ``__class__`` says ``DataLoader``; ``type`` names the real class), else None."""
    for cls in type(dl).__mro__:
        if cls.__module__.startswith("accelerate.") and cls.__name__ in ("DataLoaderShard", "DataLoaderDispatcher"):
            return cls.__name__
    return None


@functools.lru_cache(maxsize=None)
def _recording_loader_class(DataLoader: Any) -> Any:
    """A ``DataLoader`` subclass whose iterator commits each batch's ledger line as it yields the batch to
    the training loop (so batches prefetched by workers and never taken are not recorded)."""

    class RecordingDataLoader(DataLoader):  # type: ignore[misc, valid-type]
        def __iter__(self) -> Iterator[Any]:
            rec = self.batch_sampler
            rec._claim = True
            it = super().__iter__()

            def received() -> Iterator[Any]:
                try:
                    for batch in it:
                        rec.commit()
                        yield batch
                finally:
                    rec.flush()

            return received()

    return RecordingDataLoader


def iterable_dataset_name(torch: Any, loader: Any) -> str | None:
    """The class name of the iterable-style dataset (``torch.utils.data.IterableDataset``, also under
    accelerate's ``IterableDatasetShard``) a DataLoader iterates (accelerate's loaders included: the
    ``base_dataloader`` of a ``DataLoaderShard``), else None. Such a loader has no row indices: torch
    gives it a ``BatchSampler`` over ``_InfiniteConstantSampler``, which yields ``None`` for every row."""
    for dl in (loader, getattr(loader, "base_dataloader", None)):
        ds = getattr(dl, "dataset", None) if isinstance(dl, torch.utils.data.DataLoader) else None
        if isinstance(ds, torch.utils.data.IterableDataset):
            return type(ds).__name__
    return None


#: what a loader over an IterableDataset can do instead of a ledger (record_batches' and the callback's words)
ITERABLE_ADVICE = ("its rows come from the dataset's own iterator, not from indices a sampler draws, so there are no "
                   "row indices to record (torch's batch sampler for such a loader yields None for every row); use a "
                   "map-style dataset with a sampler, or carry each row's global index in its sample (an 'idx' "
                   "field) and log it with the step: no plan simulates an IterableDataset's order")


def _refuse_iterable(torch: Any, loader: Any) -> None:
    """Refuse a DataLoader over an iterable-style dataset (:func:`iterable_dataset_name`).

    Raises:
        UsageError: the loader iterates an iterable-style dataset (the message says what to do instead).
    """
    name = iterable_dataset_name(torch, loader)
    if name is not None:
        raise UsageError(f"record_batches: this DataLoader iterates an IterableDataset ({name}): {ITERABLE_ADVICE}")


def _record_accelerate(dl: Any, out_dir: str | Path, rank: int | None, **kw: Any) -> Any:
    """``record_batches`` of a loader ``accelerator.prepare`` returned: a ``DataLoaderShard`` as accelerate's
    ``skip_first_batches`` rebuilds one (device, RNG synchronisation, ``end_of_dataloader`` kept), whose batch
    sampler records this process's shard (accelerate's ``BatchSamplerShard``) under its ``process_index``."""
    if _accelerate_loader(dl) == "DataLoaderDispatcher":
        raise UsageError("record_batches: accelerate's dispatch_batches=True loader (process 0 reads every batch and "
                         "sends each process a slice of the tensors) has no per-process row indices; prepare with "
                         "dispatch_batches=False (DataLoaderConfiguration) to record each process's rows")
    inner = dl.batch_sampler
    shard, _user, _skipped = _accelerate_chain(inner)  # skip_first_batches: the shard under its SkipBatchSampler
    process = getattr(shard, "process_index", None)
    if rank is None:
        rank = process if isinstance(process, int) else 0
    elif isinstance(process, int) and rank != process:
        raise UsageError(f"record_batches: rank={rank}, but accelerate gave this process the batches of "
                         f"process_index {process}: pass rank=accelerator.process_index (or leave rank out)")
    check_output_target("record_batches out_dir", rank_file(out_dir, rank))
    rec = RecordingBatchSampler(inner, out_dir, rank=rank, **kw)
    base = dl.base_dataloader
    args: dict[str, Any] = {k: getattr(base, k) for k in ("num_workers", "collate_fn", "pin_memory", "timeout",
                                                         "worker_init_fn", "generator")}
    if base.num_workers > 0:
        args.update(prefetch_factor=base.prefetch_factor, persistent_workers=base.persistent_workers,
                    multiprocessing_context=base.multiprocessing_context)
    rec._from_loader = True
    return _recording_loader_class(type(dl))(
        dl.dataset, batch_sampler=rec, device=dl.device, rng_types=dl.rng_types,
        synchronized_generator=dl.synchronized_generator, _drop_last=dl._drop_last, _non_blocking=dl._non_blocking,
        torch_device_mesh=getattr(dl, "torch_device_mesh", None), iteration=dl.iteration, **args)


def record_batches(loader_or_sampler: Any, out_dir: str | Path, *, rank: int | None = None, grad_accum: int = 1,
                   start_step: int | None = None, epoch: int | None = None, flush_every: int = 256,
                   resume_skips: bool = False) -> Any:
    """Wrap a DataLoader or a batch sampler so every batch's global indices go to the ledger.

    Args:
        loader_or_sampler: a ``torch.utils.data.DataLoader`` (a new DataLoader over the same dataset,
            collate function, workers and pinning is returned, whose batch sampler records), or a batch
            sampler (an iterable of index lists; the recording batch sampler is returned).
        out_dir: the ledger folder; ``plan --ledger out_dir`` reads it.
        rank: this process's rank (default: a loader ``accelerator.prepare`` returned: its ``process_index``;
            otherwise 0).
        grad_accum: micro-batches per optimizer step.
        start_step: the step of the next batch (a resumed trainer's restored global step); default:
            continue the existing ledger after its last complete step (an epoch's last step with the
            remainder micro-batches is complete), else 0. An iteration that finds the rank's ledger
            written by another recorder since (the ``skip_first_batches`` loader's of a resume) continues
            where the ledger then ends.
        epoch: the epoch (default: the sampler's ``epoch``, else counted).
        flush_every: the most micro-batch lines held before a write (each complete step is written
            at once; see the module docstring for every other write).
        resume_skips: the loop skips the resumed epoch's batches trained before the resume by
            ``itertools.islice(loader, k, None)`` (or any other way that receives and drops them): the
            first iteration's batches, in order from the epoch's start, whose rows are all rows the ledger
            records as trained in that epoch before ``start_step`` (on any rank; in whatever batches: the
            batch size or the world size may have changed at the resume) are not recorded; the first batch
            holding another row ends the skip (recorded as trained; warned when it holds consumed rows too).
            Default False: a loop that receives them trains them again, and the ledger records so (warned).

    With Hugging Face accelerate, wrap the prepared loader: ``record_batches(accelerator.prepare(loader),
    folder)`` records the batches this process trains on (accelerate's shard: every ``num_processes``-th
    batch from ``process_index``, or its slice with ``split_batches``) under rank ``process_index`` and
    returns an accelerate ``DataLoaderShard`` (device placement, RNG synchronisation and the end of the
    dataloader that ``accumulate`` syncs on are kept). The other order, ``accelerator.prepare(record_batches(
    loader, folder))``, records the full batches before accelerate shards them: refused (``UsageError`` at
    the first iteration) with more than one process, warned with one.

    Raises:
        UsageError: a per-index sampler (wrap it in a ``BatchSampler``), an iterable-style dataset's
            loader (no indices), an OLMo ledger in ``out_dir``, or ``out_dir`` inside a folder datacheck refuses;
            accelerate's ``dispatch_batches=True`` loader, or a ``rank`` other than its ``process_index``; at
            the first iteration, the loader record_batches returned prepared by accelerate over several processes,
            or a ``start_step`` that another recorder on the folder has recorded past since this one was
            created (its steps would be recorded again with other rows).
        OptionalDependencyError: torch is not installed.
    """
    torch = require_torch("datacheck.torch.record_batches")
    _refuse_iterable(torch, loader_or_sampler)
    if _accelerate_loader(loader_or_sampler) is not None:
        return _record_accelerate(loader_or_sampler, out_dir, rank, grad_accum=grad_accum, start_step=start_step,
                                  epoch=epoch, flush_every=flush_every, resume_skips=resume_skips)
    rank = 0 if rank is None else rank
    check_output_target("record_batches out_dir", rank_file(out_dir, rank))
    DataLoader = torch.utils.data.DataLoader
    if isinstance(loader_or_sampler, DataLoader):
        dl = loader_or_sampler
        if dl.batch_sampler is None:
            raise UsageError("record_batches: this DataLoader has no batch sampler (batch_size=None): there are no "
                             "batches of row indices to record")
        rec = RecordingBatchSampler(dl.batch_sampler, out_dir, rank=rank, grad_accum=grad_accum,
                                    start_step=start_step, epoch=epoch, flush_every=flush_every,
                                    resume_skips=resume_skips)
        kw: dict[str, Any] = {"num_workers": dl.num_workers, "collate_fn": dl.collate_fn, "pin_memory": dl.pin_memory,
                              "timeout": dl.timeout, "worker_init_fn": dl.worker_init_fn,
                              "generator": dl.generator}
        if dl.num_workers > 0:
            kw.update(prefetch_factor=dl.prefetch_factor, persistent_workers=dl.persistent_workers,
                      multiprocessing_context=dl.multiprocessing_context)
        rec._from_loader = True
        return _recording_loader_class(DataLoader)(dl.dataset, batch_sampler=rec, **kw)
    if isinstance(loader_or_sampler, torch.utils.data.Sampler) and not hasattr(loader_or_sampler, "batch_size"):
        raise UsageError("record_batches: pass a DataLoader or a batch sampler (wrap a per-index sampler in "
                         "torch.utils.data.BatchSampler)")
    return RecordingBatchSampler(loader_or_sampler, out_dir, rank=rank, grad_accum=grad_accum,
                                 start_step=start_step, epoch=epoch, flush_every=flush_every,
                                 resume_skips=resume_skips)
