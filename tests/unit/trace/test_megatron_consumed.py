"""Where a Megatron run's sampler stands before a log step: from the log's consumed samples (a
resumed run whose global batch changed), else optimizer step x global batch, said in words; a log
whose consumed samples contradict the config's global batch is refused."""
from __future__ import annotations

import pytest
from tracehelp import trace

from datacheck.model.errors import UsageError
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


def test_a_ramp_up_near_the_step_is_refused():
    consumed = {1: 16, 2: 48, 3: 96}  # 16, 32, 48 a step (--rampup-batch-size)
    with pytest.raises(UsageError, match="grow by 32 from iteration 1 to 2 .* ramp-up is not simulated"):
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
