"""Spike rules (CHECKS.md ``log.loss_spike``): online detectors over one rank's values, O(window) memory.

Presets:

- ``megatron``: a value above 10x the max of the first 100 values (Megatron-LM's spiky-loss check
  compares against a multiple of the early loss; 10x / 100 values as CHECKS.md defines it);
- ``foundry``: a value above 2x the rolling mean of the previous 100 values for more than 4
  consecutive values (llm-foundry's loss-spike callback: ``outlier_multiplier=2``, ``patience=4``,
  ``window_size=100``); the spike is reported at the first value of that run;
- ``olmo``: a value above mean + 6 standard deviations of the previous 128 values (at least
  :data:`OLMO_MIN_HISTORY` of them);
- ``robust`` (the default): a value above ``max(F x median, median + 6 x 1.4826 x MAD)`` of the
  previous (up to) 64 values, F = 2 for the loss (llm-foundry's ``outlier_multiplier``) and
  ``[trace] grad_spike_factor`` (5) for the grad norm; the 6 sigmas are OLMo's, measured robustly
  (median and median absolute deviation, so a spike does not widen its own band). Judged from the
  third value on: with fewer than :data:`ROBUST_MIN_HISTORY` earlier values a spike is above F x
  the largest earlier value (a 3.6x jump at step 3 is a spike; a noisy small-batch loss that swings
  5x between its first steps is not). The F x median floor keeps a long clean run quiet: a
  late, low-noise loss has a tiny sigma, and 6 of them are a few percent of the loss;
- ``ratio:F:W`` (user): a value above F times the mean of the previous (up to) W values.

Only finite values enter the windows; a non-finite value is ``log.non_finite``'s, not a spike.
"""
from __future__ import annotations

import bisect
import math
from collections import deque
from dataclasses import dataclass, replace

from datacheck.model.errors import UsageError

__all__ = ["SpikeRule", "parse_spike_rule", "SpikeDetector", "PRESETS", "OLMO_MIN_HISTORY", "ROBUST_MIN_HISTORY", "ROBUST_FIRST_JUDGED",
           "ROBUST_SIGMAS", "MAD_SIGMA"]

PRESETS = ("robust", "megatron", "foundry", "olmo")
#: values the olmo rule needs before it judges (a standard deviation of 2-3 values is noise)
OLMO_MIN_HISTORY = 10
#: earlier values the robust rule needs before its sigma part applies (a MAD of fewer is noise)
ROBUST_MIN_HISTORY = 8
#: earlier values the robust rule needs before it judges at all (one value says nothing of the noise)
ROBUST_FIRST_JUDGED = 2
#: the robust rule's sigmas above the median (OLMo's 6)
ROBUST_SIGMAS = 6.0
#: a normal distribution's sigma is 1.4826 times its median absolute deviation
MAD_SIGMA = 1.4826


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
            return (f"above max({self.factor:g}x the median, median + {ROBUST_SIGMAS:g} robust sigma) of the last "
                    f"{self.window} values (robust)")
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
        r, srt, win = self.rule, self.sorted, self.win
        n = len(srt)
        spike = False
        if n < ROBUST_FIRST_JUDGED:
            self.unjudged += 1
        else:
            med = srt[n // 2] if n & 1 else 0.5 * (srt[n // 2 - 1] + srt[n // 2])
            # few earlier values say nothing of the noise: F x their max, not their median (a noisy
            # small-batch loss swings 5x between two steps; a spike clears every earlier value)
            self.threshold = r.factor * (med if n >= ROBUST_MIN_HISTORY else srt[-1])
            self.basis = None if n >= ROBUST_MIN_HISTORY else f"{r.factor:g}x the largest of the {n} earlier values"
            if med > 0 and x > self.threshold:
                spike = True
                if n >= ROBUST_MIN_HISTORY:
                    dev = sorted(abs(v - med) for v in srt)
                    mad = dev[n // 2] if n & 1 else 0.5 * (dev[n // 2 - 1] + dev[n // 2])
                    self.threshold = max(self.threshold, med + ROBUST_SIGMAS * MAD_SIGMA * mad)
                    spike = x > self.threshold
        win.append(x)
        bisect.insort(srt, x)
        if n >= r.window:
            old = win.popleft()
            del srt[bisect.bisect_left(srt, old)]
        return spike
