"""The ``log.*`` checks (CHECKS.md): one rule per check ID, run over the step records of a log.

Log checks run on step records, not shards, so they are registered here (:data:`LOG_RULES`), not in
the shard registry; each ``log.*`` catalog ID has exactly this one producer
(``tests/unit/checks/test_registry.py`` counts both registries). A rule is fed every training record of
every rank in log order (:meth:`Rule.feed`, with the :class:`Stream` state of the record's rank) and
gives its findings at the end (:meth:`Rule.finish`); it keeps O(1) state per rank (windows of a fixed
size), so a log of any length is checked in bounded memory.

Every finding's ``details`` name the ``step``, the ``rank`` (or log), the ``last_good_step`` and the
``lr`` / ``loss_scale`` at both, and ``window`` ``[first, last]``: the steps the event may have
happened in when the log records every N steps (the first bad step is only bounded to that window).
"""
from __future__ import annotations

import math
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any, Callable

from datacheck.model import catalog
from datacheck.model.config import TraceSection
from datacheck.model.errors import InternalError
from datacheck.model.findings import Finding
from datacheck.trace.readers.fields import MAX_RANK
from datacheck.trace.record import StepRecord
from datacheck.trace.spikes import OLMO_MIN_HISTORY, ROBUST_FIRST_JUDGED, ROBUST_MIN_HISTORY, SpikeDetector, SpikeRule

__all__ = ["Stream", "TraceOptions", "Rule", "LOG_RULES", "log_rule", "open_first_window", "COLLAPSE_RUN", "MIN_LOSS_SCALE",
           "SEARCH_SCALE", "LR_RESUME_TOLERANCE", "WARMUP_DROP", "DIVERGE_FACTOR", "stream_name", "scale_search",
           "scale_text", "ZERO_RUN", "hides_non_finite", "ZeroTail"]

#: consecutive loss-scale back-offs that make a collapse (CHECKS.md "several times in a row")
COLLAPSE_RUN = 3
#: a loss scale at or below this is collapsed (DeepSpeed's default ``min_loss_scale`` is 1)
MIN_LOSS_SCALE = 1.0
#: back-offs from a scale at or above 2**16 before any successful step are the fp16 initial scale
#: search (GradScaler's and apex's ``init_scale`` is 2**16, DeepSpeed's 2**16, Megatron's 2**32), not a collapse
SEARCH_SCALE = 65536.0
#: relative lr difference at a resume point, against the lr the log showed at that step before, that is a jump
LR_RESUME_TOLERANCE = 0.01
#: an lr falling below this fraction of the previous record's lr and then rising again is a warmup restart
WARMUP_DROP = 0.1
#: a rank whose mean loss over its last :data:`DIVERGE_LAST` records is above this multiple of the
#: other ranks' median diverges
DIVERGE_FACTOR = 2.0
DIVERGE_LAST = 10
#: steps -> lr remembered per rank to compare the lr after a resume with the lr logged before
_LR_MEMORY = 100_000
#: a grad-norm spike at most this many steps before a loss spike (strictly before it) led it: the
#: loss spike's ``grad_rise_step`` (gradsnitch's planted spike puts the grad norm one step ahead)
GRAD_LEAD = 10
_GRAD_SPIKE_KEY = "last_grad_spike_step"


@dataclass(frozen=True)
class RunKey:
    """The stream of a run restarted from scratch into the same log (its step counter back at or under
    the first step of the run before it): ``base`` the rank or log it continues, ``run`` its number
    (2, 3, ...), ``where`` the ``file:line`` of its first record. Each such run is judged on its own."""

    base: Any
    run: int
    where: str


def stream_name(key: Any) -> str:
    if isinstance(key, RunKey):
        return f"{stream_name(key.base)}, run {key.run} (restarted at {key.where})"
    return f"rank {key}" if isinstance(key, int) else str(key)


@dataclass
class Stream:
    """Per-rank state the runner keeps for the rules.

    Attributes:
        key: the rank (int), or the log's name when the log gives no rank.
        prev: the previous training record of this rank (None at the first).
        last_good: the last record with a finite loss and finite grad norm (where logged) that was not an overflow.
        ok_steps: whether an optimizer step is known to have succeeded (a finite loss with no skip).
        records: training records seen.
        new_launch: whether the log read a new launch's start (``ReadStats.launches``: a trainer's banner,
            a Hugging Face training bar counting again from below the last step, the Trainer's epoch back
            or its last step logged again) since this stream's previous record; False at its first.
        shared: state several rules build once per stream (the dynamics rules' kept points).
        first_details: the details of the findings made at the stream's first training record (their
            ``window`` is that step alone until the second record tells the logging interval:
            :func:`open_first_window`).
    """

    key: Any
    prev: StepRecord | None = None
    last_good: StepRecord | None = None
    ok_steps: bool = False
    records: int = 0
    new_launch: bool = False
    shared: dict[str, Any] = field(default_factory=dict)
    first_details: list[dict[str, Any]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return stream_name(self.key)


@dataclass(frozen=True)
class TraceOptions:
    """What the rules need beyond the records: the spike rule, the expected world size (None =
    unknown), the log notes (e.g. ``hf_nan_filter``), the ``[trace]`` thresholds (``limits``) and the
    ``[batch]`` ``grad_accum`` (None = not configured)."""

    spike: SpikeRule
    world_size: int | None = None
    notes: frozenset[str] = field(default_factory=frozenset)
    limits: TraceSection = field(default_factory=TraceSection)
    grad_accum: int | None = None


def _at(rec: StepRecord | None) -> dict[str, Any]:
    if rec is None:
        return {"step": None, "lr": None, "loss_scale": None}
    return {"step": rec.step, "lr": rec.lr, "loss_scale": rec.loss_scale, "where": rec.where()}


def _window(s: Stream, rec: StepRecord) -> list[int]:
    """The steps the event at ``rec`` may have happened in: after the previous logged step, up to ``rec``."""
    lo = s.prev.step + 1 if s.prev is not None and s.prev.step < rec.step else rec.step
    return [lo, rec.step]


def open_first_window(s: Stream, rec: StepRecord) -> None:
    """Widen the window of the findings made at stream ``s``'s first training record (``s.prev``) once
    its second, ``rec``, tells the logging interval ``k = rec.step - s.prev.step``: a log whose first
    record is at step ``f`` and that logs every ``k`` steps (the Hugging Face Trainer's ``logging_steps``
    5 logs 5, 10, ...; Lightning's ``log_every_n_steps`` 3 logs 2, 5, ...) trained the steps ``f - k + 1
    .. f`` before its first record, unlogged, and the value logged at ``f`` may come from any of them (a
    NaN of step 1 poisons the weights; the Trainer logs the interval's mean loss and the last grad norm).
    So the window is ``[f - k + 1, f]``, as for a record after an unlogged interval (:func:`_window`).
    Nothing changes when ``k`` is 1, the steps do not grow, a record carries no step number, or ``f - k
    + 1`` would be below 0 (the log's first record is then the run's first step, or the log starts at a
    step its interval does not lead to)."""
    first = s.prev
    if first is None or not s.first_details or rec.step_inferred or first.step_inferred:
        s.first_details.clear()
        return
    k = rec.step - first.step
    lo = first.step - k + 1
    if k > 1 and lo >= 0:
        for d in s.first_details:
            if d.get("step") == first.step and d.get("window") == [first.step, first.step]:
                d["window"] = [lo, first.step]
    s.first_details.clear()


def _details(s: Stream, rec: StepRecord, **more: Any) -> dict[str, Any]:
    good = _at(s.last_good)
    d = {"step": rec.step, "rank": s.name, "window": _window(s, rec), "where": rec.where(),
         "lr": rec.lr, "loss_scale": rec.loss_scale, "last_good_step": good["step"],
         "last_good_lr": good["lr"], "last_good_loss_scale": good["loss_scale"],
         "step_inferred": rec.step_inferred, **more}
    if s.prev is None:  # the window waits for the second record's interval (open_first_window)
        s.first_details.append(d)
    return d


def _context(d: dict[str, Any]) -> str:
    w = d["window"]
    win = f"step {w[1]}" if w[0] == w[1] else f"steps {w[0]}..{w[1]} (logged every {w[1] - w[0] + 1}: the first bad step is in this window)"
    good = f"last good step {d['last_good_step']} (lr {_g(d['last_good_lr'])}, loss scale {_g(d['last_good_loss_scale'])})" \
        if d["last_good_step"] is not None else "no good step before it"
    return f"{win}; lr {_g(d['lr'])}, loss scale {_g(d['loss_scale'])}; {good}"


def _g(x: float | None) -> str:
    return "-" if x is None else f"{x:.4g}"


def scale_text(x: float | None) -> str:
    """A loss scale as written: exact for a whole number (``65536``, ``4294967296``; scales are powers
    of 2), else ``:g`` (``0.5``)."""
    if x is None:
        return "-"
    return str(int(x)) if math.isfinite(x) and x.is_integer() and abs(x) < 1e18 else f"{x:g}"


def scale_search(from_scale: float | None, s: "Stream") -> bool:
    """Whether a back-off from ``from_scale`` on stream ``s`` is the fp16 initial scale search: from a
    scale at or above :data:`SEARCH_SCALE` before any successful step (``s.ok_steps``)."""
    return from_scale is not None and from_scale >= SEARCH_SCALE and not s.ok_steps


#: a trailing run of this many exact-0.0 losses (with the Hugging Face filter on) is a hidden NaN:
#: trainproof's MIN_ZERO_TAIL_FOR_ONSET (a loss does not land on 0.0 and stay there by converging)
ZERO_RUN = 5


def hides_non_finite(loss: float | None, grad_norm: float | None) -> bool:
    """Whether a record's loss of exactly 0.0 stands for a non-finite one the logger hid: beside a grad
    norm of 0.0 or a non-finite one on the same record (``log.hidden_non_finite``'s first sign). Its
    loss and grad norm are then no finite values: no dynamics or spike rule judges them."""
    return loss == 0.0 and grad_norm is not None and (grad_norm == 0.0 or not math.isfinite(grad_norm))


class ZeroTail:
    """A stream's trailing run of exact-0.0 losses, fed every training record in order (records
    without a loss passed over, any other loss, NaN included, ending the run): its length, the step
    of its first record, and whether a positive finite loss came before it. With the Hugging Face
    filter noted, :data:`ZERO_RUN` or more of them after a positive loss are non-finite losses the
    logger hid (``log.hidden_non_finite``'s second sign, :meth:`hidden_from`)."""

    __slots__ = ("run", "first", "after_positive", "positive")

    def __init__(self) -> None:
        self.run = 0
        self.first: int | None = None
        self.after_positive = False
        self.positive = False

    def feed(self, rec: StepRecord) -> None:
        loss = rec.loss
        if loss is None:
            return
        if loss != 0.0:
            if math.isfinite(loss) and loss > 0:
                self.positive = True
            self.run, self.first = 0, None
            return
        if self.run == 0:
            self.first, self.after_positive = rec.step, self.positive
        self.run += 1

    def hidden_from(self, notes: frozenset[str]) -> int | None:
        """The step from which the trailing 0.0 losses are hidden non-finite ones, or None."""
        return self.first if "hf_nan_filter" in notes and self.run >= ZERO_RUN and self.after_positive else None


def _finding(cid: str, message: str, count: int, details: dict[str, Any]) -> Finding:
    return Finding(check=cid, severity=catalog.info(cid).severity, message=message, count=count, details=details)


class Rule:
    """One ``log.*`` check: :meth:`feed` each training record, then :meth:`finish`."""

    id = ""

    def __init__(self, opts: TraceOptions):
        self.opts = opts
        #: what the rule could not judge, for the output (set by :meth:`finish`; no finding, no exit code)
        self.notes: list[str] = []
        #: why the rule could not run at all on this log (e.g. no learning rate logged), set by :meth:`finish`
        self.not_run: list[str] = []

    def feed(self, rec: StepRecord, s: Stream) -> None:
        """One training record of stream ``s``. A rule that judges only what another rule keeps in
        :attr:`Stream.shared` leaves this as it is, and the runner never calls it."""

    def feed_eval(self, rec: StepRecord, key: Any) -> None:
        """An eval record (``split == "eval"``) of stream ``key``; most rules ignore them."""

    def finish(self, streams: dict[Any, Stream]) -> list[Finding]:
        raise NotImplementedError


#: check ID -> its rule class (the producer of that ID)
LOG_RULES: dict[str, type[Rule]] = {}


def log_rule(cid: str) -> Callable[[type[Rule]], type[Rule]]:
    """Register the producer of log check ``cid``.

    Raises:
        InternalError: ``cid`` is not a ``log.*`` catalog ID, or already has a producer.
    """
    def deco(cls: type[Rule]) -> type[Rule]:
        if not catalog.is_known(cid) or not cid.startswith("log."):
            raise InternalError(f"log rule {cid!r} ({cls.__name__}) is not a log.* ID of the catalog (CHECKS.md)")
        if cid in LOG_RULES:
            raise InternalError(f"log check {cid!r} has two producers: {LOG_RULES[cid].__name__} and {cls.__name__}")
        cls.id = cid
        LOG_RULES[cid] = cls
        return cls
    return deco


@log_rule("log.non_finite")
class NonFinite(Rule):
    """The first record per rank whose loss or grad norm is NaN/inf (from the metrics line or a line
    stating it, ``details["stated"]``); Megatron's nan-iteration counter above 0; a line with skipped
    iterations counted, no loss and no loss scale (bf16/fp32: Megatron skips a step whose gradients
    are not finite; suspected); or a Megatron-style line (with a loss scale) whose loss is missing
    although the previous record had one and not every step of the interval was skipped (Megatron
    averages only finite, non-skipped losses, so a NaN can show up as a missing ``lm loss``: reported
    as suspected). ``details["metric"]``: ``loss``, ``grad_norm`` or ``counter``.

    ``persistent``: no finite record after the first (no finite loss: the weights are poisoned);
    ``transient``: finite again from ``recovered_step``; neither (``persistent`` None) when the log
    ends at the first non-finite record (``details["records_after"]`` 0: nothing after it to tell). A grad norm that stays non-finite while the
    logged loss stays finite (``details["loss_stays_finite"]``, ``finite_losses``: the records from the
    first one on with a finite loss other than an exact 0.0, the value loggers hide a NaN as; never on a
    Hugging Face log, whose ``logging_nan_inf_filter`` leaves NaN losses out of the logged one) is
    neither: the weights are not poisoned (their loss would be NaN),
    the gradients are non-finite on every step (xtuner's mmengine log: ``grad_norm: nan`` from iteration
    240 on, the loss 2.51, 2.46). The other way round, a loss that stays non-finite while every grad norm
    logged from the first non-finite loss on is finite (``details["grad_stays_finite"]``,
    ``finite_grad_norms``: the records after it with a finite grad norm, at least one, none non-finite)
    is neither either: the weights are not poisoned (their gradients would be NaN); the logger's running
    sum holds the NaN (the Hugging Face Trainer with ``logging_nan_inf_filter=False`` adds every step's
    loss into ``tr_loss`` and subtracts the logged part, NaN - NaN staying NaN, so every later logged
    loss is NaN): the first one's step alone had a non-finite loss as far as the log tells (a micro-batch
    whose every label is ignored, under a mean reduction: 0/0, with zero gradients)."""

    def __init__(self, opts: TraceOptions):
        super().__init__(opts)
        self.first: dict[Any, tuple[Stream, StepRecord, dict[str, Any]]] = {}
        self.count: dict[Any, int] = {}
        #: per rank: records from the first non-finite one on (inclusive) whose loss is logged and finite
        self.finite_losses: dict[Any, int] = {}
        #: per rank: finite records after the first non-finite one (the scaler skipped it and training went on)
        self.finite_after: dict[Any, int] = {}
        self.recovered_at: dict[Any, StepRecord] = {}
        #: per rank: records of any kind after the first non-finite one
        self.later: dict[Any, int] = {}
        #: per rank: records after the first non-finite one with a finite / a non-finite grad norm logged
        self.grads_after: dict[Any, list[int]] = {}

    def _why(self, rec: StepRecord, s: Stream) -> str | None:
        loss, g = rec.loss, rec.grad_norm
        if (loss is not None and math.isfinite(loss) and (g is None or math.isfinite(g)) and not rec.nan_steps):
            return None  # the common case, decided without building anything
        bad = [f"{k} {getattr(rec, k)}" for k in ("loss", "grad_norm")
               if getattr(rec, k) is not None and not math.isfinite(getattr(rec, k))]
        if bad:
            return " and ".join(bad)
        if rec.nan_steps:
            return f"{rec.nan_steps} nan iteration(s) counted"
        if rec.loss is None and rec.skipped and rec.loss_scale is None and not rec.overflow:
            # no fp16 loss scale to back off: Megatron skips an iteration whose gradients are not finite
            return (f"skipped iteration(s) counted ({rec.skipped}) and no loss logged, with no loss scale (bf16/fp32): "
                    "the skipped step's gradients were not finite")
        interval = rec.step - s.prev.step if s.prev is not None else None
        if (rec.loss is None and rec.loss_scale is not None and s.prev is not None and s.prev.loss is not None
                and not rec.overflow and (rec.skipped is None or interval is None or rec.skipped < interval)):
            return "no loss logged (suspected non-finite: the loss is missing while not every step was skipped)"
        return None

    def feed(self, rec: StepRecord, s: Stream) -> None:
        if s.key in self.first:
            self.later[s.key] = self.later.get(s.key, 0) + 1
            if rec.grad_norm is not None:
                self.grads_after.setdefault(s.key, [0, 0])[0 if math.isfinite(rec.grad_norm) else 1] += 1
        why = self._why(rec, s)
        if (why is not None or s.key in self.first) and rec.loss is not None and math.isfinite(rec.loss) \
                and rec.loss != 0.0:  # an exact 0.0 is how a logger hides a NaN (log.hidden_non_finite)
            self.finite_losses[s.key] = self.finite_losses.get(s.key, 0) + 1
        if why is None:
            if s.key in self.first and rec.loss is not None:
                self.finite_after[s.key] = self.finite_after.get(s.key, 0) + 1
                self.recovered_at.setdefault(s.key, rec)
            return
        self.count[s.key] = self.count.get(s.key, 0) + 1
        if s.key not in self.first:
            loss = rec.loss
            metric = "loss" if loss is not None and not math.isfinite(loss) else \
                "grad_norm" if rec.grad_norm is not None and not math.isfinite(rec.grad_norm) else "counter"
            more = {"stated": rec.stated} if rec.stated is not None else {}
            self.first[s.key] = (s, rec, _details(s, rec, reason=why, suspected=why.startswith(("no loss", "skipped")),
                                                  metric=metric, **more))

    def finish(self, streams: dict[Any, Stream]) -> list[Finding]:
        out = []
        for key, (s, rec, d) in self.first.items():
            d["records"] = self.count[key]
            after = self.finite_after.get(key, 0)
            losses = self.finite_losses.get(key, 0)
            d["finite_after"] = after
            d["finite_losses"] = losses
            # a Hugging Face log's losses prove nothing: its logging_nan_inf_filter leaves NaN losses out
            stays = after == 0 and d["metric"] == "grad_norm" and losses > 0 and "hf_nan_filter" not in self.opts.notes
            d["loss_stays_finite"] = stays
            later = self.later.get(key, 0)
            d["records_after"] = later
            good_g, bad_g = self.grads_after.get(key, [0, 0])
            g0 = rec.grad_norm
            # every grad norm from the first non-finite loss on finite: the logger carries the NaN, not the weights
            grads_ok = (after == 0 and d["metric"] == "loss" and good_g > 0 and bad_g == 0
                        and (g0 is None or math.isfinite(g0)))
            d["grad_stays_finite"] = grads_ok
            d["finite_grad_norms"] = good_g
            d["persistent"] = None if later == 0 else after == 0 and not stays and not grads_ok
            back = self.recovered_at.get(key)
            d["recovered_step"] = None if back is None else back.step
            msg = f"{s.name}: {d['reason']} at {_context(d)}; {self.count[key]} record(s) non-finite from there"
            if stays:
                msg += (f"; the loss stays finite ({losses} finite loss value(s) from there) while the grad norm is "
                        "non-finite on every record: the weights are not poisoned (their loss would be NaN); the "
                        "gradients are (the optimizer skips or applies non-finite updates)")
            elif grads_ok:
                msg += (f"; the grad norm stays finite ({good_g} finite grad norm(s) after it, none non-finite) while "
                        "no finite loss is logged after it: the weights are not poisoned (their gradients would be "
                        "NaN); the logger's running sum carries the NaN on (the Hugging Face Trainer with "
                        "logging_nan_inf_filter=False: NaN - NaN stays NaN in its tr_loss), so the later losses "
                        "prove nothing: this step's loss was non-finite with finite gradients (e.g. a micro-batch "
                        "whose every label is ignored, 0/0 under a mean reduction)")
            elif later == 0:
                msg += ("; the log ends at it (no record after it): whether it persists or recovers is not known "
                        "from this log")
            else:
                msg += ("; no finite loss after it: persistent (the weights are poisoned, every later step invalid)"
                        if after == 0 else f"; finite again from step {back.step if back else '?'} ({after} finite "
                        "record(s) after it): transient (the step was skipped or the value recovered)")
            if "hf_nan_filter" in self.opts.notes:
                msg += ("; Hugging Face's logging_nan_inf_filter (on by default) leaves non-finite losses out of the "
                        "logged average, so finite logged losses before it do not prove finite steps")
                d["hf_nan_filter"] = True
            out.append(_finding(self.id, msg, self.count[key], d))
        return out


class _Spike(Rule):
    metric = "loss"

    def __init__(self, opts: TraceOptions):
        super().__init__(opts)
        self.det: dict[Any, SpikeDetector] = {}
        self.pending: dict[Any, list[tuple[StepRecord, dict[str, Any]]]] = {}
        self.first: dict[Any, tuple[Stream, dict[str, Any]]] = {}
        self.count: dict[Any, int] = {}

    def feed(self, rec: StepRecord, s: Stream) -> None:
        x = getattr(rec, self.metric)
        if x is None or not math.isfinite(x) or hides_non_finite(rec.loss, rec.grad_norm):
            return  # a non-finite value, or a 0.0 loss standing for one: no finite value to judge
        det = self.det.get(s.key)
        if det is None:
            det = self.det[s.key] = SpikeDetector(
                self.opts.spike if self.metric == "loss" else self.opts.spike.for_grad_norm())
        hit = det.feed(x)
        if det.rule.kind == "foundry":  # the run's records, details built while the stream state is theirs
            run = self.pending.setdefault(s.key, [])
            if det.run:
                run.append((rec, self._details(rec, s, x, det.threshold)))
                del run[:-(det.rule.patience + 1)]
            else:
                run.clear()
            if hit:
                self.count[s.key] = self.count.get(s.key, 0) + 1
                self.first.setdefault(s.key, (s, run[0][1]))
            return
        if hit:
            self.count[s.key] = self.count.get(s.key, 0) + 1
            if self.metric == "grad_norm":
                s.shared[_GRAD_SPIKE_KEY] = rec.step
            if s.key not in self.first:
                self.first[s.key] = (s, self._details(rec, s, x, det.threshold))
                if det.basis is not None:
                    self.first[s.key][1]["threshold_basis"] = det.basis
                if det.sigmas is not None:
                    self.first[s.key][1]["sigmas"] = det.sigmas

    def _details(self, rec: StepRecord, s: Stream, x: float, threshold: float | None) -> dict[str, Any]:
        prev_val = getattr(s.prev, self.metric) if s.prev is not None else None
        d = _details(s, rec, value=x, previous_value=prev_val, threshold=threshold)
        if self.metric == "loss":
            g = s.shared.get(_GRAD_SPIKE_KEY)
            d["grad_rise_step"] = g if g is not None and 0 < rec.step - g <= GRAD_LEAD else None
        return d

    def _unjudged_note(self) -> str | None:
        """A note when the spike rule judged fewer values than it was fed beyond each stream's first
        values that no such rule judges (one; ``robust``: :data:`ROBUST_FIRST_JUDGED`, as a spike is
        judged against at least two earlier values): the values it kept as history are never spikes,
        so on a log shorter than that history "no spike" is not a verdict."""
        dets = list(self.det.values())
        seen, unjudged = sum(d.seen for d in dets), sum(d.unjudged for d in dets)
        rule = self.opts.spike
        first = ROBUST_FIRST_JUDGED if rule.kind == "robust" else 1
        if unjudged <= first * len(dets):
            return None
        need = {"megatron": f"its reference is the first {rule.window} values",
                "olmo": f"it needs {OLMO_MIN_HISTORY} earlier values",
                "robust": f"it needs {ROBUST_FIRST_JUDGED} earlier values"}.get(rule.kind, "it needs an earlier value")
        what = "none of them was judged" if unjudged == seen else "those were never judged as spikes"
        return (f"{self.id}: {unjudged} of {seen} finite {self.metric.replace('_', ' ')} value(s) "
                f"({len(dets)} stream(s)) came before the spike rule could judge them ({rule.kind}: {need}); "
                f"{what}. For a short log, choose a rule with --spike (e.g. ratio:2:4)")

    def finish(self, streams: dict[Any, Stream]) -> list[Finding]:
        note = self._unjudged_note()
        if note is not None:
            self.notes.append(note)
        out = []
        for key, (s, d) in self.first.items():
            d["rule"] = self.opts.spike.describe()
            d["spikes"] = self.count[key]
            # the rule as it judged this value: a robust threshold from too few earlier values is F x their
            # largest, not the median rule describe() states
            rule = (f"above {d['threshold_basis']} (the robust rule with fewer than {ROBUST_MIN_HISTORY} earlier values)"
                    if d.get("threshold_basis") else d["rule"])
            if d.get("sigmas") is not None:
                rule += f" (k = {d['sigmas']:.3g} here)"
            msg = (f"{s.name}: {self.metric.replace('_', ' ')} {d['value']:.4g} (previous {_g(d['previous_value'])}) "
                   f"is {rule}, threshold {_g(d['threshold'])}, at {_context(d)}; {self.count[key]} spike(s)")
            if d.get("grad_rise_step") is not None:
                msg += f"; the grad norm spiked first, at step {d['grad_rise_step']}"
            out.append(_finding(self.id, msg, self.count[key], d))
        return out


@log_rule("log.loss_spike")
class LossSpike(_Spike):
    """A loss above the spike rule (:mod:`datacheck.trace.spikes`); the first spike per rank and the count.
    Its details' ``grad_rise_step`` is the step of the last grad-norm spike (``log.grad_norm_spike``'s
    rule, same stream) at most :data:`GRAD_LEAD` steps before it, None when the grad norm did not lead
    (or is not logged, or that rule is not run). A robust threshold from fewer than
    :data:`~datacheck.trace.spikes.ROBUST_MIN_HISTORY` earlier values is F x their largest: the message
    says so (details ``threshold_basis``) instead of the median rule."""

    metric = "loss"


@log_rule("log.grad_norm_spike")
class GradNormSpike(_Spike):
    """A gradient norm above the same spike rule as the loss."""

    metric = "grad_norm"


@log_rule("log.loss_scale_collapse")
class LossScaleCollapse(Rule):
    """The fp16 loss scale backs off :data:`COLLAPSE_RUN` times in a row (records without a loss scale
    do not break the run; a record whose scale stays or grows does) or reaches :data:`MIN_LOSS_SCALE`.
    Back-offs from a scale >= :data:`SEARCH_SCALE` before any successful step are the initial scale
    search and do not count.

    One finding per rank: its first collapsing run of back-offs, followed to its end (the run goes on
    after it qualifies): ``count`` and ``details['backoffs']`` are the back-offs of the whole run,
    ``from_scale``/``step`` where it began, ``to_scale``/``to_step`` its lowest scale and last step,
    ``minimum`` whether it reached :data:`MIN_LOSS_SCALE` (apex's 16 halvings 32768 -> 0.5 are one run
    of 16 that reaches the minimum, never "3 times in a row")."""

    def __init__(self, opts: TraceOptions):
        super().__init__(opts)
        self.last_scale: dict[Any, float] = {}
        self.run: dict[Any, list[tuple[StepRecord, dict[str, Any]]]] = {}
        self.found: dict[Any, tuple[Stream, dict[str, Any]]] = {}
        self.ended: set[Any] = set()  # ranks whose collapsing run has ended: nothing more is followed
        #: per rank: the back-offs of the initial scale search, ``[count, from, to, first step, last step]``
        self.search: dict[Any, list[Any]] = {}

    def feed(self, rec: StepRecord, s: Stream) -> None:
        new = rec.loss_scale
        if new is None or s.key in self.ended:
            return
        old = rec.prev_scale if rec.overflow and rec.prev_scale is not None else self.last_scale.get(s.key)
        self.last_scale[s.key] = new
        run = self.run.get(s.key)
        if run is None:
            run = self.run[s.key] = []
        if old is None or not new < old:
            if not (rec.overflow and old is not None and new == old):  # a hysteresis skip keeps the run
                run.clear()
                if s.key in self.found:
                    self.ended.add(s.key)
            return
        if scale_search(old, s):  # the initial scale search: said beside a collapse, never counted in it
            if s.key not in self.found:
                got = self.search.setdefault(s.key, [0, old, new, rec.step, rec.step])
                got[0] += 1
                got[2], got[4] = new, rec.step
            return
        run.append((rec, _details(s, rec, from_scale=old, to_scale=new)))
        if s.key in self.found or len(run) >= COLLAPSE_RUN or new <= MIN_LOSS_SCALE:
            d = dict(run[0][1])
            d.update(to_scale=new, to_step=rec.step, backoffs=len(run),
                     minimum=new <= MIN_LOSS_SCALE or (s.key in self.found and self.found[s.key][1]["minimum"]))
            self.found[s.key] = (s, d)

    def finish(self, streams: dict[Any, Stream]) -> list[Finding]:
        out = []
        for s, d in self.found.values():
            how = " and ".join(
                ([f"backs off {d['backoffs']} times in a row"] if d["backoffs"] >= COLLAPSE_RUN else [])
                + ([f"reaches {scale_text(d['to_scale'])} (at or below {MIN_LOSS_SCALE:g})"] if d["minimum"] else []))
            search = self.search.get(s.key)
            before = ""
            if search is not None:
                n, a, b, s0, s1 = search
                d.update(search_backoffs=n, search_from_scale=a)
                before = (f", after {n} back-off(s) of the fp16 initial scale search ({scale_text(a)} -> {scale_text(b)}"
                          f"{f' at step {s0}' if s0 == s1 else f', steps {s0}..{s1}'}: from the scaler's initial scale, "
                          f"2^16 = 65536 by default in apex, GradScaler and DeepSpeed; not counted), {n + d['backoffs']} "
                          "in all")
            msg = (f"{s.name}: the fp16 loss scale {how}: {scale_text(d['from_scale'])} -> {scale_text(d['to_scale'])} "
                   f"from step {d['step']} to {d['to_step']}{before}; at {_context(d)}")
            out.append(_finding(self.id, msg, d["backoffs"], d))
        return out


def _skip_details(s: Stream, rec: StepRecord) -> dict[str, Any]:
    """:func:`_details` of a record counting ``k = rec.skipped`` skipped steps, with ``skipped_here``
    (k) and ``first_skip_by``: the latest step the first of them can be, ``rec.step - k + 1`` (k
    distinct steps up to ``rec.step``)."""
    return _details(s, rec, skipped_here=rec.skipped, first_skip_by=rec.step - (rec.skipped or 1) + 1,
                    has_prev=s.prev is not None and s.prev.step < rec.step)


def _skip_context(d: dict[str, Any]) -> str:
    """Where the first of a record's skipped steps lies, then :func:`_context`'s lr, loss scale and last
    good step: the record's window up to ``first_skip_by`` (a record at step 10 counting 10 skips of
    Megatron's first interval: "step 1 at the latest", no earlier record bounding the interval; at
    step 30 counting 2 of the 10 steps since step 20: steps 21..29)."""
    k, by, (lo, step) = d["skipped_here"] or 1, d["first_skip_by"], d["window"]
    if k == 1:
        return _context(d)
    rest = _context(d).split("; ", 1)[1]
    if not d["has_prev"]:
        where = f"step {by} at the latest ({k} skipped in the interval logged at step {step})"
    elif lo >= by:
        where = f"step {lo} (every one of steps {lo}..{step} skipped)"
    else:
        where = f"steps {lo}..{by} ({k} of the {step - lo + 1} steps logged at step {step} skipped)"
    return f"{where}; {rest}"


@log_rule("log.skipped_steps")
class SkippedSteps(Rule):
    """Optimizer steps skipped (Megatron's ``number of skipped iterations``, overflow lines): the total
    per rank, the first record with a skip, and how many came before any successful step (the fp16
    initial scale search)."""

    def __init__(self, opts: TraceOptions):
        super().__init__(opts)
        self.total: dict[Any, int] = {}
        self.early: dict[Any, int] = {}
        self.first: dict[Any, tuple[Stream, dict[str, Any]]] = {}
        self.after: dict[Any, dict[str, Any]] = {}  # the first record with a skip after an update succeeded

    def feed(self, rec: StepRecord, s: Stream) -> None:
        if not rec.skipped:
            return
        self.total[s.key] = self.total.get(s.key, 0) + rec.skipped
        if not s.ok_steps:
            self.early[s.key] = self.early.get(s.key, 0) + rec.skipped
        else:
            self.after.setdefault(s.key, _skip_details(s, rec))
        self.first.setdefault(s.key, (s, _skip_details(s, rec)))

    def finish(self, streams: dict[Any, Stream]) -> list[Finding]:
        out = []
        for key, (s, d) in self.first.items():
            early = self.early.get(key, 0)
            after = self.after.get(key)
            st = streams.get(key)
            ok = bool(st is not None and st.ok_steps)
            msg = (f"{s.name}: {self.total[key]} optimizer step(s) skipped, the first at {_skip_context(d)}; "
                   + (f"{early} of them before the first successful step logged" if ok else
                      "every logged step was skipped: no successful step is logged"))
            if after is not None:  # once training had started: the dynamic scaler probing a higher scale
                msg += f"; {self.total[key] - early} after it, the first at {_skip_context(after)}"
                d = dict(d, first_after_success_step=after["step"])
            d.update(skipped=self.total[key], before_first_success=early, success_logged=ok)
            out.append(_finding(self.id, msg, self.total[key], d))
        return out


@log_rule("log.step_regression")
class StepRegression(Rule):
    """Step numbers going back within a rank: a resume from an earlier checkpoint (one finding per rank,
    every resume point in ``details['resumes']``, the first named in the message). A record that begins a
    new launch (:attr:`Stream.new_launch`: a banner, a Hugging Face training bar counting again) at or after
    the previous record's step is a resume point too (``"launch": True``): a Trainer resumed from the
    checkpoint just before the last logged step logs that step again (step 11, then 11 again), and one
    with ``logging_steps`` > 1 may log past it; only the log's launch marks tell such a resume from one
    run. A console without any (a Trainer's ``disable_tqdm`` dicts at the default log level) that logs
    past the last step shows no resume at all."""

    def __init__(self, opts: TraceOptions):
        super().__init__(opts)
        self.resumes: dict[Any, list[dict[str, Any]]] = {}
        self.streams: dict[Any, Stream] = {}

    def feed(self, rec: StepRecord, s: Stream) -> None:
        if s.prev is not None and (rec.step < s.prev.step or s.new_launch) and not rec.step_inferred:
            self.streams[s.key] = s
            self.resumes.setdefault(s.key, []).append(
                {"from_step": s.prev.step, "to_step": rec.step, "where": rec.where(), "lr": rec.lr,
                 "lr_before": s.prev.lr, "loss_scale": rec.loss_scale,
                 **({"launch": True} if rec.step >= s.prev.step else {})})

    def finish(self, streams: dict[Any, Stream]) -> list[Finding]:
        out = []
        for key, rs in self.resumes.items():
            r = rs[0]
            d = {"step": r["to_step"], "rank": stream_name(key), "resumes": rs[:100], "window": [r["to_step"], r["to_step"]]}
            how = (f"a new launch logs step {r['to_step']} "
                   + ("again" if r["to_step"] == r["from_step"] else f"after step {r['from_step']}")
                   + f" at {r['where']}"
                   if r.get("launch") else
                   f"the step goes back from {r['from_step']} to {r['to_step']} at {r['where']}")
            msg = f"{stream_name(key)}: {how} (a resume from an earlier checkpoint); {len(rs)} resume point(s)"
            out.append(_finding(self.id, msg, len(rs), d))
        return out


@log_rule("log.lr_discontinuity")
class LrDiscontinuity(Rule):
    """At a resume point (the step going back, or a new launch logging a step it had logged: see
    :class:`StepRegression`), an lr that differs (by more than :data:`LR_RESUME_TOLERANCE`, relative) from
    the lr this log showed at the same step before (the scheduler state was not restored); or a
    warmup restart: the lr falls below :data:`WARMUP_DROP` of the previous record's and then rises."""

    def __init__(self, opts: TraceOptions):
        super().__init__(opts)
        self.seen: dict[Any, OrderedDict[int, float]] = {}
        self.hits: dict[Any, list[tuple[Stream, dict[str, Any], str]]] = {}
        self.drop: dict[Any, tuple[StepRecord, dict[str, Any]]] = {}

    def feed(self, rec: StepRecord, s: Stream) -> None:
        lr = rec.lr
        if lr is None or not math.isfinite(lr):
            return
        mem = self.seen.get(s.key)
        if mem is None:
            mem = self.seen[s.key] = OrderedDict()
        prev_lr = s.prev.lr if s.prev is not None else None
        if s.prev is not None and (rec.step < s.prev.step or s.new_launch) and rec.step in mem:
            before = mem[rec.step]
            if abs(lr - before) > LR_RESUME_TOLERANCE * max(abs(before), 1e-30):
                d = _details(s, rec, lr_before_resume=before, resumed_from=s.prev.step)
                self.hits.setdefault(s.key, []).append(
                    (s, d, f"at the resume to step {rec.step} (from {s.prev.step}) the lr is {lr:.4g}, "
                           f"but was {before:.4g} at that step before: the scheduler state was not restored"))
        if s.key in self.drop:
            drec, d = self.drop.pop(s.key)
            if prev_lr is not None and lr > prev_lr:
                self.hits.setdefault(s.key, []).append(
                    (s, d, f"the lr falls from {d['lr_before_drop']:.4g} to {drec.lr:.4g} at step {drec.step} "
                           f"and rises again ({lr:.4g} at step {rec.step}): the warmup restarted"))
        if prev_lr is not None and prev_lr > 0 and lr < WARMUP_DROP * prev_lr:
            self.drop[s.key] = (rec, _details(s, rec, lr_before_drop=prev_lr))
        mem[rec.step] = lr
        if len(mem) > _LR_MEMORY:
            mem.popitem(last=False)

    def finish(self, streams: dict[Any, Stream]) -> list[Finding]:
        out = []
        for hits in self.hits.values():
            s, d, text = hits[0]
            d["events"] = len(hits)
            out.append(_finding(self.id, f"{s.name}: {text}; {_context(d)}; {len(hits)} event(s)", len(hits), d))
        return out


@log_rule("log.rank_divergence")
class RankDivergence(Rule):
    """Across ranks: a rank whose loss goes non-finite while others stay finite (judged on the loss,
    each rank's own; on the grad norm, all-reduced and so the same on every rank, only when no loss
    went non-finite); a rank whose mean
    loss over its last :data:`DIVERGE_LAST` records exceeds :data:`DIVERGE_FACTOR` x the others'
    median; ranks missing from 0..max (or from ``--world-size``), e.g. only rank 0 logged."""

    def __init__(self, opts: TraceOptions):
        super().__init__(opts)
        self.first_bad: dict[Any, StepRecord] = {}
        self.grad_bad: dict[Any, StepRecord] = {}
        self.tail: dict[Any, deque[float]] = {}

    def feed(self, rec: StepRecord, s: Stream) -> None:
        loss, g = rec.loss, rec.grad_norm
        if loss is not None and not math.isfinite(loss):  # a rank's own loss, not the all-reduced grad norm
            self.first_bad.setdefault(s.key, rec)
        elif g is not None and not math.isfinite(g):
            self.grad_bad.setdefault(s.key, rec)
        if loss is not None and math.isfinite(loss):
            t = self.tail.get(s.key)
            if t is None:
                t = self.tail[s.key] = deque(maxlen=DIVERGE_LAST)
            t.append(loss)

    def finish(self, streams: dict[Any, Stream]) -> list[Finding]:
        out: list[Finding] = []
        ranks = sorted(k for k in streams if isinstance(k, int))
        if not ranks:
            if self.opts.world_size and self.opts.world_size > 1:
                out.append(_finding(self.id, f"the logs name no rank, but --world-size is {self.opts.world_size}: "
                                             "other ranks are unseen (one rank's log only?)", 0,
                                    {"step": None, "ranks_seen": [], "world_size": self.opts.world_size}))
            return out
        expected = set(range(min(self.opts.world_size, MAX_RANK))) if self.opts.world_size \
            else set(range(min(max(ranks), MAX_RANK - 1) + 1))
        missing = sorted(expected - set(ranks))
        if missing:
            out.append(_finding(self.id, f"ranks {missing} are not in the logs (seen {ranks}); "
                                         + ("only rank 0 is logged: other ranks unseen" if ranks == [0] else
                                            "their loss and non-finite steps are unknown"), len(missing),
                                {"step": None, "ranks_seen": ranks, "missing": missing}))
        if len(ranks) > 1:
            bad = dict(self.first_bad) if self.first_bad else dict(self.grad_bad)
            for k, rec in sorted(bad.items(), key=lambda kv: kv[1].step):
                fine = [r for r in ranks if r != k and (r not in bad or bad[r].step > rec.step)]
                if fine:
                    out.append(_finding(self.id, f"rank {k} goes non-finite at step {rec.step} ({rec.where()}) while "
                                                 f"ranks {fine} are still finite there", 1,
                                        {"step": rec.step, "rank": stream_name(k), "finite_ranks": fine}))
                    break
            means = {k: sum(v) / len(v) for k, v in self.tail.items() if isinstance(k, int) and v}
            for k, m in sorted(means.items()):
                others = sorted(v for r, v in means.items() if r != k)
                if others:
                    med = others[len(others) // 2]
                    if med > 0 and m > DIVERGE_FACTOR * med:
                        out.append(_finding(self.id, f"rank {k}'s mean loss over its last {DIVERGE_LAST} records is "
                                                     f"{m:.4g}, above {DIVERGE_FACTOR:g}x the other ranks' median {med:.4g}",
                                            1, {"step": streams[k].prev.step if streams[k].prev else None,
                                                "rank": stream_name(k), "mean_loss": m, "others_median": med}))
        return out
