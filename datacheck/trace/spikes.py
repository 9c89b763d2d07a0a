"""Spike rules (CHECKS.md ``log.loss_spike``): online detectors over one rank's values, O(window) memory.

Presets:

- ``megatron``: a value above 10x the max of the first 100 values (Megatron-LM's spiky-loss check
  compares against a multiple of the early loss; 10x / 100 values as CHECKS.md defines it);
- ``foundry``: a value above 2x the rolling mean of the previous 100 values for more than 4
  consecutive values (llm-foundry's loss-spike callback: ``outlier_multiplier=2``, ``patience=4``,
  ``window_size=100``); the spike is reported at the first value of that run;
- ``olmo``: a value above mean + 6 standard deviations of the previous 128 values (at least
  :data:`OLMO_MIN_HISTORY` of them);
- ``robust`` (the default): a value above ``max(F x median, median + k x sigma)`` of the previous
  (up to) 64 values, F = 2 for the loss (llm-foundry's ``outlier_multiplier``) and ``[trace]
  grad_spike_factor`` (5) for the grad norm. ``sigma`` is the noise's robust standard deviation from
  the window's residuals (each value minus the median of the 3 before it): 1.4826 x their median
  absolute value / :data:`RESIDUAL_SIGMA` (a trend does not widen it, a spike does not widen its own
  band). ``k`` is set for a family-wise false alarm rate: the i-th value judged is tested at
  ``p_i = ALPHA / (2 i (1 + ln i)^2)``, whose sum over any number of values is at most
  :data:`SPIKE_ALPHA` (1%), under the noise the log shows: gaussian (``k`` the normal quantile, 4.3
  at the 30th value, 5.6 at the 5,000th, but never under :data:`ROBUST_SIGMAS`, 6, which it passes
  at about the 20,000th: a sigma from a few residuals is itself uncertain) or heavy-tailed (Student-t with 4 degrees of freedom, ``k`` its
  quantile over :data:`T4_RESID_SIGMA`: 25 at the 30th value, 133 at the 5,000th), weighted by the
  posterior odds of the two (:func:`robust_sigmas`), which the log's own residuals update value by
  value (:func:`heavy_evidence`). A run's noise is taken as gaussian until its residuals show
  otherwise (prior log-odds :data:`HEAVY_PRIOR_LOG_ODDS`): a t(4) noise moves the odds within
  100-300 values, so an occasional 5-10x value of a heavy-tailed noise is not a spike, while a 4x
  loss on a gaussian noise of 10% of the loss still is. Values judged spikes are not evidence.
  Judged from the second value on: at the second, a spike is above :data:`SECOND_VALUE_FACTOR` (10)
  x the first; with fewer than :data:`ROBUST_MIN_HISTORY` earlier values above F x the largest
  earlier value (a 3.6x jump at step 3 is a spike; a noisy small-batch loss that swings 5x between
  its first steps is not). The F x median floor keeps a long clean run quiet: a late, low-noise loss
  has a tiny sigma, and k of them are a few percent of the loss;
- ``ratio:F:W`` (user): a value above F times the mean of the previous (up to) W values.

Only finite values enter the windows; a non-finite value is ``log.non_finite``'s, not a spike.
"""
from __future__ import annotations

import bisect
import math
from collections import deque
from dataclasses import dataclass, replace
from statistics import NormalDist

from datacheck.model.errors import UsageError

__all__ = ["SpikeRule", "parse_spike_rule", "SpikeDetector", "PRESETS", "OLMO_MIN_HISTORY", "ROBUST_MIN_HISTORY", "ROBUST_FIRST_JUDGED",
           "ROBUST_SIGMAS", "MAD_SIGMA", "SECOND_VALUE_FACTOR", "SPIKE_ALPHA", "HEAVY_PRIOR_LOG_ODDS", "T4_RESID_SIGMA", "T4_MAD_SIGMA", "per_value_level",
           "robust_sigmas", "t4_quantile", "heavy_evidence"]

PRESETS = ("robust", "megatron", "foundry", "olmo")
#: values the olmo rule needs before it judges (a standard deviation of 2-3 values is noise)
OLMO_MIN_HISTORY = 10
#: earlier values the robust rule needs before its sigma part applies (a MAD of fewer is noise)
ROBUST_MIN_HISTORY = 8
#: earlier values the robust rule needs before it judges at all; with one earlier value (nothing known
#: of the noise) a spike is above :data:`SECOND_VALUE_FACTOR` x it
ROBUST_FIRST_JUDGED = 1
#: the robust rule's factor over the one earlier value at the second value: Megatron's 10x of the
#: early loss (CHECKS.md ``megatron``), an order of magnitude (a noisy small-batch loss swings 5x
#: between its first steps; a 13x jump is an lr 100x too hot, tests/e2e/trace/test_tiny_runs.py)
SECOND_VALUE_FACTOR = 10.0
#: OLMo's sigmas above the mean (the ``olmo`` preset), and the bound of the other rules that still
#: quote a fixed number of robust sigmas (``log.post_warmup_spike``)
ROBUST_SIGMAS = 6.0
#: a normal distribution's sigma is 1.4826 times its median absolute deviation
MAD_SIGMA = 1.4826
#: the robust rule's family-wise false alarm rate: the chance that a stream of healthy noise, of any
#: length, has one value judged a spike (the tests per value sum to at most this)
SPIKE_ALPHA = 0.01
#: the prior log-odds of a heavy-tailed (t(4)) noise against a gaussian one before any evidence: e^-3,
#: about 1 in 21. Chosen on tests/unit/trace/test_spike_rates.py's runs: t(4) noise at 35% of the loss,
#: 300 values, flagged in 6 flat / 6 decreasing of 100 runs, a 4x loss at 20% gaussian noise in a
#: 100-value run found in 21 of 30; -2: 6 / 4 and 9 of 30; -4: 12 / 8 and 27 of 30; -6: 16 / 14 and 30
HEAVY_PRIOR_LOG_ODDS = -3.0
#: the log-odds are kept within +-this (an older regime's evidence must not outweigh a new one for
#: ever): e^-40 is below every test level of a run of up to 10^12 values
LOG_ODDS_CAP = 40.0
#: the robust sigma of a residual (a value minus the median of the 3 before it) over the noise's
#: sigma for a gaussian noise: sqrt(1 + 0.449), 0.449 the variance of the median of 3 standard normals
#: (simulation, 3 million draws: 1.2036)
RESIDUAL_SIGMA = 1.2036
#: a t(4) noise of scale s has the rule's sigma (1.4826 x the residuals' median absolute value /
#: :data:`RESIDUAL_SIGMA`) s x T4_MAD_SIGMA x 1.2583 / RESIDUAL_SIGMA, 1.2583 the same ratio for t(4)
#: noise (simulation, 3 million draws): 1.1481
T4_RESID_SIGMA = 1.4826 * 0.7406970841126829 * 1.2583 / 1.2036
#: a standard t(4) variable's robust sigma 1.4826 x MAD = 1.4826 x 0.740697 (t(4)'s 75% quantile,
#: closed form): the heavy model of a standardized difference is t(4) scaled to this sigma
T4_MAD_SIGMA = 1.4826 * 0.7406970841126829
_NORMAL = NormalDist()
#: log of the t(4) density's constant 3/8 times :data:`T4_MAD_SIGMA`, over the normal's 1/sqrt(2 pi)
_LOG_T4_OVER_NORMAL = math.log(0.375 * T4_MAD_SIGMA) + 0.5 * math.log(2 * math.pi)
#: the t(4) density's (1 + t^2 / 4) at t = T4_MAD_SIGMA z: 1 + _T4_Q z^2
_T4_Q = 0.25 * T4_MAD_SIGMA ** 2


def per_value_level(i: int, alpha: float = SPIKE_ALPHA) -> float:
    """The one-sided false alarm probability the ``i``-th judged value (1-based) is tested at:
    ``alpha / (2 i (1 + ln i)^2)``. The sum over i >= 1 is at most ``alpha`` (the first term is
    alpha / 2, the rest under the integral of 1 / (x (1 + ln x)^2) from 1, which is 1): a family-wise
    bound for a stream of any length, without knowing the length in advance."""
    return alpha / (2.0 * i * (1.0 + math.log(i)) ** 2)


def t4_quantile(u: float) -> float:
    """The ``u`` quantile (0 < u < 1) of Student's t with 4 degrees of freedom, closed form (Shaw 2006,
    "Sampling Student's T distribution"): ``2 sqrt(cos(acos(sqrt(a)) / 3) / sqrt(a) - 1)`` with
    ``a = 4u(1 - u)``, signed as ``u - 1/2``."""
    a = 4.0 * u * (1.0 - u)
    q = 2.0 * math.sqrt(max(0.0, math.cos(math.acos(math.sqrt(a)) / 3.0) / math.sqrt(a) - 1.0))
    return q if u >= 0.5 else -q


def robust_sigmas(i: int, log_odds: float, alpha: float = SPIKE_ALPHA) -> float:
    """The robust rule's ``k`` for the ``i``-th judged value: the sigmas above the median a value must
    clear so that a healthy noise crosses them with probability at most :func:`per_value_level` ``(i)``,
    half of it under each model: ``max(normal quantile(1 - p/2), t(4) quantile(1 - p / (2 w)) /
    T4_RESID_SIGMA)`` with ``w`` the posterior probability of the heavy model (from ``log_odds``);
    the normal quantile alone when ``w <= p / 2`` (the heavy model cannot reach the level); never under
    :data:`ROBUST_SIGMAS`."""
    p = per_value_level(i, alpha)
    # never under ROBUST_SIGMAS (OLMo's 6, the rule before): a sigma from 7-63 residuals is itself
    # uncertain by 15-40%, and the normal quantile alone (2.8 at the first value judged) trusts it
    k = max(ROBUST_SIGMAS, _NORMAL.inv_cdf(1.0 - 0.5 * p))
    w = 1.0 / (1.0 + math.exp(-log_odds))
    if w > 0.5 * p:
        k = max(k, t4_quantile(1.0 - 0.5 * p / w) / T4_RESID_SIGMA)
    return k


def heavy_evidence(z: float) -> float:
    """The log-likelihood ratio, heavy (t(4)) over gaussian, of one standardized residual ``z`` (a value
    minus the median of the 3 before it, over 1.4826 x the window's median absolute residual: close to
    N(0, 1) for a gaussian noise):
    ``log f_t(z) - log f_N(z)`` with ``f_t`` the t(4) density scaled to the same robust sigma
    (:data:`T4_MAD_SIGMA`): -0.06 at 0.67 sigma (a typical gaussian value), +7.2 at 5 sigmas."""
    zz = z * z
    return _LOG_T4_OVER_NORMAL - 2.5 * math.log1p(_T4_Q * zz) + 0.5 * zz


@dataclass(frozen=True)
class SpikeRule:
    """A spike rule: ``kind`` (a preset or ``ratio``), ``factor``, ``window`` (values), ``patience``."""

    kind: str
    factor: float
    window: int
    patience: int = 0
    grad_factor: float | None = None

    def for_grad_norm(self) -> "SpikeRule":
        """The rule the grad norm is judged by: the robust rule with ``grad_factor``; others unchanged."""
        if self.kind == "robust" and self.grad_factor is not None:
            return replace(self, factor=self.grad_factor)
        return self

    def describe(self) -> str:
        if self.kind == "robust":
            return (f"above max({self.factor:g}x the median, median + k robust sigmas) of the last {self.window} values, "
                    f"k for a {SPIKE_ALPHA:.0%} family-wise false alarm rate under the noise the log's residuals show "
                    "(robust)")
        if self.kind == "megatron":
            return f"above {self.factor:g}x the max of the first {self.window} values (megatron)"
        if self.kind == "foundry":
            return f"above {self.factor:g}x the rolling mean of {self.window} values for more than {self.patience} " \
                   "consecutive values (foundry)"
        if self.kind == "olmo":
            return f"above mean + {self.factor:g} sigma of the last {self.window} values (olmo)"
        return f"above {self.factor:g}x the mean of the previous {self.window} values"


def parse_spike_rule(text: str, grad_factor: float = 5.0) -> SpikeRule:
    """``robust`` | ``megatron`` | ``foundry`` | ``olmo`` | ``ratio:F:W`` -> :class:`SpikeRule`
    (``grad_factor``: the robust rule's factor for the grad norm, ``[trace] grad_spike_factor``).

    Raises:
        UsageError: anything else, or F <= 1 / W < 1.
    """
    t = text.strip().lower()
    if t == "robust":
        return SpikeRule("robust", 2.0, 64, grad_factor=grad_factor)
    if t == "megatron":
        return SpikeRule("megatron", 10.0, 100)
    if t == "foundry":
        return SpikeRule("foundry", 2.0, 100, patience=4)
    if t == "olmo":
        return SpikeRule("olmo", 6.0, 128)
    parts = t.split(":")
    if len(parts) == 3 and parts[0] == "ratio":
        try:
            f, w = float(parts[1]), int(parts[2])
        except ValueError:
            f, w = 0.0, 0
        if f > 1 and w >= 1:
            return SpikeRule("ratio", f, w)
    raise UsageError(f"--spike {text!r}: expected robust, megatron, foundry, olmo or ratio:F:W "
                     "(F > 1 times the mean of the previous W >= 1 values, e.g. ratio:2:10)")


class SpikeDetector:
    """Feed one rank's values in step order; :meth:`feed` says whether the value is a spike.

    For ``foundry`` the return value is True on the value that completes the run (patience + 1
    values above the threshold); :attr:`run` counts the values of the current run, so the run began
    ``run - 1`` values before the one that completes it.
    """

    def __init__(self, rule: SpikeRule):
        self.rule = rule
        self.first: list[float] = []
        self.win: deque[float] = deque()
        self.sorted: list[float] = []  # the robust rule's window, kept sorted (bisect: O(window) memmove)
        #: the robust rule's absolute residuals (a value minus the median of the 3 before it) of the
        #: window's values but its first, in order and sorted: the noise's sigma without the trend
        self.dwin: deque[float] = deque()
        self.dsorted: list[float] = []
        #: the robust rule's log-odds of a heavy-tailed (t(4)) noise over a gaussian one
        #: (:func:`heavy_evidence`), the values judged with a sigma (the i of :func:`per_value_level`), the
        #: sigmas of the last threshold (None: the threshold was F x median or F x the largest)
        self.log_odds = HEAVY_PRIOR_LOG_ODDS
        self.judged = 0
        self.sigmas: float | None = None
        self.total = 0.0  # running sum and sum of squares of ``win``: O(1) per value
        self.total_sq = 0.0
        self.run = 0
        self.threshold: float | None = None
        #: the robust rule's threshold when it came from fewer than :data:`ROBUST_MIN_HISTORY` earlier
        #: values, in words (``"2x the largest of the 5 earlier values"``): not the median rule that
        #: :meth:`SpikeRule.describe` states; None otherwise
        self.basis: str | None = None
        #: finite values fed / fed before the rule had the history to judge them (``megatron``: the
        #: first ``window`` values; ``olmo``: the first :data:`OLMO_MIN_HISTORY`; the others: the first)
        self.seen = 0
        self.unjudged = 0

    def feed(self, x: float) -> bool:
        r = self.rule
        if not math.isfinite(x):
            return False
        kind = r.kind
        self.seen += 1
        if kind == "robust":
            return self._robust(x)
        if kind == "megatron":
            if len(self.first) < r.window:
                self.first.append(x)
                self.unjudged += 1
                return False
            self.threshold = r.factor * max(self.first)
            return x > self.threshold
        spike = False
        win = self.win
        n = len(win)
        if n < (OLMO_MIN_HISTORY if kind == "olmo" else 1):
            self.unjudged += 1
        if n:
            mean = self.total / n
            if kind == "olmo":
                if n >= OLMO_MIN_HISTORY:
                    var = self.total_sq / n - mean * mean
                    sd = math.sqrt(var) if var > 0.0 else 0.0
                    self.threshold = mean + r.factor * sd
                    spike = x > self.threshold and sd > 0
            else:
                self.threshold = r.factor * mean
                spike = x > self.threshold
        # the window's running sums, inline (this runs for every value of every rank)
        win.append(x)
        self.total += x
        self.total_sq += x * x
        if n >= r.window:
            old = win.popleft()
            self.total -= old
            self.total_sq -= old * old
        if kind == "foundry":
            self.run = self.run + 1 if spike else 0
            return self.run == r.patience + 1
        return spike

    def _robust(self, x: float) -> bool:
        r, srt, win, dsrt = self.rule, self.sorted, self.win, self.dsorted
        n = len(srt)
        spike = False
        self.sigmas = None
        # the residual: x minus the median of the (up to) 3 values before it (inline: every value of every rank)
        if n >= 3:
            a, b, c = win[-1], win[-2], win[-3]
            if a > b:
                a, b = b, a
            res = x - (a if c < a else b if c > b else c)
        else:
            res = x - (win[-1] if n == 1 else 0.5 * (win[-1] + win[-2])) if n else 0.0
        if n < ROBUST_FIRST_JUDGED:
            self.unjudged += 1
        elif n == 1:
            self.threshold = SECOND_VALUE_FACTOR * srt[0]
            self.basis = f"{SECOND_VALUE_FACTOR:g}x the one earlier value"
            spike = srt[0] > 0 and x > self.threshold
        else:
            med = srt[n // 2] if n & 1 else 0.5 * (srt[n // 2 - 1] + srt[n // 2])
            # few earlier values say nothing of the noise: F x their max, not their median (a noisy
            # small-batch loss swings 5x between two steps; a spike clears every earlier value)
            self.threshold = r.factor * (med if n >= ROBUST_MIN_HISTORY else srt[-1])
            self.basis = None if n >= ROBUST_MIN_HISTORY else f"{r.factor:g}x the largest of the {n} earlier values"
            if n >= ROBUST_MIN_HISTORY:
                self.judged += 1
                m = len(dsrt)
                spread = MAD_SIGMA * (dsrt[m // 2] if m & 1 else 0.5 * (dsrt[m // 2 - 1] + dsrt[m // 2]))
                sigma = spread / RESIDUAL_SIGMA
                if med > 0 and x > self.threshold:
                    self.sigmas = robust_sigmas(self.judged, self.log_odds)
                    self.threshold = max(self.threshold, med + self.sigmas * sigma)
                    spike = x > self.threshold
                if not spike and spread > 0:
                    # this value's residual is evidence of the noise's tails (not a spike's: a real
                    # spike would teach the rule that spikes are noise); heavy_evidence(res / spread)
                    # inline (it runs for every value of every rank)
                    zz = (res / spread) ** 2
                    lo = self.log_odds + _LOG_T4_OVER_NORMAL - 2.5 * math.log1p(_T4_Q * zz) + 0.5 * zz
                    self.log_odds = LOG_ODDS_CAP if lo > LOG_ODDS_CAP else -LOG_ODDS_CAP if lo < -LOG_ODDS_CAP else lo
            elif med > 0 and x > self.threshold:
                spike = True
        if n:
            d = abs(res)
            self.dwin.append(d)
            bisect.insort(dsrt, d)
        win.append(x)
        bisect.insort(srt, x)
        if n >= r.window:
            old = win.popleft()
            del srt[bisect.bisect_left(srt, old)]
            old = self.dwin.popleft()
            del dsrt[bisect.bisect_left(dsrt, old)]
        return spike
