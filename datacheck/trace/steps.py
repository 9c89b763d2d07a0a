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

A JSONL/CSV/TensorBoard log whose step key names no trainer (``step``, ``_step``) has no known
convention: ``--first-step`` says it, and until it does the output says the join is assumed: from 0
when the log holds step 0 (a count from 1 would put it at optimizer step -1), else from 1 (the
Hugging Face and Megatron count). A log whose records carry no step at all (Hugging Face
console dicts without a progress bar, a header or ``--steps-per-epoch``) cannot be joined:
:meth:`StepConvention.require_placed` refuses (exit 2) to name rows from it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from datacheck.model.errors import UsageError
from datacheck.trace.record import ReadStats

__all__ = ["StepConvention", "resolve_convention", "DEFAULT_FIRST_STEP", "OLMO_LEDGER_FIRST_STEP"]

#: the first step's number assumed when neither the log nor ``--first-step`` says it (Hugging Face,
#: Megatron and OLMo log the step count after the update)
DEFAULT_FIRST_STEP = 1
#: OLMo's ``data-indices`` files number steps by its ``global_step``, from 1
OLMO_LEDGER_FIRST_STEP = 1


@dataclass(frozen=True)
class StepConvention:
    """The log's number of the first optimizer step, and how that is known.

    Attributes:
        first_step: the log's number of optimizer step 0 (0 or 1, any int from ``--first-step``).
        source: why (``--first-step``, the reader's trainer, or the assumption).
        assumed: True when neither the log nor ``--first-step`` said it.
        unplaced: logs whose records carry no step number (their record ordinals are not steps),
            with what would place them; empty when every record has its step.
    """

    first_step: int
    source: str
    assumed: bool = False
    unplaced: tuple[str, ...] = ()

    def optimizer_step(self, log_step: int) -> int:
        """The 0-based optimizer step of log step ``log_step``."""
        return log_step - self.first_step

    def log_step(self, optimizer_step: int) -> int:
        return optimizer_step + self.first_step

    def describe(self, log_step: int) -> str:
        """``"log step 50 = optimizer step 49"``."""
        return f"log step {log_step} = optimizer step {self.optimizer_step(log_step)}"

    def require_placed(self) -> None:
        """Raises UsageError when a log's records carry no step number (rows cannot be named)."""
        if self.unplaced:
            raise UsageError("cannot place the log's records on optimizer steps: " + "; ".join(self.unplaced)
                             + ". No rows are named from record ordinals")

    def to_dict(self) -> dict[str, Any]:
        return {"first_step": self.first_step, "source": self.source, "assumed": self.assumed,
                "unplaced": list(self.unplaced)}


def resolve_convention(logs: Iterable[ReadStats], given: int | None) -> StepConvention:
    """The convention of the traced logs: ``given`` (``--first-step``) when set, else the one the
    readers recognised (every log that knows its trainer must agree), else the assumed
    :data:`DEFAULT_FIRST_STEP`.

    Raises:
        UsageError: the logs were written by trainers that count differently and ``given`` is None.
    """
    stats = list(logs)
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
