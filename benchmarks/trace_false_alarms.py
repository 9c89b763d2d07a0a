"""False alarms and detections of the ``log.*`` dynamics and spike rules on synthetic runs.

Healthy runs: loss ``L(u) = 1 + 1.5 e^{-u / tau}`` (``u`` = step / last step, ``tau`` uniform in
0.2..0.35, so the loss still improves by 3-7% over the last fifth of the run) times ``1 + cv x e``,
``e`` unit-variance noise: gaussian, or student-t with 4 degrees of freedom scaled to unit variance
(heavy tails); clipped at 5% of ``L``. Grad norm ``e^{N(0, 0.3)}``. Learning-rate schedules:
constant, warmup (5% of the steps) then cosine to 0, linear decay to 0. Logged every step or every
10 steps. Each (length, noise CV) cell runs ``--seeds`` runs, cycling through the 12 combinations of
noise kind x schedule x logging interval (``--seeds 48``: every combination 4 times).

Planted faults, on a healthy run of constant lr, gaussian noise, logged every step, at onset point
``k`` (25%, 50%, 75% of the points): a sustained rise to 1.3x / 1.6x / 2x the healthy level (a linear
ramp over 5% of the points, at least 3, then held); a NaN (from ``k`` to the end); one loss 4x the
healthy level at ``k``; the same 4x loss 2 points after the lr peak of a warmup (5% of the
points) then cosine schedule (``post_warmup``); a stall (the loss frozen at its level at ``k`` plus the noise; onsets 10% and
30%, where a stall is not yet convergence); a growing oscillation (``L(u_k) x (1 + A(t) sin(t / 3))``
with ``A`` growing linearly from 0.05 to 0.9 from ``k`` to the end). Detection: the expected check at
warn or above; dating error: the finding's step (``log.stagnation``: ``plateau_from``) minus the
onset, in logged points, median and max over the detected runs.

A finding at warn or above on a healthy run is a false alarm; the table gives, per check, the
percentage of runs flagged.

Flat noisy runs (``--only flat``, and after the false alarms): a loss that does not move, ``1.95 (1 +
cv x e)``, gaussian noise, a constant lr; its first loss either a draw like the rest (``drawn``) or the
new user's low one (``low first``: 1.76 sigmas under the level, their 1.651 against 1.95 +- 0.17). A
flat run is a stall (``log.stagnation`` is its finding) but never a divergence: the table gives the
``log.divergence`` findings, per length and noise. The new user's own shape (37 points, the first
1.651, then 1.95 + N(0, 0.17)) is counted over 200 seeds (``numpy.random.default_rng(seed)``, as
tests/unit/trace/test_dynamics.py draws it).

    python benchmarks/trace_false_alarms.py [--seeds 48] [--fault-seeds 20] [--quick] [--only fa|det|flat]
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from datacheck.model.config import TraceSection  # noqa: E402
from datacheck.trace import TraceOptions, parse_spike_rule, trace_logs  # noqa: E402
from datacheck.trace.readers import LogFile  # noqa: E402
from datacheck.trace.record import StepRecord  # noqa: E402

LENGTHS = (20, 30, 50, 100, 300, 1000, 5000)
CVS = (0.02, 0.05, 0.10, 0.20, 0.35)
NOISES = ("gauss", "t4")
SCHEDULES = ("const", "warmup_cosine", "linear")
EVERY = (1, 10)
COMBOS = [(nz, sc, ev) for nz in NOISES for sc in SCHEDULES for ev in EVERY]


@dataclass
class MemLog(LogFile):
    """A log held in memory: ``rows`` of ``(step, loss, grad_norm, lr)``."""

    rows: list[tuple[int, float, float, float]] | None = None

    def records(self) -> Iterator[StepRecord]:
        for i, (step, loss, g, lr) in enumerate(self.rows or []):
            self.stats.records += 1
            yield StepRecord(step=step, source=self.source, line=i + 1, loss=loss, grad_norm=g, lr=lr)


def lr_schedule(kind: str, n: int) -> np.ndarray:
    u = np.arange(n) / max(1, n - 1)
    if kind == "const":
        return np.full(n, 1e-3)
    if kind == "linear":
        return 1e-3 * (1 - u) + 1e-6
    wu = max(1, round(0.05 * n))
    i = np.arange(n)
    cos = 0.5 * (1 + np.cos(np.pi * np.clip((i - wu) / max(1, n - 1 - wu), 0, 1)))
    return 1e-3 * np.where(i < wu, (i + 1) / (wu + 1), cos) + 1e-7


def noise(kind: str, rng: np.random.Generator, n: int) -> np.ndarray:
    if kind == "gauss":
        return rng.normal(0, 1, n)
    return rng.standard_t(4, n) / math.sqrt(2.0)  # t(4) has variance 2


def healthy(n: int, cv: float, kind: str, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(the noiseless level, the noisy loss) of a healthy run of ``n`` points."""
    tau = rng.uniform(0.2, 0.35)
    u = np.arange(n) / max(1, n - 1)
    level = 1.0 + 1.5 * np.exp(-u / tau)
    return level, np.maximum(level * (1 + cv * noise(kind, rng, n)), 0.05 * level)


def run_trace(loss: np.ndarray, lr: np.ndarray, every: int, rng: np.random.Generator) -> list[tuple[str, Any, Any]]:
    n = len(loss)
    g = np.exp(rng.normal(0, 0.3, n))
    rows = [(every * (i + 1), float(loss[i]), float(g[i]), float(lr[i])) for i in range(n)]
    lf = MemLog(Path("synthetic.jsonl"), "synthetic.jsonl", "jsonl", rows=rows)
    opts = TraceOptions(spike=parse_spike_rule("robust"), limits=TraceSection())
    res = trace_logs([lf], opts)
    return [(f.check, f.details.get("step"), f.details) for f in res.findings if f.severity in ("warn", "error")]


def false_alarms(lengths: tuple[int, ...], cvs: tuple[float, ...], seeds: int) -> dict[Any, Any]:
    counts: dict[tuple[int, float], dict[str, int]] = {}
    by_combo: dict[tuple[str, str, int], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    runs_combo: dict[tuple[str, str, int], int] = defaultdict(int)
    for n in lengths:
        for cv in cvs:
            c: dict[str, int] = defaultdict(int)
            for s in range(seeds):
                nz, sc, ev = COMBOS[s % len(COMBOS)]
                rng = np.random.default_rng([n, int(cv * 1000), s])
                _, loss = healthy(n, cv, nz, rng)
                got = {chk for chk, _, _ in run_trace(loss, lr_schedule(sc, n), ev, rng)}
                runs_combo[(nz, sc, ev)] += 1
                for chk in got:
                    c[chk] += 1
                    by_combo[(nz, sc, ev)][chk] += 1
                c["any"] += bool(got)
                by_combo[(nz, sc, ev)]["any"] += bool(got)
            counts[(n, cv)] = dict(c)
    return {"cells": counts, "by_combo": by_combo, "runs_combo": runs_combo}


FAULTS = ("rise1.3", "rise1.6", "rise2", "nan", "spike", "stall", "oscillation", "post_warmup")
EXPECT = {"rise1.3": "log.divergence", "rise1.6": "log.divergence", "rise2": "log.divergence",
          "nan": "log.non_finite", "spike": "log.loss_spike", "stall": "log.stagnation",
          "oscillation": "log.divergence", "post_warmup": "log.post_warmup_spike"}


FLAT_LENGTHS = (20, 37, 50, 100, 300, 1000)
FLAT_CVS = (0.05, 0.087, 0.20, 0.35)
#: the new user's first loss, in sigmas of the noise under the level: (1.651 - 1.95) / 0.17
LOW_FIRST = (1.651 - 1.95) / 0.17


def flat_noisy(n: int, cv: float, low_first: bool, rng: np.random.Generator) -> np.ndarray:
    """A flat run of ``n`` points at 1.95 with gaussian noise ``cv`` of the level; the first loss
    :data:`LOW_FIRST` sigmas under the level when ``low_first``."""
    loss = 1.95 * (1 + cv * rng.normal(0, 1, n))
    if low_first:
        loss[0] = 1.95 * (1 + cv * LOW_FIRST)
    return np.maximum(loss, 0.05 * 1.95)


def flat_alarms(lengths: tuple[int, ...], cvs: tuple[float, ...], seeds: int) -> dict[Any, Any]:
    """Per (first, length, cv): (runs with log.divergence, runs); and the new user's shape over 200 seeds."""
    out: dict[Any, Any] = {}
    for first in ("drawn", "low first"):
        for n in lengths:
            for cv in cvs:
                hit = 0
                for s in range(seeds):
                    rng = np.random.default_rng([n, int(cv * 1000), s, 7, first == "low first"])
                    loss = flat_noisy(n, cv, first == "low first", rng)
                    got = run_trace(loss, lr_schedule("const", n), 1, rng)
                    hit += any(chk == "log.divergence" for chk, _, _ in got)
                out[(first, n, cv)] = (hit, seeds)
    user = 0
    for s in range(200):
        rng = np.random.default_rng(s)
        loss = np.array([1.651] + (1.95 + rng.normal(0, 0.17, 36)).tolist())
        got = run_trace(loss, np.full(37, 5e-5), 1, np.random.default_rng([s, 1]))
        user += any(chk == "log.divergence" for chk, _, _ in got)
    out["user"] = (user, 200)
    return out


def flat_table(fl: dict[Any, Any], lengths: tuple[int, ...], cvs: tuple[float, ...]) -> str:
    hit, runs = fl["user"]
    lines = [f"Flat noisy runs: log.divergence false alarms (runs flagged of {fl[('drawn', lengths[0], cvs[0])][1]})", "",
             "| first loss | points | " + " | ".join(f"cv {cv:.1%}" for cv in cvs) + " |",
             "|" + "---|" * (len(cvs) + 2)]
    for first in ("drawn", "low first"):
        for n in lengths:
            lines.append(f"| {first} | {n} | " + " | ".join(str(fl[(first, n, cv)][0]) for cv in cvs) + " |")
    lines += ["", f"The new user's shape (37 points, first 1.651, then 1.95 + N(0, 0.17)): {hit} of {runs} seeds "
              f"flagged ({100 * hit / runs:.1f}%)"]
    return "\n".join(lines)


def planted(fault: str, n: int, cv: float, onset: float, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """The loss of a healthy run with ``fault`` planted at point ``k``; (loss, k)."""
    level, loss = healthy(n, cv, "gauss", rng)
    e = noise("gauss", rng, n)
    k = int(onset * n + 1e-9)
    if fault.startswith("rise"):
        x = float(fault[4:])
        ramp = max(3, round(0.05 * n))
        f = 1 + (x - 1) * np.clip((np.arange(n) - k + 1) / ramp, 0, 1)
        new = level[k] * f * (1 + cv * e)
        loss = np.where(np.arange(n) >= k, np.maximum(new, 0.05 * level[k]), loss)
    elif fault == "nan":
        loss = loss.copy()
        loss[k:] = np.nan
    elif fault in ("spike", "post_warmup"):
        loss = loss.copy()
        loss[k] = 4 * level[k]
    elif fault == "stall":
        loss = np.where(np.arange(n) >= k, np.maximum(level[k] * (1 + cv * e), 0.05 * level[k]), loss)
    elif fault == "oscillation":
        t = np.arange(n)
        amp = 0.05 + 0.85 * np.clip((t - k) / max(1, n - 1 - k), 0, 1)
        osc = level[k] * (1 + amp * np.sin(t / 3.0)) * (1 + cv * e)
        loss = np.where(t >= k, osc, loss)
    return loss, k


def detections(lengths: tuple[int, ...], cvs: tuple[float, ...], seeds: int) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    for fault in FAULTS:
        onsets = {"stall": (0.1, 0.3), "post_warmup": (0.0,)}.get(fault, (0.25, 0.5, 0.75))
        for n in lengths:
            for cv in cvs:
                hit, errs, other = 0, [], 0
                total = 0
                for onset in onsets:
                    for s in range(seeds):
                        rng = np.random.default_rng([n, int(cv * 1000), s, FAULTS.index(fault), int(onset * 100)])
                        if fault == "post_warmup":  # 2 points after the lr peak (warmup: 5% of the points)
                            onset = (max(1, round(0.05 * n)) + 2) / n
                        loss, k = planted(fault, n, cv, onset, rng)
                        sched = "warmup_cosine" if fault == "post_warmup" else "const"
                        got = run_trace(loss, lr_schedule(sched, n), 1, rng)
                        total += 1
                        f = next((d for chk, _, d in got if chk == EXPECT[fault]), None)
                        if f is None:
                            other += bool(got)
                            continue
                        hit += 1
                        step = f.get("plateau_from") if fault == "stall" else f.get("step")
                        if step is not None:
                            errs.append(step - (k + 1))
                out[(fault, n, cv)] = (hit, total, errs, other)
    return out


def fa_table(fa: dict[Any, Any], lengths: tuple[int, ...], cvs: tuple[float, ...], seeds: int) -> str:
    cells = fa["cells"]
    checks = sorted({c for d in cells.values() for c in d if c != "any"})
    lines = [f"False alarms (% of {seeds} healthy runs per cell with a warn-or-above finding; 'any' = any check)", ""]
    head = "| points | " + " | ".join(f"cv {cv:.0%}" for cv in cvs) + " |"
    lines += [head, "|" + "---|" * (len(cvs) + 1)]
    for n in lengths:
        row = []
        for cv in cvs:
            d = cells[(n, cv)]
            r = f"{100 * d.get('any', 0) / seeds:.0f}"
            if d.get("any"):
                r += " (" + ", ".join(f"{c.removeprefix('log.')} {d[c]}" for c in checks if d.get(c)) + ")"
            row.append(r)
        lines.append(f"| {n} | " + " | ".join(row) + " |")
    lines += ["", "By noise, schedule, logging interval (% of runs flagged, all cells):", ""]
    for combo, runs in sorted(fa["runs_combo"].items()):
        d = fa["by_combo"][combo]
        detail = ", ".join(f"{c.removeprefix('log.')} {d[c]}" for c in checks if d.get(c))
        lines.append(f"  {combo[0]:5s} {combo[1]:13s} every {combo[2]:2d}: {100 * d.get('any', 0) / runs:5.1f}% "
                     f"of {runs}  {detail}")
    return "\n".join(lines)


def det_table(det: dict[Any, Any], lengths: tuple[int, ...], cvs: tuple[float, ...]) -> str:
    lines = ["Detections: % detected by the expected check, dating error in points (median/max)", "",
             "| fault | points | " + " | ".join(f"cv {cv:.0%}" for cv in cvs) + " |",
             "|" + "---|" * (len(cvs) + 2)]
    for fault in FAULTS:
        for n in lengths:
            row = []
            for cv in cvs:
                hit, total, errs, _ = det[(fault, n, cv)]
                r = f"{100 * hit / total:.0f}%"
                if errs:
                    r += f" {int(np.median(errs)):+d}/{max(errs, key=abs):+d}"
                row.append(r)
            lines.append(f"| {fault} | {n} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=48, help="healthy runs per (length, cv) cell")
    ap.add_argument("--fault-seeds", type=int, default=10, help="runs per (fault, onset, length, cv)")
    ap.add_argument("--quick", action="store_true", help="lengths up to 1000, fewer seeds")
    ap.add_argument("--only", choices=("fa", "det", "flat"), default=None)
    a = ap.parse_args()
    lengths = LENGTHS[:-1] if a.quick else LENGTHS
    t0 = time.process_time()
    if a.only in (None, "fa"):
        fa = false_alarms(lengths, CVS, a.seeds)
        print(fa_table(fa, lengths, CVS, a.seeds), flush=True)
        print()
    if a.only in (None, "flat"):
        fl = flat_alarms(FLAT_LENGTHS, FLAT_CVS, a.seeds)
        print(flat_table(fl, FLAT_LENGTHS, FLAT_CVS), flush=True)
        print()
    if a.only in (None, "det"):
        dl = (30, 100, 1000) if a.quick else (30, 100, 1000, 5000)
        det = detections(dl, (0.02, 0.10, 0.20), a.fault_seeds)
        print(det_table(det, dl, (0.02, 0.10, 0.20)))
    print(f"\n{time.process_time() - t0:.0f} CPU s")


if __name__ == "__main__":
    main()
