"""The data leg's choice of steps (datacheck.trace.data): the update before a Lightning log's first
non-finite loss (audited too only when Lightning's logged loss may have missed a row of it), and the
one micro-batch of a log step that counts micro-batches."""
from __future__ import annotations

import json

import pytest
from conftest import run_cli
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


# --- the replay advice names the step whose batch holds the failing row --------------------------------------------
B, GA, N = 4, 2, 64  # shuffle false, one process: optimizer step k holds rows B*GA*k .. B*GA*(k+1) - 1


def _lightning_run(tmp_path, bad_step: int, nan_from: int, mb: int = 0):
    """A Lightning metrics.csv (no grad norm) whose loss is NaN from ``nan_from``, and data whose row at
    position 1 of micro-batch ``mb`` of optimizer step ``bad_step`` has a NaN feature; (log, data,
    config, that row)."""
    bad = B * GA * bad_step + B * mb + 1
    data = tmp_path / "data"
    data.mkdir()
    data.joinpath("part.jsonl").write_text("".join(
        json.dumps({"x1": float("nan") if i == bad else float(i), "x2": 1.0, "label": i % 2}) + "\n"
        for i in range(N)))
    log = _csv(tmp_path / "lightning_logs" / "version_0" / "metrics.csv", grad_norm=False,
               losses=[0.5 if s < nan_from else float("nan") for s in range(N // (B * GA))])
    cfg = tmp_path / "dc.toml"
    cfg.write_text('[columns]\nfeatures = ["x1", "x2"]\nlabel = "label"\n[batch]\n'
                   f"batch_size = {B}\ngrad_accum = {GA}\nshuffle = false\n")
    return log, data, cfg, bad


def _first_next(tmp_path, *extra):
    log, data, cfg, _ = extra[0]
    r = run_cli("trace", str(log), "--data", str(data), "--config", str(cfg), "--format", "json", *extra[1:])
    assert r.returncode == 1, r.stderr
    res = json.loads(r.stdout)["result"]
    return res, next(a for a in res["verdict"]["anomalies"] if a["check"] == "log.non_finite")


def test_the_replay_advice_names_the_update_before_when_it_holds_the_row(tmp_path):
    """The row is in micro-batch 0 of step 3; Lightning logs its first NaN at step 4: the rows are
    found in the update before, and the replay advice names step 3, whose batch holds them (it named
    the logged step 4, whose batch is clean)."""
    run = _lightning_run(tmp_path, bad_step=NAN - 1, nan_from=NAN)
    res, first = _first_next(tmp_path, run)
    assert res["first_bad"]["step"] == NAN and res["data"]["audited_steps"] == [NAN - 1, NAN]
    assert res["data"]["rows"]["row_checks"] == {str(run[3]): ["finite.nan:x1"]}
    assert first["class"] == "data"
    assert f"replay the fixed batch of step {NAN - 1} (its batch holds the failing rows" in first["next_experiment"]
    assert f"replay the fixed batch of step {NAN} " not in first["next_experiment"]
    assert res["data"]["replay_step"] == NAN - 1 and res["data"]["failing_steps"] == [NAN - 1]


def test_the_replay_advice_keeps_the_logged_step_when_it_holds_the_row(tmp_path):
    run = _lightning_run(tmp_path, bad_step=NAN, nan_from=NAN, mb=1)
    res, first = _first_next(tmp_path, run)
    assert res["data"]["failing_steps"] == [NAN] and res["data"]["replay_step"] == NAN
    assert f"replay the fixed batch of step {NAN} (--data" in first["next_experiment"]


def test_clean_rows_in_both_steps_replay_the_update_before_then_the_logged_one(tmp_path):
    """No failing row: the NaN may still come from the update before (Lightning logged part of its
    loss): resume from before it and replay its batch, then the logged step's."""
    run = _lightning_run(tmp_path, bad_step=0, nan_from=NAN)
    (run[1] / "part.jsonl").write_text("".join(json.dumps({"x1": float(i), "x2": 1.0, "label": i % 2}) + "\n"
                                               for i in range(N)))
    res, first = _first_next(tmp_path, run)
    assert res["data"]["failing_steps"] == [] and first["class"] == "numeric"
    assert first["next_experiment"].startswith(f"resume from the checkpoint before step {NAN - 1} and replay the "
                                               f"fixed batch of step {NAN - 1} (the update before step {NAN}")


def test_replay_runs_on_the_step_whose_batch_holds_the_row(tmp_path):
    pytest.importorskip("torch")
    run = _lightning_run(tmp_path, bad_step=NAN - 1, nan_from=NAN)
    (tmp_path / "replaymodel.py").write_text(
        "import torch\n"
        "def build():\n"
        "    torch.manual_seed(0)\n"
        "    m = torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))\n"
        "    return m, lambda out, y: torch.nn.functional.cross_entropy(out, y, reduction='none')\n")
    res, first = _first_next(tmp_path, run, "--replay", f"{tmp_path / 'replaymodel.py'}:build")
    rp = res["verdict"]["replay"]
    assert rp["step"] == NAN - 1 and rp["class"] == "data"  # step 4's batch is clean: its replay was finite
    assert all(m["bad_rows"] == [run[3]] for m in rp["modes"].values())
    assert first["class"] == "data" and first["why"].startswith(f"replay: rows [{run[3]}]")
