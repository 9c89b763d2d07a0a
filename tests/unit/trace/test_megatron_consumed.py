"""Where a Megatron run's sampler stands before a log step: from the log's consumed samples (a
resumed run whose global batch changed), else optimizer step x global batch, said in words; a log
whose consumed samples contradict the config's global batch is refused."""
from __future__ import annotations

import megatronref as ref
import pytest
from tracehelp import trace

from datacheck.model.errors import UsageError
from datacheck.model.megatronorder import rampup
from datacheck.trace.data import megatron_consumed


def test_no_report_is_optimizer_step_times_global_batch_and_said():
    before, how = megatron_consumed({}, 25, 24, 8)
    assert before == 24 * 8 and "reports no consumed samples" in how and "--ledger" in how


@pytest.mark.parametrize("step, want", [
    (21, 80),        # the first logged iteration after the resume: 88 after it, 80 before
    (25, 80 + 4 * 8),
    (30, 80 + 9 * 8),
    (35, 80 + 14 * 8),  # past the last report: moved by 8 per iteration
])
def test_resumed_run_with_another_global_batch(step, want):
    # 20 iterations of 4, resumed with 8: consumed samples after iteration i = 80 + (i - 20) x 8
    consumed = {i: 80 + (i - 20) * 8 for i in range(21, 31)}
    before, how = megatron_consumed(consumed, step, step - 1, 8)
    assert before == want and f"the samples before iteration {step}: {want}" in how


def test_reports_every_ten_iterations():
    consumed = {10: 40, 20: 80, 30: 120}  # log_interval 10, global batch 4 (logs PROVENANCE.md base_n4)
    assert megatron_consumed(consumed, 25, 24, 4)[0] == 24 * 4
    assert megatron_consumed(consumed, 5, 4, 4)[0] == 4 * 4  # before the first report: counted back from it


def test_a_global_batch_the_log_contradicts_is_refused():
    consumed = {1: 1024, 2: 2048, 3: 3072}
    with pytest.raises(UsageError, match="grow by 1024 from iteration 2 to 3 .* global batch 8"):
        megatron_consumed(consumed, 3, 2, 8)


def test_a_ramp_up_near_the_step_without_the_config_is_refused():
    consumed = {1: 16, 2: 48, 3: 96}  # 16, 32, 48 a step (--rampup-batch-size)
    with pytest.raises(UsageError, match="grow by 32 from iteration 1 to 2 .* set \\[megatron\\] rampup_batch_size"):
        megatron_consumed(consumed, 2, 1, 48)
    # at iteration 3 the run's global batch is the config's 48: its samples are 48 .. 95
    assert megatron_consumed(consumed, 3, 2, 48)[0] == 48


def test_trace_keeps_a_megatron_logs_consumed_samples(tmp_path):
    log = tmp_path / "m.out"
    log.write_text("".join(
        f" iteration {i:8d}/{100:8d} | consumed samples: {88 + (i - 21) * 8:12d} | elapsed time per iteration (ms): 1.0 | "
        f"learning rate: 1.000E-04 | global batch size:     8 | lm loss: 7.000000E+00 | loss scale: 1.0 | "
        "number of skipped iterations:   0 | number of nan iterations:   0 |\n" for i in range(21, 26)))
    res = trace(log)
    assert res.consumed == {i: 88 + (i - 21) * 8 for i in range(21, 26)}


# --rampup-batch-size 16 16 400 to 64 with micro-batch 4 x data-parallel 2 (megatron/core/
# num_microbatches_calculator.py): the run's own iterations from the line copy of the calculator and
# training.py's loop (tests/helpers/megatronref.py), never from datacheck
RAMP = (16, 16, 400)


def _ramp_run(iters):
    calc = ref.RampupCalculator(64, 4, 2, *RAMP)
    steps = ref.rampup_steps(calc, iters)  # (consumed before, global batch) per iteration
    return ({i + 1: c + g for i, (c, g) in enumerate(steps)}, {i + 1: g for i, (_, g) in enumerate(steps)},
            [c for c, _ in steps])


@pytest.mark.parametrize("every", [1, 10])
def test_a_ramp_up_run_is_placed_by_its_log_and_ramp(every):
    after, batch, before = _ramp_run(60)
    assert sorted(set(batch.values())) == [16, 32, 48, 64]  # the log's global batch grows
    consumed = {i: c for i, c in after.items() if i % every == 0}
    batches = {i: g for i, g in batch.items() if i % every == 0}
    ramp = rampup(*RAMP, global_batch=64)
    for it in range(1, 61):
        got, how = megatron_consumed(consumed, it, it - 1, 64, ramp, batches)
        assert got == before[it - 1], it
        assert "ramp-up" in how
    # no report at all: the sum over the ramp from the run's start
    assert [megatron_consumed({}, it, it - 1, 64, ramp)[0] for it in range(1, 61)] == before
    # without the ramp in the config the same log is refused, naming the key to set
    with pytest.raises(UsageError, match="rampup_batch_size"):
        megatron_consumed(consumed, 5 if every == 1 else 15, 4, 64, None, batches)


def test_a_ramp_the_log_contradicts_is_refused():
    after, batch, _ = _ramp_run(40)
    # the config's ramp is another than the run's: the consumed samples grow otherwise near the step
    other = rampup(16, 16, 800, global_batch=64)
    with pytest.raises(UsageError, match="grow by .* from iteration .* rampup_batch_size"):
        megatron_consumed(after, 12, 11, 64, other, batch)
    # a single report whose global batch size is not the ramp's where that iteration started
    # (iteration 12 starts after 9 x 16 + 2 x 32 = 208 samples with 32; a ramp over 200 samples is over there)
    assert (after[12], batch[12]) == (240, 32)
    with pytest.raises(UsageError, match="global batch size at iteration 12 is 32 .* 208 before.* gives 64"):
        megatron_consumed({12: after[12]}, 12, 11, 64, rampup(16, 16, 200, global_batch=64), {12: 32})
    # a constant-batch config (64) against a log whose global batch size is 16 at a lone report
    with pytest.raises(UsageError, match="global batch size at iteration 1 is 16 .* global batch 64 gives 64"):
        megatron_consumed({1: 16}, 1, 0, 64, None, {1: 16})


def test_trace_keeps_a_megatron_logs_global_batch_size(tmp_path):
    after, batch, _ = _ramp_run(8)
    log = tmp_path / "m.out"
    log.write_text("".join(
        f" iteration {i:8d}/{100:8d} | consumed samples: {after[i]:12d} | elapsed time per iteration (ms): 1.0 | "
        f"learning rate: 1.000E-04 | global batch size: {batch[i]:5d} | lm loss: 7.000000E+00 | loss scale: 1.0 | "
        "number of skipped iterations:   0 | number of nan iterations:   0 |\n" for i in range(1, 9)))
    res = trace(log)
    assert res.consumed == after and res.global_batches == batch
