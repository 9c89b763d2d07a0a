"""A Megatron run with a batch-size ramp-up (``--rampup-batch-size 4 4 60`` to a global batch of 16)
over the real Megatron shard (realdata PROVENANCE.md section 4): ``plan --step N`` and ``trace --data``
name the samples that run's iteration read, which start at the sum of the earlier iterations' global
batches (megatron-core's RampupBatchsizeNumMicroBatchesCalculator; here from the line copy of it and of
training.py's loop in tests/helpers/megatronref.py), not at N x 16; a config the log contradicts is
refused (exit 2)."""
from __future__ import annotations

import json
import struct

import megatronref as ref
import numpy as np
import pytest
from conftest import run_cli

SHARD = "megatron_gpt2_openwebtext/meg-gpt2-openwebtext_text_document"
MBS, DP, GA, SEQ, SEED, SPLIT, SAMPLES = 2, 2, 4, 64, 7, "969, 30, 1", 400
RAMP = (4, 4, 60)
CONFIG = f"""[batch]
batch_size = {MBS}
world_size = {DP}
grad_accum = {GA}

[megatron]
seq_length = {SEQ}
seed = {SEED}
train_samples = {SAMPLES}
rampup_batch_size = [{RAMP[0]}, {RAMP[1]}, {RAMP[2]}]
"""


def _lengths(idx):
    raw = idx.read_bytes()
    version, code, s, d = struct.unpack("<QBQQ", raw[9:34])
    assert raw[:9] == b"MMIDIDX\x00\x00" and (version, code, s, d) == (1, 8, 1000, 1001)
    assert np.frombuffer(raw, dtype="<i8", count=d, offset=34 + 12 * s).tolist() == list(range(1001))
    return np.frombuffer(raw, dtype="<i4", count=s, offset=34).tolist()


def _calc():
    return ref.RampupCalculator(MBS * DP * GA, MBS, DP, *RAMP)


def _want(lens, step):
    """{rank: [{sample, micro_batch, reads}]} of optimizer step ``step`` of the ramp-up run."""
    iters = ref.rampup_train_iters(_calc(), SAMPLES, RAMP[2])
    di, si, sh, _, _ = ref.order(lens, SEQ, SEED, SPLIT, 1, SAMPLES)
    out: dict[str, list[dict]] = {}
    for rank, mb, idxs in ref.rampup_step_batches(len(si) - 1, MBS, DP, _calc(), iters)[step]:
        for idx in idxs:
            out.setdefault(str(rank), []).append(
                {"sample": idx, "micro_batch": mb, "reads": [list(p) for p in ref.sample_pieces(lens, di, si, sh, idx, 1)]})
    return out


def _log(path, iters, batch_of=None, spike=None):
    """A Megatron training_log of the ramp-up run: consumed samples after each iteration and its global
    batch size, from the reference calculator (``batch_of``: another run's, to contradict the config)."""
    steps = ref.rampup_steps(_calc(), iters) if batch_of is None else batch_of
    path.write_text("".join(
        f" iteration {i + 1:8d}/{iters:8d} | consumed samples: {c + g:12d} | elapsed time per iteration (ms): 10.0 | "
        f"learning rate: 1.000E-04 | global batch size: {g:5d} | "
        f"lm loss: {(40.0 if i + 1 == spike else 7.0 - i * 0.01):.6E} | loss scale: 1.0 | grad norm: 1.000 | "
        "number of skipped iterations:   0 | number of nan iterations:   0 |\n" for i, (c, g) in enumerate(steps)))
    return steps


@pytest.fixture
def data(realdata, tmp_path):
    (tmp_path / "datacheck.toml").write_text(CONFIG)
    return realdata / f"{SHARD}.bin", tmp_path / "datacheck.toml"


def test_the_ramp_run_is_what_the_test_says():
    # 3 increments of 4 over 60 samples: 20.0 samples per increment (a float, as Megatron divides);
    # 4 a step below 20 consumed, 8 below 40, 12 up to 60, then 16; update_train_iters: 10 iterations
    # pass 60 samples (68), then (400 - 68) // 16 more
    steps = ref.rampup_steps(_calc(), 12)
    assert steps == [(0, 4), (4, 4), (8, 4), (12, 4), (16, 4), (20, 8), (28, 8), (36, 8), (44, 12), (56, 12), (68, 16),
                     (84, 16)]
    assert ref.rampup_train_iters(_calc(), SAMPLES, RAMP[2]) == 10 + (400 - 68) // 16


@pytest.mark.parametrize("step", [0, 9, 12, 20])
def test_plan_step_rows_follow_the_ramp(data, realdata, step):
    bin_, cfg = data
    lens = _lengths(bin_.with_suffix(".idx"))
    r = run_cli("plan", str(bin_), "--config", str(cfg), "--step", str(step), "--format", "json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)["result"]
    want = _want(lens, step)
    flat = [(int(k), s["micro_batch"], s["sample"], seq, a, b) for k in sorted(want, key=int) for s in want[k]
            for seq, a, b in s["reads"]]
    assert [(x["rank"], x["micro_batch"], x["sample"], x["row"], *x["tokens"]) for x in got["step"]["rows"]] == flat
    assert got["step"]["consumed_samples"] == ref.rampup_steps(_calc(), step + 1)[step][0]
    assert got["plan"]["rampup_batch_size"] == list(RAMP) and got["plan"]["global_batch"] == 16
    assert got["plan"]["steps"] == ref.rampup_train_iters(_calc(), SAMPLES, RAMP[2])


def test_trace_names_the_ramp_iterations_samples(data, tmp_path):
    bin_, cfg = data
    lens = _lengths(bin_.with_suffix(".idx"))
    log = tmp_path / "ramp.out"
    steps = _log(log, 24, spike=10)
    assert [g for _, g in steps[8:11]] == [12, 12, 16]  # iteration 10 (step 9) inside the ramp: 12 samples
    r = run_cli("trace", str(log), "--data", str(bin_), "--config", str(cfg), "--step", "10", "--format", "json")
    assert r.returncode in (0, 1), r.stderr
    data = json.loads(r.stdout)["result"]["data"]
    assert data["audited_optimizer_steps"] == [9, 9] and data["source"]["kind"] == "plan"
    assert data["rows"]["samples"] == {"10": _want(lens, 9)}
    # dataset indices 56..67, where 9 x 16 = 144 would be the run without its ramp
    assert sorted(s["sample"] for v in data["rows"]["samples"]["10"].values() for s in v) == list(range(56, 68))


def test_trace_refuses_a_config_the_logs_ramp_contradicts(data, tmp_path):
    bin_, cfg = data
    log = tmp_path / "ramp.out"
    _log(log, 24)
    # the config without the ramp: the log's global batch size grows 4 -> 8 -> 16
    plain = tmp_path / "plain.toml"
    plain.write_text(CONFIG.replace(f"rampup_batch_size = [{RAMP[0]}, {RAMP[1]}, {RAMP[2]}]\n", ""))
    r = run_cli("trace", str(log), "--data", str(bin_), "--config", str(plain), "--step", "10")
    assert r.returncode == 2, r.stdout
    assert "grow by 12 from iteration 9 to 10 (56 -> 68), not 1 x the config's global batch 16" in r.stderr
    assert "set [megatron] rampup_batch_size" in r.stderr
    # at iteration 11 the reports 10 and 11 grow by 16, as the config says, but iteration 10's logged
    # global batch size (12, after 56) is not the config's 16
    r = run_cli("trace", str(log), "--data", str(bin_), "--config", str(plain), "--step", "11")
    assert r.returncode == 2, r.stdout
    assert "global batch size at iteration 10 is 12 (consumed samples 68 after it, 56 before)" in r.stderr
    # another ramp than the run's (over 120 samples): the log's consumed samples grow otherwise
    other = tmp_path / "other.toml"
    other.write_text(CONFIG.replace(f"[{RAMP[0]}, {RAMP[1]}, {RAMP[2]}]", "[4, 4, 120]"))
    r = run_cli("trace", str(log), "--data", str(bin_), "--config", str(other), "--step", "10")
    assert r.returncode == 2, r.stdout
    # (120 / 3 = 40.0 samples per increment: that ramp's iteration after 56 consumed samples takes 8)
    calc = ref.RampupCalculator(16, MBS, DP, 4, 4, 120)
    calc.update(56, consistency_check=False)
    assert f"grow by 12 from iteration 9 to 10 (56 -> 68), not the {calc.current_global_batch_size} that" in r.stderr
    assert "rampup_batch_size" in r.stderr


def test_plan_micro_batches_are_the_steps_own(data):
    # step 0 takes the start batch 4 = 1 micro-batch of 2 x data-parallel 2, not grad_accum 4 of them
    bin_, cfg = data
    r = run_cli("plan", str(bin_), "--config", str(cfg), "--step", "0", "--micro-batch", "1")
    assert r.returncode == 2, r.stdout
    assert "step 0 has micro-batches 0..0" in r.stderr
    r = run_cli("plan", str(bin_), "--config", str(cfg), "--step", "9", "--micro-batch", "2", "--format", "json")
    assert r.returncode == 0, r.stderr
    assert {x["micro_batch"] for x in json.loads(r.stdout)["result"]["step"]["rows"]} == {2}  # 12 = 3 micro-batches


def test_plan_consumed_samples_takes_the_ramps_batch_there(data):
    # a resumed run's step placed by --consumed-samples 44: the ramp's batch after 44 samples is 12
    # (44 / 20.0 -> 2 increments of 4 on 4), whatever the step number
    bin_, cfg = data
    calc = _calc()
    calc.update(44, consistency_check=True)
    r = run_cli("plan", str(bin_), "--config", str(cfg), "--step", "3", "--consumed-samples", "44", "--format", "json")
    assert r.returncode == 0, r.stderr
    st = json.loads(r.stdout)["result"]["step"]
    assert st["consumed_samples"] == 44 and st["samples"] == calc.current_global_batch_size == 12
    assert sorted({x["sample"] for x in st["rows"]}) == list(range(44, 56))
