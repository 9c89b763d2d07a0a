"""Real CPU runs of a Hugging Face ``accelerate`` loop (tests/helpers/acceleraterun.py, run as a
script): ``Accelerator(cpu=True, gradient_accumulation_steps=2)``, a ``DistributedSampler`` (seed 7,
batch 16) DataLoader wrapped in ``record_batches`` then ``accelerator.prepare``, ``accelerator.log``
to accelerate's TensorBoard tracker or a user's JSONL tracker. Every expected step and row is computed
here from torch's ``DistributedSampler`` seeding rule, checked against the batches the loop saw,
never read back from datacheck.

- ``completed``: TensorBoard; the loop logs once per optimizer step (``accelerator.sync_gradients``)
  at ``step=completed_steps`` after the update (from 1, as accelerate's ``*_no_trainer`` examples
  count), the mean loss of the step's 2 micro-batches; a NaN feature in micro-batch 0 of optimizer
  step 5 (so log step 6). The log names no trainer: the count is assumed (from 1: no step 0
  logged) and said so; ``--first-step 1`` states it.
- ``micro``: JSONL; the loop logs every micro-batch at ``step=k`` of ``enumerate(loader)``: its step
  counts micro-batches, 2 per optimizer step. A NaN feature in micro-batch 11 (optimizer step 5,
  micro-batch 1). Without ``--step-unit micro-batch`` the join cannot be right: with the ledger trace
  refuses (exit 2, naming the option), without it says that each log step is taken as an optimizer
  step; with it, log step 11 is optimizer step 5, micro-batch 1, and its 16 rows hold the NaN.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from realruns import cli, distributed_order, place, trace_json, write_nan_feature_rows

torch = pytest.importorskip("torch")
pytest.importorskip("accelerate")
pytestmark = pytest.mark.slow  # each run starts accelerate in a fresh process: 5 s or more

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "tests" / "helpers" / "acceleraterun.py"
N, SIZES, BATCH, SEED, GA = 640, (200, 240, 200), 16, 7, 2
COLUMNS = '[columns]\nfeatures = ["x1", "x2"]\nlabel = "label"\n'
PLAN = COLUMNS + f"[batch]\nbatch_size = {BATCH}\nworld_size = 1\ngrad_accum = {GA}\nseed = {SEED}\n"


def _run(root: Path, micro_batch: int, pos: int, **spec) -> int:
    """The run with a NaN ``x1`` at position ``pos`` of micro-batch ``micro_batch`` (0-based, of the
    whole run); returns that row's global index."""
    bad = distributed_order(torch, N, 1, 0, SEED)[micro_batch * BATCH + pos]
    write_nan_feature_rows(torch, root, bad, SIZES)
    (root / "plan.toml").write_text(PLAN)
    (root / "cols.toml").write_text(COLUMNS)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    p = subprocess.run([sys.executable, str(SCRIPT), str(root), json.dumps({"seed": SEED, "batch": BATCH, "ga": GA,
                                                                            **spec})],
                       env=env, cwd=root, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    seen = [json.loads(line) for line in (root / "seen.jsonl").read_text().splitlines()]
    assert [i for s in seen for i in s["rows"]] == distributed_order(torch, N, 1, 0, SEED)[:len(seen) * BATCH]
    assert [(s["micro_batch"], s["optimizer_step"]) for s in seen if bad in s["rows"]] == \
        [(micro_batch, micro_batch // GA)]
    return bad


def _rows_args(root: Path, rows_from: str) -> list[str]:
    return ["--data", str(root / "data"), *(["--ledger", str(root / "run"), "--config", str(root / "cols.toml")]
                                            if rows_from == "ledger" else ["--config", str(root / "plan.toml")])]


# --- once per optimizer step, step = completed steps (from 1), TensorBoard ------------------------------------------
C_STEP = 5  # the optimizer step (0-based) whose micro-batch 0 holds the NaN


@pytest.fixture(scope="module")
def completed(tmp_path_factory):
    root = tmp_path_factory.mktemp("accelerate_completed")
    bad = _run(root, C_STEP * GA, 2, max_steps=9, tracker="tensorboard", step="completed")
    return root, bad


def _tb_steps(folder: Path) -> dict[int, float]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    ea = EventAccumulator(str(folder))
    ea.Reload()
    return {e.step: e.value for e in ea.Scalars("train_loss")}


def test_completed_run_logs_from_1_and_goes_bad_at_the_planted_step(completed):
    root, _ = completed
    steps = _tb_steps(root / "logs" / "run")
    assert sorted(steps) == list(range(1, 10))  # completed_steps after each update
    assert min(s for s, v in steps.items() if v != v) == C_STEP + 1


@pytest.mark.parametrize("rows_from", ["ledger", "plan"])
@pytest.mark.parametrize("first_step", [None, "1"], ids=["assumed", "--first-step 1"])
def test_completed_trace_names_the_step_and_the_row(completed, rows_from, first_step):
    root, bad = completed
    rc, res, err = trace_json(str(root / "logs" / "run"), *_rows_args(root, rows_from),
                              *(["--first-step", first_step] if first_step else []))
    assert rc == 1, err
    fb = res["first_bad"]
    assert (fb["check"], fb["step"], fb["optimizer_step"]) == ("log.non_finite", C_STEP + 1, C_STEP)
    conv = res["data"]["convention"]
    assert conv["first_step"] == 1 and conv["assumed"] is (first_step is None)
    if first_step is None:  # said, with what it takes: no step 0 logged, and the micro-batch question
        assert "assumed" in conv["source"] and "--step-unit micro-batch" in conv["source"]
    rows = res["data"]["rows"]
    assert bad in rows["steps"][str(C_STEP + 1)]["0"] and len(rows["steps"][str(C_STEP + 1)]["0"]) == GA * BATCH
    assert rows["row_checks"] == {str(bad): ["finite.nan:x1"]}


# --- every micro-batch, step = the enumerate index, JSONL -----------------------------------------------------------
M_MICRO = 11  # micro-batch 1 of optimizer step 5


@pytest.fixture(scope="module")
def micro(tmp_path_factory):
    root = tmp_path_factory.mktemp("accelerate_micro")
    bad = _run(root, M_MICRO, 4, max_steps=9, tracker="jsonl", step="micro")
    return root, bad


def test_micro_run_logs_every_micro_batch(micro):
    root, _ = micro
    log = [json.loads(line) for line in (root / "logs" / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == list(range(9 * GA))
    assert min(r["step"] for r in log if r["train_loss"] != r["train_loss"]) == M_MICRO


@pytest.mark.parametrize("rows_from", ["ledger", "plan"])
def test_micro_trace_with_step_unit_names_the_micro_batch_and_the_row(micro, rows_from):
    root, bad = micro
    rc, res, err = trace_json(str(root / "logs" / "run" / "metrics.jsonl"), *_rows_args(root, rows_from),
                              "--step-unit", "micro-batch")
    assert rc == 1, err
    fb = res["first_bad"]
    assert (fb["check"], fb["step"], fb["optimizer_step"]) == ("log.non_finite", M_MICRO, M_MICRO // GA)
    assert fb["step_map"].startswith(f"log step {M_MICRO} = optimizer step {M_MICRO // GA}, micro-batch "
                                     f"{M_MICRO % GA} of {GA}")
    rows = res["data"]["rows"]
    # the one micro-batch the log step counts: the batch that held the row, no more
    assert rows["steps"][str(M_MICRO)]["0"] == distributed_order(torch, N, 1, 0, SEED)[M_MICRO * BATCH:(M_MICRO + 1) * BATCH]
    assert rows["micro_batches"] == {str(M_MICRO): M_MICRO % GA}
    assert rows["row_checks"] == {str(bad): ["finite.nan:x1"]}


def test_micro_trace_without_step_unit_says_so(micro):
    root, bad = micro
    log = str(root / "logs" / "run" / "metrics.jsonl")
    rc, out, err = cli("trace", log, *_rows_args(root, "ledger"))  # log step 11 is past the 9 recorded steps
    assert rc == 2 and "--step-unit micro-batch" in err, err
    rc, res, err = trace_json(log, *_rows_args(root, "plan"))
    assert rc == 1, err  # the NaN is found; the rows are joined as optimizer step 11, and the output says so
    conv = res["data"]["convention"]
    assert conv["assumed"] and "each log step is taken as one optimizer step" in conv["source"]


def test_micro_text_names_shard_and_shard_row(micro):
    root, bad = micro
    shard, row = place(bad, SIZES)
    rc, out, _ = cli("trace", str(root / "logs" / "run" / "metrics.jsonl"), *_rows_args(root, "ledger"),
                     "--step-unit", "micro-batch")
    assert rc == 1 and f"{shard} row {row}" in out
    assert f"log step {M_MICRO} = optimizer step {M_MICRO // GA} (micro-batch {M_MICRO % GA})" in out
