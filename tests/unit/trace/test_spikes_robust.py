"""The default spike rule (robust) judges a log's first values and stays quiet on a long clean run; a
non-finite value that recovers is told apart from one that stays."""
from __future__ import annotations

import math
import random

import pytest
from conftest import SHARED
from peerlogs import trainproof_gallery
from tracehelp import by_check, loud, trace, write_jsonl

from datacheck.trace.spikes import SpikeDetector, parse_spike_rule

LOGS = SHARED / "logs"


def test_the_third_value_is_judged_and_one_earlier_value_is_not_enough():
    det = SpikeDetector(parse_spike_rule("robust"))
    assert [det.feed(x) for x in (12.44, 12.44, 44.24)] == [False, False, True]  # 3.56x at the third value
    # the second value is judged against 10x the first (SECOND_VALUE_FACTOR): only the first is unjudged
    assert det.unjudged == 1 and det.threshold == pytest.approx(2 * 12.44)
    jump = SpikeDetector(parse_spike_rule("robust"))  # lr 100x too hot (tests/e2e/trace/test_tiny_runs.py)
    assert [jump.feed(x) for x in (0.582, 7.762)] == [False, True] and jump.threshold == pytest.approx(5.82)
    # a real 4-row-batch regression run's first losses (tests/e2e/trace/test_real_runs_torch.py): noise, not a spike
    noisy = SpikeDetector(parse_spike_rule("robust"))
    assert [noisy.feed(x) for x in (1.006, 5.049, 1.137, 3.486, 0.385, 2.958, 4.176)] == [False] * 7


def test_megatron_jump_at_iteration_3_is_a_spike_by_default():
    f = by_check(trace(LOGS / "megatron/meg_ds_3d_gpt2_perf_n16-ds-off.out"))["log.loss_spike"]
    assert f.details["step"] == 3 and f.details["last_good_step"] == 2 and f.details["value"] == pytest.approx(44.24, abs=0.01)


def test_lr_x100_gallery_run_is_bad_from_step_10(tmp_path):
    f = by_check(trace(trainproof_gallery("lr_hot", tmp_path / "trainer_state.json")))
    # step 10 is the second logged value: one earlier value says nothing of the noise, so the spike
    # rule judges from step 15 (24.24 > 2 x 3.30); log.divergence names step 10 (tests/unit/trace/test_dynamics.py)
    assert f["log.loss_spike"].details["step"] == 15
    assert f["log.divergence"].details["step"] == 10
    # the olmo preset needs 10 earlier values: it cannot judge step 10 (the second logged value)
    olmo = by_check(trace(trainproof_gallery("lr_hot", tmp_path / "o" / "trainer_state.json"), spike="olmo"))
    assert olmo.get("log.loss_spike") is None or olmo["log.loss_spike"].details["step"] > 10


def _long_clean(n=19_560, seed=0):
    """A long clean pretraining-like run (llm.c's GPT-2 124M shape: 700 warmup steps, then the lr
    decaying linearly to 0): the loss falls from 11 to ~3.3 and keeps improving slowly, with per-step
    noise (Student-t with 3 degrees of freedom: heavy tails); the grad norm falls from ~5 to ~0.4
    with lognormal noise; logged every step."""
    rng = random.Random(seed)
    rows = []
    for i in range(1, n + 1):
        t = rng.gauss(0, 1) / math.sqrt(max(1e-9, sum(rng.gauss(0, 1) ** 2 for _ in range(3)) / 3))
        loss = 3.3 + 7.7 * math.exp(-i / 400) + 0.4 * (1 - i / n) + 0.03 * t
        g = (0.4 + 4.6 * math.exp(-i / 300)) * math.exp(rng.gauss(0, 0.35))
        lr = 6e-4 * (i / 700 if i < 700 else (n - i) / (n - 700))
        rows.append({"step": i, "loss": loss, "grad_norm": g, "lr": lr})
    return rows


@pytest.mark.slow
def test_a_long_clean_run_gives_no_spike(tmp_path):
    p = write_jsonl(tmp_path / "clean.jsonl", _long_clean())
    res = trace(p)
    assert loud(res) == []  # no spike, and nothing else at warn or above
    olmo = by_check(trace(p, spike="olmo"))  # mean + 6 sigma of the last 128: a tight late window fires
    assert olmo["log.loss_spike"].count + olmo["log.grad_norm_spike"].count > 0


def test_non_finite_transient_and_persistent(tmp_path):
    fp16 = by_check(trace(trainproof_gallery("fp16_nan", tmp_path / "trainer_state.json")))["log.non_finite"]
    assert fp16.details["step"] == 20 and fp16.details["persistent"] is False and fp16.details["recovered_step"] == 25
    tf = by_check(trace(LOGS / "issues/gradnorm_tf_17_epoch_loss_nan.txt"))["log.non_finite"]
    assert tf.details["step"] == 3451 and tf.details["persistent"] is True and tf.details["finite_after"] == 0


def test_no_unjudged_note_for_the_two_values_every_stream_starts_with(tmp_path):
    """The robust rule judges every value from the third: a clean 100-step log has nothing unjudged to
    note, and the spike check is not listed as one that could not judge."""
    from tracehelp import trace, write_jsonl

    res = trace(write_jsonl(tmp_path / "m.jsonl", [{"step": s, "loss": 3.0 - 0.01 * s} for s in range(1, 101)]))
    assert not any(n.startswith(("log.loss_spike:", "log.grad_norm_spike:")) for n in res.notes), res.notes
    two = trace(write_jsonl(tmp_path / "r0.jsonl", [{"step": s, "loss": 2.0, "rank": 0} for s in range(1, 31)]),
                write_jsonl(tmp_path / "r1.jsonl", [{"step": s, "loss": 2.0, "rank": 1} for s in range(1, 31)]))
    assert not any(n.startswith("log.loss_spike:") for n in two.notes), two.notes
