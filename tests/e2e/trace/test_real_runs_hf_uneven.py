"""A real two-process Hugging Face ``Trainer`` CPU run (tests/helpers/hftrainer_ddp.py over gloo) with
accelerate's ``even_batches=False`` and ``gradient_accumulation_steps`` 2, ``max_steps`` 5, traced back to
the process and the rows of a step where the processes train different epochs.

36 rows in batches of 4 are 9 DataLoader batches an epoch (``torch.randperm(36)`` from a generator seeded
``seed + epoch``: accelerate's ``SeedableRandomSampler``); ``BatchSamplerShard`` deals batch ``k`` to process
``k % 2`` and pads nothing: process 0 gets 5 micro-batches an epoch, process 1 gets 4. The Trainer computes
each process's epoch from its own loader (``len(epoch_dataloader)``): process 0 takes ``ceil(5 / 2)`` = 3
optimizer steps an epoch (the last on one micro-batch), process 1 ``4 / 2`` = 2, and nothing joins them at
an epoch's end: each process's ``state.global_step`` counts its own updates, and DDP's all-reduce pairs the
``k``-th update of each. So the run's optimizer step 2 is process 0's last micro-batch of epoch 0 together
with process 1's first two of epoch 1 (the Trainer without ``max_steps`` would hang at the end: process 0
waits for an all-reduce process 1 never makes).

The ledger used to start process 1's epoch 1 after process 0's 3 steps (the longest share, right only for a
loop whose processes are joined at an epoch's end, not for the Trainer nor a plain accelerate loop): it put process 1's epoch 1 at step 3, where
the Trainer trained it at 2, and lost its later micro-batches; trace named no row of process 1 at step 2.

Every expected row and step is computed here from the sampler arithmetic and checked against the
``state.global_step`` each process's forward saw, never read back from datacheck."""
from __future__ import annotations

import json
import math
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from realruns import cli, trace_json, write_nan_feature_rows

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("accelerate")
pytestmark = pytest.mark.slow  # two processes start the Trainer and gloo

from datacheck.io.ledger import read_ledger  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "tests" / "helpers" / "hftrainer_ddp.py"
N, B, GA, SEED, WORLD, MAX_STEPS = 36, 4, 2, 7, 2, 5
SIZES = (12, 12, 12)
STEP = 2  # the run's optimizer step (0-based) traced: process 0 in epoch 0, process 1 in epoch 1
COLUMNS = '[columns]\nfeatures = ["x1", "x2"]\nlabel = "label"\n'
_PORT_LOST = ("address already in use", "distnetworkerror", "connection refused", "connection reset",
              "terminate called without an active exception")


def _shares(epoch: int) -> list[list[list[int]]]:
    """Process p's micro-batches of ``epoch``: every 2nd DataLoader batch of the epoch's order from batch p."""
    order = torch.randperm(N, generator=torch.Generator().manual_seed(SEED + epoch)).tolist()
    batches = [order[i:i + B] for i in range(0, N, B)]
    return [batches[p::WORLD] for p in range(WORLD)]


def _trained(p: int) -> list[tuple[int, int, int, list[int]]]:
    """(step, micro-batch, epoch, rows) of every micro-batch process p trains: its epoch e starts after its
    own ``ceil(len / GA)`` steps of each epoch before; the run stops after ``MAX_STEPS`` updates."""
    out, start = [], 0
    for e in range(MAX_STEPS):
        mbs = _shares(e)[p]
        out += [(start + k // GA, k % GA, e, rows) for k, rows in enumerate(mbs) if start + k // GA < MAX_STEPS]
        start += math.ceil(len(mbs) / GA)
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _launch(root: Path) -> list[subprocess.CompletedProcess]:
    for _ in range(3):
        shutil.rmtree(root / "out", ignore_errors=True)
        port, procs = _free_port(), []
        for r in range(WORLD):
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
                   "RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": str(WORLD), "LOCAL_WORLD_SIZE": str(WORLD),
                   "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1"}
            spec = json.dumps({"seed": SEED, "batch": B, "ga": GA, "even_batches": False, "max_steps": MAX_STEPS})
            procs.append(subprocess.Popen([sys.executable, str(SCRIPT), str(root), spec], env=env, cwd=root,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        out = []
        for p in procs:
            o, e = p.communicate(timeout=300)
            out.append(subprocess.CompletedProcess(p.args, p.returncode, o, e))
        if not any(p.returncode and any(m in p.stderr.lower() for m in _PORT_LOST) for p in out):
            break
    return out


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf_uneven")
    bad = _shares(1)[1][0][1]  # a row of process 1's first micro-batch of epoch 1
    write_nan_feature_rows(torch, root, bad, SIZES)
    (root / "cols.toml").write_text(COLUMNS)
    res = _launch(root)
    assert all(p.returncode == 0 for p in res), [p.stderr[-3000:] for p in res]
    return root, bad


def test_each_process_counts_its_own_steps(run):
    root, _bad = run
    assert [len(s) for s in _shares(0)] == [5, 4]
    for p in range(WORLD):
        got = json.loads((root / f"trained{p}.json").read_text())
        assert got == [[s, rows] for s, _m, _e, rows in _trained(p)], p  # the Trainer's global_step per micro-batch
    assert [s for s, m, e, _ in _trained(1) if e == 1 and m == 0][0] == STEP  # process 1's epoch 1 starts at 2


def test_the_ledger_records_each_micro_batch_at_the_step_the_trainer_trained_it(run):
    root, _bad = run
    led = read_ledger(root / "out")
    for p in range(WORLD):
        got = sorted((b.step, b.micro_batch, b.epoch, list(b.indices)) for per in led.batches[p].values() for b in per)
        assert got == sorted(_trained(p)), p


@pytest.mark.parametrize("source", ["ledger", "plan"])
@pytest.mark.parametrize("step", [STEP, MAX_STEPS - 1])
def test_trace_names_both_processes_rows_of_a_step_across_epochs(run, source, step):
    """Step 2: process 0's epoch 0, process 1's epoch 1; step 4: process 0's epoch 1, process 1's epoch 2 (past
    the 2 epochs the config says: with ``max_steps`` each process runs ``ceil(5 / its steps an epoch)``). From
    the ledger, and from the plan of the config's ``[batch]`` (the loader told from the Trainer's log)."""
    root, bad = run
    hf_step = step + 1  # the Trainer logs the 0-based step k as global_step k + 1
    (root / "batch.toml").write_text(COLUMNS + f"[batch]\nbatch_size = {B}\nworld_size = {WORLD}\ngrad_accum = {GA}\n"
                                     f"seed = {SEED}\nepochs = 2\neven_batches = false\n")
    log = str(root / ("out" if source == "ledger" else "out/trainer_state.json"))
    rc, res, err = trace_json(log, "--data", str(root / "data"), "--config", str(root / "batch.toml"),
                              "--step", str(hf_step))
    assert rc == 1, err
    want = {str(p): [g for s, _m, _e, rows in _trained(p) if s == step for g in rows] for p in range(WORLD)}
    if step == STEP:
        assert want["0"] == _shares(0)[0][4] and want["1"] == _shares(1)[1][0] + _shares(1)[1][1]
    else:
        assert want["0"] == _shares(1)[0][2] + _shares(1)[0][3] and want["1"] == _shares(2)[1][0] + _shares(2)[1][1]
    d = res["data"]
    assert d["source"]["kind"] == source
    assert d["rows"]["steps"][str(hf_step)] == want
    assert d["rows"]["row_checks"] == ({str(bad): ["finite.nan:x1"]} if bad in want["1"] else {})
    if source == "plan":
        assert "rank 0: 3, rank 1: 2" in d["source"]["description"]


def test_order_verify_passes_the_trainers_own_epochs(run):
    """The Trainer's order as each process counts it is the plan: no divergent step, no rank skew, and no row
    unseen in an epoch one process completed while the other stopped inside it (``max_steps``). Before, process
    1's epoch 1 at step 2 read as a lost ``set_epoch``, a resume with the ranks skewed, and 4 rows never seen."""
    root, _bad = run
    rc, out, err = cli("order", "verify", str(root / "out"), "--rows", str(N), "--format", "json")
    assert rc == 0, out + err
    res = json.loads(out)["result"]
    assert res["passed"] and res["first_divergent_step"] is None and not res["findings"], res
    assert res["seen_twice"]["count"] == 0 and res["never_seen"]["count"] == 0
    assert res["never_seen"]["completed_epochs"] == [0]  # process 0 stopped inside epoch 1
