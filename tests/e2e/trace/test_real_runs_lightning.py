"""Real CPU runs of a PyTorch Lightning ``Trainer`` (tests/helpers/lightningrun.py, run as a script),
traced from the run's own logger files: ``CSVLogger``'s ``metrics.csv`` and ``TensorBoardLogger``'s
event files (the file, its ``version_0`` folder, the logger's folder). Every expected step, rank and
row is computed here from torch's ``DistributedSampler`` seeding rule (Lightning's sampler takes the
``seed_everything`` seed, ``PL_GLOBAL_SEED``), checked against the batches the run's
``training_step`` saw, never read back from datacheck.

- ``accum``: one process, ``accumulate_grad_batches=2``, batch 16, its own ``DistributedSampler``
  (seed 7) wrapped in ``record_batches``; a NaN feature in the last micro-batch of optimizer step 5
  (Lightning logs the last micro-batch's ``train_loss`` at each optimizer step);
- ``ddp``: ``strategy="ddp"`` on 2 CPU processes (gloo), Lightning's own ``DistributedSampler``
  (``use_distributed_sampler``), no ledger; a NaN feature in rank 0's batch of step 4 (the loggers
  write rank 0's values).

``every3``: ``log_every_n_steps=3``, one process, no accumulation: Lightning logs at global steps 2, 5,
8 (``(global_step + 1) % 3 == 0``), so the log holds no step 0; a NaN feature in step 5. Joined as a
count from 1 (the assumption for a log without step 0) the rows would be step 4's: the layout says
Lightning, from 0.

Where the logged loss does not see the row: ``accum_first`` plants it in micro-batch 0 of step 5
(the logged loss is micro-batch 1's: finite; the update makes the weights NaN, so the first NaN is
logged at step 6), ``ddp_rank1`` in rank 1's batch of step 4 (rank 0's loss is logged: NaN first at
step 5, after the all-reduce). The log cannot tell step 5 (4) from step 6 (5): trace names the
logged step and audits the update before it too, with the reason, and finds the row there.

Facts the files show and the tests assert: the ``step`` column is the optimizer step from 0 (the
step the training_step saw as ``global_step``), one row per optimizer step with accumulation.
"""
from __future__ import annotations

import csv
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from realruns import cli, distributed_order, place, trace_json, write_nan_feature_rows

torch = pytest.importorskip("torch")
pytest.importorskip("lightning")
pytest.importorskip("tensorboard")
pytestmark = pytest.mark.slow  # each run starts Lightning in a fresh process: 10 s or more

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "tests" / "helpers" / "lightningrun.py"
N, SIZES, BATCH, SEED = 640, (200, 240, 200), 16, 7
FEATURES = '[columns]\nfeatures = ["x1", "x2"]\nlabel = "label"\n'


def _batch(world: int, ga: int) -> str:
    return f"[batch]\nbatch_size = {BATCH}\nworld_size = {world}\ngrad_accum = {ga}\nseed = {SEED}\n"


def _run(root: Path, bad: int, **spec) -> Path:
    write_nan_feature_rows(torch, root, bad, SIZES)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    spec = {"seed": SEED, "batch": BATCH, **spec}
    p = subprocess.run([sys.executable, str(SCRIPT), str(root), json.dumps(spec)], env=env, cwd=root,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    return root


def _seen(root: Path, rank: int) -> list[dict]:
    return [json.loads(line) for line in (root / f"seen-rank{rank}.jsonl").read_text().splitlines()]


def _csv_rows(root: Path) -> list[dict]:
    with open(root / "logs" / "csv" / "version_0" / "metrics.csv") as f:
        return list(csv.DictReader(f))


def _first_nan(root: Path) -> int:
    return min(int(r["step"]) for r in _csv_rows(root) if r["train_loss"] and math.isnan(float(r["train_loss"])))


def _logs(root: Path) -> dict[str, str]:
    tb = root / "logs" / "tb" / "version_0"
    return {"metrics.csv": str(root / "logs" / "csv" / "version_0" / "metrics.csv"), "tb version folder": str(tb),
            "tb event file": str(next(tb.glob("events.out.tfevents.*"))), "tb logger folder": str(root / "logs" / "tb")}


# --- accumulate_grad_batches=2, one process, record_batches --------------------------------------------------------
GA, A_STEP, A_POS = 2, 5, 9


@pytest.fixture(scope="module")
def accum(tmp_path_factory):
    order = distributed_order(torch, N, 1, 0, SEED)
    bad = order[(A_STEP * GA + GA - 1) * BATCH + A_POS]  # micro-batch 1 (the last) of optimizer step 5
    root = tmp_path_factory.mktemp("lightning_accum")
    _run(root, bad, ga=GA, devices=1, strategy="auto", max_steps=9, ledger=True)
    (root / "plan.toml").write_text(FEATURES + _batch(1, GA))
    (root / "cols.toml").write_text(FEATURES)
    return root, bad


def test_accum_run_files_show_the_step_convention(accum):
    root, bad = accum
    seen = _seen(root, 0)
    assert [i for s in seen for i in s["rows"]] == distributed_order(torch, N, 1, 0, SEED)[:len(seen) * BATCH]
    assert [s["global_step"] for s in seen] == [k // GA for k in range(len(seen))]  # 2 micro-batches per step
    assert [s["global_step"] for s in seen if bad in s["rows"]] == [A_STEP]
    assert [int(r["step"]) for r in _csv_rows(root)] == list(range(9))  # one row per optimizer step, from 0
    assert _first_nan(root) == A_STEP


@pytest.mark.parametrize("log", ["metrics.csv", "tb version folder", "tb event file", "tb logger folder"])
@pytest.mark.parametrize("rows_from", ["ledger", "plan"])
def test_accum_trace_names_the_step_and_the_row(accum, log, rows_from):
    root, bad = accum
    extra = ["--ledger", str(root / "run"), "--config", str(root / "cols.toml")] if rows_from == "ledger" \
        else ["--config", str(root / "plan.toml")]
    rc, res, err = trace_json(_logs(root)[log], "--data", str(root / "data"), *extra)
    assert rc == 1, err
    assert res["first_bad"]["check"] == "log.non_finite" and res["first_bad"]["step"] == A_STEP
    conv = res["data"]["convention"]
    assert conv["first_step"] == 0 and not conv["assumed"] and "Lightning" in conv["source"]
    assert res["data"]["source"]["kind"] == rows_from
    rows = res["data"]["rows"]
    assert bad in rows["steps"][str(A_STEP)]["0"] and len(rows["steps"][str(A_STEP)]["0"]) == GA * BATCH
    assert rows["row_checks"] == {str(bad): ["finite.nan:x1"]}


def test_accum_text_names_shard_and_shard_row(accum):
    root, bad = accum
    shard, row = place(bad, SIZES)
    rc, out, _ = cli("trace", _logs(root)["metrics.csv"], "--data", str(root / "data"), "--config",
                     str(root / "cols.toml"), "--ledger", str(root / "run"))
    assert rc == 1 and f"{shard} row {row}" in out and "assumed" not in out


# --- strategy="ddp", 2 processes, Lightning's DistributedSampler, no ledger ----------------------------------------
WORLD, D_STEP, D_POS = 2, 4, 3


def _ddp_run(tmp_path_factory, rank: int):
    """The 2-process run with the NaN row at position ``D_POS`` of ``rank``'s step ``D_STEP`` (a row
    the other rank does not load); (run folder, that row's global index)."""
    if not torch.distributed.is_available():  # pragma: no cover
        pytest.skip("torch.distributed is not available")
    bad = distributed_order(torch, N, WORLD, rank, SEED)[D_STEP * BATCH + D_POS]
    assert bad not in distributed_order(torch, N, WORLD, 1 - rank, SEED)
    root = tmp_path_factory.mktemp(f"lightning_ddp_rank{rank}")
    _run(root, bad, ga=1, devices=WORLD, strategy="ddp", max_steps=8, ledger=False)
    (root / "plan.toml").write_text(FEATURES + _batch(WORLD, 1))
    return root, bad


@pytest.fixture(scope="module")
def ddp(tmp_path_factory):
    return _ddp_run(tmp_path_factory, 0)


def test_ddp_run_files_show_lightnings_sampler(ddp):
    root, bad = ddp
    for r in range(WORLD):  # Lightning's DistributedSampler, seeded by seed_everything
        seen = _seen(root, r)
        assert [i for s in seen for i in s["rows"]] == distributed_order(torch, N, WORLD, r, SEED)[:len(seen) * BATCH]
    assert [s["global_step"] for s in _seen(root, 0) if bad in s["rows"]] == [D_STEP]
    assert [int(r["step"]) for r in _csv_rows(root)] == list(range(8))
    assert _first_nan(root) == D_STEP


@pytest.mark.parametrize("log", ["metrics.csv", "tb version folder"])
def test_ddp_trace_names_the_step_and_rank_0s_row(ddp, log):
    root, bad = ddp
    rc, res, err = trace_json(_logs(root)[log], "--data", str(root / "data"), "--config", str(root / "plan.toml"))
    assert rc == 1, err
    assert res["first_bad"]["check"] == "log.non_finite" and res["first_bad"]["step"] == D_STEP
    assert not res["data"]["convention"]["assumed"]
    rows = res["data"]["rows"]["steps"][str(D_STEP)]
    assert bad in rows["0"] and bad not in rows["1"] and sorted(rows) == ["0", "1"]
    assert res["data"]["rows"]["row_checks"] == {str(bad): ["finite.nan:x1"]}


# --- the row where the logged loss does not see it --------------------------------------------------------------------
@pytest.fixture(scope="module")
def accum_first(tmp_path_factory):
    bad = distributed_order(torch, N, 1, 0, SEED)[(A_STEP * GA + 0) * BATCH + A_POS]  # micro-batch 0 of step 5
    root = tmp_path_factory.mktemp("lightning_accum_first")
    _run(root, bad, ga=GA, devices=1, strategy="auto", max_steps=9, ledger=True)
    (root / "cols.toml").write_text(FEATURES)
    return root, bad


@pytest.fixture(scope="module")
def ddp_rank1(tmp_path_factory):
    return _ddp_run(tmp_path_factory, 1)


@pytest.mark.parametrize("case", ["accum_first", "ddp_rank1"])
def test_a_row_the_logged_loss_missed_is_found_in_the_update_before(request, case):
    root, bad = request.getfixturevalue(case)
    step, rank, world = (A_STEP, 0, 1) if case == "accum_first" else (D_STEP, 1, WORLD)
    seen = [s for s in _seen(root, rank) if bad in s["rows"]]
    assert [s["global_step"] for s in seen] == [step]
    if case == "accum_first":
        assert seen[0]["batch_idx"] % GA == 0  # the step's first micro-batch: its loss is not the one logged
    assert _first_nan(root) == step + 1  # the files: the first NaN is logged one step later
    extra = ["--ledger", str(root / "run"), "--config", str(root / "cols.toml")] if case == "accum_first" \
        else ["--config", str(root / "plan.toml")]
    rc, res, err = trace_json(_logs(root)["metrics.csv"], "--data", str(root / "data"), *extra)
    assert rc == 1, err
    assert res["first_bad"]["check"] == "log.non_finite" and res["first_bad"]["step"] == step + 1
    d = res["data"]
    assert d["audited_steps"] == [step, step + 1]
    assert f"also log step {step}, the update before the first non-finite loss" in d["message"]
    assert bad in d["rows"]["steps"][str(step)][str(rank)] and len(d["rows"]["steps"][str(step)]) == world
    assert d["rows"]["row_checks"] == {str(bad): ["finite.nan:x1"]}
    assert f"(global {bad})" in json.dumps(res["verdict"]["answers"]["rows"])  # "4. the rows of that step"
    first = next(a for a in res["verdict"]["anomalies"] if a["check"] == "log.non_finite")
    assert first["class"] == "data" and d["replay_step"] == step  # the batch that holds the row, not the logged one
    assert f"replay the fixed batch of step {step} (its batch holds the failing rows" in first["next_experiment"]


def test_no_step_before_when_the_logged_loss_saw_the_row(accum):
    """One process without accumulation would log every row's loss; with accumulation the update
    before is audited too, and its rows are clean: the one failing row is still the planted one."""
    root, bad = accum
    rc, res, _ = trace_json(_logs(root)["metrics.csv"], "--data", str(root / "data"), "--config",
                            str(root / "cols.toml"), "--ledger", str(root / "run"))
    assert rc == 1 and res["data"]["audited_steps"] == [A_STEP - 1, A_STEP]
    assert res["data"]["rows"]["row_checks"] == {str(bad): ["finite.nan:x1"]}


# --- log_every_n_steps=3: no step 0 in the log -------------------------------------------------------------------------
EVERY, E_STEP = 3, 5


@pytest.fixture(scope="module")
def every3(tmp_path_factory):
    bad = distributed_order(torch, N, 1, 0, SEED)[E_STEP * BATCH + 7]
    root = tmp_path_factory.mktemp("lightning_every3")
    _run(root, bad, ga=1, devices=1, strategy="auto", max_steps=9, ledger=True, every=EVERY)
    (root / "plan.toml").write_text(FEATURES + _batch(1, 1))
    return root, bad


def test_every3_logs_global_steps_2_5_8(every3):
    root, bad = every3
    assert [int(r["step"]) for r in _csv_rows(root)] == [k for k in range(9) if (k + 1) % EVERY == 0]
    assert [s["global_step"] for s in _seen(root, 0) if bad in s["rows"]] == [E_STEP]
    assert _first_nan(root) == E_STEP


@pytest.mark.parametrize("log", ["metrics.csv", "tb version folder"])
@pytest.mark.parametrize("rows_from", ["ledger", "plan"])
def test_every3_trace_joins_from_0_without_step_0_in_the_log(every3, log, rows_from):
    root, bad = every3
    extra = ["--ledger", str(root / "run")] if rows_from == "ledger" else []
    rc, res, err = trace_json(_logs(root)[log], "--data", str(root / "data"), "--config", str(root / "plan.toml"),
                              *extra)
    assert rc == 1, err
    fb = res["first_bad"]
    assert (fb["step"], fb["optimizer_step"], fb["window"]) == (E_STEP, E_STEP, [E_STEP - EVERY + 1, E_STEP])
    assert not res["data"]["convention"]["assumed"] and res["data"]["convention"]["first_step"] == 0
    assert bad in res["data"]["rows"]["steps"][str(E_STEP)]["0"]
    assert res["data"]["rows"]["row_checks"] == {str(bad): ["finite.nan:x1"]}


# ``every3_first``: the NaN row in step 1, before the first logged step (2). The log's first record is
# already NaN and nothing before it was logged: the first bad step is any of 0, 1, 2 (the log's interval,
# 3, read from its first two records), so trace audits steps 0..2, not step 2 alone (it once audited
# step 2, whose rows are clean, and said "no good step before it").
F_STEP = 1


@pytest.fixture(scope="module")
def every3_first(tmp_path_factory):
    bad = distributed_order(torch, N, 1, 0, SEED)[F_STEP * BATCH + 5]
    root = tmp_path_factory.mktemp("lightning_every3_first")
    _run(root, bad, ga=1, devices=1, strategy="auto", max_steps=9, ledger=True, every=EVERY)
    (root / "plan.toml").write_text(FEATURES + _batch(1, 1))
    return root, bad


@pytest.mark.parametrize("rows_from", ["ledger", "plan"])
def test_every3_a_nan_in_the_first_interval_audits_it_whole(every3_first, rows_from):
    root, bad = every3_first
    assert [s["global_step"] for s in _seen(root, 0) if bad in s["rows"]] == [F_STEP]
    assert _first_nan(root) == EVERY - 1  # the first logged step is already NaN
    extra = ["--ledger", str(root / "run")] if rows_from == "ledger" else []
    rc, res, err = trace_json(_logs(root)["metrics.csv"], "--data", str(root / "data"), "--config",
                              str(root / "plan.toml"), *extra)
    assert rc == 1, err
    fb = res["first_bad"]
    assert (fb["step"], fb["window"]) == (EVERY - 1, [0, EVERY - 1])
    assert res["data"]["audited_steps"] == [0, EVERY - 1]
    assert bad in res["data"]["rows"]["steps"][str(F_STEP)]["0"]
    assert res["data"]["rows"]["row_checks"] == {str(bad): ["finite.nan:x1"]}
    assert res["verdict"]["answers"]["from_step"]["first"]["window"] == [0, EVERY - 1]
