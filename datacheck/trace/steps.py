"""How a log numbers its steps, and the join of a log step to the 0-based optimizer step.

The batch plan (:mod:`datacheck.execute.plan`) and datacheck's ledger (``record_batches``) number
optimizer steps from 0: step ``k`` is the ``k``-th update. Trainers log other numbers:

==================================== ======== =====================================================
trainer (what the reader sees)       first    why
==================================== ======== =====================================================
Hugging Face (``trainer_state.json``,   1     ``state.global_step`` is incremented after the update
console dicts, ``global_step`` key)             and logged after it (``Trainer._inner_training_loop``)
Megatron-LM ``iteration``               1     ``iteration += 1`` after ``train_step``, then logged
mmengine ``Epoch(train) [e][i/n]``      1     ``runner.iter + 1``
mlx-lm ``Iter N:``                      1     ``for it in range(1, iters + 1)``
Lightning (``trainer/global_step``,     0     ``global_step`` counts the updates done before this one
  ``lr-<Optimizer>`` keys, ``*_step``,          (``_batches_that_stepped``, incremented after the log
  ``version_N/metrics.csv``, a                  call); logged when ``(global_step + 1) %
  ``version_N`` TensorBoard folder              log_every_n_steps == 0``: steps 49, 99, ... at 50;
  with ``hparams.yaml``; ``epoch`` logged)      with accumulation, once per optimizer step
nanoGPT ``iter N:``                     0     ``iter_num`` counts the updates done before this one
llm.c ``s:N trl:X``                     0     ``step`` of ``for (step = 0; ...)``
==================================== ======== =====================================================

A loop may log every micro-batch with its own counter (``accelerator.log(..., step=k)`` for the
``k``-th batch of ``enumerate(loader)`` under ``gradient_accumulation_steps``): its step counts
micro-batches, ``grad_accum`` per optimizer step. No log says so; ``--step-unit micro-batch`` does
(:attr:`StepConvention.micro_batches`), and until it does, with ``[batch] grad_accum`` > 1 and an
assumed count, the output says that each log step is taken as one optimizer step.

A JSONL/CSV/TensorBoard log whose step key names no trainer (``step``, ``_step``) has no known
convention: ``--first-step`` says it, and until it does the output says the join is assumed: from 0
when the log holds step 0 (a count from 1 would put it at optimizer step -1), else from 1 (the
Hugging Face and Megatron count). A log whose records carry no step at all (Hugging Face
console dicts without a progress bar, a header or ``--steps-per-epoch``) cannot be joined:
:meth:`StepConvention.require_placed` refuses (exit 2) to name rows from it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Iterable

from datacheck.model.errors import UsageError
from datacheck.trace.record import EPOCH_STEP_NOTE, ReadStats

__all__ = ["StepConvention", "resolve_convention", "DEFAULT_FIRST_STEP", "OLMO_LEDGER_FIRST_STEP", "STEP_UNITS",
           "RECORD", "as_records"]

#: the first step's number assumed when neither the log nor ``--first-step`` says it (Hugging Face,
#: Megatron and OLMo log the step count after the update)
DEFAULT_FIRST_STEP = 1
#: OLMo's ``data-indices`` files number steps by its ``global_step``, from 1
OLMO_LEDGER_FIRST_STEP = 1
#: what a log's step may count (``--step-unit``)
STEP_UNITS = ("optimizer", "micro-batch")
#: the word for a position in a log whose records carry no step number (numbered from 1 in every
#: reader): the ``step_unit`` of its findings, events and verdict lines
RECORD = "record"

#: "step N", "steps N..M", "good step": a step number (or the last good one) in a message
_STEP_WORD = re.compile(r"\b(good )?step(s?)\b(?=\s+(?:\d|before it))")


def as_records(text: str) -> str:
    """``text`` with each step number said as a record number (``step 4`` -> ``record 4``, ``steps 2..9``
    -> ``records 2..9``, ``no good step before it`` -> ``no good record before it``), for a log whose
    records carry no step number: their numbers are ordinals, not steps. A step without a number
    ("17 optimizer step(s) skipped", "every later step") keeps its word."""
    return _STEP_WORD.sub(lambda m: f"{m.group(1) or ''}{RECORD}{m.group(2)}", text)


@dataclass(frozen=True)
class StepConvention:
    """The log's number of the first optimizer step, and how that is known.

    Attributes:
        first_step: the log's number of optimizer step 0 (0 or 1, any int from ``--first-step``).
        source: why (``--first-step``, the reader's trainer, or the assumption).
        assumed: True when neither the log nor ``--first-step`` said it.
        unplaced: logs whose records carry no step number (their record ordinals are not steps),
            with what would place them; empty when every record has its step.
        micro_batches: log steps per optimizer step: 1 (the log counts optimizer steps), or the
            run's ``grad_accum`` when the log counts micro-batches (``--step-unit micro-batch``).
        epoch_micro_batches: with ``micro_batches`` > 1, the micro-batches of one epoch per rank when
            they are not a multiple of ``micro_batches`` (the epoch's last optimizer step holds fewer:
            accelerate and the Trainer step at the end of the loader), else None. The log's count
            runs on across epochs: the epoch's micro-batches, not ``micro_batches``, start the next.
            Every epoch of the simulated plan has as many (torch's samplers and TokenBudgetBatchSampler
            deal a count that does not depend on the epoch's shuffle: :mod:`datacheck.model.order`).
        epoch_counts: with ``micro_batches`` > 1, the micro-batches per rank of epochs 0, 1, ... when
            they differ from epoch to epoch and some is not a multiple of ``micro_batches`` (a ledger
            of a loader whose length changes per epoch records each: ``#state`` ``batches``); epochs
            after the last listed are taken as long as it. Empty: :attr:`epoch_micro_batches` rules.
    """

    first_step: int
    source: str
    assumed: bool = False
    unplaced: tuple[str, ...] = ()
    micro_batches: int = 1
    epoch_micro_batches: int | None = None
    epoch_counts: tuple[int, ...] = ()

    def _epochs(self) -> tuple[int, ...]:
        """Micro-batches per rank of epochs 0, 1, ... (the last repeats); empty: no epoch boundary."""
        return self.epoch_counts or ((self.epoch_micro_batches,) if self.epoch_micro_batches else ())

    def _split(self, log_step: int) -> tuple[int, int]:
        """(optimizer steps of the epochs before, micro-batch within the epoch) of a micro-batch count."""
        n = log_step - self.first_step
        counts = self._epochs()
        if not counts:
            return 0, n
        before = 0
        for m in counts[:-1]:
            if n < m:
                return before, n
            before, n = before + -(-m // self.micro_batches), n - m
        m = counts[-1]
        e, j = divmod(n, m)
        return before + e * -(-m // self.micro_batches), j

    def optimizer_step(self, log_step: int) -> int:
        """The 0-based optimizer step of log step ``log_step``: ``(log_step - first_step) //
        micro_batches``; with :attr:`epoch_micro_batches` ``M``, epoch ``n // M``'s steps
        (``ceil(M / micro_batches)`` each) before, then ``(n % M) // micro_batches``; with
        :attr:`epoch_counts`, the epochs before ``n``'s each by its own count."""
        before, j = self._split(log_step)
        return before + j // self.micro_batches

    def micro_batch(self, log_step: int) -> int | None:
        """The micro-batch (0 .. ``micro_batches - 1``) of its optimizer step that log step ``log_step``
        counts, or None when the log counts optimizer steps."""
        return self._split(log_step)[1] % self.micro_batches if self.micro_batches > 1 else None

    def log_step(self, optimizer_step: int) -> int:
        """The log step of ``optimizer_step`` (its first micro-batch's when the log counts micro-batches)."""
        counts, k, base = self._epochs(), optimizer_step, self.first_step
        if not counts:
            return k * self.micro_batches + base
        for m in counts[:-1]:
            steps = -(-m // self.micro_batches)
            if k < steps:
                return base + k * self.micro_batches
            k, base = k - steps, base + m
        m = counts[-1]
        e, i = divmod(k, -(-m // self.micro_batches))
        return base + e * m + i * self.micro_batches

    def describe(self, log_step: int) -> str:
        """``"log step 50 = optimizer step 49"``; ``"log step 11 = optimizer step 5, micro-batch 1 of 2"``."""
        mb = self.micro_batch(log_step)
        return f"log step {log_step} = optimizer step {self.optimizer_step(log_step)}" + (
            f", micro-batch {mb} of {self.micro_batches}" if mb is not None else "")

    def formula(self) -> str:
        """``"optimizer step = log step - 1"``, or with micro-batches ``"optimizer step = (log step - 0)
        // 2, micro-batch = the remainder"``."""
        if self.micro_batches == 1:
            return f"optimizer step = log step - {self.first_step}"
        if self.epoch_counts:
            ga, cs = self.micro_batches, self.epoch_counts
            return (f"n = log step - {self.first_step}, counted across epochs of {', '.join(map(str, cs))} "
                    f"micro-batches (epochs 0..{len(cs) - 1}; later ones as the last), "
                    f"{', '.join(str(-(-c // ga)) for c in cs)} optimizer steps: optimizer step = the steps of "
                    f"the epochs before n's + (n's micro-batch in its epoch) // {ga}, micro-batch = the remainder")
        m = self.epoch_micro_batches
        if m:
            return (f"n = log step - {self.first_step}: epoch n // {m} ({m} micro-batches, "
                    f"{-(-m // self.micro_batches)} optimizer steps each, the last holding {m % self.micro_batches}"
                    f"), optimizer step in it = (n % {m}) // {self.micro_batches}, micro-batch = the remainder")
        return (f"optimizer step = (log step - {self.first_step}) // {self.micro_batches}, micro-batch = the "
                "remainder")

    def require_placed(self) -> None:
        """Raises UsageError when a log's records carry no step number (rows cannot be named)."""
        if self.unplaced:
            raise UsageError("cannot place the log's records on optimizer steps: " + "; ".join(self.unplaced)
                             + ". No rows are named from record ordinals")

    def to_dict(self) -> dict[str, Any]:
        """``first_step``, ``source``, ``assumed``, ``unplaced``, and ``micro_batches`` only when the log
        counts micro-batches (> 1), ``epoch_micro_batches`` and ``epoch_counts`` only when set."""
        return {"first_step": self.first_step, "source": self.source, "assumed": self.assumed,
                "unplaced": list(self.unplaced),
                **({"micro_batches": self.micro_batches} if self.micro_batches > 1 else {}),
                **({"epoch_micro_batches": self.epoch_micro_batches} if self.epoch_micro_batches else {}),
                **({"epoch_counts": list(self.epoch_counts)} if self.epoch_counts else {})}


def resolve_convention(logs: Iterable[ReadStats], given: int | None, *, micro_batches: int = 1,
                       grad_accum: int = 1) -> StepConvention:
    """The convention of the traced logs: ``given`` (``--first-step``) when set, else the one the
    readers recognised (every log that knows its trainer must agree), else the assumed
    :data:`DEFAULT_FIRST_STEP`. ``micro_batches``: log steps per optimizer step (``--step-unit
    micro-batch``: the run's ``grad_accum``; 1: optimizer steps). ``grad_accum``: the run's ``[batch]
    grad_accum``; when it is > 1, the count is assumed and the log is taken to count optimizer steps,
    the source says so (a loop that logs every micro-batch would be joined ``grad_accum`` times too late).

    Raises:
        UsageError: the logs were written by trainers that count differently and ``given`` is None.
    """
    conv = _resolve(logs, given)
    if micro_batches > 1:
        return replace(conv, micro_batches=micro_batches, source=f"{conv.source}; the log counts micro-batches, "
                       f"{micro_batches} per optimizer step (--step-unit micro-batch)")
    if conv.assumed and grad_accum > 1:
        return replace(conv, source=f"{conv.source}; each log step is taken as one optimizer step of [batch] "
                       f"grad_accum {grad_accum} micro-batches (a loop that logs every micro-batch with its own "
                       "counter: --step-unit micro-batch)")
    return conv


def _resolve(logs: Iterable[ReadStats], given: int | None) -> StepConvention:
    stats = list(logs)
    conv = _resolve_count(stats, given)
    epochs = sorted(st.source for st in stats if EPOCH_STEP_NOTE in st.notes)
    if epochs:  # its numbers are epochs: one optimizer step each only for a loop that steps once per epoch
        conv = replace(conv, source=f"{conv.source}; {epochs[0]}'s step number is the epoch it logs (no step "
                       "given): each epoch is taken as one optimizer step, true only for a loop that steps once "
                       "per epoch (full-batch training); with more steps per epoch the rows named are not that "
                       "epoch's")
    return conv


def _resolve_count(stats: list[ReadStats], given: int | None) -> StepConvention:
    unplaced = tuple(f"{st.source}: {st.unplaced}" for st in stats if st.unplaced)
    known = {(st.first_step, st.first_step_why) for st in stats if st.first_step is not None}
    if given is not None:
        differs = sorted({why for first, why in known if first != given and why})
        src = "--first-step" + (f" (the reader recognised another count: {'; '.join(differs)})" if differs else "")
        return StepConvention(given, src, False, unplaced)
    firsts = {first for first, _ in known}
    if len(firsts) > 1:
        raise UsageError("the logs count steps differently (" + "; ".join(f"{w}: from {f}" for f, w in sorted(known))
                         + "); trace them one at a time, or say the count with --first-step K")
    if firsts:
        first = firsts.pop()
        return StepConvention(first, "; ".join(sorted(w for f, w in known if w)), False, unplaced)
    zero = sorted(st.source for st in stats if st.min_step == 0 and not st.unplaced)
    if zero:  # a log holding step 0 cannot count from 1: its step 0 would be optimizer step -1
        return StepConvention(0, f"assumed: the log names no trainer whose count is known, but {zero[0]} logs step 0, "
                              "so it counts from 0 (the loop's counter before the update, as nanoGPT and Lightning "
                              "count; --first-step K says otherwise)", True, unplaced)
    return StepConvention(DEFAULT_FIRST_STEP, f"assumed: the log names no trainer whose count is known; from "
                          f"{DEFAULT_FIRST_STEP}, as Hugging Face and Megatron count (--first-step 0 for a loop that "
                          "logs the step before counting it)", True, unplaced)
