"""A real two-process Hugging Face ``Trainer`` CPU run (tests/helpers/hftrainer_ddp.py over gloo, recorded by
``DatacheckCallback``) stopped at ``global_step`` 4 and resumed from ``checkpoint-4`` with another
``per_device_train_batch_size``: 48 rows, batch size 4 with ``gradient_accumulation_steps`` 2, then batch size 8
with 1 (16 rows an update either way), 3 epochs.

accelerate's ``SeedableRandomSampler`` orders epoch ``e`` as ``torch.randperm(48)`` of a generator seeded
``seed + e``; ``BatchSamplerShard`` deals DataLoader batch ``k`` to process ``k % 2`` (48 rows fill every
batch: no padding). First launch: 12 batches of 4, 6 a process, 3 updates an epoch; step 4 is epoch 1 after
one update (its batches 0..3: the epoch's first 16 rows). The resumed Trainer counts ``ceil(3 / 1)`` = 3
updates an epoch with its 6 batches of 8 (3 a process), so global step 4 is epoch ``4 // 3`` = 1 after ``(4 %
3) x 1`` = 1 skipped micro-batch a process: batches 0 and 1 of 8, the same first 16 rows. A correct resume,
each update's rows regrouped between the processes: ``order verify`` plans each launch with its own settings
and finds nothing. The negative: resumed with batch size 8 and ``gradient_accumulation_steps`` 2 kept, the
Trainer counts ``ceil(3 / 2)`` = 2 updates an epoch, so step 4 is epoch 2 from its start: the 32 rows left of
epoch 1 are never trained (``order.never_seen``, the resume ``skip_ahead`` at step 4).

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
from realruns import cli, write_nan_feature_rows

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("accelerate")
pytestmark = pytest.mark.slow  # two processes start the Trainer and gloo, twice

from datacheck.io.ledger import read_ledger  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "tests" / "helpers" / "hftrainer_ddp.py"
N, SEED, WORLD, EPOCHS, CKPT = 48, 7, 2, 3, 4
FIRST = (4, 2)  # (per_device_train_batch_size, gradient_accumulation_steps)
#: the resumed launch's settings: 16 rows an update (a correct resume), or 32 (the Trainer skips ahead)
SECONDS = {"batch 8, grad_accum 1": (8, 1), "batch 8, grad_accum 2": (8, 2)}
_PORT_LOST = ("address already in use", "distnetworkerror", "connection refused", "connection reset",
              "terminate called without an active exception")


def _shares(epoch: int, batch: int) -> list[list[list[int]]]:
    """Process p's micro-batches of ``epoch``: every 2nd DataLoader batch of ``batch`` rows from batch p."""
    order = torch.randperm(N, generator=torch.Generator().manual_seed(SEED + epoch)).tolist()
    batches = [order[i:i + batch] for i in range(0, N, batch)]
    return [batches[p::WORLD] for p in range(WORLD)]


def _launch(root: Path, spec: dict) -> list[subprocess.CompletedProcess]:
    for _ in range(3):
        port, procs = _free_port(), []
        for r in range(WORLD):
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
                   "RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": str(WORLD), "LOCAL_WORLD_SIZE": str(WORLD),
                   "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1"}
            procs.append(subprocess.Popen([sys.executable, str(SCRIPT), str(root), json.dumps(spec)], env=env,
                                          cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        out = []
        for p in procs:
            o, e = p.communicate(timeout=400)
            out.append(subprocess.CompletedProcess(p.args, p.returncode, o, e))
        if not any(p.returncode and any(m in p.stderr.lower() for m in _PORT_LOST) for p in out):
            break
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module", params=list(SECONDS))
def run(tmp_path_factory, request):
    root = tmp_path_factory.mktemp("hf_ddp_resume")
    write_nan_feature_rows(torch, root, 0, (16, 16, 16))
    shutil.rmtree(root / "out", ignore_errors=True)
    (b1, g1), (b2, g2) = FIRST, SECONDS[request.param]
    res = _launch(root, {"seed": SEED, "batch": b1, "ga": g1, "epochs": EPOCHS, "max_steps": CKPT,
                         "save_steps": CKPT, "tag": "first"})
    assert all(p.returncode == 0 for p in res), [p.stderr[-3000:] for p in res]
    assert (root / "out" / f"checkpoint-{CKPT}").is_dir()
    res = _launch(root, {"seed": SEED, "batch": b2, "ga": g2, "epochs": EPOCHS, "resume": f"checkpoint-{CKPT}",
                         "tag": "resumed"})
    assert all(p.returncode == 0 for p in res), [p.stderr[-3000:] for p in res]
    return root, SECONDS[request.param]


def _want(p: int, second: tuple[int, int]) -> list[list]:
    """[global_step, rows] of every micro-batch process p trains: the first launch's steps 0..CKPT-1, then the
    resumed launch's (``second``: its batch size and grad_accum), from the Trainer's resume arithmetic."""
    (b1, g1), (b2, g2) = FIRST, second
    out: list[list] = []
    per1 = math.ceil(len(_shares(0, b1)[p]) / g1)  # 3 updates an epoch
    for e in range(EPOCHS):
        for k, rows in enumerate(_shares(e, b1)[p]):
            if e * per1 + k // g1 < CKPT:
                out.append([e * per1 + k // g1, rows])
    per2 = math.ceil(len(_shares(0, b2)[p]) / g2)  # the resumed Trainer's updates an epoch
    epoch, skip = CKPT // per2, (CKPT % per2) * g2
    for e in range(epoch, EPOCHS):
        for k, rows in enumerate(_shares(e, b2)[p]):
            if e == epoch and k < skip:
                continue
            out.append([e * per2 + k // g2, rows])
    return out


def test_the_trainer_resumes_as_its_arithmetic_says(run):
    """With grad_accum 1 the resumed launch skips the micro-batches holding the first 16 rows of epoch 1, the
    rows the first launch trained of it: every row once an epoch."""
    root, second = run
    for p in range(WORLD):
        got = json.loads((root / f"trainedfirst{p}.json").read_text()) + \
            json.loads((root / f"trainedresumed{p}.json").read_text())
        assert got == _want(p, second), p
    if second == (8, 1):
        for e in range(EPOCHS):  # 3 updates an epoch in both launches
            rows = [i for p in range(WORLD) for s, r in _want(p, second) for i in r if s // 3 == e]
            assert sorted(rows) == list(range(N)), e


def test_the_ledger_records_each_micro_batch_at_the_trainers_step(run):
    root, second = run
    led = read_ledger(root / "out")
    for p in range(WORLD):
        got = [[s, list(b.indices)] for s in sorted(led.batches[p]) for b in led.batches[p][s]]
        assert got == _want(p, second), p


def test_order_verify_plans_each_launch_with_its_own_batch_size(run):
    """Resumed at 16 rows an update: no finding, though the resumed steps hold other rows on each process than
    a single launch at batch size 4 would (its step 4 on process 0 is its batch 2 of 8, where batch size 4
    gives its batches 4 and 6 of 4). Resumed at 32 rows an update: the Trainer goes on at epoch 2, the 32 rows
    left of epoch 1 (the batches of 4 after the first 4) are never trained, exit 1."""
    root, second = run
    if second != (8, 1):
        o1 = torch.randperm(N, generator=torch.Generator().manual_seed(SEED + 1)).tolist()
        rc, out, err = cli("order", "verify", str(root / "out"), "--rows", str(N), "--format", "json")
        res = json.loads(out)["result"]
        assert rc == 1 and res["never_seen"]["by_epoch"] == {"1": 32}, out + err
        assert res["never_seen"]["rows"] == sorted(o1[16:])[:20]
        assert res["first_divergent_step"] == CKPT and res["divergence"]["order"] == "skip_ahead"
        return
    (b1, _g1), (b2, _g2) = FIRST, second
    step4 = [r for s, r in _want(0, second) if s == CKPT]
    assert step4 == [_shares(1, b2)[0][1]]  # process 0's 2nd batch of 8 (DataLoader batch 2)
    assert step4[0] != _shares(1, b1)[0][2] + _shares(1, b1)[0][3]  # not its batches 4 and 6 of 4
    rc, out, err = cli("order", "verify", str(root / "out"), "--rows", str(N), "--format", "json")
    res = json.loads(out)["result"]
    assert rc == 0 and res["findings"] == [] and res["first_divergent_step"] is None, out + err
    assert res["never_seen"]["completed_epochs"] == [0, 1, 2]
    assert res["plan"]["epoch_settings"] == {"2": {"batch_size": b2, "grad_accum": 1, "world_size": WORLD}}
