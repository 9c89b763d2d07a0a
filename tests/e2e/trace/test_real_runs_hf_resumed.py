"""A real Hugging Face Trainer run that crashed and was resumed from a checkpoint, its two launches in
one console (``python train.py >> console.log 2>&1`` twice; tests/helpers/hfresume.py), traced with
``--data`` from the simulated plan.

240 rows, batch 8: 30 steps an epoch, 2 epochs, a checkpoint every 10 steps, a dict every step. The first
launch crashes at the end of global step 12 (its dicts of steps 1..11 printed); the second resumes from
checkpoint-10: the Trainer restores global step 10 and skips the epoch's first 10 batches (accelerate's
``skip_first_batches``), so it logs steps 11..60, step 11 a second time. The Trainer's sampler is
accelerate's ``SeedableRandomSampler``: ``torch.randperm(240)`` from a generator seeded ``42 + epoch``, in
both launches; 0-based step ``s`` of epoch 0 holds positions ``8s .. 8s+7``. The NaN ``x1`` row sits at
position 3 of step 20's batch, which only the resumed launch reached: it logs global step 21 first with
grad norm NaN (the loss shown 0: ``logging_nan_inf_filter``).

Every expected step and row is computed here from that arithmetic, checked against the batches each
launch's forward saw, never read back from datacheck. ``dicts``: a console without bars prints each dict
with its epoch and no step; the plan's 30 steps per epoch place them per launch: the resumed launch's first
dict (epoch 0.3667) is step 11 again, a new launch's (its epoch back), not two records of one step (which
had refused the placing: "both fall on step 11", no rows named). ``tqdm``: the default console, each dict
placed by the bar before it. In both the report says there were two launches (``log.step_regression``:
step 11, then 11 again), though the step never goes below the last one logged."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from realruns import place, trace_json, write_nan_feature_rows

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("accelerate")  # the Trainer needs it
pytestmark = pytest.mark.slow  # two launches of the Trainer, each in a fresh process

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "tests" / "helpers" / "hfresume.py"
N, SIZES, B, SEED, EPOCHS = 240, (80, 100, 60), 8, 42, 2
SPE = N // B  # 30 steps an epoch
CRASH, CKPT, BAD_STEP, BAD_POS = 12, 10, 20, 3  # BAD_STEP: 0-based, logged by the Trainer as BAD_STEP + 1
CONFIG = ('[columns]\nfeatures = ["x1", "x2"]\nlabel = "label"\n'
          f"[batch]\nbatch_size = {B}\nseed = {SEED}\nepochs = {EPOCHS}\n")


def _perm(epoch: int) -> list[int]:
    return torch.randperm(N, generator=torch.Generator().manual_seed(SEED + epoch)).tolist()


def _batches() -> list[list[int]]:
    """Every batch of the run from scratch, in step order."""
    return [p[i:i + B] for p in map(_perm, range(EPOCHS)) for i in range(0, N, B)]


def _launch(root: Path, mode: str, crash: int, *ckpt: str) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}
    with open(root / "launch.log", "w") as out:  # stdout and stderr in one file, unbuffered: in order
        p = subprocess.run([sys.executable, str(SCRIPT), str(root), mode, str(crash), *ckpt], stdout=out,
                           stderr=subprocess.STDOUT, env=env, cwd=root, timeout=300)
    text = (root / "launch.log").read_bytes().decode()
    assert p.returncode == (3 if crash else 0), text[-3000:]
    return text


@pytest.fixture(scope="module", params=["dicts", "tqdm"])
def resumed(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(f"hf_resumed_{request.param}")
    bad = _perm(0)[BAD_STEP * B + BAD_POS]
    write_nan_feature_rows(torch, root, bad, SIZES)
    (root / "datacheck.toml").write_text(CONFIG)
    first = _launch(root, request.param, CRASH)
    second = _launch(root, request.param, 0, str(root / "out" / f"checkpoint-{CKPT}"))
    (root / "console.log").write_bytes((first + second).encode())
    return root, bad


def test_the_resumed_launch_skips_the_batches_already_trained(resumed):
    root, bad = resumed
    batches = _batches()
    first = json.loads((root / "seen-first.json").read_text())
    again = json.loads((root / "seen-resumed.json").read_text())
    assert first == batches[:CRASH]  # crashed after step 12's update
    assert again == batches[CKPT:]  # resumed at checkpoint-10: batches 10.. of the same epoch order
    assert [s for s, b in enumerate(batches) if bad in b] == [BAD_STEP, SPE + _perm(1).index(bad) // B]
    assert CRASH <= BAD_STEP  # the first launch never trained the row


def test_trace_names_the_resumed_launchs_step_and_rows(resumed):
    root, bad = resumed
    rc, res, err = trace_json(str(root / "console.log"), "--data", str(root / "data"), "--config",
                              str(root / "datacheck.toml"))
    assert rc == 1, err
    hf_step = BAD_STEP + 1  # the Trainer logs 0-based step k as global step k + 1
    assert res["first_bad"]["step"] == hf_step
    assert res["first_bad"]["check"] in ("log.hidden_non_finite", "log.non_finite")
    assert not [e for e in res["events"] if e["kind"] == "restart"]  # a resume, one run
    # two launches: the resumed one logs the first launch's last step (CRASH - 1) again, from CKPT + 1
    assert CKPT + 1 == CRASH - 1
    reg = [f for f in res["findings"] if f["check"] == "log.step_regression"]
    assert [(r["from_step"], r["to_step"]) for f in reg for r in f["details"]["resumes"]] == [(CRASH - 1, CKPT + 1)]
    assert [(e["from_step"], e["step"]) for e in res["events"] if e["kind"] == "resume"] == [(CRASH - 1, CKPT + 1)]
    d = res["data"]
    assert d["source"]["kind"] == "plan" and d["audited_steps"] == [hf_step, hf_step]
    assert d["rows"]["steps"] == {str(hf_step): {"0": _batches()[BAD_STEP]}}
    assert d["rows"]["row_checks"] == {str(bad): ["finite.nan:x1"]}
    shard, row = place(bad, SIZES)
    loc = d["rows"]["failing_rows"][0]
    assert (loc["shard"], loc["shard_row"], loc["row"]) == (shard, row, bad)
