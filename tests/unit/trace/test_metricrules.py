"""The metric rules (datacheck/trace/metricrules.py): training may be fine, the logged number is wrong or
missing; and the Trainer's final summary entry is never read as a step."""
from __future__ import annotations

import json
import math
import random
import statistics

import pytest
from conftest import SHARED
from peerlogs import losslint_demo, trainproof_gallery
from tracehelp import by_check, loud, trace, write_jsonl

from datacheck.model.config import TraceSection
from datacheck.trace import open_log
from datacheck.trace.metricrules import ZERO_RUN

LOGS = SHARED / "logs"


def test_no_loss_on_a_log_of_counters_and_learning_rates(tmp_path):
    p = write_jsonl(tmp_path / "m.jsonl", [{"step": i, "lr": 1e-4, "tokens": 1000 * i} for i in range(1, 21)])
    f = by_check(trace(p))["log.no_loss"]
    assert f.severity == "error" and f.details["step"] is None and f.count == 20
    assert f.details["fields"] == {"lr": 20, "tokens": 20}
    meg = by_check(trace(LOGS / "megatron/meg_gpt2_perf_n16.out"))["log.no_loss"]  # every iteration skipped
    assert meg.count == 3 and meg.details["skipped_records"] == 3


def test_a_log_with_a_loss_has_no_no_loss(tmp_path):
    p = write_jsonl(tmp_path / "m.jsonl", [{"step": 1, "lr": 1e-4}, {"step": 2, "lr": 1e-4, "loss": 2.0}])
    assert "log.no_loss" not in by_check(trace(p))


def test_hidden_non_finite_zero_loss_beside_a_nan_grad_norm():
    """ModernBERT#233: Trainer dict lines, grad_norm nan on every line, loss 0.2051 then 0.0, 0.0."""
    f = by_check(trace(LOGS / "issues/modernbert_233_hf_trainer_grad_norm_nan.txt"))["log.hidden_non_finite"]
    lines = (LOGS / "issues/modernbert_233_hf_trainer_grad_norm_nan.txt").read_text().splitlines()
    first_zero = next(i for i, ln in enumerate(lines, 1) if "'loss': 0.0" in ln)
    assert f.details["where"].endswith(f":{first_zero}") and f.severity == "error"
    # every grad norm is nan from the first line: no good step before it, said in words (was "Last good step None")
    # (the log carries no step number: its numbers are records)
    assert f.details["last_good_step"] is None and f.message.endswith("; no good record before it")
    assert "None" not in f.message


def test_hidden_non_finite_zero_tail_in_trainer_state(tmp_path):
    """trainproof's TinyLlama case: 2.859 at step 10, then exactly 0.0 for the rest, grad norm NaN (no filter
    signal on the record itself when grad_norm is not logged): the trailing exact-0.0 run names it."""
    hist = [{"step": 10 * (i + 1), "loss": 2.859 if i == 0 else 0.0, "learning_rate": 1e-4} for i in range(36)]
    p = tmp_path / "trainer_state.json"
    p.write_text(json.dumps({"log_history": hist, "logging_steps": 10}))
    f = by_check(trace(p))["log.hidden_non_finite"]
    assert f.details["step"] == 20 and f.details["last_good_step"] == 10
    assert len(hist) - 1 >= ZERO_RUN


def test_smoothed_loss_is_an_ema_not_per_step(tmp_path):
    rng = random.Random(0)
    raw = [2.0 + 3.0 * math.exp(-i / 200) + rng.gauss(0, 0.1) for i in range(600)]
    ema, e = [], raw[0]
    for x in raw:
        e = 0.98 * e + 0.02 * x
        ema.append(e)
    f = by_check(trace(write_jsonl(tmp_path / "e.jsonl", [{"step": i, "loss": x} for i, x in enumerate(ema)])))
    assert f["log.smoothed_loss"].severity == "info" and f["log.smoothed_loss"].details["autocorr"] > 0.3
    g = by_check(trace(write_jsonl(tmp_path / "r.jsonl", [{"step": i, "loss": x} for i, x in enumerate(raw)])))
    assert "log.smoothed_loss" not in g


def test_duplicate_steps_re_counted_and_mislogged_eval(tmp_path):
    rows = [{"step": s, "loss": 2.0 - 0.01 * k} for k, s in enumerate([1, 2, 3, 3, 4, 5])]
    f = by_check(trace(write_jsonl(tmp_path / "d.jsonl", rows)))["log.duplicate_steps"]
    assert f.details["step"] == 3 and (f.details["previous_loss"], f.details["loss"]) == (1.98, 1.97)
    g = by_check(trace(losslint_demo(tmp_path / "ll")["trainer_state.json"]))["log.duplicate_steps"]
    assert g.details["step"] == 7 and g.details["last_train_step"] == 40  # losslint's planted mislogged eval


def test_lr_per_micro_batch_with_grad_accum_and_warmup(tmp_path):
    warm, ga = 100, 4
    rows = [{"step": i, "loss": 2.0, "lr": 1e-3 * min(1.0, i * ga / warm)} for i in range(1, 201)]
    p = write_jsonl(tmp_path / "l.jsonl", rows)
    limits = TraceSection(warmup_steps=warm)
    f = by_check(trace(p, limits=limits, grad_accum=ga))["log.lr_per_micro_batch"]
    assert f.details["peak_step"] == warm // ga and f.details["grad_accum"] == ga
    ok = [{"step": i, "loss": 2.0, "lr": 1e-3 * min(1.0, i / warm)} for i in range(1, 201)]
    assert "log.lr_per_micro_batch" not in by_check(trace(write_jsonl(tmp_path / "ok.jsonl", ok), limits=limits,
                                                          grad_accum=ga))
    res = trace(p)  # not configured: said, not silently passed
    assert {"check": "log.lr_per_micro_batch", "reason": "needs [batch] grad_accum > 1 and [trace] warmup_steps "
            "(the configured schedule)"} in res.not_run


def test_trainer_summary_entry_is_never_a_step(tmp_path):
    p = trainproof_gallery("lr_zero", tmp_path / "trainer_state.json")
    hist = json.loads(p.read_text())["log_history"]
    assert "train_loss" in hist[-1] and hist[-1]["step"] == hist[-2]["step"] == 300
    lf = open_log(str(p))
    recs = list(lf.records())
    assert len(recs) == len(hist) - 1 and recs[-1].loss == hist[-2]["loss"] != hist[-1]["train_loss"]
    assert "hf_summary_entry" in lf.stats.notes
    assert "log.duplicate_steps" not in by_check(trace(p))
    # the lr is 0 throughout: log.zero_lr says nothing is trained; 60 losses at 1.48 +- 6% cannot tell a 1%
    # change (medians of f values: 0.06 x sqrt 2 x sqrt(pi / (2f + 1)) <= 1% needs f over 100), so
    # log.stagnation is not judged, and says why (it was a stall from medians of 2 values each)
    res = trace(p)
    assert [c for c, _, _ in loud(res)] == ["log.zero_lr"]
    losses = [r.loss for r in recs]
    assert statistics.pstdev(losses) / statistics.mean(losses) > 0.05
    assert "hides a 1% change" in {n["check"]: n["reason"] for n in res.not_run}["log.stagnation"]


def test_trainer_console_summary_line_is_never_a_step(tmp_path):
    p = tmp_path / "console.txt"
    p.write_text("{'loss': 2.5, 'grad_norm': 1.0, 'learning_rate': 0.0001, 'epoch': 0.1}\n"
                 "{'loss': 2.3, 'grad_norm': 1.0, 'learning_rate': 0.0001, 'epoch': 0.2}\n"
                 "{'train_runtime': 12.3, 'train_samples_per_second': 5.0, 'train_steps_per_second': 1.0, "
                 "'train_loss': 2.4, 'epoch': 0.2}\n")
    assert [r.loss for r in open_log(str(p)).records()] == [2.5, 2.3]


def _hf_filtered_log(losses, logging_steps):
    """What the Hugging Face Trainer logs with ``logging_nan_inf_filter`` on (its training loop: a
    non-finite step adds ``tr_loss / (1 + global_step - globalstep_last_logged)``; every log writes
    ``tr_loss / steps since the last log`` and resets ``tr_loss``), with the grad norm of the
    interval's last step (NaN once the loss is)."""
    rows, tr, last, gs = [], 0.0, 0, 0
    for x in losses:
        tr = tr + tr / (1 + gs - last) if not math.isfinite(x) else tr + x
        gs += 1
        if gs % logging_steps == 0:
            rows.append({"step": gs, "loss": tr / (gs - last), "grad_norm": x if not math.isfinite(x) else 1.0})
            tr, last = 0.0, gs
    return rows


@pytest.mark.parametrize("logging_steps", [1, 4])
def test_hidden_non_finite_under_the_trainers_filter_arithmetic(tmp_path, logging_steps):
    """A loss NaN from step 43 on: with logging_steps=1 the step logs exactly 0.0 (its interval holds
    nothing else); with 4 the interval of step 43 logs a finite blend and the next interval 0.0. The
    hidden value is never the mean of the earlier logged losses."""
    nan_from = 43
    losses = [3.0 * math.exp(-i / 50) + 0.1 * math.sin(i) + 0.5 if i < nan_from else math.nan
              for i in range(1, 101)]
    rows = _hf_filtered_log(losses, logging_steps)
    first_zero = next(r["step"] for r in rows if r["loss"] == 0.0)
    # the end of the first logging interval whose steps are all non-finite
    assert first_zero == -(-(nan_from + logging_steps - 1) // logging_steps) * logging_steps
    onset = next(r for r in rows if r["step"] >= nan_from)
    earlier = [r["loss"] for r in rows if r["step"] < onset["step"]]
    assert not math.isclose(onset["loss"], sum(earlier) / len(earlier), rel_tol=1e-6)
    f = by_check(trace(write_jsonl(tmp_path / "hf.jsonl", rows)))["log.hidden_non_finite"]
    assert f.details["step"] == first_zero and f.severity == "error"


def test_hidden_non_finite_trl_frac_non_finite_loss(tmp_path):
    """TRL's frac_non_finite_loss: 1 of 8 losses of step 37 non-finite (the logged mean is finite)."""
    rows = [{"step": i, "loss": 2.0 - 0.005 * i, "frac_non_finite_loss": 0.125 if i == 37 else 0.0}
            for i in range(1, 61)]
    at = next(r["step"] for r in rows if r["frac_non_finite_loss"] > 0)
    f = by_check(trace(write_jsonl(tmp_path / "trl.jsonl", rows)))["log.hidden_non_finite"]
    assert f.details["step"] == at and f.details["non_finite_frac"] == 0.125 and f.details["last_good_step"] == at - 1
    assert "frac_non_finite_loss 0.125" in f.message
    hist = [{"step": r["step"], "loss": r["loss"], "train/frac_non_finite_loss": r["frac_non_finite_loss"]}
            for r in rows]
    p = tmp_path / "trainer_state.json"
    p.write_text(json.dumps({"log_history": hist}))
    assert by_check(trace(p))["log.hidden_non_finite"].details["step"] == at
    clean = [{**r, "frac_non_finite_loss": 0.0} for r in rows]
    assert "log.hidden_non_finite" not in by_check(trace(write_jsonl(tmp_path / "c.jsonl", clean)))
