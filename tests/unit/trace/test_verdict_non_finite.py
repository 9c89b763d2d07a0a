"""The first answer gives a non-finite grad norm as logged: an infinite one is ``inf`` (in the JSON the
string ``"inf"``, as the report writes every non-finite number, JSON having none), never ``nan``;
answer 3 tells NaN from inf, and answer 1 must not contradict it (the new user's trial: a JSONL
logging ``"grad_norm": Infinity`` at step 23, and a TensorBoard run whose loss turns NaN while its
grad norm is infinite; tests/data/trace/trial22)."""
from __future__ import annotations

import json
import math

import pytest
from conftest import ROOT, run_cli
from tracehelp import trace, verdict

from datacheck.trace.verdict import verdict_text

TRIAL = ROOT / "tests" / "data" / "trace" / "trial22"


def _first_non_finite(rows: list[dict], key: str) -> tuple[int, float]:
    return next((r["step"], r[key]) for r in rows if r.get(key) is not None and not math.isfinite(r[key]))


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
def test_answer_one_gives_the_grad_norm_as_logged(tmp_path, value):
    rows = [{"step": s, "loss": 3.0 - 0.04 * s, "grad_norm": value if s == 23 else 1.0, "lr": 0.001}
            for s in range(1, 41)]
    p = tmp_path / "m.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))  # Python's json writes Infinity / -Infinity / NaN
    step, logged = _first_non_finite(rows, "grad_norm")
    v = verdict(trace(p))
    first = v["answers"]["from_step"]["first"]
    assert first["step"] == step
    got = first["grad_norm"]
    assert (math.isnan(got) and math.isnan(logged)) or got == logged
    line1 = verdict_text(v)[0]
    assert f"grad norm {logged:.4g};" in line1 and f"step {step} " in line1
    kind = v["answers"]["nan_or_inf"]["kind"]
    assert kind == ("NaN" if math.isnan(logged) else "inf")
    j = json.loads(run_cli("trace", str(p), "--format", "json").stdout)["result"]
    assert j["verdict"]["answers"]["from_step"]["first"]["grad_norm"] == str(logged)  # "inf", "-inf", "nan"
    assert j["verdict"]["answers"]["from_step"]["last_good"]["grad_norm"] == 1.0


def test_the_trials_jsonl_and_tensorboard_logs():
    rows = [json.loads(ln) for ln in (TRIAL / "inf_grad_norm.jsonl").read_text().splitlines()]
    step, logged = _first_non_finite(rows, "grad_norm")
    assert (step, logged) == (23, math.inf)
    r = run_cli("trace", str(TRIAL / "inf_grad_norm.jsonl"))
    assert f"1. from which step: step {step} (log.non_finite): lr 0.001, loss scale -, grad norm inf;" in r.stdout
    assert "3. NaN or inf: inf at step 23" in r.stdout

    ea = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    acc = ea.EventAccumulator(str(TRIAL / "tb"))
    acc.Reload()
    tags = acc.Tags()["scalars"]
    series = {t: {e.step: e.value for e in acc.Scalars(t)} for t in tags}
    loss = next(v for t, v in series.items() if "loss" in t)
    grad = next(v for t, v in series.items() if "grad" in t)
    bad = min(s for s in loss if not math.isfinite(loss[s]) or not math.isfinite(grad[s]))
    v = verdict(trace(TRIAL / "tb"))
    first = v["answers"]["from_step"]["first"]
    assert first["step"] == bad and first["grad_norm"] == grad[bad] == math.inf
    assert math.isnan(loss[bad]) and v["answers"]["nan_or_inf"]["kind"] == "NaN"
    assert "grad norm inf;" in verdict_text(v)[0]
