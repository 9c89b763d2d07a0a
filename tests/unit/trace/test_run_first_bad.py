"""The first anomaly of ``datacheck trace`` (datacheck/trace/run.py ``first_bad``): a non-finite value
logged anywhere is the first answer's step over an earlier dynamics warning, which is kept as what came
before it (``after_warning``); expected steps computed here from the series."""
from __future__ import annotations

import random

from tracehelp import by_check, trace, verdict, write_jsonl

from datacheck.trace.render import render_text


def _rise_then_nan(tmp_path):
    """1.0 + N(0, 0.01) for 20 steps, 2.0 from step 21 (2x: past the 1.5x cap whatever the noise), a NaN
    at the last step, 60."""
    rng = random.Random(0)
    raw = [1.0 + rng.gauss(0, 0.01) for _ in range(20)] + [2.0 + rng.gauss(0, 0.01) for _ in range(39)] + [float("nan")]
    return write_jsonl(tmp_path / "r.jsonl", [{"step": i + 1, "loss": v, "lr": 1e-3} for i, v in enumerate(raw)]), raw


def test_a_later_nan_is_the_first_anomaly_over_an_earlier_divergence(tmp_path):
    p, raw = _rise_then_nan(tmp_path)
    res = trace(p)
    rise, nan = 21, len(raw)  # the first 2.0, the NaN (steps from 1)
    assert by_check(res)["log.divergence"].details["step"] == rise  # still reported, at its own step
    fb = res.first_bad
    assert (fb["check"], fb["step"]) == ("log.non_finite", nan)
    assert fb["after_warning"]["check"] == "log.divergence" and fb["after_warning"]["step"] == rise
    v = verdict(res)
    assert v["answers"]["from_step"]["first"]["step"] == nan
    assert v["answers"]["nan_or_inf"]["step"] == nan
    line = next(ln for ln in render_text(res, None, v).splitlines() if ln.startswith("first anomaly:"))
    assert f"log.non_finite at step {nan}" in line and f"after log.divergence from step {rise}" in line


def test_without_a_non_finite_value_the_warning_stays_first(tmp_path):
    p, raw = _rise_then_nan(tmp_path)
    rows = [r for r in (line for line in p.read_text().splitlines()) if '"nan"' not in r]
    p.write_text("\n".join(rows) + "\n")
    fb = trace(p).first_bad
    assert (fb["check"], fb["step"]) == ("log.divergence", 21) and "after_warning" not in fb
