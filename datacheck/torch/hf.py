"""A Hugging Face ``transformers`` ``TrainerCallback``: the data identity, the recorded batch order and
BatchGuard's verdicts, inside ``Trainer.train()``.

``transformers`` is imported when this module is (``from datacheck.torch.hf import DatacheckCallback``
or the lazy ``datacheck.torch.DatacheckCallback``); ``import datacheck`` and ``import datacheck.torch``
never import it.

What the callback does:

- **Data identity** (``report=``: the gate's :class:`~datacheck.report.model.Report`, its
  ``report.json`` path, or a dict with ``index_hash`` and ``config_hash``): at ``on_train_begin`` it
  prints the line of :func:`~datacheck.model.identity.log_data_identity` (the console log) and adds
  ``{"datacheck_index_hash", "datacheck_config_hash", "step"}`` to ``state.log_history``, so every
  ``trainer_state.json`` the Trainer writes carries it and ``datacheck trace`` compares it with
  ``--data``.
- **The ledger** (``record=True``): at ``on_train_begin`` the training DataLoader's batch sampler (the
  one accelerate's ``DataLoaderShard`` iterates) is wrapped in a
  :class:`~datacheck.torch.record.RecordingBatchSampler` writing
  ``<ledger_dir or args.output_dir>/data-indices/rank<process_index>.tsv.gz``, with ``grad_accum =
  args.gradient_accumulation_steps`` and the Trainer's step numbering: epoch ``e`` starts at step
  ``e x ceil(len(loader) / grad_accum)`` (the Trainer's ``num_update_steps_per_epoch``; its last step
  takes the remainder micro-batches) when every epoch has that length, ``len(loader)`` being each
  process's own (with accelerate's ``even_batches=False`` a process with a batch fewer takes fewer steps an
  epoch: nothing joins the processes at an epoch's end, each ``global_step`` counts its own updates and
  DDP pairs the ``k``-th update of every process); what was observed decides
  first: the step a ``#state`` line of the ledger started epoch ``e`` at (a resume re-reads its
  epoch), else ``state.global_step`` at ``on_epoch_begin`` (the Trainer runs the first epoch's number
  of updates every epoch, so an epoch whose dataset grew or shrank does not start at ``e x
  ceil(its length / grad_accum)``). A micro-batch is recorded under the value ``state.global_step``
  has while the Trainer trains on it: the 0-based optimizer step; at ``on_step_end`` a step keeps the
  micro-batches trained since ``on_step_begin`` (an epoch grown past the first epoch's count takes its
  last update on the first epoch's remainder: the batches fetched after it are never trained, nor
  recorded). The Trainer zeroes the gradients only after an update (never at an epoch's start), so the
  micro-batches an epoch that shrank trains after its last update go into the next epoch's first update:
  they are recorded as that step's first micro-batches (the next epoch's ``#state`` line says
  ``"carried": k``; its own micro-batches of the step are numbered k ..; see
  :mod:`datacheck.io.ledger`). When the training ends with such micro-batches waiting (a shrunk LAST
  epoch: no next epoch's update takes them; a stop between a step's micro-batches), ``on_train_end``
  writes an ``#untrained`` line: they were run forward and backward, never part of an update, and the
  ledger does not count them as trained. Each ``#state`` line records ``trainer_epoch_batches``, the
  Trainer's ``steps_in_epoch`` (its loader's length when ``train()`` began: the most micro-batches it trains
  of any epoch), and the sampler's ``dataset_rows``. Its line is written when the
  Trainer has trained it (``on_substep_end`` / ``on_step_end``), so the batches DataLoader workers
  (``dataloader_num_workers``) and accelerate fetched ahead of a stop (``max_steps``, a guard stop,
  an interrupt) are not recorded; when the process stops without ``on_train_end`` (an exception out of
  ``Trainer.train()``: an embedding's ``IndexError``, Ctrl-C) the recorder's finalizer writes an
  ``#in_flight`` line naming the micro-batches the Trainer held then, the one it was training first
  (:attr:`datacheck.io.ledger.Ledger.in_flight`; ``trace --data`` audits them as the crash's step). The Trainer logs that step's loss at
  ``global_step`` + 1 (the count after the update), so log step ``N`` is ledger step ``N - 1``. A
  resumed ``train(resume_from_checkpoint=...)`` at ``global_step`` G re-reads epoch ``G //
  num_update_steps_per_epoch`` (``ceil(len(loader) / grad_accum)`` of its loader when ``train()`` began)
  and skips its first ``(G % num_update_steps_per_epoch) x grad_accum`` batches (accelerate's
  ``skip_first_batches``): the skipped batches are not recorded (the ``#state`` line says ``"skipped":
  k``), the batches it trains are recorded from step G on, and that ``#state`` line supersedes the earlier
  run's records from G (what the checkpoint did not hold: a micro-batch in flight at the checkpoint, whose
  gradient waited for an update, included). When the dataset changed size between epochs that arithmetic
  need not be where the run was: the ledger records what the resumed Trainer trains, rows it trains again
  or skips included (``order verify`` flags them). With
  ``ignore_data_skip=True`` the resumed Trainer trains that epoch again from its first batch at the
  restored ``global_step``: its batches are recorded from that step on (the rows trained twice are in
  the ledger twice, as trained; ``order verify`` flags them). Lines are
  written as each step completes, at ``on_save`` and at ``on_train_end`` (see
  :mod:`datacheck.torch.record`).
- **BatchGuard** (``guard=``: the :class:`~datacheck.torch.guard.BatchGuard` given to the Trainer as
  ``data_collator``, built with ``on_error="warn"`` or ``"skip"``): after each micro-batch and each
  step the callback reads the guard's new failures (its ``failures`` in this process; with
  ``dataloader_num_workers > 0`` the dumps the workers wrote to the guard's ``dump_dir``) and, per
  ``on_guard_error``, sets ``control.should_training_stop`` (``"stop"``: the Trainer ends the epoch
  loop after the current micro-batch, saves and logs as at any stop) or only warns (``"warn"``).
  accelerate's ``DataLoaderShard`` collates one batch ahead of the one being trained, so with
  ``gradient_accumulation_steps`` 1 the failure is seen at the end of the step before the bad one,
  which is then never taken; with more micro-batches per step the step holding the bad one may be
  part-trained (its optimizer update is not taken when the stop comes before its last micro-batch).
  Each failure is warned once (``RuntimeWarning``) with the batch's step and micro-batch.
- **trainer_state.json** (``save_state=True``): at ``on_train_end`` the state is written to
  ``args.output_dir/trainer_state.json`` (what ``Trainer.save_state`` writes), so a run stopped
  between checkpoints still leaves its whole log history; ``datacheck trace OUTPUT_DIR/`` reads it and
  the ledger beside it.
"""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Mapping

from datacheck.io.safejson import JsonInputError, read_json_file
from datacheck.model.errors import OptionalDependencyError, UsageError
from datacheck.model.identity import log_data_identity
from datacheck.model.torchdep import require_torch
from datacheck.torch.guard import BatchGuard
from datacheck.torch.record import ITERABLE_ADVICE, RecordingBatchSampler, flush_ledgers, iterable_dataset_name

try:
    from transformers import TrainerCallback
except ImportError:  # pragma: no cover - exercised by the missing-dependency test
    raise OptionalDependencyError('datacheck.torch.hf needs transformers: pip install "transformers>=4.45"') from None

__all__ = ["DatacheckCallback", "GUARD_ACTIONS"]

#: what the callback does on a guard failure
GUARD_ACTIONS = ("stop", "warn")


def _identity(report: Any) -> dict[str, str] | None:
    """``{"index_hash", "config_hash"}`` of a report, a report.json path or a mapping (None: none given).

    Raises:
        UsageError: a path that is not a readable report.json, or a value without both hashes.
    """
    if report is None:
        return None
    if isinstance(report, (str, Path)):
        try:
            report = read_json_file(Path(report))
        except (OSError, JsonInputError) as exc:
            raise UsageError(f"DatacheckCallback report={str(report)!r}: not a readable report.json ({exc})") from None
    get = report.get if isinstance(report, Mapping) else (lambda k: getattr(report, k, None))
    ih, ch = get("index_hash"), get("config_hash")
    if not ih or not ch:
        raise UsageError("DatacheckCallback report=: needs a datacheck report (index_hash and config_hash), got "
                         f"{type(report).__name__}")
    return {"index_hash": str(ih), "config_hash": str(ch)}


class DatacheckCallback(TrainerCallback):  # type: ignore[misc]
    """Log the data identity, record the ledger and act on BatchGuard failures (module docstring).

    Args:
        report: the gate's report (a Report, a ``report.json`` path, or a mapping with ``index_hash``
            and ``config_hash``); None: no identity logged.
        guard: the :class:`BatchGuard` passed to the Trainer as ``data_collator`` (None: no guard).
        on_guard_error: ``"stop"`` (``control.should_training_stop``) or ``"warn"``.
        record: wrap the training DataLoader's batch sampler in a recorder.
        ledger_dir: the ledger folder; None: ``args.output_dir``.
        save_state: write ``args.output_dir/trainer_state.json`` at the end of training.

    Attributes:
        recorder: the :class:`RecordingBatchSampler` of this process's training loader (None before
            ``on_train_begin``, or when the loader has no batch sampler).
        guard_failures: every guard failure the callback has seen (dicts as in ``BatchGuard.failures``).

    Raises:
        UsageError: a bad ``on_guard_error`` or ``report``.
    """

    def __init__(self, report: Any = None, *, guard: BatchGuard | None = None, on_guard_error: str = "stop",
                 record: bool = True, ledger_dir: str | Path | None = None, save_state: bool = True):
        if on_guard_error not in GUARD_ACTIONS:
            raise UsageError(f"on_guard_error must be one of {', '.join(GUARD_ACTIONS)}, got {on_guard_error!r}")
        if guard is not None and guard.on_error == "raise":
            warnings.warn("DatacheckCallback: the guard raises on a bad batch, which ends train() with an exception "
                          "before the callback can stop it; build it with on_error='warn' or 'skip'", RuntimeWarning,
                          stacklevel=2)
        self.identity = _identity(report)
        self.guard = guard
        self.on_guard_error = on_guard_error
        self.record = record
        self.ledger_dir = ledger_dir
        self.save_state = save_state
        self.recorder: RecordingBatchSampler | None = None
        self.guard_failures: list[dict[str, Any]] = []
        self._seen_local = 0
        self._seen_dumps: set[str] = set()
        self._trained_micro = 0  # micro-batches of the current step trained so far

    # -- events -------------------------------------------------------------------------------------------
    def on_train_begin(self, args: Any, state: Any, control: Any, train_dataloader: Any = None, **kw: Any) -> Any:
        if self.identity is not None:
            log_data_identity(self.identity)
            keys = {"datacheck_index_hash": self.identity["index_hash"],
                    "datacheck_config_hash": self.identity["config_hash"]}
            if not any(all(e.get(k) == v for k, v in keys.items()) for e in state.log_history if isinstance(e, dict)):
                state.log_history.append({**keys, "step": state.global_step})
        if self.record and train_dataloader is not None:
            self.recorder = self._wrap(train_dataloader, args)
            if self.recorder is not None:
                try:  # the Trainer's steps_in_epoch: every epoch trains at most this many micro-batches
                    self.recorder.trainer_epoch_batches = len(train_dataloader)
                except TypeError:
                    pass
            if self.recorder is not None and state.global_step > 0:
                # a resume: the Trainer trains from the restored global step on. With ignore_data_skip the epoch
                # it resumes is trained again from its first batch; else it skips that epoch's first
                # (global_step % num_update_steps_per_epoch) x grad_accum batches, num_update_steps_per_epoch
                # being ceil(len(loader) / grad_accum) of the loader now (transformers' _init_training_state),
                # which need not be where the run was when its dataset changed size between epochs: the
                # batches trained from there are recorded at the steps they are trained at, whatever rows
                self.recorder.first_step = int(state.global_step)
                if not getattr(args, "ignore_data_skip", False):
                    try:
                        per_epoch = max(-(-len(train_dataloader) // self.recorder.grad_accum), 1)
                    except TypeError:
                        per_epoch = None
                    if per_epoch is not None:
                        self.recorder.first_skip = (int(state.global_step) % per_epoch) * self.recorder.grad_accum
        return control

    def on_substep_end(self, args: Any, state: Any, control: Any, **kw: Any) -> Any:
        # a micro-batch of step global_step (not its last) is trained
        self._trained_micro += 1
        if self.recorder is not None:
            self.recorder.commit_through(int(state.global_step), self._trained_micro)
        return self._check_guard(state, control)

    def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> Any:
        self._trained_micro = 0
        return self._check_guard(state, control)

    def on_epoch_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> Any:
        # the epoch's first step is the Trainer's own count, whatever the epochs before held
        if self.recorder is not None:
            self.recorder.epoch_start = int(state.global_step)
        return control

    def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> Any:
        # the optimizer step is taken (global_step already counts it) on the micro-batches trained since
        # on_step_begin: this one and those on_substep_end counted; the step's later batches were not trained
        trained, self._trained_micro = self._trained_micro + 1, 0
        if self.recorder is not None:
            self.recorder.step_taken(int(state.global_step) - 1, trained)
        return self._check_guard(state, control)

    def on_save(self, args: Any, state: Any, control: Any, **kw: Any) -> Any:
        flush_ledgers()
        return control

    def on_train_end(self, args: Any, state: Any, control: Any, **kw: Any) -> Any:
        if self.recorder is not None:  # micro-batches trained since the last update never get one
            self.recorder.training_ended()
        flush_ledgers()
        if self.save_state and getattr(state, "is_world_process_zero", True):
            out = Path(args.output_dir)
            out.mkdir(parents=True, exist_ok=True)
            state.save_to_json(str(out / "trainer_state.json"))
        return control

    # -- helpers ------------------------------------------------------------------------------------------
    def _wrap(self, loader: Any, args: Any) -> RecordingBatchSampler | None:
        dl = getattr(loader, "base_dataloader", loader)  # accelerate's DataLoaderShard wraps a DataLoader
        inner = getattr(dl, "batch_sampler", None)
        if isinstance(inner, RecordingBatchSampler):
            return inner
        name = iterable_dataset_name(require_torch("datacheck.torch.hf.DatacheckCallback"), loader)
        if name is not None or inner is None:  # no row indices: training goes on, unrecorded
            warnings.warn("DatacheckCallback: the training DataLoader "
                          + (f"iterates an IterableDataset ({name}): {ITERABLE_ADVICE}; the ledger is not written"
                             if name is not None else "has no batch sampler: no row indices to record"),
                          RuntimeWarning, stacklevel=2)
            return None
        out = Path(self.ledger_dir if self.ledger_dir is not None else args.output_dir)
        rec = RecordingBatchSampler(inner, out, rank=int(getattr(args, "process_index", 0)),
                                    grad_accum=int(args.gradient_accumulation_steps), epoch_aligned=True, hold=True)
        # DataLoader refuses a new batch_sampler after __init__; its iterators read the attribute anew
        # each epoch (_index_sampler), so the recorder is what they iterate from here on
        object.__setattr__(dl, "batch_sampler", rec)
        return rec

    def _new_failures(self) -> list[dict[str, Any]]:
        g = self.guard
        if g is None:
            return []
        new = list(g.failures[self._seen_local:])
        self._seen_local = len(g.failures)
        for f in new:
            if f.get("dump"):
                self._seen_dumps.add(Path(f["dump"]).name)
        if g.dump_dir is not None and g.dump_dir.is_dir():  # failures of DataLoader workers
            for p in sorted(g.dump_dir.glob("batch-*.pt")):
                if p.name in self._seen_dumps:
                    continue
                self._seen_dumps.add(p.name)
                try:
                    meta = g.torch.load(p, weights_only=True)["meta"]
                except Exception:  # noqa: BLE001 - an unreadable dump is still a failure, named by its file
                    meta = {"where": p.name, "failures": {}}
                new.append({"batch": meta.get("batch"), "where": meta.get("where", p.name), "tag": meta.get("tag"),
                            "worker": meta.get("worker"), "checks": meta.get("failures", {}), "dump": str(p)})
        return new

    def _check_guard(self, state: Any, control: Any) -> Any:
        new = self._new_failures()
        if not new:
            return control
        self.guard_failures.extend(new)
        stop = self.on_guard_error == "stop"
        for f in new:
            checks = ", ".join(sorted(f.get("checks") or {})) or "a check"
            warnings.warn(f"datacheck: {f['where']} fails {checks}"
                          + (f" (saved to {f['dump']})" if f.get("dump") else "")
                          + (f"; stopping training at global step {state.global_step}" if stop else ""),
                          RuntimeWarning, stacklevel=2)
        if stop:
            control.should_training_stop = True
        return control

