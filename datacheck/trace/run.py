"""Run the ``log.*`` rules over one or more logs in one streaming pass: findings, the timeline, curves.

Logs are read one after another, each streamed; records are kept apart per rank (the record's rank,
else the log's name). Memory is bounded: the rules keep fixed-size state and the curves are
down-sampled to at most :data:`CURVE_POINTS` points per metric and rank (every non-finite point kept
up to :data:`CURVE_POINTS` as well), so a log of any size is traced in bounded memory.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from datacheck.formats.discovery import format_of
from datacheck.model.config import Config
from datacheck.model.errors import UsageError
from datacheck.model.findings import Finding
from datacheck.report.policy import apply_policy
from datacheck.trace.readers import LogFile
from datacheck.trace.record import ReadStats, StepRecord
from datacheck.trace.rules import (
    LOG_RULES,
    Rule,
    RunKey,
    Stream,
    TraceOptions,
    open_first_window,
    scale_search,
    stream_name,
)
from datacheck.trace.steps import RECORD, StepConvention, as_records

__all__ = ["Curve", "TraceResult", "trace_logs", "jsonable", "CURVE_POINTS", "METRICS", "SEVERITY_ORDER", "NON_FINITE_CHECKS",
           "SOFT_DYNAMICS_CHECKS"]

#: points kept per curve (metric x rank) for the HTML plot
CURVE_POINTS = 2000
METRICS = ("loss", "grad_norm", "lr", "loss_scale")
SEVERITY_ORDER = {"error": 0, "warn": 1, "info": 2}
#: the checks of a non-finite loss or grad norm (logged NaN/inf, or one the logger hid)
NON_FINITE_CHECKS = frozenset({"log.non_finite", "log.hidden_non_finite"})
#: the dynamics checks whose warnings judge a trend of finite values (rising, stalling, spiking): when a
#: non-finite value is logged too, even later, it is the first anomaly and these are how the run came
#: there (the non-finite value is the failure; a trend's onset is a statistical estimate)
SOFT_DYNAMICS_CHECKS = frozenset({"log.loss_spike", "log.grad_norm_spike", "log.divergence", "log.stagnation",
                                  "log.overfit_onset", "log.vanishing_grad", "log.periodic_spikes",
                                  "log.post_warmup_spike"})
_EVENTS = 200
#: the most steps whose logged epoch a trace keeps (:attr:`TraceResult.epochs`; 8 bytes and a dict slot
#: each): enough for every logged step of a Trainer run logging every 10 steps over 1,000,000 steps
MAX_EPOCH_POINTS = 100_000


class Curve:
    """A down-sampled series: every ``stride``-th point (stride doubles when full), non-finite points
    kept separately (as the step of a gap in the curve, ``bad``, and its value, NaN or which infinity,
    in ``bad_value``: the first logged at that step)."""

    def __init__(self) -> None:
        self.points: list[tuple[int, float]] = []
        self.bad: list[int] = []
        self.bad_value: dict[int, float] = {}
        self.stride = 1
        self.n = 0

    def add(self, step: int, value: float) -> None:
        if not math.isfinite(value):
            if len(self.bad) < CURVE_POINTS:
                self.bad.append(step)
                self.bad_value.setdefault(step, value)
            return
        if self.n % self.stride == 0:
            self.points.append((step, value))
            if len(self.points) >= CURVE_POINTS:
                self.points = self.points[::2]
                self.stride *= 2
        self.n += 1

    def to_dict(self) -> dict[str, Any]:
        return {"points": [[s, v] for s, v in self.points], "non_finite_steps": self.bad, "stride": self.stride}


@dataclass
class TraceResult:
    """What ``datacheck trace`` found in the logs.

    Attributes:
        logs: per log file, what was read (format, lines, records, unparsed lines with examples).
        findings: the ``log.*`` findings, most severe and earliest first.
        first_bad: the first anomaly (earliest step among error/warn step findings; when a non-finite
            value is logged (:data:`NON_FINITE_CHECKS`), the warnings of :data:`SOFT_DYNAMICS_CHECKS`
            are passed over: the earliest of them before it is ``after_warning``, ``{"check", "step",
            "rank"}``): ``{"check", "step", "rank", "window", ...}`` (its details), or None.
        events: the timeline: resumes, loss-scale back-offs (``search``: one of the fp16 initial scale
            search, :func:`datacheck.trace.rules.scale_search`), eval points (at most 200, in log order).
        curves: ``{stream: {metric: Curve}}``.
        streams: the ranks (or logs) seen -> training records.
        notes: what a rule could not judge (e.g. a spike rule's history on a short log): no finding,
            no effect on the exit code, but a "none" is then not a verdict on those values.
        convention: how the log's steps join the 0-based optimizer steps
            (:meth:`datacheck.trace.steps.StepConvention.to_dict`), once :meth:`join` was called.
        not_run: ``{"check", "reason"}`` per rule that could not run on these logs at all (no learning
            rate, no eval loss, no grad norm logged, ...).
        stream_ranks: the streams that are not a rank of their own -> the rank whose process wrote
            them: a log's records that name no rank in a log whose other records name one (the Hugging
            Face Trainer's dicts beside DeepSpeed's ``Rank 0`` lines: one process's two streams) ->
            that rank's stream name; None when the log names several ranks (one of them wrote it).
        step_less: the streams of logs whose records carry no step number (``ReadStats.unplaced``):
            their findings' and events' ``step`` is the record's ordinal (from 1), said "record N"
            (``details["step_unit"]`` / the event's ``step_unit``: ``"record"``).
        consumed: per iteration a Megatron log reports, its ``consumed samples`` (Megatron's
            ``consumed_train_samples`` after that iteration; the last report of an iteration logged
            twice); empty for other logs. Where a resumed run's sampler stands (``trace --data``).
        global_batches: per iteration a Megatron log reports it, its ``global batch size`` (the
            iteration's own global batch; a ``--rampup-batch-size`` run grows it).
        epochs: per training step a log reports it with a step number, its (fractional) ``epoch``, the
            last report of a step kept (a Hugging Face Trainer's ``epoch + (micro-batch + 1) /
            steps_in_epoch``); at most :data:`MAX_EPOCH_POINTS` steps, the first ones.
    """

    logs: list[ReadStats]
    findings: list[Finding]
    first_bad: dict[str, Any] | None
    events: list[dict[str, Any]] = field(default_factory=list)
    curves: dict[str, dict[str, Curve]] = field(default_factory=dict)
    streams: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    not_run: list[dict[str, str]] = field(default_factory=list)
    convention: dict[str, Any] | None = None
    stream_ranks: dict[str, str | None] = field(default_factory=dict)
    consumed: dict[int, int] = field(default_factory=dict)
    global_batches: dict[int, int] = field(default_factory=dict)
    step_less: set[str] = field(default_factory=set)
    epochs: dict[int, float] = field(default_factory=dict)

    def rank_of(self, stream: str) -> str | None:
        """The rank a stream's records come from: its own name, the rank of the process that wrote it
        (:attr:`stream_ranks`), or None when that process is one of several ranks."""
        return self.stream_ranks[stream] if stream in self.stream_ranks else stream

    def join(self, conv: StepConvention) -> None:
        """Name the first anomaly's optimizer step (``first_bad["optimizer_step"]``, ``"step_map"``:
        "log step 50 = optimizer step 49"), or, for a log whose records carry no step, that its
        ``step`` is a record ordinal (``first_bad["unplaced"]``)."""
        self.convention = conv.to_dict()
        fb = self.first_bad
        if fb is None:
            return
        w = fb.get("window")
        if w and w[0] < conv.first_step <= w[1]:  # a first record's window opened below the log's first step
            fb["window"] = [conv.first_step, w[1]]
        if conv.unplaced and fb.get("step_inferred"):
            fb["unplaced"] = True
            fb["step_map"] = f"record {fb['step']} (the log gives no step number)"
        else:
            fb["optimizer_step"] = conv.optimizer_step(fb["step"])
            fb["step_map"] = conv.describe(fb["step"]) + (" (assumed)" if conv.assumed else "")

    def apply_fail_on(self, cfg: Config, fail_on: str) -> None:
        """Set each finding's ``fails_policy`` (and severity) by the config's ``[policy]`` and ``fail_on``."""
        kept = [apply_policy(f, cfg, fail_on, None) for f in self.findings]
        self.findings = [f for f in kept if f is not None]

    def to_dict(self) -> dict[str, Any]:
        return jsonable({"logs": [s.to_dict() for s in self.logs], "findings": [f.to_dict() for f in self.findings],
                         "first_bad": self.first_bad, "events": self.events, "streams": self.streams,
                         "notes": self.notes, "convention": self.convention, "not_run": self.not_run,
                         "curves": {k: {m: c.to_dict() for m, c in v.items()} for k, v in self.curves.items()}})


def jsonable(v: Any) -> Any:
    """``v`` with non-finite floats as the strings ``"nan"``, ``"inf"``, ``"-inf"`` (JSON has no NaN)."""
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    if isinstance(v, dict):
        return {k: jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    return v


def _good(rec: StepRecord) -> bool:
    g = rec.grad_norm
    return (not rec.overflow and rec.loss is not None and math.isfinite(rec.loss)
            and (g is None or math.isfinite(g)) and not rec.nan_steps)


def _scale_kept(rec: StepRecord) -> bool:
    """An overflow record that skipped the step but kept the loss scale (DeepSpeed's "but hysteresis is
    2. Reducing hysteresis to 1"): not a back-off of the scale, so not a ``scale_backoff`` event."""
    return rec.prev_scale is not None and rec.loss_scale is not None and rec.loss_scale >= rec.prev_scale


def _restarts(rec: StepRecord, cur: Stream, first_step: int, first_epoch: float | None, launch: int,
              last_launch: int, marked: bool) -> bool:
    """True when ``rec`` (a training or eval record) begins a run restarted from
    scratch into the log of stream ``cur``: the step counter goes back below the stream's last training
    step to at or under its first training step ``first_step`` (a new launch counts from the start;
    a resume goes back to its checkpoint's step, after the first), and, in a log that prints a
    launch banner (``marked``: one was read before the stream's first record; Megatron's arguments
    block, the Hugging Face Trainer's ``***** Running training *****``), a new banner was read since
    the stream's last record (``launch > last_launch``). A log that prints none (JSONL metrics,
    nanoGPT's console) has the step alone: nanoGPT logs ``step 0`` (eval) and ``iter 0`` again, the
    Trainer ``epoch`` back near 0. The loss back at its initial level is no evidence (a resume from an
    early checkpoint has it too). A record without a step number (``step_inferred``: a Trainer console
    without header nor bar, whose records are ordinals) has its ``epoch`` in the step's place: back
    below the last record's, at or under the run's first (the Trainer's epoch never goes back within a
    launch)."""
    prev = cur.prev
    if prev is None:
        return False
    if rec.step_inferred:
        if rec.epoch is None or prev.epoch is None or first_epoch is None:
            return False
        back = rec.epoch < prev.epoch and rec.epoch <= first_epoch
    else:
        back = rec.step < prev.step and rec.step <= first_step and not prev.step_inferred
    return back and (launch > last_launch or not marked)


def _check_world_size(streams: dict[Any, Stream], world_size: int | None) -> None:
    """Raises :class:`UsageError` when the logs name a rank at or above ``world_size`` (ranks count
    from 0): the given world size contradicts the logs, and what is said of the ranks (those unseen,
    "all ranks") would be said of a run with other ranks."""
    if not world_size:
        return
    ranks = sorted(k for k in streams if isinstance(k, int))
    over = [r for r in ranks if r >= world_size]
    if over:
        def shown(rs: list[int]) -> str:
            return ", ".join(map(str, rs[:10])) + (f", ... ({len(rs)} in all)" if len(rs) > 10 else "")
        raise UsageError(f"--world-size is {world_size} (ranks 0 .. {world_size - 1}), but the logs name rank(s) "
                         f"{shown(over)} (ranks seen: {shown(ranks)}): give the run's world size (at least "
                         f"{max(over) + 1}), or drop --world-size")


def trace_logs(logs: list[LogFile], opts: TraceOptions) -> TraceResult:
    """Read every log once and run every registered ``log.*`` rule.

    A log whose records a steps-per-epoch from outside it (``--steps-per-epoch``, the ``[batch]``
    plan) placed so that two training records share a step (``ReadStats.epoch_clash``) is not placed
    by it: every log is read again with that log's records left unplaced, the clash their reason (a
    step can only be taken back by reading again; the rules have seen the first read).

    Raises:
        UsageError: no log yields a single step record (the message lists each log's format, lines
            and unparsed-line examples, and the remedy: ``--format`` or ``--regex``); the logs name a
            rank at or above ``opts.world_size`` (the message names the ranks seen).
    """
    res = _trace_once(logs, opts)
    clashed = [lf for lf in logs if lf.stats.epoch_clash is not None and lf.epoch_refused is None]
    if not clashed:
        return res
    for lf in clashed:
        lf.epoch_refused = lf.stats.epoch_clash
    return _trace_once(logs, opts)


def _trace_once(logs: list[LogFile], opts: TraceOptions) -> TraceResult:
    notes: set[str] = set(opts.notes)
    rules = [cls(opts) for cls in LOG_RULES.values()]
    streams: dict[Any, Stream] = {}
    curves: dict[str, dict[str, Curve]] = {}
    events: list[dict[str, Any]] = []
    stats: list[ReadStats] = []
    feeds: dict[Any, list[Any]] = {}  # per stream: the rules' bound feed methods
    named: dict[str, set[int]] = {}  # per log: the ranks its records name
    consumed: dict[int, int] = {}  # Megatron's consumed samples per iteration
    epochs: dict[int, float] = {}  # the epoch a record reports at its step
    global_batches: dict[int, int] = {}  # and its global batch size
    inferred: dict[str, set[str]] = {}  # per log: the streams of its records that carry no step number
    runs: dict[Any, RunKey] = {}  # per rank or log: the stream of its latest run restarted from scratch
    first_steps: dict[Any, int] = {}  # per stream: its first training record's step
    launches: dict[Any, int] = {}  # per stream: the log's launches read when its last record came
    first_epochs: dict[Any, float | None] = {}  # per stream: its first training record's epoch
    marked: dict[Any, bool] = {}  # per stream: its log had printed a launch banner before its first record
    for lf in logs:
        seen_notes = 0
        for rec in lf.records():
            if rec.rank is not None and len(named.setdefault(lf.source, set())) < 2:
                named[lf.source].add(rec.rank)
            if len(lf.stats.notes) != seen_notes:  # notes (e.g. hf_nan_filter) reach the rules' messages
                seen_notes = len(lf.stats.notes)
                if lf.stats.notes - notes:
                    notes |= lf.stats.notes
                    for r in rules:
                        r.opts = replace(opts, notes=frozenset(notes))
            base = rec.rank if rec.rank is not None else lf.source
            key = runs.get(base, base)
            launch = lf.stats.launches  # the launch banners (arguments blocks, Trainer banners) read so far
            if key in streams and _restarts(rec, streams[key], first_steps[key], first_epochs[key], launch,
                                            launches[key], marked[key]):
                # a run restarted from scratch and appended, judged on its own (its warmup, loss-scale search
                # and first losses are its own, not a resume's discontinuity nor spikes against the run before)
                cur = streams[key]
                n = (key.run if isinstance(key, RunKey) else 1) + 1
                key = runs[base] = RunKey(base, n, rec.where())
                if len(events) < _EVENTS:
                    events.append({"kind": "restart", "step": rec.step, "rank": stream_name(key),
                                   "from_step": cur.prev.step if cur.prev is not None else rec.step,
                                   "where": rec.where()})
            if rec.step_inferred:
                inferred.setdefault(lf.source, set()).add(stream_name(key))
            if rec.split != "train":
                if len(events) < _EVENTS:
                    events.append({"kind": "eval", "step": rec.step, "rank": stream_name(key), "loss": rec.loss})
                for r in rules:
                    r.feed_eval(rec, key)
                continue
            if lf.stats.min_step is None or rec.step < lf.stats.min_step:
                lf.stats.min_step = rec.step
            if lf.stats.last_step is not None and rec.step > lf.stats.last_step:
                lf.stats.interval = rec.step - lf.stats.last_step
            lf.stats.last_step = rec.step
            if rec.epoch is not None and not rec.step_inferred and math.isfinite(rec.epoch) \
                    and (rec.step in epochs or len(epochs) < MAX_EPOCH_POINTS):
                epochs[rec.step] = rec.epoch
            if rec.tokens is not None and math.isfinite(rec.tokens) \
                    and (lf.stats.format == "megatron" or lf.stats.line_formats.get("megatron")):
                consumed[rec.step] = int(rec.tokens)  # "consumed samples": a sample count (a NaN/inf token
                # count of another line format in the same log counts nothing)
                if rec.global_batch is not None and rec.global_batch > 0:
                    global_batches[rec.step] = rec.global_batch
                else:
                    global_batches.pop(rec.step, None)  # the last report of the iteration is the one kept
            s = streams.get(key)
            if s is None:
                s = streams[key] = Stream(key)
                first_steps[key] = rec.step
                first_epochs[key] = rec.epoch
                marked[key] = launch > 0
                curves[s.name] = {m: Curve() for m in METRICS}
                feeds[key] = [r.feed for r in rules if type(r).feed is not Rule.feed]  # rules that read records
            s.new_launch = s.prev is not None and launch > launches[key]
            launches[key] = launch
            prev = s.prev
            if s.records == 1 and not s.new_launch:  # the second record: the logging interval widens the
                open_first_window(s, rec)              # window of the first record's findings
            if prev is not None and (rec.step < prev.step or s.new_launch) and len(events) < _EVENTS:
                events.append({"kind": "resume", "step": rec.step, "rank": s.name, "from_step": prev.step,
                               "where": rec.where()})
            if rec.overflow and len(events) < _EVENTS and not _scale_kept(rec):
                events.append({"kind": "scale_backoff", "step": rec.step, "rank": s.name, "from": rec.prev_scale,
                               "to": rec.loss_scale, "where": rec.where(), "search": scale_search(rec.prev_scale, s)})
            for feed in feeds[key]:
                feed(rec, s)
            cs = curves[s.name]
            if rec.loss is not None:
                cs["loss"].add(rec.step, rec.loss)
            if rec.grad_norm is not None:
                cs["grad_norm"].add(rec.step, rec.grad_norm)
            if rec.lr is not None:
                cs["lr"].add(rec.step, rec.lr)
            if rec.loss_scale is not None:
                cs["loss_scale"].add(rec.step, rec.loss_scale)
            if _good(rec):
                s.last_good = rec
                # a finite loss over an interval with fewer skips than iterations (Megatron logs every
                # log_interval iterations): some update of that interval succeeded
                if not rec.skipped or (s.prev is not None and rec.skipped < rec.step - s.prev.step):
                    s.ok_steps = True
            s.prev = rec
            s.records += 1
        stats.append(lf.stats)
    if not streams:
        desc = "; ".join(f"{st.source}: read as {st.format}, {st.lines} line(s), {st.bad_lines} unparsed"
                         + (f" (line {st.bad_examples[0][0]}: {st.bad_examples[0][1]!r})" if st.bad_examples else "")
                         + _data_shard_hint(st.source)
                         for st in stats)
        raise UsageError(f"no training step found in the log(s): {desc}. Give the format with --log-format "
                         "(hf_state, jsonl, csv, tensorboard, megatron, deepspeed, hf_console, key_value) or a "
                         "--regex with (?P<step>...) and (?P<loss>...) groups")
    _check_world_size(streams, opts.world_size)
    findings: list[Finding] = []
    for r in rules:
        findings.extend(r.finish(streams))
    # a log whose records carry no step: each number its findings and events give is a record's ordinal
    step_less = {name for st in stats if st.unplaced for name in inferred.get(st.source, ())}
    every = bool(step_less) and {s.name for s in streams.values()} <= step_less  # a run-wide finding's too
    findings = [f.with_(message=as_records(f.message), details={**f.details, "step_unit": RECORD})
                if (f.details.get("rank") in step_less and f.details.get("step_inferred"))
                or (every and f.details.get("rank") is None) else f for f in findings]
    for e in events:
        if e.get("rank") in step_less:
            e["step_unit"] = RECORD
    findings.sort(key=lambda f: (SEVERITY_ORDER[f.severity], f.details.get("step") is None,
                                 f.details.get("step") or 0, f.check))
    anomalies = [f for f in findings if f.severity in ("error", "warn") and f.details.get("step") is not None
                 and f.check != "log.skipped_steps"]
    # at the same step a rank whose own loss went non-finite comes before a grad norm made non-finite on
    # every rank by the all-reduce
    def start(f: Finding) -> int:
        return int(f.details["window"][0] if "window" in f.details else f.details["step"])

    # a non-finite value anywhere in the log is the first anomaly over an earlier dynamics warning (a
    # flat noisy run flagged as diverging at step 3 hid the NaN of step 38 from the first answer and
    # from --data); the warning is kept as what came before it (first_bad["after_warning"])
    soft = [f for f in anomalies if f.severity == "warn" and f.check in SOFT_DYNAMICS_CHECKS]
    pool = [f for f in anomalies if f not in soft] if any(f.check in NON_FINITE_CHECKS for f in anomalies) else anomalies
    first = min(pool, key=lambda f: (start(f), SEVERITY_ORDER[f.severity], f.details.get("metric") != "loss"), default=None)
    first_bad = None if first is None else {"check": first.check, **{k: v for k, v in first.details.items()
                                                                      if not isinstance(v, (list, dict)) or k == "window"}}
    before = min((f for f in soft if first is not None and start(f) < start(first)), key=start, default=None)
    if first_bad is not None and before is not None:
        first_bad["after_warning"] = {"check": before.check, "step": before.details["step"], "rank": before.details.get("rank")}
    return TraceResult(logs=stats, findings=findings, first_bad=first_bad, events=events, curves=curves, consumed=consumed,
                       global_batches=global_batches, epochs=epochs,
                       streams={s.name: s.records for s in streams.values()},
                       notes=[n for r in rules for n in r.notes],
                       not_run=[{"check": r.id, "reason": why} for r in rules for why in r.not_run],
                       step_less=step_less,
                       stream_ranks={**{stream_name(k): (stream_name(next(iter(named[k]))) if len(named[k]) == 1 else None)
                                        for k in streams if isinstance(k, str) and named.get(k)},
                                     # a restarted run is its rank's (or log's) again, not a rank of its own
                                     **{stream_name(k): stream_name(k.base) for k in streams if isinstance(k, RunKey)}})


#: shard formats no training log is written in: a file of one of them given as the log is the data
_BINARY_DATA_FORMATS = ("parquet", "arrow", "megatron", "mds", "webdataset", "litdata")


def _data_shard_hint(source: str) -> str:
    """``" (a parquet data shard, not a training log: ...)"`` when the log ``source`` is a local file
    in a binary shard format (:data:`_BINARY_DATA_FORMATS`, by :func:`datacheck.formats.discovery.format_of`):
    a shard given where the log goes (``datacheck trace data.parquet``) was read as text; ``""``
    otherwise."""
    path = Path(source)
    try:
        fmt = format_of(path) if path.is_file() else None
    except OSError:
        return ""
    if fmt not in _BINARY_DATA_FORMATS:
        return ""
    return (f" (a {fmt} data shard, not a training log: give the run's log, and the data with --data "
            "to audit the rows of its first bad step)")
