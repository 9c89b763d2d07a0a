"""The training-dynamics ``log.*`` checks (CHECKS.md "training dynamics"): finite values, a run going
wrong. Registered into :data:`datacheck.trace.rules.LOG_RULES` like the numeric rules.

The rules share, per stream (rank, or log), one buffer of the training records' ``(step, loss, grad
norm, lr, file:line)`` (kept in the stream's ``shared`` state by :class:`Divergence`), a :class:`Points` bounded to :data:`MAX_POINTS` entries (past it every other
entry is dropped and the stride doubles, as the plot's curves are down-sampled), so a log of any length
is judged in bounded memory; on a log of more than :data:`MAX_POINTS` records an onset is dated to the
kept entry, within one stride. Records whose whole logging interval was skipped (Megatron's
``number of skipped iterations`` equal to the interval, an overflow line) carry no update and are left
out. Eval records come through :meth:`~datacheck.trace.rules.Rule.feed_eval`.

Every threshold is a ``[trace]`` key (:class:`datacheck.model.config.TraceSection`, whose descriptions
give their sources). Onsets are dated where the curve left its band (the first raw value above it,
walking back from where the smoothed curve stayed out), never where a rolling window finally fired.
The smoothed curve is the centred running median over :func:`smooth_width` points.
"""
from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

from datacheck.model.findings import Finding
from datacheck.trace.record import StepRecord
from datacheck.trace.rules import (
    Rule,
    Stream,
    TraceOptions,
    ZeroTail,
    _finding,
    _g,
    hides_non_finite,
    log_rule,
    stream_name,
)
from datacheck.trace.spikes import MAD_SIGMA, ROBUST_MIN_HISTORY, ROBUST_SIGMAS, SpikeDetector, SpikeRule

__all__ = ["Points", "Pt", "MAX_POINTS", "MIN_POINTS", "median", "smooth", "smooth_width", "noise_sigma", "prefix_noise_sigmas", "relative_noise",
           "median_se", "expected_max_normal", "noise_upper", "NOISE_SE", "warmup_end", "spike_indices"]

#: entries kept per stream (past it the stride doubles)
MAX_POINTS = 8192
#: the sigmas of the level's own uncertainty that log.divergence's 1.5x cap leaves over it: one-sided
#: 97.7% (with 1, a flat run at 35% noise whose first losses were low was flagged in 2-13 of 96 runs;
#: with 2, 2-9; the planted faults of benchmarks/trace_false_alarms.py --quick found as often)
LEVEL_Z = 2.0
#: finite losses a dynamics rule needs before it judges a stream
MIN_POINTS = 8
#: stagnation needs this many finite losses (a 20% window of fewer is a handful of values)
STAGNATION_MIN_POINTS = 20
#: the fraction of points from the onset to the end that must stay out of the band (divergence,
#: vanishing gradient): a curve that comes back is an episode, not a divergence
STAY_OUT = 0.8
#: an lr at or below this fraction of its peak is decayed (a plateau there is convergence, not a stall)
DECAYED_LR = 0.5
#: a run whose loss fell by at least this fraction before a plateau of at most :data:`CONVERGED_SPAN`
#: of the run has converged (trainproof's dead-run rule asks for 5% improvement; 10% leaves room for noise)
CONVERGED_DROP = 0.1
CONVERGED_SPAN = 0.5
#: a logged lr of at most this fraction of the peak is treated as the peak being reached (warmup end)
PEAK_LR = 0.999
#: the growing-oscillation test of ``log.divergence`` cuts the finite losses into this many equal windows
#: (each at least :data:`MIN_POINTS` points)
OSC_WINDOWS = 10
#: ... and asks the amplitude (q90 - q10) of the last 3 windows (median) to be at least this multiple of
#: the first 3 windows' (the oscillation at least doubled: a constant one, gradsnitch's healthy_osc,
#: gives about 1.0) ...
OSC_GROWTH = 2.0
#: ... rising steadily: the Spearman rank correlation of the windows' amplitudes with their order at
#: least this (noise around a flat loss gives up to about 0.8 on 10 windows: the bar is above it)
OSC_RHO = 0.9


@dataclass(slots=True)
class Pt:
    """One kept training record: step, loss, grad norm, lr (None: not logged), ``file:line``, loss scale."""

    step: int
    loss: float | None
    grad_norm: float | None
    lr: float | None
    where: str
    loss_scale: float | None


def _interval_skipped(rec: StepRecord, s: Stream) -> bool:
    if rec.overflow:
        return True
    if not rec.skipped:
        return False
    interval = rec.step - s.prev.step if s.prev is not None and s.prev.step < rec.step else 1
    return rec.skipped >= interval


class Points:
    """A stream's kept records (every ``stride``-th; at most :data:`MAX_POINTS`), and, over every
    record (kept or not, a wholly skipped interval's too), what was logged of the grad norm and the
    learning rate: ``logged`` (records carrying it), ``finite`` (finite values), ``skipped`` (finite
    values on records of wholly skipped intervals, left out of ``pts``), ``lo``/``hi`` (the least and
    largest finite value): why a rule finds no value in ``pts`` (:meth:`missing`)."""

    def __init__(self) -> None:
        self.pts: list[Pt] = []
        self.stride = 1
        self.n = 0
        self.logged = {"grad_norm": 0, "lr": 0}
        self.finite = {"grad_norm": 0, "lr": 0}
        self.skipped = {"grad_norm": 0, "lr": 0}
        self.lo: dict[str, float] = {}
        self.hi: dict[str, float] = {}
        #: the stream's trailing exact-0.0 losses, over every record (:meth:`hide_tail`)
        self.tail = ZeroTail()

    def count(self, rec: StepRecord, skipped: bool) -> None:
        """Count ``rec``'s grad norm and learning rate (every record, before any is left out)."""
        for m, v in (("grad_norm", rec.grad_norm), ("lr", rec.lr)):
            if v is None:
                continue
            self.logged[m] += 1
            if math.isfinite(v):
                self.finite[m] += 1
                self.skipped[m] += skipped
                self.lo[m] = min(self.lo.get(m, v), v)
                self.hi[m] = max(self.hi.get(m, v), v)

    def missing(self, metric: str) -> str:
        """Why ``pts`` holds no finite ``metric`` (``"grad_norm"`` or ``"lr"``): none logged; every
        logged value NaN or inf; or every finite one on a record of a wholly skipped interval (no
        update was made: the values are said, and that they judge nothing)."""
        noun = {"grad_norm": "grad norm", "lr": "learning rate"}[metric]
        n, fin = self.logged[metric], self.finite[metric]
        if n == 0:
            return f"no {noun} logged"
        if fin == 0:
            return f"every logged {noun} is NaN or inf ({n} record(s)): log.non_finite's finding, not a vanishing gradient" if metric == "grad_norm" \
                else f"every logged {noun} is NaN or inf ({n} record(s))"
        lo, hi = self.lo[metric], self.hi[metric]
        vals = _g(lo) if lo == hi else f"{_g(lo)} .. {_g(hi)}"
        if self.skipped[metric] == fin:
            return (f"the {noun} ({vals}) is logged only on records whose whole interval was skipped ({fin} "
                    "record(s), no update made): nothing to judge")
        return f"{n} {noun}(s) logged ({vals}), none kept"

    def hide_tail(self, notes: frozenset[str]) -> None:
        """Leave out (as not logged) the 0.0 losses of the kept records that the stream's trailing run
        of them makes hidden non-finite ones (:meth:`ZeroTail.hidden_from`): no finite values to judge."""
        start = self.tail.hidden_from(notes)
        if start is None:
            return
        for p in reversed(self.pts):
            if p.step < start or (p.loss is not None and p.loss != 0.0):
                break
            p.loss = None

    def add(self, p: Pt) -> None:
        if self.n % self.stride == 0:
            self.pts.append(p)
            if len(self.pts) >= MAX_POINTS:
                self.pts = self.pts[::2]
                self.stride *= 2
        self.n += 1


def median(xs: list[float]) -> float:
    """The median of a non-empty list."""
    return median_sorted(sorted(xs))


def median_sorted(s: list[float]) -> float:
    """The median of a non-empty sorted list."""
    n = len(s)
    return s[n // 2] if n & 1 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def smooth_width(n: int) -> int:
    """The running-median width for ``n`` points: 4% of them, odd, at least 3."""
    w = max(3, n // 25)
    return w | 1


def smooth(xs: list[float], w: int) -> list[float]:
    """The centred running median of ``xs`` over ``w`` points (truncated at the ends)."""
    h = w // 2
    out = []
    win: list[float] = sorted(xs[:h])
    n = len(xs)
    for i in range(n):
        if i + h < n:
            bisect.insort(win, xs[i + h])
        if i - h - 1 >= 0:
            del win[bisect.bisect_left(win, xs[i - h - 1])]
        k = len(win)
        out.append(win[k // 2] if k & 1 else 0.5 * (win[k // 2 - 1] + win[k // 2]))
    return out


def noise_sigma(xs: list[float]) -> float:
    """The noise of a curve, as a normal sigma: 1.4826 x the median absolute second difference of
    ``xs`` / sqrt(6) (a second difference of independent N(0, s^2) noise has variance 6 s^2). Robust to
    spikes (a median) and not inflated by a trend that is locally linear, unlike the residuals around a
    running median, whose median absolute value is 0 or near it for a third of the points when the
    median runs over 3 (a short log): those understated the noise 3-10x and a noisy healthy run of 40
    steps left its band (1 run in 10). 0.0 for fewer than 3 values."""
    d2 = [xs[i - 1] - 2 * xs[i] + xs[i + 1] for i in range(1, len(xs) - 1)]
    return MAD_SIGMA * median([abs(x) for x in d2]) / math.sqrt(6) if d2 else 0.0


def prefix_noise_sigmas(xs: list[float]) -> list[float]:
    """``[noise_sigma(xs[:k]) for k in range(len(xs) + 1)]``, in one pass (the absolute second
    differences kept sorted as they come): the noise of the curve before each point."""
    out = [0.0] * min(3, len(xs) + 1)
    srt: list[float] = []
    for k in range(3, len(xs) + 1):
        bisect.insort(srt, abs(xs[k - 3] - 2 * xs[k - 2] + xs[k - 1]))
        out.append(MAD_SIGMA * median_sorted(srt) / math.sqrt(6))
    return out


def relative_noise(xs: list[float]) -> float | None:
    """The noise of the whole curve relative to its level: :func:`noise_sigma` of ``log(xs)`` (for noise
    ``cv`` times the level, about ``cv``, whatever the level does: a loss that doubles with its noise
    doubling keeps it); None when a value is not positive (no log)."""
    if any(x <= 0 for x in xs):
        return None
    return noise_sigma([math.log(x) for x in xs])


_NORMAL = NormalDist()

#: the relative standard deviation of :func:`noise_sigma` on ``m`` values of white noise is about
#: ``NOISE_SE / sqrt(m - 2)`` (measured: 0.237 on 37 values, 0.073 on 370, 0.023 on 3,700, 600-2,000
#: draws each; the median's 37% efficiency and the second differences' overlap: 1.36 / m for a MAD of
#: independent values, 1.93 / m here; tests/unit/trace/test_dynamics.py measures it again)
NOISE_SE = 1.39
#: the one-sided 95% normal quantile (:func:`noise_upper`)
_Z95 = 1.645


def noise_upper(n: int) -> float:
    """The factor that raises :func:`noise_sigma` of ``n`` values to its one-sided 95% upper bound:
    ``1 + 1.645 x NOISE_SE / sqrt(n - 2)`` (1.39 at 37 values, 1.07 at 1,000)."""
    return 1 + _Z95 * NOISE_SE / math.sqrt(max(1, n - 2))


def median_se(w: int) -> float:
    """The standard deviation of the median of ``w`` independent N(0, 1) values: sqrt(pi / (2w + 1))
    (the asymptotic variance is pi / 2w; with the + 1 the variance is within 1% of the exact 0.449,
    0.287, 0.210 for w = 3, 5, 7, the widths :func:`smooth_width` gives). The running median of :func:`smooth` over ``w`` points of a curve whose noise is
    ``s`` (:func:`noise_sigma`) swings by ``s x median_se(w)``."""
    return math.sqrt(math.pi / (2 * w + 1))


def expected_max_normal(m: float) -> float:
    """The expected largest of ``m`` independent N(0, 1) values (Blom's approximation
    Phi^-1((m - 0.375) / (m + 0.25)): 0 at m = 1, within 5% of the exact value for m = 2, 3 and 1% from
    m = 10; 0 for m <= 1). The lowest of ``m`` independent noisy values of one level lies this many
    sigmas under it, on average."""
    if m <= 1:
        return 0.0
    return _NORMAL.inv_cdf((m - 0.375) / (m + 0.25))


def warmup_end(lrs: list[float | None]) -> int | None:
    """The index of the first lr at its peak when the lr warms up (its first value is under half the
    peak); 0 when the lr starts at its peak; None when no lr is logged."""
    vals = [(i, v) for i, v in enumerate(lrs) if v is not None and math.isfinite(v)]
    if not vals:
        return None
    peak = max(v for _, v in vals)
    if peak <= 0:
        return None
    if vals[0][1] > 0.5 * peak:
        return 0
    return next(i for i, v in vals if v >= PEAK_LR * peak)


def spike_indices(xs: list[float], factor: float, window: int = 64) -> list[int]:
    """Indices of the values of ``xs`` that the robust spike rule (:class:`datacheck.trace.spikes.SpikeDetector`,
    factor ``factor``, ``window`` values) calls spikes, fed in order (non-finite values are never spikes)."""
    det = SpikeDetector(SpikeRule("robust", factor, window))
    return [i for i, x in enumerate(xs) if det.feed(x)]


def _ev(p: Pt, **values: Any) -> dict[str, Any]:
    """One evidence line: where, step and the values it rests on."""
    return {"where": p.where, "step": p.step, **{k: v for k, v in values.items() if v is not None}}


def _step_details(s_name: str, p: Pt, last_good: Pt | None, **more: Any) -> dict[str, Any]:
    lo = last_good.step + 1 if last_good is not None and last_good.step < p.step else p.step
    return {"step": p.step, "rank": s_name, "window": [lo, p.step], "where": p.where, "lr": p.lr,
            "loss_scale": p.loss_scale, "grad_norm": p.grad_norm, "loss": p.loss,
            "last_good_step": None if last_good is None else last_good.step,
            "last_good_lr": None if last_good is None else last_good.lr,
            "last_good_loss_scale": None if last_good is None else last_good.loss_scale,
            "last_good_grad_norm": None if last_good is None else last_good.grad_norm,
            "last_good_loss": None if last_good is None else last_good.loss, **more}


_SHARED_KEY = "dynamics_points"


class _Dynamics(Rule):
    """Judges each stream's shared points (:meth:`judge`); :class:`Divergence` collects them, once per
    record, for every dynamics rule (the others leave :meth:`feed` alone and the runner skips them)."""

    def __init__(self, opts: TraceOptions):
        super().__init__(opts)
        self.points: dict[Any, Points] = {}
        self.evals: dict[Any, list[tuple[int, float, str]]] = {}
        #: per stream: eval index -> the train loss its eval line reports (``StepRecord.eval_train_loss``)
        self.eval_train: dict[Any, dict[int, float]] = {}

    def collect(self, rec: StepRecord, s: Stream) -> None:
        """Add ``rec`` to the stream's shared :class:`Points` (records of a wholly skipped interval left out)."""
        pts = s.shared.get(_SHARED_KEY)
        if pts is None:
            pts = s.shared[_SHARED_KEY] = Points()
        skipped = _interval_skipped(rec, s)
        pts.count(rec, skipped)
        pts.tail.feed(rec)
        if skipped:
            return
        if hides_non_finite(rec.loss, rec.grad_norm):  # a 0.0 loss standing for a non-finite one: no finite values
            loss = g = None
        else:
            loss = rec.loss if rec.loss is not None and math.isfinite(rec.loss) else None
            g = rec.grad_norm if rec.grad_norm is not None and math.isfinite(rec.grad_norm) else None
        pts.add(Pt(rec.step, loss, g, rec.lr, rec.where(), rec.loss_scale))

    def feed_eval(self, rec: StepRecord, key: Any) -> None:
        if rec.loss is not None and math.isfinite(rec.loss):
            self.evals.setdefault(key, []).append((rec.step, rec.loss, rec.where()))
            t = rec.eval_train_loss
            if t is not None and math.isfinite(t):
                self.eval_train.setdefault(key, {})[len(self.evals[key]) - 1] = t

    def losses(self, key: Any) -> list[Pt]:
        return [p for p in self.points[key].pts if p.loss is not None]

    def finish(self, streams: dict[Any, Stream]) -> list[Finding]:
        out: list[Finding] = []
        reasons: list[str] = []
        self.points = {k: s.shared[_SHARED_KEY] for k, s in streams.items() if _SHARED_KEY in s.shared}
        for key in self.points:
            self.points[key].hide_tail(self.opts.notes)  # once per stream in effect: the next calls find no 0.0 left
        for key in self.points:
            got = self.judge(key, stream_name(key))
            if isinstance(got, str):
                reasons.append(f"{stream_name(key)}: {got}")
            elif got is not None:
                out.append(got)
        if not self.points:
            reasons.append("no training record")
        if reasons and len(reasons) == len(self.points or [None]):
            self.not_run.append("; ".join(reasons[:4]) + (f"; and {len(reasons) - 4} more" if len(reasons) > 4 else ""))
        return out

    def judge(self, key: Any, name: str) -> Finding | str | None:
        """A finding, None (judged: nothing wrong), or why the stream could not be judged."""
        raise NotImplementedError


def _first_margin(first: float, sigma: float, opts: TraceOptions) -> float:
    """The band of one raw value (the first loss) as a reference: ``divergence_sigmas`` of the raw noise,
    at least ``divergence_floor`` of it, never cut to ``divergence_factor`` (a level's cap: one value
    is no level)."""
    lim = opts.limits
    return max(lim.divergence_floor * first, lim.divergence_sigmas * sigma) if first > 0 else lim.divergence_sigmas * sigma


def _margin(best: float, sigma: float, opts: TraceOptions, level_sigma: float | None = None) -> float:
    """The band's margin over the level ``best`` whose smoothed curve's sigma is ``sigma``:
    ``divergence_sigmas`` sigmas, at least ``divergence_floor`` of the level, and cut to
    ``divergence_factor - 1`` of it plus :data:`LEVEL_Z` sigmas of the level ``level_sigma`` (default
    ``sigma``): the level is itself a smoothed value, and 1.5x of a level one sigma low is inside the
    noise (flat runs at 35% noise were flagged 12-39 runs in 96 by the cut at 1.5x alone; with one
    sigma, runs whose first losses were low 2-13 in 96, with two 2-9)."""
    lim = opts.limits
    if best <= 0:
        return lim.divergence_sigmas * sigma
    ls = sigma if level_sigma is None else level_sigma
    return max(lim.divergence_floor * best, min((lim.divergence_factor - 1) * best + LEVEL_Z * ls, lim.divergence_sigmas * sigma))


@log_rule("log.divergence")
class Divergence(_Dynamics):
    """The smoothed loss (centred running median, :func:`smooth`) stays above its best smoothed value
    so far by more than a margin for ``[trace] divergence_window`` of the points and on
    :data:`STAY_OUT` of the points to the end of the log (at least twice that window of points: a
    short tail, e.g. a finite stretch cut by a NaN, cannot tell a rise from noise), never reaching a new best after it (a loss
    that jumps and then comes back under its old best is a spike episode; a later sustained rise
    from the new best is the divergence). The best is a level: the lowest smoothed value is the lowest
    of the independent swings (one per ``width`` points) of the smoothed values before it, or of every
    smoothed value up to the one judged since the curve first came within 3 of its sigmas of it,
    whichever are more (a flat run whose low value came first: every value after it competed), so it
    lies about :func:`expected_max_normal` of them under the level; the best level is the lowest value
    plus that many sigmas of the smoothed curve (``s x`` :func:`median_se` ``(width)``, ``s`` the raw
    noise before the point judged, :func:`noise_sigma`, never under the whole log's
    :func:`relative_noise`, raised to its one-sided 95% upper bound (:func:`noise_upper`: from 37
    values the estimate is 0.53-0.88 of the noise 1 time in 8), times the best (from a few values the
    noise is one or two draws of a median: 3 of those sigmas were narrower than the run's noise, and a
    flat run at 1.95 +- 0.17 whose first loss was 1.651 left its band at step 3; 71 of 200 such seeds
    were flagged, 13 with the log's noise as a floor, none with its upper bound and the min-bias of
    every value): a run that goes wild from its tenth value is judged against the calm before, not
    against its own swings). Without it a short noisy healthy run's best is 1-2 sigmas low and 1.5x of
    it under the level's own noise (12% of 40-point runs at 20-33% noise were flagged). The margin is
    ``divergence_sigmas`` sigmas of the smoothed curve, at least ``divergence_floor`` of the best level
    and at most ``divergence_factor - 1`` of it plus two sigmas of the level (a smoothed value; near the
    log's start a median of fewer points, :func:`median_se` of those; so 1.5x the level and two such
    sigmas is always out of the band). "A new best" is the lowest
    smoothed value of the rest plus its own min-bias under the best level. The first loss (one raw
    value: the centred median does not see a run that leaves it within half a width) is a reference
    too, once its noise is known (the log's, or 3 values): when it is under the best level and its band
    (3 sigmas of the raw noise at the level it is held under, at least ``divergence_floor`` of it, never
    cut to ``divergence_factor``: one value is no level) is the lower, the run is judged against it. Judged from the first value, warmup included: a run
    that diverges while the lr warms up (the lr too high) is the commonest divergence. The onset is
    the first raw loss above the band before the smoothed curve stayed out. The details say whether
    the grad norm rose before it (``grad_rise_step``: the grad norm above twice its median so far,
    within the 10 records before the onset) and how many smoothed values from the window's start stayed
    above the band (``points_out`` of ``points_after``: at least :data:`STAY_OUT`, so the message says
    "stayed out" only when it is every one, and says when the last one is back under the band top).
    This rule collects the stream's points every dynamics
    rule reads (:meth:`_Dynamics.collect`).

    A loss whose running median stays flat while it oscillates with a growing amplitude (the upper
    envelope, not the median, leaves the band: :meth:`_oscillation`) is the same unstable dynamics (the
    lr too high) and the same finding, with ``kind: growing_oscillation`` in its details; a constant
    or decaying oscillation is not."""

    def feed(self, rec: StepRecord, s: Stream) -> None:
        self.collect(rec, s)

    def judge(self, key: Any, name: str) -> Finding | str | None:
        pts = self.losses(key)
        n = len(pts)
        if n < MIN_POINTS:
            return f"{n} finite loss value(s), fewer than {MIN_POINTS}"
        raw = [p.loss for p in pts]  # type: ignore[misc]
        width = smooth_width(n)
        sm = smooth(raw, width)  # type: ignore[arg-type]
        sig = prefix_noise_sigmas(raw)  # type: ignore[arg-type]
        # the log's relative noise, raised to its one-sided 95% upper bound: from n values the estimate
        # is itself noisy (:data:`NOISE_SE`), and a band of 3 sigmas of a low draw of it was narrower than
        # the run's noise (the new user's flat run at 1.95 +- 0.17: flagged by estimates 0.53-0.88 of it)
        rel = (relative_noise(raw) or 0.0) * noise_upper(n)  # type: ignore[arg-type]
        se = median_se(width)
        win = max(3, math.ceil(self.opts.limits.divergence_window * n))
        sigmas = self.opts.limits.divergence_sigmas
        half = width // 2
        best, best_i = sm[0], 0
        low: list[float] = []  # -(the lowest smoothed value up to each index): non-decreasing, for bisect
        tops = []
        for i, v in enumerate(sm):
            if v < best:
                best, best_i = v, i
            low.append(-best)
            # the noise before i, never under the log's relative noise at the best's level: from a few
            # values the noise is one or two draws of a median (from 3 values, under a third of the noise 1
            # time in 4) and a band of 3 of those sigmas was narrower than the noise the run shows
            s_i = max(sig[i + 1], rel * best)
            # the lowest smoothed value is the lowest of the independent swings (one per width) of the
            # values before it, and of every value up to i since the curve first came within 3 of its
            # sigmas of it, whichever are more (a flat run whose low value came first counted none of the
            # values after it, and its band top sat under the run's level): the level is that much above it
            since = bisect.bisect_left(low, -(best + sigmas * s_i * se))
            level = best + s_i * se * expected_max_normal(max(best_i + 1, i + 1 - since) / width)
            # near the log's start the running median is truncated: the best there is a median of
            # fewer points, whose sigma is the level's uncertainty in the band's cap
            se_b = median_se(min(width, best_i + half + 1))
            top = level + _margin(level, s_i * se, self.opts, s_i * se_b)
            # the first loss, one raw value (the centred median does not see a run that leaves it within
            # width / 2 points): its band is the margin of the raw noise, not of the smoothed curve's,
            # once that noise is known (the log's relative noise, or 3 values), never under the log's relative noise at the level it
            # is held under (a low first loss is a low draw of that level's noise, not a level of its
            # own); one value is no level: its 3 sigmas are never cut to divergence_factor of it (a flat
            # run at 35% noise whose first loss was low left 1.5x of it at once: 96 of 96 runs)
            first = raw[0] + _first_margin(raw[0], max(sig[i + 1], rel * level), self.opts)  # type: ignore[arg-type, operator]
            if (i >= 2 or rel > 0) and raw[0] < level and first < top:  # type: ignore[operator]
                tops.append((raw[0], 0, raw[0], first))
            else:
                tops.append((best, best_i, level, top))
        for i in range(1, n - win + 1):
            b, bi, lvl, top = tops[i - 1]
            if not all(sm[j] > top for j in range(i, i + win)):
                continue
            rest = sm[i:]
            if len(rest) < 2 * win:
                break  # too few points left to tell a sustained rise from the noise of the tail
            # the lowest of the rest is as biased as the best: a new best is its level under the best's
            back = min(rest) + sig[n] * se * expected_max_normal(len(rest) / width)
            out = sum(v > top for v in rest)
            if out < STAY_OUT * len(rest) or back < lvl:
                continue  # it came back under its band, or to a new best: an episode, not a divergence
            j = i
            while j - 1 > bi and raw[j - 1] > top:  # type: ignore[operator]
                j -= 1
            while j < n - 1 and raw[j] <= top:  # type: ignore[operator]
                j += 1
            onset, good = pts[j], pts[j - 1]
            end = sm[-1]
            d = _step_details(name, onset, good, best_step=pts[bi].step, best_smoothed_loss=b, best_level=lvl, band_top=top,
                              end_smoothed_loss=end, sigma=sig[i], ratio=end / b if b > 0 else None,
                              points_out=out, points_after=len(rest),
                              grad_rise_step=_grad_rise(self.points[key].pts, onset.step),
                              evidence=[_ev(pts[bi], smoothed_loss=b), _ev(good, loss=good.loss, lr=good.lr,
                                                                           grad_norm=good.grad_norm),
                                        _ev(onset, loss=onset.loss, lr=onset.lr, grad_norm=onset.grad_norm),
                                        _ev(pts[-1], smoothed_loss=end)])
            # the rule asks STAY_OUT of the points from the window's start, not every one: say how many,
            # and where the last one is (under the band top: "stayed out" would be untrue there)
            stayed = "stayed out" if out == len(rest) else f"stayed out on {out} of the {len(rest)} points from step {pts[i].step}"
            last = "" if end > top else ", back under the band top there"
            msg = (f"{name}: the loss left its band at step {onset.step} (loss {_g(onset.loss)}, band top {_g(top)}: "
                   f"best smoothed {_g(b)} at step {pts[bi].step}) and {stayed}: smoothed {_g(end)} at the last "
                   f"step {pts[-1].step}{last}; last good step {good.step} (lr {_g(good.lr)}, loss scale "
                   f"{_g(good.loss_scale)}, grad norm {_g(good.grad_norm)}); at the onset lr {_g(onset.lr)}, grad "
                   f"norm {_g(onset.grad_norm)}")
            if d["grad_rise_step"] is not None:
                msg += f"; the grad norm rose first, at step {d['grad_rise_step']}"
            return _finding(self.id, msg, n - j, d)
        return self._oscillation(key, name, pts, raw, sig[n // 4])  # type: ignore[arg-type]

    def _oscillation(self, key: Any, name: str, pts: list[Pt], raw: list[float], sigma: float) -> Finding | None:
        """The growing oscillation (the lr too high: each step overshoots more than the last), whose
        running median stays flat: the finite losses cut into :data:`OSC_WINDOWS` equal windows, the
        amplitude (q90 - q10) of the last 3 at least :data:`OSC_GROWTH` times the first 3's, rising
        steadily (Spearman >= :data:`OSC_RHO`), and the upper envelope (each window's q90) above its
        best (lowest) window's by the divergence margin (of the first quarter's noise) on the last 2 windows. The onset is the first
        raw loss above that band in the first window from which every later envelope stays above it."""
        n = len(raw)
        w = n // OSC_WINDOWS
        if w < MIN_POINTS:
            return None
        wins = [sorted(raw[k * w:(k + 1) * w]) for k in range(OSC_WINDOWS)]
        amp = [_q(v, 0.9) - _q(v, 0.1) for v in wins]
        top = [_q(v, 0.9) for v in wins]
        a0, a1 = median(amp[:3]), median(amp[-3:])
        if a0 <= 0 or a1 < OSC_GROWTH * a0 or _spearman(amp) < OSC_RHO:
            return None
        bi = min(range(OSC_WINDOWS), key=lambda k: top[k])
        best = top[bi]
        band = best + _margin(best, sigma, self.opts)
        if bi >= OSC_WINDOWS - 2 or not all(x > band for x in top[-2:]):
            return None
        k0 = OSC_WINDOWS - 2
        while k0 - 1 > bi and top[k0 - 1] > band:
            k0 -= 1
        j = next(i for i in range(k0 * w, n) if raw[i] > band)
        onset, good = pts[j], pts[j - 1]
        d = _step_details(name, onset, good, kind="growing_oscillation", best_step=pts[bi * w].step,
                          best_envelope=best, band_top=band, end_envelope=top[-1], amplitude_first=a0,
                          amplitude_last=a1, growth=a1 / a0, windows=OSC_WINDOWS, window_points=w,
                          grad_rise_step=_grad_rise(self.points[key].pts, onset.step),
                          evidence=[_ev(pts[bi * w], loss_q90=best, amplitude=amp[bi]),
                                    _ev(onset, loss=onset.loss, lr=onset.lr, grad_norm=onset.grad_norm),
                                    _ev(pts[-1], loss_q90=top[-1], amplitude=amp[-1])])
        msg = (f"{name}: the loss oscillates with a growing amplitude ({_g(a0)} -> {_g(a1)}, q90 - q10 over windows "
               f"of {w} points, x{a1 / a0:.1f}) and its upper envelope left its band at step {onset.step} (loss "
               f"{_g(onset.loss)}, band top {_g(band)}: best envelope {_g(best)} from step {pts[bi * w].step}), "
               f"{_g(top[-1])} at the end: unstable dynamics (each step overshoots: the lr too high); last good step "
               f"{good.step} (lr {_g(good.lr)}, loss scale {_g(good.loss_scale)}, grad norm {_g(good.grad_norm)})")
        return _finding(self.id, msg, n - j, d)


def _q(s: list[float], p: float) -> float:
    """The ``p`` quantile of the sorted list ``s`` (linear interpolation)."""
    k = (len(s) - 1) * p
    lo = math.floor(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def _spearman(xs: list[float]) -> float:
    """The Spearman rank correlation of ``xs`` with 0, 1, 2, ... (ties broken by position)."""
    n = len(xs)
    rank = [0] * n
    for r, i in enumerate(sorted(range(n), key=lambda i: xs[i])):
        rank[i] = r
    return 1 - 6 * sum((rank[i] - i) ** 2 for i in range(n)) / (n * (n * n - 1))


def _grad_rise(pts: list[Pt], onset_step: int, before: int = 10) -> int | None:
    gs = [(p.step, p.grad_norm) for p in pts if p.grad_norm is not None and p.step <= onset_step]
    if len(gs) < 3:
        return None
    first = max(1, len(gs) - before - 1)
    for k in range(first, len(gs)):
        med = median([g for _, g in gs[:k]])
        if med > 0 and gs[k][1] > 2 * med:
            return gs[k][0]
    return None


def _fifth_for(rel: float, improvement: float) -> int:
    """The fewest values ``f`` whose median, compared with another's, tells a relative change of
    ``improvement`` from a noise of ``rel`` (relative): ``rel x sqrt 2 x`` :func:`median_se` ``(f)`` at
    most ``improvement``, i.e. ``2f + 1 >= pi / t^2`` with ``t = improvement / (rel sqrt 2)``; 1 for a
    noiseless curve."""
    if rel <= 0:
        return 1
    t = improvement / (rel * math.sqrt(2))
    return max(1, math.ceil((math.pi / (t * t) - 1) / 2))


@log_rule("log.stagnation")
class Stagnation(_Dynamics):
    """After warmup (the lr's peak, :func:`warmup_end`; the first record when no lr is logged), the loss
    improves by less than ``[trace] stagnation_improvement`` (relative, median of the first fifth of
    the window against the median of its last fifth) over the last ``stagnation_window`` of the
    points, and does not rise by more than ``divergence_floor`` either (a rising loss is
    ``log.divergence``'s). The fifths hold at least ``f`` values, the fewest whose medians tell that
    improvement from the loss's noise (:func:`_fifth_for`: the log's relative noise at its 95% upper
    bound x sqrt 2 x :func:`median_se` ``(f)`` at most the improvement), the window growing to ``5 f``;
    a run after warmup shorter than that is not judged, the reason saying so (one raw value against
    another on a short run: its noise decided). The plateau's start is the earliest point from which
    that still holds (the walk back stops where a median is out of the range by 2 of the change's
    sigmas, then goes forward to the first in it).
    Not a finding on a converged run: the eval loss still improving over the plateau; an lr decayed
    to at most :data:`DECAYED_LR` of its peak where the plateau starts (a loss at its floor under a
    decayed lr: a full-length cosine or linear decay); or a loss that fell by :data:`CONVERGED_DROP`
    before a plateau of at most :data:`CONVERGED_SPAN` of the run (it learned, then reached its floor).
    A dead run (no such drop) and a long stall are findings. The message says which way the loss went
    over the last window (``it fell 0.40%``, or ``it did not fall: it rose 8.14%``: a rise under
    ``divergence_floor`` is a stall, not a divergence) and quotes the two medians compared; the details
    keep ``change`` (the improvement: positive when the loss fell), ``window_first``, ``window_last``
    and ``window_points``."""

    def judge(self, key: Any, name: str) -> Finding | str | None:
        allp = self.points[key].pts
        pts = self.losses(key)
        n = len(pts)
        if n < STAGNATION_MIN_POINTS:
            return f"{n} finite loss value(s), fewer than {STAGNATION_MIN_POINTS}"
        lim = self.opts.limits
        we = warmup_end([p.lr for p in allp])
        start_step = allp[we].step if we is not None else pts[0].step
        body = [p for p in pts if p.step >= start_step]
        w = max(5, math.ceil(lim.stagnation_window * n))
        if len(body) < w:
            return "the run after warmup is shorter than the stagnation window"
        # the two medians compared are each of f values: the change's noise is the log's relative noise
        # (its 95% upper bound) x sqrt 2 x median_se(f); the window grows until that is at most the
        # improvement judged (a run improving 3% is then called a stall 1 time in 40), else the noise
        # decides and the run is not judged (one raw value against another on a short run said "it rose
        # 8.14%" on a flat run at 8.7% noise, and a stall at 2% noise was missed 3 times in 4)
        xs = [p.loss for p in body]
        rel = relative_noise(xs)  # type: ignore[arg-type]
        if rel is None:
            mid = abs(median(xs))  # type: ignore[arg-type]
            rel = noise_sigma(xs) / mid if mid else 0.0  # type: ignore[arg-type]
        rel *= noise_upper(len(body))
        f = max(1, w // 5, _fifth_for(rel, lim.stagnation_improvement))
        w = max(w, 5 * f)
        if len(body) < w:
            return (f"the loss's noise ({rel:.2%} of it, at most) hides a {lim.stagnation_improvement:.0%} change: "
                    f"medians of {f} values each, a window of {w} points, and the run after warmup has {len(body)}")
        last = median(xs[-f:])  # type: ignore[arg-type]

        def change(srt: list[float]) -> float:
            first = median_sorted(srt)
            return (first - last) / abs(first) if first else 0.0

        i = len(body) - w
        win: list[float] = sorted(xs[i:i + f])  # type: ignore[arg-type]
        c = change(win)
        if not -lim.divergence_floor < c < lim.stagnation_improvement:
            return None
        # walk back while the median of the f values from i - 1 is not clearly out of the range (by 2 of
        # the change's sigmas: each of hundreds of overlapping medians crossed the bar by its noise alone
        # somewhere, and a 700-point plateau was cut to one under half the run, "converged"), then forward
        # to the first whose change is in it
        tol = 2 * rel * math.sqrt(2) * median_se(f)
        seen = {i: c}
        while i > 0:  # the f values from i - 1, kept sorted as i walks back
            bisect.insort(win, xs[i - 1])  # type: ignore[arg-type]
            del win[bisect.bisect_left(win, xs[i - 1 + f])]  # type: ignore[arg-type]
            ci = change(win)
            if not -lim.divergence_floor - tol < ci < lim.stagnation_improvement + tol:
                break
            i -= 1
            seen[i] = ci
        while not -lim.divergence_floor < seen[i] < lim.stagnation_improvement:
            i += 1
        start = body[i]
        peak = max((p.lr for p in allp if p.lr is not None and math.isfinite(p.lr)), default=None)
        if peak and start.lr is not None and start.lr <= DECAYED_LR * peak:
            return None  # converged under a decayed lr
        learned = median([p.loss for p in body[:f]])  # type: ignore[misc]
        level = median([p.loss for p in body[i:i + f]])  # type: ignore[misc]
        if learned and (learned - level) / abs(learned) >= CONVERGED_DROP and len(body) - i <= CONVERGED_SPAN * n:
            return None  # learned, then flattened for under half the run: converged at its floor
        ev = [e for e in self.evals.get(key, []) if e[0] >= start.step]
        if len(ev) >= 2 and ev[-1][1] < (1 - lim.stagnation_improvement) * ev[0][1]:
            return None  # the eval loss still improves: converged train loss, not a stall
        head = median([p.loss for p in body[-w:][:f]])  # type: ignore[misc]
        d = _step_details(name, start, None, plateau_from=start.step, plateau_to=body[-1].step,
                          change=c, points=len(body) - i, peak_lr=peak, window_points=w, window_first=head,
                          window_last=last,
                          evidence=[_ev(start, loss=start.loss, lr=start.lr), _ev(body[-1], loss=body[-1].loss,
                                                                                  lr=body[-1].lr)])
        d["step"] = None  # a run-level check (CHECKS.md): the plateau's start is in plateau_from
        # ``c`` is the improvement (a fall is positive): say which way the loss went, in words, and the two
        # medians compared, so that a rise is not printed as a negative "change" read as a fall
        of = f"the median of the first {f} of them {_g(head)} -> of the last {f} {_g(last)}"
        how = (f"it fell {c:.2%} over the last {w} points ({of}), under {lim.stagnation_improvement:.0%}" if c >= 0
               else f"it did not fall: it rose {-c:.2%} over the last {w} points ({of}), under the "
                    f"{lim.divergence_floor:.0%} divergence floor")
        msg = (f"{name}: the loss stalls from step {start.step} to {body[-1].step} ({len(body) - i} points; {how}); "
               f"lr {_g(start.lr)} there (peak {_g(peak)}), no eval improvement")
        return _finding(self.id, msg, len(body) - i, d)


@log_rule("log.zero_lr")
class ZeroLr(_Dynamics):
    """The logged learning rate is exactly 0 on every record that has one (at least 2), or from some
    record on to the end over at least 2 records and 5% of them (a scheduler sized for fewer steps
    than the run takes). An lr of 0 on the last record alone is the end of a full-length decay, not a
    finding; records whose whole interval was skipped are left out (no update, no scheduler step)."""

    def judge(self, key: Any, name: str) -> Finding | str | None:
        pts = [p for p in self.points[key].pts if p.lr is not None and math.isfinite(p.lr)]
        if not pts:
            return self.points[key].missing("lr")
        k = len(pts)
        while k > 0 and pts[k - 1].lr == 0:
            k -= 1
        zeros = len(pts) - k
        if zeros < 2 or zeros < 0.05 * len(pts):
            return None
        at = pts[k]
        good = pts[k - 1] if k else None
        d = _step_details(name, at, good, zero_records=zeros, records=len(pts), every=k == 0,
                          evidence=[_ev(at, lr=at.lr)] + ([_ev(good, lr=good.lr)] if good else [])
                          + [_ev(pts[-1], lr=pts[-1].lr)])
        msg = (f"{name}: the learning rate is 0 on every logged step ({zeros} record(s), from step {at.step}): "
               "nothing is trained" if k == 0 else
               f"{name}: the learning rate is 0 from step {at.step} to the last step {pts[-1].step} ({zeros} of "
               f"{len(pts)} records; {_g(good.lr) if good else '-'} at step {good.step if good else '-'}): the "
               "scheduler was sized for fewer steps than the run takes")
        return _finding(self.id, msg, zeros, d)


@log_rule("log.overfit_onset")
class OverfitOnset(_Dynamics):
    """The eval loss rises above its minimum so far by more than ``[trace] overfit_margin`` (and more
    than 3 sigmas of the eval's own noise: :func:`noise_sigma`, which a trend does not inflate, so a noisy eval of a converged run is not a rise) on ``overfit_evals`` consecutive evals (the eval values and
    their running median of 3 both above) while the train loss falls by at least
    ``stagnation_improvement`` from the eval minimum to the last of those evals: the train loss the eval
    lines report at both (nanoGPT's ``step N: train loss A, val loss B``) when they do, else the median
    of the logged train losses between the evals before and after each. Reported at the step of the
    eval minimum (the lowest raw eval beside where the running median bottoms): the checkpoint worth
    keeping. The message quotes the two train values compared and names their series."""

    def judge(self, key: Any, name: str) -> Finding | str | None:
        ev = self.evals.get(key)
        if not ev:
            return "no eval loss logged"
        lim = self.opts.limits
        if len(ev) < lim.overfit_evals + 1:
            return f"{len(ev)} eval loss value(s), fewer than {lim.overfit_evals + 1}"
        pts = self.losses(key)
        raw = [e[1] for e in ev]
        sm = smooth(raw, 3)
        noise = noise_sigma(raw)
        best_i, run = 0, 0
        for i in range(1, len(ev)):
            if sm[i] < sm[best_i]:
                best_i, run = i, 0
                continue
            top = sm[best_i] + max(lim.overfit_margin * abs(sm[best_i]), 3 * noise)
            run = run + 1 if sm[i] > top and raw[i] > top else 0
            if run >= lim.overfit_evals:
                lo_i = min(range(max(0, best_i - 1), min(len(ev), best_i + 2)), key=lambda k: raw[k])
                t0, t1, series = _train_compared(pts, ev, self.eval_train.get(key, {}), lo_i, i)
                if t0 is None or t1 is None or not t1 < (1 - lim.stagnation_improvement) * t0:
                    continue
                bs, bl, bw = ev[lo_i]  # the lowest eval where the smoothed eval bottoms: the checkpoint to keep
                p = next((q for q in pts if q.step >= bs), pts[-1]) if pts else Pt(bs, None, None, None, bw, None)
                d = _step_details(name, Pt(bs, bl, p.grad_norm, p.lr, bw, p.loss_scale), None,
                                  eval_min_step=bs, eval_min=bl, eval_at=ev[i][0], eval_loss=ev[i][1],
                                  train_at_min=t0, train_now=t1, train_series=series, evals_above=run,
                                  best_checkpoint_step=bs,
                                  evidence=[{"where": bw, "step": bs, "eval_loss": bl},
                                            {"where": ev[i][2], "step": ev[i][0], "eval_loss": ev[i][1]}])
                d["eval_last"] = ev[-1][1]
                msg = (f"{name}: the eval loss bottoms at {_g(bl)} at step {bs} and is above it by more than "
                       f"{lim.overfit_margin:.0%} on {run} consecutive evals ({_g(ev[i][1])} at step {ev[i][0]}; "
                       f"{_g(ev[-1][1])} at the last eval, step {ev[-1][0]}) while the train loss falls "
                       f"({series}): overfitting from step {bs}, the checkpoint worth keeping")
                return _finding(self.id, msg, run, d)
        return None


def _train_compared(pts: list[Pt], ev: list[tuple[int, float, str]], at_eval: dict[int, float], a: int,
                    b: int) -> tuple[float | None, float | None, str]:
    """The train loss at eval ``a`` and at eval ``b``, and the words that quote them with their series:
    the train loss the eval lines report at both when they do (``at_eval``), else
    :func:`_train_near` of each."""
    if a in at_eval and b in at_eval:
        t0, t1 = at_eval[a], at_eval[b]
        return t0, t1, (f"{_g(t0)} at step {ev[a][0]} -> {_g(t1)} at step {ev[b][0]}, the train loss the eval lines "
                        "report")
    (t0, r0), (t1, r1) = _train_near(pts, ev, a), _train_near(pts, ev, b)
    return t0, t1, (f"the median of the logged train losses: {_g(t0)} over {r0} -> {_g(t1)} over {r1}"
                    if t0 is not None and t1 is not None else "")


def _train_near(pts: list[Pt], ev: list[tuple[int, float, str]], i: int) -> tuple[float | None, str]:
    """The median train loss between the evals before and after eval ``i`` (or the train loss nearest
    its step), and the steps it is over (``"steps 1500..2000"``, ``"step 1740"``)."""
    lo = ev[i - 1][0] if i > 0 else ev[i][0]
    hi = ev[i + 1][0] if i + 1 < len(ev) else ev[i][0]
    xs = [p.loss for p in pts if lo <= p.step <= hi and p.loss is not None]
    if not xs:
        near = min(pts, key=lambda p: abs(p.step - ev[i][0]), default=None)
        return (None, "") if near is None else (near.loss, f"step {near.step}")
    return median(xs), f"steps {lo}..{hi}"


@log_rule("log.vanishing_grad")
class VanishingGrad(_Dynamics):
    """The grad norm (running median of 5) falls below ``[trace] vanishing_ratio`` of its early median
    (the first 10% of the grad norms, at least 5) and stays there on :data:`STAY_OUT` of the records to
    the end, while the loss over that stretch changes by less than ``stagnation_improvement`` (flat).
    A grad norm shrinking while the loss falls is convergence, not a finding."""

    def judge(self, key: Any, name: str) -> Finding | str | None:
        allp = self.points[key].pts
        gp = [p for p in allp if p.grad_norm is not None]
        if not gp:
            return self.points[key].missing("grad_norm")
        if len(gp) < MIN_POINTS:
            return f"{len(gp)} finite grad norm(s), fewer than {MIN_POINTS}"
        early = median([p.grad_norm for p in gp[:max(5, len(gp) // 10)]])  # type: ignore[misc]
        if early <= 0:
            return None
        lim = self.opts.limits
        gs = [p.grad_norm for p in gp]
        low = [median(gs[max(0, i - 4):i + 1]) < lim.vanishing_ratio * early for i in range(len(gs))]  # type: ignore
        for i, is_low in enumerate(low):
            if not is_low or sum(low[i:]) < STAY_OUT * (len(low) - i):
                continue
            j = i
            while j > 0 and gs[j - 1] < lim.vanishing_ratio * early:  # type: ignore[operator]
                j -= 1
            at = gp[j]
            losses = [p.loss for p in allp if p.step >= at.step and p.loss is not None]
            if len(losses) < 2:
                return None
            f = max(1, len(losses) // 5)
            a, b = median(losses[:f]), median(losses[-f:])
            if a and abs(a - b) / abs(a) >= lim.stagnation_improvement:
                return None
            d = _step_details(name, at, gp[j - 1] if j else None, early_median=early, grad_norm=at.grad_norm,
                              loss_change=(a - b) / abs(a) if a else 0.0,
                              evidence=[_ev(gp[0], grad_norm=gp[0].grad_norm), _ev(at, grad_norm=at.grad_norm,
                                                                                   loss=at.loss)])
            msg = (f"{name}: the grad norm falls to {_g(at.grad_norm)} at step {at.step}, under "
                   f"{lim.vanishing_ratio:g} of its early median {_g(early)}, and stays there while the loss is "
                   f"flat ({_g(a)} -> {_g(b)})")
            return _finding(self.id, msg, len(low) - j, d)
        return None


@log_rule("log.periodic_spikes")
class PeriodicSpikes(_Dynamics):
    """Loss or grad-norm spikes (the robust spike rule, :func:`spike_indices`) that recur at a period:
    at least 3 spikes whose gaps (in steps) all lie within 5% (at least 1 step) of their median gap,
    and at least 2 gaps. The verdict (:mod:`datacheck.trace.verdict`) matches the period with the
    batch plan when ``--data``/``[batch]`` give it (epoch boundaries, tail batches)."""

    def judge(self, key: Any, name: str) -> Finding | str | None:
        allp = self.points[key].pts
        if len([p for p in allp if p.loss is not None]) < MIN_POINTS:
            return f"fewer than {MIN_POINTS} finite loss values"
        for metric, factor in (("loss", self.opts.spike.factor if self.opts.spike.kind == "robust" else 2.0),
                               ("grad_norm", self.opts.limits.grad_spike_factor)):
            pts = [p for p in allp if getattr(p, metric) is not None]
            idx = spike_indices([getattr(p, metric) for p in pts], factor)
            # a run of consecutive spikes is one event at its first record
            events = [i for k, i in enumerate(idx) if k == 0 or idx[k - 1] != i - 1]
            steps = [pts[i].step for i in events]
            if len(steps) < 3:
                continue
            gaps = [b - a for a, b in zip(steps, steps[1:])]
            period = median([float(g) for g in gaps])
            tol = max(1.0, 0.05 * period)
            if period <= 1 or any(abs(g - period) > tol for g in gaps):
                continue
            first = pts[events[0]]
            d = _step_details(name, first, pts[events[0] - 1] if events[0] else None, metric=metric,
                              period=period, spike_steps=steps[:50], spikes=len(steps),
                              evidence=[_ev(pts[i], **{metric: getattr(pts[i], metric)}) for i in events[:5]])
            d["step"] = None  # a run-level check (CHECKS.md): the spikes' steps are in spike_steps
            msg = (f"{name}: {len(steps)} {metric.replace('_', ' ')} spikes recur every {period:g} steps (steps "
                   f"{', '.join(str(s) for s in steps[:8])}{'...' if len(steps) > 8 else ''}): a step-periodic "
                   "cause (epoch boundary, tail batch, shard switch, accumulation boundary)")
            return _finding(self.id, msg, len(steps), d)
        return None


@log_rule("log.post_warmup_spike")
class PostWarmupSpike(_Dynamics):
    """A loss (or grad norm) spike within ``[trace] post_warmup_records`` logged records after the
    learning rate reaches its peak (the end of a warmup: the lr's first value is under half its peak):
    a value above twice (the grad norm: ``grad_spike_factor`` times) the reference of the (up to 16)
    values before the peak, judged as the robust spike rule judges (:mod:`datacheck.trace.spikes`):
    the reference is their median, and the value must also clear it by :data:`ROBUST_SIGMAS` robust
    sigmas (1.4826 MAD) when there are at least :data:`ROBUST_MIN_HISTORY` of them; with fewer it is
    their largest (a median of 2-7 noisy values is no level: a short noisy warmup's median is often
    low, and twice it is within the noise); and always by :data:`ROBUST_SIGMAS` sigmas of the noise of
    the (up to) 16 values before and 16 from the peak (:func:`noise_sigma`: 35% noise on a 2-point warmup
    put 3% of healthy runs over twice the reference). The peak lr is the suspect. The message quotes
    the threshold with the bound that set it (``threshold_basis`` in the details: ``factor``, ``noise``
    or ``robust_sigma``)."""

    def judge(self, key: Any, name: str) -> Finding | str | None:
        allp = self.points[key].pts
        we = warmup_end([p.lr for p in allp])
        if we is None:
            if any(p.lr is not None and math.isfinite(p.lr) for p in allp):
                return "the learning rate is 0 on every record: it never warms up to a peak"
            return self.points[key].missing("lr")
        if we == 0:
            return "no warmup in the logged learning rate (it starts at its peak)"
        for metric, factor in (("loss", 2.0), ("grad_norm", self.opts.limits.grad_spike_factor)):
            before = [getattr(p, metric) for p in allp[max(0, we - 16):we] if getattr(p, metric) is not None]
            if len(before) < 2:
                continue
            watched = allp[we:we + self.opts.limits.post_warmup_records + 1]
            ref = median(before) if len(before) >= ROBUST_MIN_HISTORY else max(before)
            # the noise of the (up to) 16 values before and 16 from the peak (second differences: a
            # trend does not inflate it, nor one spike, which touches 3 of them): a spike clears the
            # reference by ROBUST_SIGMAS of it too
            around = [getattr(p, metric) for p in allp[max(0, we - 16):we + 16] if getattr(p, metric) is not None]
            noise = noise_sigma(around)
            # the threshold is the largest of these bounds: the message names the one it is (a "2x the
            # median" quoted beside a threshold the noise set was a number the rule did not compare)
            bounds = [(factor * ref, "factor"), (ref + ROBUST_SIGMAS * noise, "noise")]
            if len(before) >= ROBUST_MIN_HISTORY:
                rs = MAD_SIGMA * median([abs(x - ref) for x in before])
                bounds.append((ref + ROBUST_SIGMAS * rs, "robust_sigma"))
            thr, basis = max(bounds, key=lambda b: b[0])
            for p in watched:
                v = getattr(p, metric)
                if v is not None and ref > 0 and v > thr:
                    peak = allp[we]
                    d = _step_details(name, p, allp[we - 1], metric=metric, value=v, reference=ref,
                                      threshold=thr, threshold_basis=basis, noise_sigma=noise, peak_step=peak.step,
                                      peak_lr=peak.lr, evidence=[_ev(peak, lr=peak.lr), _ev(p, **{metric: v})])
                    what = "median" if len(before) >= ROBUST_MIN_HISTORY else "largest"
                    of = (f"the {what} {_g(ref)} of the {len(before)} values before the lr peak {_g(peak.lr)}, reached "
                          f"at step {peak.step}")
                    why = (f"{factor:g}x {of}" if basis == "factor" else
                           f"{of}, + {ROBUST_SIGMAS:g} sigmas of the noise {_g(noise)} of the {len(around)} values "
                           "around the peak" if basis == "noise" else
                           f"{of}, + {ROBUST_SIGMAS:g} robust sigmas {_g((thr - ref) / ROBUST_SIGMAS)} of those values")
                    msg = (f"{name}: {metric.replace('_', ' ')} {_g(v)} at step {p.step}, over {_g(thr)} ({why}): the "
                           "peak learning rate is the suspect")
                    return _finding(self.id, msg, 1, d)
        return None
