"""The data leg's choice of steps (datacheck.trace.data): the update before a Lightning log's first
non-finite loss (audited too only when Lightning's logged loss may have missed a row of it), and the
one micro-batch of a log step that counts micro-batches."""
from __future__ import annotations

from tracehelp import trace

from datacheck.execute.plan import StepRow
from datacheck.trace.data import _update_before, micro_batch_rows
from datacheck.trace.steps import resolve_convention

NAN = 4  # the first step whose logged loss is NaN


def _csv(path, grad_norm: bool, losses=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    losses = losses or [0.5 if s < NAN else float("nan") for s in range(8)]
    head = "epoch,grad_norm,step,train_loss" if grad_norm else "epoch,step,train_loss"
    lines = [f"0,{'1.0,' if grad_norm else ''}{s},{x}" for s, x in enumerate(losses)]
    path.write_text(head + "\n" + "\n".join(lines) + "\n")
    return path


def _before(path):
    res = trace(path)
    return _update_before(res, resolve_convention(res.logs, None))


def test_a_lightning_nan_loss_without_grad_norm_takes_the_update_before(tmp_path):
    assert _before(_csv(tmp_path / "lightning_logs" / "version_0" / "metrics.csv", grad_norm=False)) == NAN - 1


def test_no_update_before_with_a_finite_grad_norm_another_logger_or_a_gap(tmp_path):
    # the grad norm (every rank's and micro-batch's gradients) was logged finite at the step before
    assert _before(_csv(tmp_path / "a" / "version_0" / "metrics.csv", grad_norm=True)) is None
    # not a Lightning log: its logged loss is not known to miss rows
    assert _before(_csv(tmp_path / "b" / "metrics.csv", grad_norm=False)) is None
    # a gap before the NaN (the step before was not logged): the anomaly's window already spans it
    gap = tmp_path / "c" / "version_0" / "metrics.csv"
    gap.parent.mkdir(parents=True)
    gap.write_text("epoch,step,train_loss\n0,0,0.5\n0,1,0.5\n0,4,nan\n")
    assert _before(gap) is None


def test_a_micro_batch_step_keeps_its_own_micro_batch():
    """Log step 11 (from 0, 2 per step) is micro-batch 1 of every rank; 10 is micro-batch 0; a row whose
    micro-batch is not recorded (OLMo's ledger) stays."""
    conv = resolve_convention([], 0, micro_batches=2)

    def r(rank, mb, g):
        return StepRow(rank, mb, g, None, None)

    rows = {11: [r(0, 0, 1), r(0, 1, 2), r(1, 1, 3), r(1, 0, 4)], 10: [r(0, 0, 1), r(0, 1, 2)], 12: [r(0, None, 9)]}
    assert micro_batch_rows(rows, conv) == {11: [r(0, 1, 2), r(1, 1, 3)], 10: [r(0, 0, 1)], 12: [r(0, None, 9)]}
