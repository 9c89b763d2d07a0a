"""The training-dynamics rules judge finite values (docs/trace.md): a 0.0 loss that stands for a
non-finite one the logger hid (``log.hidden_non_finite``: beside a NaN or 0.0 grad norm, or the trailing
run of 0.0 losses the Hugging Face Trainer's ``logging_nan_inf_filter`` logs) is no finite value, and
no dynamics rule (stagnation, divergence, the spikes, vanishing gradient, ...) nor the smoothed-loss
rule judges it. The new user's trial (tests/data/trace/trial22/hf_nan_trainer_state.json, a real
Trainer run of transformers 5.2 whose loss went NaN at step 2) was told "the loss stalls from step 3
to 46 ... raise the peak lr" on those 0.0 losses, after trace had named them hidden NaNs."""
from __future__ import annotations

import json
import math
import random

import pytest
from conftest import ROOT
from tracehelp import by_check, loud, trace, write_jsonl

TRIAL = ROOT / "tests" / "data" / "trace" / "trial22"
#: the rules that judge the logged values as a curve (the dynamics family of docs/trace.md, and the
#: smoothed-loss metric rule, which reads the curve's autocorrelation)
CURVE_RULES = {"log.loss_spike", "log.grad_norm_spike", "log.divergence", "log.stagnation", "log.overfit_onset",
               "log.vanishing_grad", "log.periodic_spikes", "log.post_warmup_spike", "log.smoothed_loss"}


def test_the_trials_trainer_run_is_not_called_a_stall():
    hist = json.loads((TRIAL / "hf_nan_trainer_state.json").read_text())["log_history"]
    train = [e for e in hist if "loss" in e]
    zeros = [e["step"] for e in train if e["loss"] == 0.0]
    assert len(zeros) > 40 and all(not math.isfinite(e["grad_norm"]) for e in train if e["loss"] == 0.0)
    res = trace(TRIAL / "hf_nan_trainer_state.json")
    found = by_check(res)
    assert {"log.non_finite", "log.hidden_non_finite"} <= set(found)
    assert found["log.hidden_non_finite"].details["step"] == zeros[0]
    assert not CURVE_RULES & set(found)


def _state(tmp_path, grad: float | None, tail: list[float] | None = None) -> tuple:
    """A trainer_state.json of 30 falling losses, then 60 records of ``tail`` (default: exactly 0.0)
    with grad norm ``grad`` (None: not logged)."""
    rng = random.Random(4)
    hist = [{"step": i, "loss": 2.0 * math.exp(-i / 20) + 0.5 + rng.gauss(0, 0.01), "grad_norm": 1.0,
             "learning_rate": 1e-3, "epoch": i / 100} for i in range(1, 31)]
    for k, i in enumerate(range(31, 91)):
        e = {"step": i, "loss": 0.0 if tail is None else tail[k], "learning_rate": 1e-3, "epoch": i / 100}
        if grad is not None:
            e["grad_norm"] = grad
        hist.append(e)
    p = tmp_path / "trainer_state.json"
    p.write_text(json.dumps({"log_history": hist, "logging_steps": 1}))
    return p, hist


@pytest.mark.parametrize("grad", [math.nan, 0.0, None, 1.0], ids=["nan", "zero", "absent", "finite"])
def test_a_trainer_state_ending_in_hidden_nans_is_judged_on_its_finite_losses_only(tmp_path, grad):
    """Each form of the hidden NaN: 0.0 beside a NaN or 0.0 grad norm (each record says it), or a
    trailing run of 0.0 losses with the grad norm absent or finite (the Trainer's filter, logging_steps
    > 1: the run says it). Before, log.stagnation (and log.vanishing_grad on the 0.0 grad norms) fired."""
    p, hist = _state(tmp_path, grad)
    first_zero = next(e["step"] for e in hist if e["loss"] == 0.0)
    found = by_check(trace(p))
    assert found["log.hidden_non_finite"].details["step"] == first_zero
    assert not CURVE_RULES & set(found), sorted(found)


def test_a_real_stall_after_the_same_start_is_still_a_stall(tmp_path):
    """The control: the same run whose last 60 losses are finite and flat is a stall."""
    rng = random.Random(5)
    p, _ = _state(tmp_path, 1.0, tail=[0.6 + rng.gauss(0, 0.005) for _ in range(60)])
    found = by_check(trace(p))
    assert "log.hidden_non_finite" not in found
    assert found["log.stagnation"].severity == "warn"


def _rows(n_hidden: int, grad: float) -> list[dict]:
    rng = random.Random(2)
    return [{"step": i, "loss": 0.0, "grad_norm": grad, "lr": 1e-3} if 40 <= i < 40 + n_hidden else
            {"step": i, "loss": 1.5 * math.exp(-i / 60) + 1.0 + rng.gauss(0, 0.03),
             "grad_norm": 1.0 + rng.gauss(0, 0.05), "lr": 1e-3} for i in range(1, 161)]


@pytest.mark.parametrize("n_hidden", [8, 50])
@pytest.mark.parametrize("grad", [math.nan, 0.0], ids=["nan", "zero"])
def test_hidden_nans_mid_run_are_no_best_loss_nor_spike_history(tmp_path, n_hidden, grad):
    """0.0 losses mid-run, then the loss back at its level: before, the smoothed best was 0 and every
    later loss "left its band" (log.divergence), and the loss after 50 of them was a spike over a median
    of 0.0 (log.loss_spike). Judged without them, the healthy curve has no dynamics finding."""
    rows = _rows(n_hidden, grad)
    res = trace(write_jsonl(tmp_path / "m.jsonl", rows))
    found = by_check(res)
    assert found["log.hidden_non_finite"].details["step"] == 40
    assert not CURVE_RULES & {c for c, _, _ in loud(res)}, loud(res)
    healthy = [r for r in rows if r["loss"] != 0.0]
    assert not CURVE_RULES & {c for c, _, _ in loud(trace(write_jsonl(tmp_path / "h.jsonl", healthy)))}
