"""Real training logs (../shared/logs, PROVENANCE.md): the facts read by hand there, read by the trace."""
from __future__ import annotations

import json
import math
import re

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
    # iteration 20's loss is finite over 10 iterations of which 8 were skipped: an update succeeded in
    # 11..20, so iteration 30's skip came after training started (at most 10 + 8 skips before it)
    assert f["log.skipped_steps"].details["before_first_success"] == r10.skipped + r20.skipped == 18
    assert f["log.skipped_steps"].details["first_after_success_step"] == 30
    r = run_cli("trace", str(LOGS / "megatron/meg_gpt2_base_n4-1809579.out"), "--format", "json")
    verdict = json.loads(r.stdout)["result"]["verdict"]
    assert verdict["anomalies"] == [] and [a["check"] for a in verdict["not_anomalies"]] == ["log.skipped_steps"]
    assert "18 skipped step(s) before the first successful one" in verdict["not_anomalies"][0]["why"]
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


def test_a_nan_grad_norm_under_a_finite_loss_is_not_called_poisoned_weights():
    """xtuner: grad_norm nan from 240 on while the loss stays finite (2.5128, 2.4566). It was "no finite
    loss after it: persistent (the weights are poisoned)", which the loss on the same lines refutes."""
    rel = "issues/xtuner_187_mmengine_grad_norm_nan.txt"
    recs = list(open_log(str(LOGS / rel)).records())
    first = next(i for i, r in enumerate(recs) if not math.isfinite(r.grad_norm))
    after = recs[first:]
    assert all(not math.isfinite(r.grad_norm) for r in after) and all(math.isfinite(r.loss) and r.loss for r in after)
    f = _by(_trace(rel))["log.non_finite"]
    assert f.details["metric"] == "grad_norm" and f.details["step"] == recs[first].step
    assert f.details["loss_stays_finite"] is True and f.details["persistent"] is False
    assert f.details["finite_losses"] == len(after)
    assert "no finite loss after it" not in f.message and "the weights are not poisoned" in f.message
    out = run_cli("trace", str(LOGS / rel)).stdout
    answer3 = next(ln for ln in out.splitlines() if ln.startswith("3. NaN or inf:"))
    assert "poisoned)" not in answer3 and "the loss stays finite" in answer3
    # the Hugging Face log: a logged loss proves nothing there (logging_nan_inf_filter; 0.0 hides a NaN)
    g = _by(_trace("issues/modernbert_233_hf_trainer_grad_norm_nan.txt"))["log.non_finite"]
    assert g.details["loss_stays_finite"] is False and g.details["persistent"] is True


def test_deepspeed_overflow_collapse_mixed_with_trainer_lines():
    rel = "issues/chinese_llama_alpaca_534_deepspeed_overflow_scale_collapse.txt"
    lf = open_log(str(LOGS / rel))
    recs = list(lf.records())
    assert lf.stats.line_formats == {"deepspeed": 5, "hf_console": 1}
    assert [(r.step, r.prev_scale, r.loss_scale) for r in recs if r.overflow] == [
        (378, 64, 32), (379, 32, 16), (380, 16, 8), (381, 8, 4), (382, 4, 2)]
    f = _by(_trace(rel))
    c = f["log.loss_scale_collapse"]
    # the whole run of back-offs, 64 -> 2 over steps 378..382 (not the first three that qualify it)
    assert (c.details["step"], c.details["from_scale"], c.details["to_step"]) == (378, 64.0, 382)
    assert (c.count, c.details["to_scale"], c.details["minimum"]) == (5, 2.0, False)
    assert f["log.skipped_steps"].count == 5


def test_one_process_two_streams_are_one_rank():
    """Chinese-LLaMA-Alpaca#534: DeepSpeed's `OVERFLOW! Rank 0` lines and the Trainer's dict (no rank) in
    one console are one process's two streams: rank 0, not "rank 0 only (of 2)"."""
    rel = "issues/chinese_llama_alpaca_534_deepspeed_overflow_scale_collapse.txt"
    text = (LOGS / rel).read_text()
    named = set(re.findall(r"OVERFLOW! Rank (\d+)", text))
    assert named == {"0"} and text.count("{'loss'") == 1
    r = run_cli("trace", str(LOGS / rel), "--format", "json")
    res = json.loads(r.stdout)["result"]
    ranks = res["verdict"]["answers"]["ranks"]
    assert ranks["seen"] == ["rank 0"] and ranks["affected"] == ["rank 0"]
    assert "of 2" not in ranks["answer"] and "only rank 0 is logged" in ranks["answer"]
    assert "rank 0 only (of 2)" not in run_cli("trace", str(LOGS / rel)).stdout


def test_apex_scale_to_below_one_and_hysteresis():
    f = _by(_trace("issues/apex_834_loss_scale_to_zero.txt"))
    assert f["log.skipped_steps"].count == 17
    assert f["log.loss_scale_collapse"].severity == "error"
    recs = list(open_log(str(LOGS / "issues/apex_834_loss_scale_to_zero.txt")).records())
    assert recs[0].loss_scale == 32768.0 and recs[-1].loss_scale == 0.5
    # DeepSpeed hysteresis: the first overflow keeps the scale, then 65536 -> 8192 at the start (scale search)
    recs = list(open_log(str(LOGS / "issues/deepspeed_931_overflow_hysteresis.txt")).records())
    assert [(r.prev_scale, r.loss_scale) for r in recs] == [(65536, 65536), (65536, 32768), (32768, 16384), (16384, 8192)]
    # the hysteresis skip keeps the scale: not a back-off in the timeline (was "4 (first at step 0: 65536 -> 65536)");
    # its lines carry no step: records numbered from 1, the N-th line record N (the back-offs: lines 2..4)
    res = _trace("issues/deepspeed_931_overflow_hysteresis.txt")
    assert [(e["step"], e["from"], e["to"]) for e in res.events if e["kind"] == "scale_backoff"] == [
        (2, 65536, 32768), (3, 32768, 16384), (4, 16384, 8192)]
    assert _by(res)["log.skipped_steps"].count == 4  # the step is still skipped


def test_a_collapse_is_reported_to_the_end_of_its_run():
    """apex halves the scale on every line of the excerpt; the first back-off, from 65536 before any
    good step, is the initial scale search, every later one belongs to one run that ends below 1."""
    rel = "issues/apex_834_loss_scale_to_zero.txt"
    scales = [float(m) for m in re.findall(r"reducing loss scale to ([0-9.]+)", (LOGS / rel).read_text())]
    assert scales[0] == 65536 / 2 and all(b == a / 2 for a, b in zip(scales, scales[1:]))
    steps = [r.step for r in open_log(str(LOGS / rel)).records()]
    c = _by(_trace(rel))["log.loss_scale_collapse"]
    backoffs = len(scales) - 1  # each pair of consecutive lines; 65536 -> scales[0] is the search
    assert c.count == backoffs == c.details["backoffs"]
    assert (c.details["from_scale"], c.details["to_scale"]) == (scales[0], scales[-1])
    assert (c.details["step"], c.details["to_step"]) == (steps[1], steps[-1])
    assert c.details["minimum"] is True and scales[-1] < 1
    assert (f"backs off {backoffs} times in a row and reaches {scales[-1]:g} (at or below 1): "
            f"{scales[0]:.0f} -> {scales[-1]:g} from record {steps[1]} to {steps[-1]}") in c.message  # no step logged


def test_apex_collapse_and_timeline_count_the_same_back_offs():
    """apex#834: 17 overflow lines, 32768 -> 0.5. The first halves apex's default initial scale 2^16 =
    65536 (the initial scale search, not counted in the collapse); the collapse's 16 and the timeline's
    17 say so, both from 65536."""
    rel = "issues/apex_834_loss_scale_to_zero.txt"
    scales = [float(m) for m in re.findall(r"reducing loss scale to ([0-9.]+)", (LOGS / rel).read_text())]
    assert len(scales) == 17 and scales[0] == 32768 and scales[-1] == 0.5
    steps = [r.step for r in open_log(str(LOGS / rel)).records()]
    c = _by(_trace(rel))["log.loss_scale_collapse"]
    assert (c.count, c.details["search_backoffs"], c.details["search_from_scale"]) == (16, 1, 65536)
    assert (f"after 1 back-off(s) of the fp16 initial scale search (65536 -> 32768 at record {steps[0]}: from the "
            "scaler's initial scale, 2^16 = 65536 by default in apex") in c.message
    assert f"not counted), {len(scales)} in all" in c.message
    out = run_cli("trace", str(LOGS / rel)).stdout
    assert (f"loss-scale back-offs: {len(scales)} (1 of the fp16 initial scale search, from the scaler's initial "
            f"scale: first at record {steps[0]}: 65536 -> 32768; then {len(scales) - 1}: first at record {steps[1]}: "
            f"32768 -> 16384, last at record {steps[-1]}: 1 -> 0.5)") in out


def test_a_collapse_run_ends_where_the_scale_stops_falling(tmp_path):
    """Four back-offs, a step at the same scale, then two more: one finding for the first run (4,
    not 6); the later back-offs are no part of it."""
    scales = [1024.0, 512.0, 256.0, 128.0, 64.0, 64.0, 32.0, 16.0]
    log = tmp_path / "metrics.jsonl"
    log.write_text("".join(json.dumps({"step": i + 1, "loss": 2.0, "loss_scale": x}) + "\n"
                           for i, x in enumerate(scales)))
    end = next(i for i in range(1, len(scales)) if scales[i] >= scales[i - 1]) - 1  # the run's last index
    res = trace_logs([open_log(str(log))], TraceOptions(spike=parse_spike_rule("olmo")))
    c = _by(res)["log.loss_scale_collapse"]
    assert (c.count, c.details["from_scale"], c.details["to_scale"]) == (end, scales[0], scales[end])
    assert (c.details["step"], c.details["to_step"], c.details["minimum"]) == (2, end + 1, False)


def test_mlx_spike_window():
    res = _trace("issues/mlx_examples_620_lora_loss_spike.txt", "ratio:2:4")
    f = _by(res)["log.loss_spike"]
    assert (f.details["step"], f.details["window"], f.details["previous_value"]) == (75, [51, 75], 1.406)
    recs = [r for r in open_log(str(LOGS / "issues/mlx_examples_620_lora_loss_spike.txt")).records() if r.split == "train"]
    assert [r.loss for r in recs[:4]] == [1.593, 1.406, 3.316, 6.437]


def _refused_rows(rel: str, tmp_path, first: str) -> str:
    """Trace ``rel`` (its first anomaly at ``first``, a record, not a step), then with ``--data``: the
    stderr of the refusal to name rows from record ordinals (exit 2)."""
    r = run_cli("trace", str(LOGS / rel))
    assert r.returncode == 1 and f"first anomaly: {first} (the log gives no step number)" in r.stdout
    data = tmp_path / "d.jsonl"
    data.write_text('{"x": 1.0}\n')
    r = run_cli("trace", str(LOGS / rel), "--data", str(data))
    assert r.returncode == 2 and "cannot place the log's records" in r.stderr
    return r.stderr


def test_hf_console_dicts_without_steps_are_records_not_steps(tmp_path):
    """The ModernBERT excerpt: three Trainer dicts at epoch 0.53, no header, no progress bar. Their
    ordinals are not steps: the first anomaly is "record 1", and no rows are named from it."""
    rel = "issues/modernbert_233_hf_trainer_grad_norm_nan.txt"
    assert "--steps-per-epoch N" in _refused_rows(rel, tmp_path, "log.non_finite at record 1")
    data = tmp_path / "d.jsonl"
    # the epoch is printed with 2 decimals: x 1000 steps per epoch it is known to +/-5 steps only
    r = run_cli("trace", str(LOGS / rel), "--data", str(data), "--steps-per-epoch", "1000")
    assert r.returncode == 2 and "2 decimal(s)" in r.stderr and "+/-5 steps" in r.stderr
    # 10 steps per epoch: 0.53 x 10 = 5.3, step 5 (the epoch overshoots by less than a step) for each
    # of the three; the reader notes that two training records then share a step
    lf = open_log(str(LOGS / rel), steps_per_epoch=10)
    recs = list(lf.records())
    assert [r.step for r in recs] == [5, 5, 5] and not any(r.step_inferred for r in recs)
    assert lf.stats.epoch_clash is not None and "lines 1 (epoch 0.53) and 2 (epoch 0.53)" in lf.stats.epoch_clash


def test_hf_console_records_one_plan_puts_on_one_step_are_not_duplicates(tmp_path):
    """The ModernBERT excerpt under a [batch] plan: its three training dicts (losses 0.2051, 0.0, 0.0)
    all print epoch 0.53. The Trainer logs one training dict per global step, so three of them are three
    steps; a plan whose steps per epoch puts them on one step (here 320 rows / batch 8 = 40: 0.53 x 40 =
    21.2, step 21 each) is not this run's. No log.duplicate_steps: the records stay unplaced, and the
    refusal to name rows says why."""
    rel = "issues/modernbert_233_hf_trainer_grad_norm_nan.txt"
    lines = (LOGS / rel).read_text().splitlines()
    assert len(lines) == 3 and all("'epoch': 0.53" in t and "'loss': " in t for t in lines)
    rows, batch = 320, 8
    spe = rows // batch
    step = math.floor(0.53 * spe)
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"x": float(i)}) + "\n" for i in range(rows)))
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text(f"[batch]\nbatch_size = {batch}\nseed = 0\n")
    r = run_cli("trace", str(LOGS / rel), "--data", str(data), "--config", str(cfg))
    assert r.returncode == 2 and "log.duplicate_steps" not in r.stdout + r.stderr
    assert "cannot place the log's records" in r.stderr
    assert f"lines 1 (epoch 0.53) and 2 (epoch 0.53) both fall on step {step} at {spe} steps per epoch " \
           "(the [batch] plan's)" in r.stderr
    # the same with --steps-per-epoch, without --data: the records are records, no duplicate step
    res = _trace(rel, steps_per_epoch=spe)
    assert "log.duplicate_steps" not in _by(res)
    assert res.logs[0].unplaced is not None and "(--steps-per-epoch)" in res.logs[0].unplaced
    r = run_cli("trace", str(LOGS / rel), "--steps-per-epoch", str(spe))
    assert r.returncode == 1 and "log.duplicate_steps" not in r.stdout
    assert "first anomaly: log.non_finite at record 1 (the log gives no step number)" in r.stdout


def test_overflow_lines_alone_are_records_not_steps(tmp_path):
    """apex's overflow lines (NVIDIA/apex#834: 17 lines, none with a step number): their positions are
    not optimizer steps, so no rows are named from them (nor from DeepSpeed#931's four); an overflow
    line among stepped lines takes the step after the previous one, and the log stays placed."""
    rel = "issues/apex_834_loss_scale_to_zero.txt"
    recs = list(open_log(str(LOGS / rel)).records())
    assert len(recs) == 17 and all(r.step_inferred for r in recs)
    # the collapse starts at the second line (the first back-off, 65536 -> 32768, is the initial scale
    # search): record 2, as records are numbered from 1 in every log without steps
    assert [r.step for r in recs] == list(range(1, 18))
    assert "carry no step number" in _refused_rows(rel, tmp_path, "log.loss_scale_collapse at record 2")
    ds = open_log(str(LOGS / "issues/deepspeed_931_overflow_hysteresis.txt"))
    assert len(list(ds.records())) == 4 and ds.stats.unplaced is not None
    mixed = tmp_path / "mixed.log"
    mixed.write_text("step=1 loss=2.0\nstep=2 loss=1.9\n"
                     "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 16384.0\nstep=4 loss=1.8\n")
    lf = open_log(str(mixed))
    assert [(r.step, r.step_inferred) for r in lf.records()] == [(1, False), (2, False), (3, True), (4, False)]
    assert lf.stats.unplaced is None


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


STEP_NUMBER = re.compile(r"\bsteps? \d|\bgood steps?\b")  # "step 4", "steps 2..9", "last good step"


def _strings(v):
    if isinstance(v, str):
        yield v
    elif isinstance(v, dict):
        for x in v.values():
            yield from _strings(x)
    elif isinstance(v, list):
        for x in v:
            yield from _strings(x)


@pytest.mark.parametrize("rel", ["issues/apex_834_loss_scale_to_zero.txt",
                                 "issues/modernbert_233_hf_trainer_grad_norm_nan.txt"])
def test_a_log_without_step_numbers_says_record_n_in_text_and_json(rel):
    """Both logs carry no step number (PROVENANCE: apex's overflow lines; the Trainer's dicts with an
    epoch only): their records are numbered from 1, and every number the output gives is a record's.
    The text and the JSON said "step N" beside "record N" (the first anomaly's line alone said record)."""
    text = run_cli("trace", str(LOGS / rel)).stdout
    said = [ln for ln in text.splitlines() if STEP_NUMBER.search(ln)]
    assert said == [] and "record 1" in text
    res = json.loads(run_cli("trace", str(LOGS / rel), "--format", "json").stdout)["result"]
    assert res["first_bad"]["step_unit"] == "record" and res["first_bad"]["unplaced"] is True
    v = res["verdict"]
    assert v["answers"]["from_step"]["first"]["step_unit"] == "record"
    assert all(a["step_unit"] == "record" for a in v["anomalies"])
    texts = [*_strings([f["message"] for f in res["findings"]]), *_strings(v["anomalies"]), *_strings(v["answers"])]
    assert [t for t in texts if STEP_NUMBER.search(t)] == []


def test_a_log_with_step_numbers_keeps_step_n():
    """The text lines that number their epoch (PROVENANCE: gradnorm_tf#17, first NaN at epoch 3451)
    are steps: no record wording."""
    res = json.loads(run_cli("trace", str(LOGS / "issues/gradnorm_tf_17_epoch_loss_nan.txt"), "--format",
                             "json").stdout)["result"]
    assert res["first_bad"]["step"] == 3451 and "step_unit" not in res["first_bad"]
    assert all("step_unit" not in f["details"] for f in res["findings"])
    first = res["verdict"]["anomalies"][0]
    assert "step_unit" not in first and "before step 3451" in first["next_experiment"]
