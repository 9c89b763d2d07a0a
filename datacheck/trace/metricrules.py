"""The ``log.*`` checks of the metric itself (CHECKS.md "the metric itself"): training may be fine,
the logged number is wrong or missing. Registered into :data:`datacheck.trace.rules.LOG_RULES`.

Each rule keeps O(1) state per stream, except :class:`SmoothedLoss`, which keeps the first
:data:`SMOOTH_POINTS` finite losses of each stream.
"""
from __future__ import annotations

import math
from typing import Any

from datacheck.model.findings import Finding
from datacheck.trace.record import StepRecord
from datacheck.trace.rules import (
    ZERO_RUN,
    Rule,
    Stream,
    TraceOptions,
    ZeroTail,
    _details,
    _finding,
    _g,
    hides_non_finite,
    log_rule,
    stream_name,
)

__all__ = ["ZERO_RUN", "SMOOTH_POINTS", "SMOOTH_AUTOCORR", "LR_MATCH"]

#: finite losses per stream the smoothing test reads
SMOOTH_POINTS = 4096
#: the lag-1 autocorrelation of the loss's step-to-step differences above which the loss is a running
#: average: a per-step (or per-interval mean) loss is noise around a trend, whose differences
#: correlate at about -0.5; an exponential moving average with beta b gives about +b
SMOOTH_AUTOCORR = 0.3
#: the logged lr peak step within this fraction of warmup / grad_accum (and not of warmup) means per micro-batch
LR_MATCH = 0.2


@log_rule("log.no_loss")
class NoLoss(Rule):
    """No training record carries a loss (finite or not): counters, learning rates or loss scales only
    (Megatron logs no ``lm loss`` when every iteration of the interval was skipped, and prints
    ``loss scale -1`` when none is used). One run-level finding naming what the records do carry."""

    def __init__(self, opts: TraceOptions):
        super().__init__(opts)
        self.records = 0
        self.with_loss = 0
        self.carry: dict[str, int] = {}
        self.skipped_all = 0
        self.first: StepRecord | None = None

    def feed(self, rec: StepRecord, s: Stream) -> None:
        self.records += 1
        if rec.loss is not None:
            self.with_loss += 1
            return
        if self.first is None:
            self.first = rec
        for k in ("lr", "grad_norm", "loss_scale", "skipped", "tokens"):
            if getattr(rec, k) is not None:
                self.carry[k] = self.carry.get(k, 0) + 1
        if rec.skipped and rec.loss is None:
            self.skipped_all += 1

    def finish(self, streams: dict[Any, Stream]) -> list[Finding]:
        if self.records == 0 or self.with_loss:
            return []
        carry = ", ".join(f"{k.replace('_', ' ')} on {v}" for k, v in sorted(self.carry.items())) or "no metric"
        why = (f"; {self.skipped_all} of them report skipped iterations (every step of those intervals was "
               "skipped: no update, so no loss)" if self.skipped_all else "")
        msg = (f"none of the {self.records} training record(s) carries a loss ({carry}){why}: nothing was "
               "measured; the loss field is missing from the log or its name is not recognised (--regex)")
        first = self.first
        d = {"step": None, "records": self.records, "fields": dict(sorted(self.carry.items())),
             "skipped_records": self.skipped_all,
             "evidence": [] if first is None else [{"where": first.where(), "step": first.step,
                                                    **{k: getattr(first, k) for k in ("lr", "loss_scale", "skipped")
                                                       if getattr(first, k) is not None}}]}
        return [_finding(self.id, msg, self.records, d)]


@log_rule("log.hidden_non_finite")
class HiddenNonFinite(Rule):
    """A non-finite loss the logger hid. Hugging Face's ``logging_nan_inf_filter`` (on by default)
    logs a NaN step's loss as the running mean of the interval, which is exactly 0.0 once the interval
    holds nothing else: a loss of exactly 0.0 beside a grad norm of 0.0 or a non-finite one on the same
    record, or (with the filter noted: a ``trainer_state.json``) a run of :data:`ZERO_RUN` or more
    exact-0.0 losses to the end of the log after a positive one. TRL's ``frac_non_finite_loss``
    (:attr:`~datacheck.trace.record.StepRecord.non_finite_frac`) above 0 (or NaN) is the same event,
    stated by the logger: that share of the step's losses was dropped from the logged mean. The first
    such record per stream.

    The filter's "running mean" is the mean of the steps of the current logging interval only (the
    Trainer adds ``tr_loss / (1 + steps logged in the interval)`` for a non-finite step and resets
    ``tr_loss`` at every log: ``transformers.Trainer``'s training loop and ``_maybe_log_save_evaluate``),
    never of earlier logged losses. With ``logging_steps=1`` that interval holds nothing else, so the
    hidden step logs exactly 0.0 (caught above); with ``logging_steps=N>1`` it logs a blend of the
    interval's finite steps that no rule can tell from a real value, and the NaN shows as exact
    0.0 losses from the next fully non-finite interval on (the zero run above). A loss equal to the
    mean of the earlier logged losses is therefore not a sign of the filter and is not tested for."""

    def __init__(self, opts: TraceOptions):
        super().__init__(opts)
        self.first: dict[Any, tuple[Stream, dict[str, Any]]] = {}
        self.zeros: dict[Any, tuple[int, dict[str, Any] | None]] = {}
        self.positive: set[Any] = set()
        self.streams: dict[Any, Stream] = {}

    def feed(self, rec: StepRecord, s: Stream) -> None:
        frac = rec.non_finite_frac
        if frac is not None and s.key not in self.first and (frac > 0 or math.isnan(frac)):
            self.streams[s.key] = s
            d = _details(s, rec, loss=rec.loss, non_finite_frac=frac,
                         evidence=[{"where": rec.where(), "step": rec.step, "frac_non_finite_loss": frac,
                                    "loss": rec.loss}])
            d["reason"] = (f"frac_non_finite_loss {frac:g} (that share of the step's losses was non-finite and left "
                           f"out of the logged loss {_g(rec.loss)})")
            self.first[s.key] = (s, d)
        loss = rec.loss
        if loss is None:
            return
        self.streams[s.key] = s
        if loss != 0.0:
            if math.isfinite(loss) and loss > 0:
                self.positive.add(s.key)
            self.zeros.pop(s.key, None)
            return
        g = rec.grad_norm
        n, d0 = self.zeros.get(s.key, (0, None))
        d = _details(s, rec, loss=0.0, grad_norm=g, evidence=[{"where": rec.where(), "step": rec.step, "loss": 0.0,
                                                               "grad_norm": g}])
        self.zeros[s.key] = (n + 1, d0 if d0 is not None else (d if s.key in self.positive else None))
        if s.key not in self.first and hides_non_finite(loss, g):
            d["reason"] = f"loss exactly 0.0 with grad norm {g}"
            self.first[s.key] = (s, d)

    def finish(self, streams: dict[Any, Stream]) -> list[Finding]:
        if "hf_nan_filter" in self.opts.notes:
            for key, (n, d) in self.zeros.items():
                if key not in self.first and n >= ZERO_RUN and d is not None:
                    d["reason"] = f"the loss is exactly 0.0 on the last {n} records after a positive loss"
                    self.first[key] = (self.streams[key], d)
        out = []
        for key, (s, d) in self.first.items():
            good = "no good step before it" if d["last_good_step"] is None else f"last good step {d['last_good_step']}"
            if "non_finite_frac" in d:
                msg = (f"{s.name}: {d['reason']} at step {d['step']} ({d['where']}): a non-finite loss the logged mean "
                       f"hides (TRL); the step's batch holds rows whose loss is NaN or inf; {good}")
            else:
                msg = (f"{s.name}: {d['reason']} at step {d['step']} ({d['where']}): a non-finite loss hidden by the "
                       "logger (Hugging Face's logging_nan_inf_filter, on by default, logs a NaN step's loss as the "
                       "interval's running mean, 0.0 when nothing else is in it); rerun with logging_nan_inf_filter="
                       f"False to see it; {good}")
            out.append(_finding(self.id, msg, 1, d))
        return out


@log_rule("log.smoothed_loss")
class SmoothedLoss(Rule):
    """The logged loss is a running average, not a per-step (or per-interval mean) value: over the
    first :data:`SMOOTH_POINTS` finite losses (at least 50) of a stream, the lag-1 autocorrelation of
    the step-to-step differences is above :data:`SMOOTH_AUTOCORR`, and the differences change sign
    (a noiseless synthetic curve, all differences of one sign, is not called smoothed). A 0.0 loss
    that stands for a hidden non-finite one (:func:`~datacheck.trace.rules.hides_non_finite`, and the
    trailing run :class:`~datacheck.trace.rules.ZeroTail` names) is no finite value and is left out."""

    def __init__(self, opts: TraceOptions):
        super().__init__(opts)
        self.vals: dict[Any, list[float]] = {}
        self.tails: dict[Any, ZeroTail] = {}

    def feed(self, rec: StepRecord, s: Stream) -> None:
        tail = self.tails.get(s.key)
        if tail is None:
            tail = self.tails[s.key] = ZeroTail()
        tail.feed(rec)
        x = rec.loss
        if x is None or not math.isfinite(x) or hides_non_finite(x, rec.grad_norm):
            return
        v = self.vals.setdefault(s.key, [])
        if len(v) < SMOOTH_POINTS:
            v.append(x)

    def finish(self, streams: dict[Any, Stream]) -> list[Finding]:
        out = []
        for key, v in self.vals.items():
            if self.tails[key].hidden_from(self.opts.notes) is not None:
                while v and v[-1] == 0.0:  # the hidden non-finite losses the log ends with
                    v.pop()
            if len(v) < 50:
                continue
            d = [b - a for a, b in zip(v, v[1:])]
            if all(x <= 0 for x in d) or all(x >= 0 for x in d):
                continue
            m = sum(d) / len(d)
            c = [x - m for x in d]
            den = sum(x * x for x in c)
            if den <= 0:
                continue
            r = sum(a * b for a, b in zip(c, c[1:])) / den
            if r > SMOOTH_AUTOCORR:
                msg = (f"{stream_name(key)}: the logged loss moves like a running average (lag-1 autocorrelation of its "
                       f"step-to-step changes {r:.2f}, over {len(v)} values; a per-step loss gives about -0.5): "
                       "spikes and onsets are delayed and flattened in it")
                out.append(_finding(self.id, msg, len(v), {"step": None, "rank": stream_name(key), "autocorr": r,
                                                           "values": len(v)}))
        return out


@log_rule("log.duplicate_steps")
class DuplicateSteps(Rule):
    """A step logged twice in a row with a different loss (a re-counted step), or an eval record
    mislogged: its step goes back from the previous eval's without a training resume, or lies past
    the last training step by more than one logging interval (no train record reached it). Step
    numbers going back in the training records are ``log.step_regression``'s."""

    def __init__(self, opts: TraceOptions):
        super().__init__(opts)
        self.hits: dict[Any, list[tuple[Stream | None, dict[str, Any], str]]] = {}
        self.last_train: dict[Any, StepRecord] = {}
        self.interval: dict[Any, int] = {}
        self.last_eval: dict[Any, StepRecord] = {}
        self.resumed: set[Any] = set()

    def feed(self, rec: StepRecord, s: Stream) -> None:
        prev = s.prev
        if prev is not None and not rec.step_inferred and not prev.step_inferred:
            if rec.step == prev.step and rec.loss is not None and prev.loss is not None and rec.loss != prev.loss \
                    and not (math.isnan(rec.loss) and math.isnan(prev.loss)):
                d = _details(s, rec, loss=rec.loss, previous_loss=prev.loss,
                             evidence=[{"where": prev.where(), "step": prev.step, "loss": prev.loss},
                                       {"where": rec.where(), "step": rec.step, "loss": rec.loss}])
                self.hits.setdefault(s.key, []).append(
                    (s, d, f"step {rec.step} is logged twice with different losses ({_g(prev.loss)} at "
                           f"{prev.where()}, {_g(rec.loss)} at {rec.where()}): a re-counted step"))
            elif rec.step > prev.step:
                self.interval[s.key] = rec.step - prev.step
            elif rec.step < prev.step:
                self.resumed.add(s.key)
        self.last_train[s.key] = rec

    def feed_eval(self, rec: StepRecord, key: Any) -> None:
        last = self.last_train.get(key)
        pe = self.last_eval.get(key)
        self.last_eval[key] = rec
        if last is None:
            return
        why = None
        if pe is not None and rec.step < pe.step and key not in self.resumed:
            why = f"goes back from the previous eval's step {pe.step} ({pe.where()}) with no training resume"
        elif rec.step > last.step + self.interval.get(key, 1):
            why = f"is past the last training step {last.step} by more than one logging interval"
        if why is None:
            return
        d = {"step": rec.step, "rank": stream_name(key), "window": [rec.step, rec.step], "where": rec.where(),
             "eval_loss": rec.loss, "last_train_step": last.step, "lr": last.lr, "loss_scale": last.loss_scale,
             "last_good_step": last.step, "last_good_lr": last.lr, "last_good_loss_scale": last.loss_scale,
             "evidence": [{"where": rec.where(), "step": rec.step, "eval_loss": rec.loss},
                          {"where": last.where(), "step": last.step, "loss": last.loss}]}
        self.hits.setdefault(key, []).append(
            (None, d, f"an eval record at step {rec.step} ({rec.where()}) {why}: a mislogged step"))

    def finish(self, streams: dict[Any, Stream]) -> list[Finding]:
        out = []
        for key, hits in self.hits.items():
            _, d, text = hits[0]
            d["events"] = len(hits)
            out.append(_finding(self.id, f"{stream_name(key)}: {text}; {len(hits)} event(s)", len(hits), d))
        return out


@log_rule("log.lr_per_micro_batch")
class LrPerMicroBatch(Rule):
    """With ``[batch] grad_accum`` > 1 and ``[trace] warmup_steps`` configured: the logged lr reaches
    its peak at about ``warmup_steps / grad_accum`` optimizer steps (within :data:`LR_MATCH`) rather
    than at ``warmup_steps``: the scheduler steps once per micro-batch. Needs the lr logged with a
    warmup (its first value under half its peak)."""

    def __init__(self, opts: TraceOptions):
        super().__init__(opts)
        self.first: dict[Any, StepRecord] = {}
        self.peak: dict[Any, tuple[float, StepRecord]] = {}
        self.logged = False  # some record carries a learning rate (finite or not)

    def feed(self, rec: StepRecord, s: Stream) -> None:
        lr = rec.lr
        if lr is None:
            return
        self.logged = True
        if not math.isfinite(lr):
            return
        self.first.setdefault(s.key, rec)
        p = self.peak.get(s.key)
        if p is None or lr > p[0] * (1 + 1e-9):
            self.peak[s.key] = (lr, rec)

    def finish(self, streams: dict[Any, Stream]) -> list[Finding]:
        ga, warm = self.opts.grad_accum, self.opts.limits.warmup_steps
        if not ga or ga < 2 or not warm:
            self.not_run.append("needs [batch] grad_accum > 1 and [trace] warmup_steps (the configured schedule)")
            return []
        if not self.peak:
            self.not_run.append("every logged learning rate is NaN or inf" if self.logged else "no learning rate logged")
            return []
        out = []
        for key, (lr, rec) in self.peak.items():
            first = self.first[key]
            if first.lr is None or first.lr > 0.5 * lr:
                continue
            micro = warm / ga
            if abs(rec.step - micro) <= LR_MATCH * micro and abs(rec.step - warm) > LR_MATCH * warm:
                d = {"step": None, "rank": stream_name(key), "peak_step": rec.step, "peak_lr": lr,
                     "warmup_steps": warm, "grad_accum": ga,
                     "evidence": [{"where": rec.where(), "step": rec.step, "lr": lr}]}
                msg = (f"{stream_name(key)}: the lr peaks ({_g(lr)}) at step {rec.step} ({rec.where()}), about warmup "
                       f"{warm} / grad_accum {ga} = {micro:g}, not at step {warm}: the scheduler steps per micro-batch")
                out.append(_finding(self.id, msg, 1, d))
        return out
