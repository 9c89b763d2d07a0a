"""Real training logs (../shared/logs, PROVENANCE.md): the facts read by hand there, read by the trace."""
from __future__ import annotations

import pytest
from conftest import SHARED, run_cli

from datacheck.trace import TraceOptions, open_log, parse_spike_rule, trace_logs

LOGS = (SHARED / "logs")
pytestmark = pytest.mark.skipif(not LOGS.is_dir(), reason="shared logs not present")


def _trace(rel: str, spike: str = "olmo", **kw):
    return trace_logs([open_log(str(LOGS / rel), **kw)], TraceOptions(spike=parse_spike_rule(spike)))


def _by(res):
    return {f.check: f for f in res.findings}


def test_megatron_base_skipped_steps_scale_and_grad_norm():
    lf = open_log(str(LOGS / "megatron/meg_gpt2_base_n4-1809579.out"))
    recs = [r for r in lf.records() if r.split == "train"]
    assert [r.step for r in recs] == list(range(10, 201, 10))
    r10, r20, r30 = recs[:3]
    assert (r10.loss, r10.skipped, r10.lr, r10.loss_scale) == (None, 10, 0.0, 8388608.0)
    assert (r20.loss, r20.skipped, r20.loss_scale) == (12.03115, 8, 32768.0)
    assert (r30.loss, r30.skipped, r30.loss_scale, r30.grad_norm) == (22.47505, 1, 16384.0, 16.999)
    assert r20.grad_norm is None and all(r.nan_steps == 0 for r in recs)
    assert recs[-1].loss == pytest.approx(7.366, abs=1e-3)
    res = _trace("megatron/meg_gpt2_base_n4-1809579.out")
    f = _by(res)
    assert f["log.skipped_steps"].count == 19 and f["log.skipped_steps"].details["step"] == 10
    assert "log.non_finite" not in f and "log.loss_scale_collapse" not in f  # the scale search, not a collapse
    # 22.475 is about 1.9x the previous loss: not a 2x spike
    assert "log.loss_spike" not in _by(_trace("megatron/meg_gpt2_base_n4-1809579.out", "ratio:2:4"))
    # validation lines at 100 and 200 are eval records, kept out of the rules
    evals = [e for e in res.events if e["kind"] == "eval"]
    assert [e["step"] for e in evals] == [100, 200]


def test_megatron_perf_scale_search_every_step_skipped():
    res = _trace("megatron/meg_gpt2_perf_n16.out")
    lf = open_log(str(LOGS / "megatron/meg_gpt2_perf_n16.out"))
    assert [(r.loss, r.loss_scale, r.skipped) for r in lf.records()] == [
        (None, 4294967296.0, 1), (None, 2147483648.0, 1), (None, 1073741824.0, 1)]
    f = _by(res)
    assert f["log.skipped_steps"].count == 3 and f["log.skipped_steps"].details["before_first_success"] == 3
    assert "log.loss_scale_collapse" not in f and res.first_bad is None


def test_megatron_ds_divergence_spike_at_3():
    res = _trace("megatron/meg_ds_3d_gpt2_perf_n16-ds-off.out", "ratio:2:4")
    f = _by(res)["log.loss_spike"]
    assert f.details["step"] == 3 and f.details["value"] == pytest.approx(44.24, abs=0.01)
    assert f.details["last_good_step"] == 2 and f.details["loss_scale"] == 12.0
    assert res.first_bad["step"] == 3
    lf = open_log(str(LOGS / "megatron/meg_ds_3d_gpt2_perf_n16-ds-off.out"))
    recs = list(lf.records())
    assert [r.step for r in recs] == list(range(1, 63)) and recs[-1].loss == pytest.approx(20.44, abs=0.01)


def test_megatron_llm_missing_loss_is_suspected_non_finite():
    res = _trace("issues/megatron_llm_33_nan_loss_counters_zero.txt")
    f = _by(res)["log.non_finite"]
    assert f.details["step"] == 3385 and f.details["suspected"] is True and f.details["last_good_step"] == 3384
    assert f.details["lr"] == pytest.approx(6.676e-06) and f.details["last_good_lr"] == pytest.approx(6.678e-06)


def test_nanogpt_iter_lines_and_eval_lines():
    lf = open_log(str(LOGS / "nanogpt/output.log"))
    recs = list(lf.records())
    train = [r for r in recs if r.split == "train"]
    evals = [r for r in recs if r.split == "eval"]
    assert [r.step for r in train] == list(range(0, 5001, 10)) and train[0].loss == 6.1551
    assert train[-1].loss == 1.171  # "iter 5000: loss 1.1710"; 0.8948 is the "step 5000: train loss" estimate
    best = min(evals, key=lambda r: r.loss)
    assert (best.step, best.loss) == (1750, 2.1041) and evals[-1].loss == 2.4492
    assert lf.stats.bad_lines == 0
    res = _trace("nanogpt/output.log")
    assert "log.non_finite" not in _by(res)


@pytest.mark.parametrize("rel, step, window, last_good, why", [
    ("issues/gradnorm_tf_17_epoch_loss_nan.txt", 3451, [3451, 3451], 3450, "loss nan"),
    ("issues/xtuner_187_mmengine_grad_norm_nan.txt", 240, [231, 240], 230, "grad_norm nan"),
    ("issues/modernbert_233_hf_trainer_grad_norm_nan.txt", 1, [1, 1], None, "grad_norm nan"),  # record 1: no step
])
def test_first_non_finite_step(rel, step, window, last_good, why):
    f = _by(_trace(rel))["log.non_finite"]
    assert (f.details["step"], f.details["window"], f.details["last_good_step"]) == (step, window, last_good)
    assert f.details["reason"] == why and f.severity == "error"


def test_xtuner_loss_stays_finite_while_grad_norm_is_nan():
    recs = list(open_log(str(LOGS / "issues/xtuner_187_mmengine_grad_norm_nan.txt")).records())
    assert [r.step for r in recs] == [200, 210, 220, 230, 240, 250]
    assert recs[-1].loss == 2.4566 and str(recs[-1].grad_norm) == "nan"


def test_deepspeed_overflow_collapse_mixed_with_trainer_lines():
    rel = "issues/chinese_llama_alpaca_534_deepspeed_overflow_scale_collapse.txt"
    lf = open_log(str(LOGS / rel))
    recs = list(lf.records())
    assert lf.stats.line_formats == {"deepspeed": 5, "hf_console": 1}
    assert [(r.step, r.prev_scale, r.loss_scale) for r in recs if r.overflow] == [
        (378, 64, 32), (379, 32, 16), (380, 16, 8), (381, 8, 4), (382, 4, 2)]
    f = _by(_trace(rel))
    c = f["log.loss_scale_collapse"]
    assert (c.details["step"], c.details["from_scale"], c.details["to_step"]) == (378, 64.0, 380)
    assert f["log.skipped_steps"].count == 5


def test_apex_scale_to_below_one_and_hysteresis():
    f = _by(_trace("issues/apex_834_loss_scale_to_zero.txt"))
    assert f["log.skipped_steps"].count == 17
    assert f["log.loss_scale_collapse"].severity == "error"
    recs = list(open_log(str(LOGS / "issues/apex_834_loss_scale_to_zero.txt")).records())
    assert recs[0].loss_scale == 32768.0 and recs[-1].loss_scale == 0.5
    # DeepSpeed hysteresis: the first overflow keeps the scale, then 65536 -> 8192 at the start (scale search)
    recs = list(open_log(str(LOGS / "issues/deepspeed_931_overflow_hysteresis.txt")).records())
    assert [(r.prev_scale, r.loss_scale) for r in recs] == [(65536, 65536), (65536, 32768), (32768, 16384), (16384, 8192)]
    # the hysteresis skip keeps the scale: not a back-off in the timeline (was "4 (first at step 0: 65536 -> 65536)")
    res = _trace("issues/deepspeed_931_overflow_hysteresis.txt")
    assert [(e["step"], e["from"], e["to"]) for e in res.events if e["kind"] == "scale_backoff"] == [
        (1, 65536, 32768), (2, 32768, 16384), (3, 16384, 8192)]
    assert _by(res)["log.skipped_steps"].count == 4  # the step is still skipped


def test_mlx_spike_window():
    res = _trace("issues/mlx_examples_620_lora_loss_spike.txt", "ratio:2:4")
    f = _by(res)["log.loss_spike"]
    assert (f.details["step"], f.details["window"], f.details["previous_value"]) == (75, [51, 75], 1.406)
    recs = [r for r in open_log(str(LOGS / "issues/mlx_examples_620_lora_loss_spike.txt")).records() if r.split == "train"]
    assert [r.loss for r in recs[:4]] == [1.593, 1.406, 3.316, 6.437]


def test_hf_console_dicts_without_steps_are_records_not_steps(tmp_path):
    """The ModernBERT excerpt: three Trainer dicts at epoch 0.53, no header, no progress bar. Their
    ordinals are not steps: the first anomaly is "record 1", and no rows are named from it."""
    rel = "issues/modernbert_233_hf_trainer_grad_norm_nan.txt"
    r = run_cli("trace", str(LOGS / rel))
    assert r.returncode == 1 and "first anomaly: log.non_finite at record 1 (the log gives no step number)" in r.stdout
    data = tmp_path / "d.jsonl"
    data.write_text('{"x": 1.0}\n')
    r = run_cli("trace", str(LOGS / rel), "--data", str(data))
    assert r.returncode == 2 and "cannot place the log's records" in r.stderr and "--steps-per-epoch N" in r.stderr
    # the epoch is printed with 2 decimals: x 1000 steps per epoch it is known to +/-5 steps only
    r = run_cli("trace", str(LOGS / rel), "--data", str(data), "--steps-per-epoch", "1000")
    assert r.returncode == 2 and "2 decimal(s)" in r.stderr and "+/-5 steps" in r.stderr
    # 10 steps per epoch: 0.53 x 10 = 5.3, step 5 (the epoch overshoots by less than a step)
    recs = list(open_log(str(LOGS / rel), steps_per_epoch=10).records())
    assert [r.step for r in recs] == [5, 5, 5] and not any(r.step_inferred for r in recs)


@pytest.mark.parametrize("rel, first", [
    ("megatron/meg_gpt2_base_n4-1809579.out", 1),           # Megatron: iteration counted after the update
    ("nanogpt/output.log", 0),                              # nanoGPT: iter_num before the update
    ("issues/xtuner_187_mmengine_grad_norm_nan.txt", 1),    # mmengine: Epoch(train) [e][i/n] from 1
    ("issues/mlx_examples_620_lora_loss_spike.txt", 1),     # mlx-lm: Iter from 1
    ("issues/chinese_llama_alpaca_534_deepspeed_overflow_scale_collapse.txt", 1),  # the Trainer's dict after a bar
    ("issues/gradnorm_tf_17_epoch_loss_nan.txt", None),     # "epoch: N loss: X": no trainer named
])
def test_each_real_log_says_how_its_trainer_counts(rel, first):
    lf = open_log(str(LOGS / rel))
    recs = list(lf.records())
    assert recs and lf.stats.first_step == first and lf.stats.unplaced is None


def test_the_join_is_printed_with_the_first_anomaly():
    r = run_cli("trace", str(LOGS / "issues/xtuner_187_mmengine_grad_norm_nan.txt"))
    assert r.returncode == 1 and "first anomaly: log.non_finite at log step 240 = optimizer step 239 (" in r.stdout
    r = run_cli("trace", str(LOGS / "issues/gradnorm_tf_17_epoch_loss_nan.txt"))
    assert "log step 3451 = optimizer step 3450 (assumed)" in r.stdout and "note: step join assumed" in r.stdout
