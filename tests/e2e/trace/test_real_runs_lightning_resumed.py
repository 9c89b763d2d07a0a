"""A real PyTorch Lightning run (tests/helpers/lightningresume.py) that crashed at step 12 and was
launched again: resumed from its checkpoint of step 10 (``resumed``), or from scratch (``restarted``),
its loggers writing on: ``TensorBoardLogger(version=0)`` into the same folder (one event file per
launch), the logger's own versions (``version_0``, ``version_1``), and the two launches' ``CSVLogger``
rows as one CSV (an appending CSV logger's file). Every expected step and row is computed here from torch's
``DistributedSampler`` seeding rule (``randperm(640)`` of a generator seeded ``7 + epoch``; batch 16: 40
steps an epoch), checked against the batches each launch's ``training_step`` saw, never read back from
datacheck.

Facts the run shows and the tests assert: Lightning restores the step count (10) but not the plain
DataLoader's position: the resumed launch trains, at step ``10 + i``, the epoch's batch ``i`` (it warns that
the dataloader is not resumable), ends epoch 0 at step 40 (its last 10 batches never trained) and trains
epoch 1 from step 40 as a run from scratch does. The NaN ``x1`` row is in batch 20 of epoch 0: the resumed
launch logs NaN first at step 30, the restarted one at step 20 (the first launch never reached it).

Before, the event files of one folder were merged step by step (the resumed launch's steps 10 and 11
overwrote the crashed one's: no resume seen; a restart's steps 0..11 mixed into the first run's), and the
plan's rows of step 30 were taken as a run from scratch's: batch 30, which holds no bad row ("the rows
look sound"). A log of the second launch alone (``CSVLogger(version=0)`` rewrites ``metrics.csv`` from
the resumed launch's first step; Lightning's next version folder holds that launch alone) begins at step 10
logging every step: a launch from scratch logs step 0 first, so it begins with a resumed launch, joined
the same way."""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from realruns import distributed_order, place, trace_json, write_nan_feature_rows

torch = pytest.importorskip("torch")
pytest.importorskip("lightning")
pytest.importorskip("tensorboard")
pytestmark = pytest.mark.slow  # two Lightning launches, each in a fresh process

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "tests" / "helpers" / "lightningresume.py"
N, SIZES, BATCH, SEED = 640, (200, 240, 200), 16, 7
SPE = N // BATCH  # 40 steps an epoch
CRASH, CKPT, BAD_BATCH, BAD_POS, MAX_STEPS = 12, 10, 20, 3, 60
CONFIG = ('[columns]\nfeatures = ["x1", "x2"]\nlabel = "label"\n'
          f"[batch]\nbatch_size = {BATCH}\nseed = {SEED}\nepochs = 2\n")


def _batches(epoch: int) -> list[list[int]]:
    order = distributed_order(torch, N, 1, 0, SEED, epoch)
    return [order[i:i + BATCH] for i in range(0, N, BATCH)]


def _launch(root: Path, crash: int, *ckpt: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": "1"}
    p = subprocess.run([sys.executable, str(SCRIPT), str(root), str(crash), *ckpt], env=env, cwd=root,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == (1 if crash else 0), p.stderr[-3000:]
    if crash:
        assert f"RuntimeError: crash at step {crash}" in p.stderr


def _appended_csv(root: Path) -> Path:
    """The two launches' CSVLogger rows (``csvv/version_0``, ``version_1``) under one header, as a CSV logger
    appending to its file writes them, where a CSVLogger writes (``version_0/metrics.csv``: Lightning's
    step count, from 0)."""
    rows, names = [], None
    for v in (0, 1):
        with open(root / "logs" / "csvv" / f"version_{v}" / "metrics.csv", newline="") as f:
            r = csv.DictReader(f)
            names = names or r.fieldnames
            assert r.fieldnames == names
            rows += list(r)
    out = root / "logs" / "appended" / "version_0" / "metrics.csv"
    out.parent.mkdir(parents=True)
    with open(out, "w", newline="") as f:
        w = csv.DictWriter(f, names)
        w.writeheader()
        w.writerows(rows)
    return out


@pytest.fixture(scope="module", params=["resumed", "restarted"])
def run(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(f"lightning_{request.param}")
    bad = _batches(0)[BAD_BATCH][BAD_POS]
    write_nan_feature_rows(torch, root, bad, SIZES)
    (root / "datacheck.toml").write_text(CONFIG)
    _launch(root, CRASH)
    _launch(root, 0, *([str(root / "ckpt" / f"step={CKPT}.ckpt")] if request.param == "resumed" else []))
    logs = {"tb version folder": root / "logs" / "tb" / "version_0", "tb logger folder": root / "logs" / "tbv",
            "appended csv": _appended_csv(root)}
    assert len(list(logs["tb version folder"].glob("events.out.tfevents.*"))) == 2  # one per launch
    return request.param, root, bad, logs


def test_each_launch_trained_what_the_sampler_arithmetic_says(run):
    mode, root, bad, _ = run
    seen = [json.loads(t) for t in (root / "seen.jsonl").read_text().splitlines()]
    first = [(s["global_step"], s["rows"]) for s in seen if s["launch"] == 0]
    again = [(s["global_step"], s["rows"]) for s in seen if s["launch"] == 1]
    e0, e1 = _batches(0), _batches(1)
    assert first == [(k, e0[k]) for k in range(CRASH)]
    if mode == "resumed":  # step 10 + i: the epoch's batch i; epoch 1 from step 40 on
        want = [(CKPT + i, e0[i]) for i in range(SPE - CKPT)] + [(SPE + i, e1[i]) for i in range(MAX_STEPS - SPE)]
    else:
        want = [(k, (e0 + e1)[k]) for k in range(MAX_STEPS)]
    assert again == want
    assert bad in e0[BAD_BATCH] and CRASH <= BAD_BATCH


@pytest.mark.parametrize("log", ["tb version folder", "tb logger folder", "appended csv"])
def test_trace_sees_the_second_launch_and_names_its_rows(run, log):
    mode, root, bad, logs = run
    rc, res, err = trace_json(str(logs[log]), "--data", str(root / "data"), "--config", str(root / "datacheck.toml"))
    assert rc == 1, err
    back = [(e["kind"], e["from_step"], e["step"]) for e in res["events"] if e["kind"] in ("resume", "restart")]
    regress = [f for f in res["findings"] if f["check"] == "log.step_regression"]
    fb, d = res["first_bad"], res["data"]
    if mode == "resumed":
        assert back == [("resume", CRASH - 1, CKPT)]
        assert [(r["from_step"], r["to_step"]) for r in regress[0]["details"]["resumes"]] == [(CRASH - 1, CKPT)]
        step = CKPT + BAD_BATCH  # the resumed launch's step that trained batch 20
        assert "Lightning restarts a DataLoader without state_dict" in d["source"]["description"]
    else:
        assert back == [("restart", CRASH - 1, 0)] and not regress
        assert ", run 2 (restarted at " in fb["rank"]
        step = BAD_BATCH
    assert (fb["check"], fb["step"]) == ("log.non_finite", step)
    assert d["rows"]["steps"][str(step)] == {"0": _batches(0)[BAD_BATCH]}
    assert d["rows"]["row_checks"] == {str(bad): ["finite.nan:x1"]}
    shard, row = place(bad, SIZES)
    loc = d["rows"]["failing_rows"][0]
    assert (loc["shard"], loc["shard_row"], loc["row"]) == (shard, row, bad)


@pytest.mark.parametrize("log", ["csv rewritten", "csv version_1", "tb version_1"])
def test_a_log_of_the_second_launch_alone_names_its_rows(run, log):
    mode, root, bad, _ = run
    path = {"csv rewritten": root / "logs" / "csv" / "version_0" / "metrics.csv",
            "csv version_1": root / "logs" / "csvv" / "version_1" / "metrics.csv",
            "tb version_1": root / "logs" / "tbv" / "version_1"}[log]
    first = CKPT if mode == "resumed" else 0
    if log != "tb version_1":  # the file holds the second launch alone, every step from its first
        with open(path, newline="") as f:
            assert [int(r["step"]) for r in csv.DictReader(f)] == list(range(first, MAX_STEPS))
    rc, res, err = trace_json(str(path), "--data", str(root / "data"), "--config", str(root / "datacheck.toml"))
    assert rc == 1, err
    assert not [e for e in res["events"] if e["kind"] in ("resume", "restart")]
    step = first + BAD_BATCH
    fb, d = res["first_bad"], res["data"]
    assert (fb["check"], fb["step"]) == ("log.non_finite", step)
    assert d["rows"]["steps"][str(step)] == {"0": _batches(0)[BAD_BATCH]}
    assert d["rows"]["row_checks"] == {str(bad): ["finite.nan:x1"]}
    said = "trained by the launch resumed at log step 10 (the log begins there, logging every step"
    assert (said in d["source"]["description"]) == (mode == "resumed")
