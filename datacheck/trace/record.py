"""The one per-step record every log reader yields, and the reader's bookkeeping.

A training log, whatever its format, becomes a stream of :class:`StepRecord` (one logged optimizer
step of one rank) plus :class:`ReadStats` (lines read, lines that did not parse, with examples).
Readers stream: they hold one line (or one TensorBoard event) at a time, never the whole log.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

__all__ = ["StepRecord", "ReadStats", "BAD_LINE_EXAMPLES", "is_finite"]

#: Unparsed lines kept as examples per log (the count is always exact).
BAD_LINE_EXAMPLES = 5


def is_finite(x: float | None) -> bool:
    """True when ``x`` is a finite float; None (not logged) is not finite and not non-finite: callers test None first."""
    return x is not None and math.isfinite(x)


@dataclass(slots=True)
class StepRecord:
    """One logged training step (or logging interval) of one rank. Readers build it and nothing
    changes it afterwards (not ``frozen``: a frozen dataclass's ``__init__`` costs 5x more, measured
    8.7 against 1.6 us per record, and a log has millions of them).

    Attributes:
        step: the optimizer step (iteration) number as the log gives it (int; Megatron's
            ``iteration``, Hugging Face's ``step``, nanoGPT's ``iter``, a TensorBoard event's step).
        source: the log file (as given on the command line).
        line: 1-based line of the record in ``source`` (None for TensorBoard / trainer_state.json entries).
        rank: the data-parallel rank (from a ``rank`` field, a DeepSpeed ``Rank R`` or a ``rankR`` file
            name), None when the log does not say (then one log = one rank).
        epoch: the epoch (float: Hugging Face logs fractional epochs), None when not logged.
        loss: training loss (float, may be NaN/inf), None when the line has no loss (e.g. Megatron's
            ``lm loss`` is absent when every iteration of the interval was skipped).
        grad_norm: global gradient norm (float), None when not logged.
        lr: learning rate (float), None when not logged.
        loss_scale: fp16 dynamic loss scale AFTER the step (float), None when not logged.
        skipped: optimizer steps skipped in the interval ending at ``step`` (int; Megatron's
            ``number of skipped iterations``; 1 for a DeepSpeed/apex overflow line), None when not logged.
        nan_steps: Megatron's ``number of nan iterations`` of the interval, None elsewhere.
        tokens: tokens (or consumed samples, see ``tokens_unit``) so far, None when not logged.
        wall_time: seconds: the event's wall time (TensorBoard), or the time per step/iteration
            the log reports, None when not logged.
        overflow: True for a loss-scale back-off event (DeepSpeed ``OVERFLOW!``, apex
            ``Gradient overflow``): ``loss_scale`` is the new scale and ``prev_scale`` the attempted one.
        prev_scale: the attempted (previous) loss scale of an overflow event.
        split: ``"train"``, or ``"eval"`` for a validation line (kept for the timeline, not fed to the rules).
        step_inferred: True when the log line carries no step number (DeepSpeed/apex overflow
            lines): ``step`` is then the previous record's step + 1; for a record that could not be
            placed at all (see :attr:`ReadStats.unplaced`) ``step`` is the record's ordinal.
        stated: the log line that states a bad value of this record (a warning such as ``Bad grad_norm
            detected (grad_norm=nan)``), None when the values come from the metrics line alone.
        non_finite_frac: the fraction (0..1) of the step's losses that were non-finite and left out of
            the logged loss (TRL's ``frac_non_finite_loss``), None when not logged.
        eval_train_loss: on an eval record, the train loss the eval line reports beside the eval loss
            (nanoGPT's ``step N: train loss A, val loss B``: ``estimate_loss`` over ``eval_iters``
            train batches at step N), None elsewhere.
        global_batch: the global batch of the iteration (Megatron's ``global batch size``: micro-batch x
            data-parallel x its micro-batches, which a ``--rampup-batch-size`` run grows), None when not
            logged.
    """

    step: int
    source: str
    line: int | None = None
    rank: int | None = None
    epoch: float | None = None
    loss: float | None = None
    grad_norm: float | None = None
    lr: float | None = None
    loss_scale: float | None = None
    skipped: int | None = None
    nan_steps: int | None = None
    tokens: float | None = None
    wall_time: float | None = None
    overflow: bool = False
    prev_scale: float | None = None
    split: str = "train"
    step_inferred: bool = False
    stated: str | None = None
    non_finite_frac: float | None = None
    eval_train_loss: float | None = None
    global_batch: int | None = None

    def where(self) -> str:
        """``file:line`` (or the file alone) for messages."""
        return f"{self.source}:{self.line}" if self.line is not None else self.source

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"step": self.step, "source": self.source}
        for k in ("line", "rank", "epoch", "loss", "grad_norm", "lr", "loss_scale", "skipped", "nan_steps",
                  "tokens", "wall_time", "prev_scale", "non_finite_frac", "eval_train_loss"):
            v = getattr(self, k)
            if v is not None:
                d[k] = v if not isinstance(v, float) or math.isfinite(v) else str(v)
        if self.overflow:
            d["overflow"] = True
        if self.split != "train":
            d["split"] = self.split
        if self.step_inferred:
            d["step_inferred"] = True
        if self.stated is not None:
            d["stated"] = self.stated
        return d


#: the note (``ReadStats.notes``) of a log whose only step number is its epoch (``epoch: N loss: X``,
#: a loop that logs once per epoch): each epoch is taken as one optimizer step
EPOCH_STEP_NOTE = "step_is_epoch"


@dataclass
class ReadStats:
    """What a reader saw in one log file.

    Attributes:
        source: the file.
        format: the format it was read as (``megatron``, ``hf_state``, ``jsonl``, ...; ``text`` for the
            line-by-line reader, whose per-line formats are counted in ``line_formats``).
        lines: lines (or events / entries) read.
        records: step records produced.
        bad_lines: lines that look like a metrics line (they hold a loss/step-like key) but do not parse.
        bad_examples: up to :data:`BAD_LINE_EXAMPLES` of them as ``(line, text)`` (text cut to 200 chars).
        line_formats: per-line format -> records (the text reader: mixed formats are counted, not refused).
        notes: facts about the log a finding needs (e.g. "hf_nan_filter").
        identity: ``(index_hash, config_hash)`` of the data the run trained on, when the log holds the
            line :func:`datacheck.model.identity.log_data_identity` prints.
        stopped: why and where the read stopped before the end of the log (a ``trainer_state.json``
            cut mid-write, nesting over the bound), None when it was read to the end; the records read
            before it are traced.
        first_step: the log's number of the first optimizer step when the reader recognised the
            trainer (:mod:`datacheck.trace.steps`), else None.
        first_step_why: the trainer and its rule (for the output).
        unplaced: why the records carry no step number and what would give it (Hugging Face console
            dicts without a progress bar, header or ``--steps-per-epoch``), None when every record has
            its step.
        min_step: the smallest step of the log's training records (set by the trace's read), None
            before any; a log holding step 0 counts optimizer steps from 0
            (:func:`datacheck.trace.steps.resolve_convention`).
        last_step: the step of the log's last training record (set by the trace's read; where the log
            ends: a run that stopped with an error stopped after it), None before any.
        interval: the last rise of the step between two training records read (the logging interval
            where the log ends; set by the trace's read), None before two.
        crash: the Python traceback a console log ends with (:mod:`datacheck.trace.readers.crash`: a
            complete one no training record of its rank followed; the text reader's formats only):
            ``{"line", "traceback_line", "exception", "message", "text", "rank"}``, None when none.
        epoch_clash: why a steps-per-epoch from outside the log (``--steps-per-epoch``, the
            ``[batch]`` plan) does not place this log's records (it put two training records on one
            step), None when it does or was not used; the trace then reads the log again without it
            (the records unplaced, this the reason).
        launches: the launch banners read so far (a trainer's start-of-training print: Megatron's
            arguments block, the Hugging Face Trainer's ``***** Running training *****``), counted as
            the log is read; 0 for a log that prints none (JSONL metrics, nanoGPT). A run restarted from
            scratch into a log that prints them is one after a new banner
            (:func:`datacheck.trace.run.trace_logs`).
    """

    source: str
    format: str
    lines: int = 0
    records: int = 0
    bad_lines: int = 0
    bad_examples: list[tuple[int, str]] = field(default_factory=list)
    line_formats: dict[str, int] = field(default_factory=dict)
    notes: set[str] = field(default_factory=set)
    identity: tuple[str, str] | None = None
    stopped: str | None = None
    first_step: int | None = None
    first_step_why: str | None = None
    unplaced: str | None = None
    min_step: int | None = None
    last_step: int | None = None
    interval: int | None = None
    crash: dict[str, Any] | None = None
    epoch_clash: str | None = None
    dataset_lines: Any = None
    launches: int = 0

    def crash_text(self) -> str | None:
        """The crash in words: ``"console.log line 57 (rank 1): IndexError: index out of range in self
        (a Python traceback from line 40)"``; None when the log ends in none (:attr:`crash`)."""
        c = self.crash
        if c is None:
            return None
        rank = f" (rank {c['rank']})" if c.get("rank") is not None else ""
        return f"{self.source} line {c['line']}{rank}: {c['text']} (a Python traceback from line {c['traceback_line']})"

    def knows(self, first: int, why: str) -> None:
        """Record the trainer's step count (the first reader line that names it wins)."""
        if self.first_step is None:
            self.first_step, self.first_step_why = first, why

    def bad(self, line: int, text: str) -> None:
        self.bad_lines += 1
        if len(self.bad_examples) < BAD_LINE_EXAMPLES:
            self.bad_examples.append((line, text.strip()[:200]))

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "format": self.format, "lines": self.lines, "records": self.records,
                "bad_lines": self.bad_lines,
                "bad_examples": [{"line": n, "text": t} for n, t in self.bad_examples],
                "line_formats": dict(sorted(self.line_formats.items())), "notes": sorted(self.notes),
                "identity": None if self.identity is None else
                {"index_hash": self.identity[0], "config_hash": self.identity[1]}, "stopped": self.stopped,
                "crash": self.crash,
                "first_step": self.first_step, "first_step_why": self.first_step_why, "unplaced": self.unplaced}
