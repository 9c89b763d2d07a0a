"""The training-dynamics rules (datacheck/trace/dynamics.py), each at its step on its own material, and
silent on clean runs (healthy curves, full-length cosine and linear decay to 0, a decaying oscillation,
a converged run with noisy eval)."""
from __future__ import annotations

import math
import random

import numpy as np
import pytest
from peerlogs import gradsnitch_csv, gradsnitch_synthetic, losslint_demo, trainproof_gallery
from tracehelp import by_check, loud, trace, write_jsonl

from datacheck.model.config import TraceSection
from datacheck.trace.dynamics import smooth, spike_indices, warmup_end


def test_divergence_dated_where_the_loss_left_its_band(tmp_path):
    p = losslint_demo(tmp_path)["diverging.csv"]  # loss 1.0 + 0.03 i at step 10 i
    f = by_check(trace(p))["log.divergence"]
    raw = [1.0 + 0.03 * i for i in range(40)]
    best = min(smooth(raw, 3))  # the running median's first value: median(1.0, 1.03)
    top = best * (1 + TraceSection().divergence_floor)  # no noise: the 10% floor is the margin
    first_out = next(i for i, x in enumerate(raw) if x > top)
    assert best == pytest.approx(1.015)
    assert f.details["step"] == 10 * first_out == 40
    assert f.details["last_good_step"] == 10 * (first_out - 1)
    assert f.details["band_top"] == pytest.approx(top)


def test_divergence_on_a_learning_rate_x100_gallery_run_from_step_10(tmp_path):
    """trainproof's lr_hot (real QLoRA, lr x100): 1.398 at step 5, 3.302 at 10, 24.24 at 15, never back."""
    f = by_check(trace(trainproof_gallery("lr_hot", tmp_path / "trainer_state.json")))
    d = f["log.divergence"].details
    assert (d["step"], d["last_good_step"]) == (10, 5)
    assert (d["loss"], d["last_good_loss"]) == (3.3023, 1.3983)
    assert (d["lr"], d["last_good_lr"], d["grad_norm"]) == (0.009, 0.004, 672.21)
    # one earlier value says nothing of the noise: the spike rule judges from the third value
    # (24.24 > 2 x 3.30 at step 15); the run is still flagged at step 10, by the divergence
    assert f["log.loss_spike"].details["step"] == 15


def test_divergence_gradsnitch_planted_rise(tmp_path):
    """gradsnitch's diverge: 3 e^{-t/120} + 0.3 + noise, rising 0.01/step from step 200."""
    f = by_check(trace(gradsnitch_csv("diverge", tmp_path / "d.csv")))["log.divergence"]
    base200 = 3.0 * math.exp(-200 / 120) + 0.3
    # the band is at least 10% of the best: the rise crosses it (base200 * 1.1) about 0.1 * base200 / 0.01 steps in
    assert 200 < f.details["step"] <= 200 + math.ceil(0.1 * base200 / 0.01) + 5


def test_divergence_growing_oscillation_gradsnitch_osc(tmp_path):
    """gradsnitch's osc: 1 + (0.05 + 0.9 t / 400) sin(t / 3) + N(0, 0.02): the running median stays near 1
    while the amplitude grows; the upper envelope (q90 of 10 windows of 40) leaves its band."""
    loss = np.array(gradsnitch_synthetic("osc")["train_loss"])
    n, k = len(loss), 10
    w = n // k
    wins = np.sort(loss[:k * w].reshape(k, w), axis=1)
    top = np.quantile(wins, 0.9, axis=1)
    amp = top - np.quantile(wins, 0.1, axis=1)
    assert np.median(amp[-3:]) > 2 * np.median(amp[:3])
    h = (max(3, n // 25) | 1) // 2  # the running median of 4% of the points, centred, truncated at the ends
    sm = np.array([np.median(loss[max(0, i - h):i + h + 1]) for i in range(n)])
    sigma = 1.4826 * np.median(np.abs(loss[:n // 4] - sm[:n // 4]))
    bi = int(np.argmin(top))
    best = top[bi]
    band = best + max(0.1 * best, min(0.5 * best, 3 * sigma))
    k0 = next(j for j in range(bi + 1, k) if (top[j:] > band).all())
    onset = k0 * w + int(np.argmax(loss[k0 * w:] > band))
    f = by_check(trace(gradsnitch_csv("osc", tmp_path / "o.csv")))["log.divergence"]
    assert f.details["kind"] == "growing_oscillation" and f.details["step"] == onset
    assert f.details["last_good_step"] == onset - 1 and f.details["best_step"] == bi * w
    assert f.details["band_top"] == pytest.approx(band) and f.details["end_envelope"] == pytest.approx(top[-1])
    assert "growing amplitude" in f.message


def test_stagnation_on_a_dead_run_and_zero_lr(tmp_path):
    f = by_check(trace(gradsnitch_csv("plateau", tmp_path / "p.csv")))
    s = f["log.stagnation"]
    assert s.details["step"] is None and s.details["plateau_from"] == 0  # flat from the first step (no lr warmup)
    g = by_check(trace(trainproof_gallery("lr_zero", tmp_path / "z" / "trainer_state.json")))
    z = g["log.zero_lr"]
    assert z.severity == "error" and z.details["step"] == 5 and z.details["every"] is True
    assert z.details["zero_records"] == 60  # the summary entry is not a record


def test_zero_lr_from_a_scheduler_sized_too_short(tmp_path):
    """gradsnitch's lrdead: the lr decays linearly to 0 at step 200 of 400 and stays there."""
    f = by_check(trace(gradsnitch_csv("lrdead", tmp_path / "l.csv")))["log.zero_lr"]
    assert f.details["step"] == 200 and f.details["last_good_step"] == 199 and f.details["zero_records"] == 200


def test_overfit_onset_at_the_eval_minimum(tmp_path):
    rows = []
    evals = {}
    for i in range(1, 401):
        rows.append({"step": i, "loss": 2.0 * math.exp(-i / 150) + 0.2})
        if i % 40 == 0:
            e = 1.5 - 0.1 * (i // 40) if i <= 160 else 1.1 + 0.08 * ((i - 160) // 40)
            evals[i] = e
            rows.append({"step": i, "eval_loss": e})
    f = by_check(trace(write_jsonl(tmp_path / "o.jsonl", rows)))["log.overfit_onset"]
    best = min(evals, key=evals.get)
    above = [s for s in sorted(evals) if s > best and evals[s] > 1.05 * evals[best]]
    assert f.details["step"] == best == 160
    # three consecutive evals above the margin; the running median of 3 may count one eval later
    assert f.details["eval_at"] in (above[2], above[3])


def test_vanishing_grad_while_the_loss_is_flat(tmp_path):
    rng = random.Random(1)
    rows = [{"step": i, "loss": 2.5 + rng.gauss(0, 0.01), "grad_norm": math.exp(-i / 20), "lr": 1e-3}
            for i in range(400)]
    f = by_check(trace(write_jsonl(tmp_path / "v.jsonl", rows)))["log.vanishing_grad"]
    early = sorted(math.exp(-i / 20) for i in range(40))
    early_med = (early[19] + early[20]) / 2
    first_low = next(i for i in range(400) if math.exp(-i / 20) < 1e-3 * early_med)
    assert f.details["step"] == first_low


def test_vanishing_grad_gradsnitch_vanish_needs_a_looser_ratio(tmp_path):
    """gradsnitch's vanish: grad |e^{-t/40} + N(0, 0.005)| levels off at about 0.5% of its early median
    (the noise floor), under the catalog's 1e-3 only now and then: not a finding at the default; with
    ``[trace] vanishing_ratio = 0.05`` (gradsnitch's own ``collapse``) it is, where the grad norm went under."""
    cols = gradsnitch_synthetic("vanish")
    g = np.array(cols["grad_norm"])
    early = float(np.median(g[:max(5, len(g) // 10)]))
    run_med = np.array([np.median(g[max(0, i - 4):i + 1]) for i in range(len(g))])  # the rule's median of 5
    assert (run_med[200:] < 1e-3 * early).mean() < 0.8  # on the floor, under the catalog's ratio only now and then
    path = gradsnitch_csv("vanish", tmp_path / "v.csv")
    assert "log.vanishing_grad" not in by_check(trace(path))
    ratio = 0.05
    low = run_med < ratio * early
    i = next(i for i in range(len(g)) if low[i] and low[i:].sum() >= 0.8 * (len(g) - i))
    while i > 0 and g[i - 1] < ratio * early:
        i -= 1
    f = by_check(trace(path, limits=TraceSection(vanishing_ratio=ratio)))["log.vanishing_grad"]
    assert f.details["step"] == cols["step"][i] and f.details["early_median"] == pytest.approx(early)


def test_periodic_spikes_at_an_epoch_period(tmp_path):
    rng = random.Random(2)
    rows = [{"step": i, "loss": (4.0 if i % 50 == 0 and i else 1.0 + rng.gauss(0, 0.02))} for i in range(1, 301)]
    f = by_check(trace(write_jsonl(tmp_path / "s.jsonl", rows)))["log.periodic_spikes"]
    assert f.details["period"] == 50 and f.details["spike_steps"] == [50, 100, 150, 200, 250, 300]


def test_post_warmup_spike_at_the_peak_lr(tmp_path):
    rows = [{"step": i, "lr": 1e-3 * min(1.0, i / 20), "loss": 3.0 - 0.01 * i} for i in range(1, 101)]
    rows[21]["loss"] = 9.0  # step 22, two steps after the lr peaks at step 20
    f = by_check(trace(write_jsonl(tmp_path / "w.jsonl", rows)))["log.post_warmup_spike"]
    assert f.details["step"] == 22 and f.details["peak_step"] == 20 and f.details["peak_lr"] == pytest.approx(1e-3)
    assert warmup_end([r["lr"] for r in rows]) == 19


def _clean(n, lr_of, seed=0, eval_every=0, eval_noise=0.0, tau=0.2):
    """Loss 2 + 3 e^{-i / (tau n)} + N(0, 0.05), lognormal grad norm; eval (if any) 0.1 above, with noise."""
    rng = random.Random(seed)
    rows = []
    for i in range(1, n + 1):
        rows.append({"step": i, "loss": 2.0 + 3.0 * math.exp(-i / (tau * n)) + rng.gauss(0, 0.05),
                     "grad_norm": math.exp(rng.gauss(0, 0.3)), "lr": lr_of(i)})
        if eval_every and i % eval_every == 0:
            rows.append({"step": i, "eval_loss": 2.1 + 3.0 * math.exp(-i / (tau * n)) + rng.gauss(0, eval_noise)})
    return rows


@pytest.mark.parametrize("name,rows", [
    ("cosine to 0", _clean(1000, lambda i: 3e-4 * 0.5 * (1 + math.cos(math.pi * i / 1000)))),
    ("linear to 0", _clean(1000, lambda i: 3e-4 * (1 - i / 1000))),
    ("warmup then cosine to 0", _clean(1000, lambda i: 3e-4 * (i / 50 if i < 50 else
                                                                  0.5 * (1 + math.cos(math.pi * (i - 50) / 950))))),
    ("converged, noisy eval", _clean(2000, lambda i: 3e-4 * 0.5 * (1 + math.cos(math.pi * i / 2000)), seed=3,
                                     eval_every=50, eval_noise=0.04)),
    ("decaying oscillation", [{"step": i, "loss": 1.5 + math.exp(-i / 300) + 0.3 * math.exp(-i / 150) * math.sin(i / 5),
                               "lr": 1e-3} for i in range(1, 601)]),
])
def test_clean_runs_give_nothing_at_warn_or_above(tmp_path, name, rows):
    assert loud(trace(write_jsonl(tmp_path / "c.jsonl", rows))) == []


@pytest.mark.parametrize("kind", ["clean", "cosine", "healthy_osc"])
def test_gradsnitch_clean_runs(tmp_path, kind):
    assert loud(trace(gradsnitch_csv(kind, tmp_path / f"{kind}.csv"))) == []


def test_losslint_healthy(tmp_path):
    assert loud(trace(losslint_demo(tmp_path)["healthy.csv"])) == []


def test_spike_indices_match_the_detector():
    xs = [1.0, 1.1, 0.9, 3.5, 1.0, 1.05]
    assert spike_indices(xs, 2.0) == [3]  # 3.5 > 2 x median(1.0, 1.1, 0.9)


def test_overfit_onset_on_gradsnitch_planted_run(tmp_path):
    """gradsnitch's overfit: val = train + 0.05, rising 0.002/step from step 200 while train keeps falling."""
    f = by_check(trace(gradsnitch_csv("overfit", tmp_path / "o.csv")))["log.overfit_onset"]
    assert 195 <= f.details["step"] <= 200 and f.details["train_now"] < f.details["train_at_min"]


def test_trainproof_healthy_gallery_run(tmp_path):
    """A real healthy QLoRA run (warmup to 2e-4, cosine to ~0, noisy loss 1.52 -> ~1.06): nothing."""
    assert loud(trace(trainproof_gallery("healthy", tmp_path / "trainer_state.json"))) == []
