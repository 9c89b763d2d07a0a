"""A real two-process Hugging Face ``Trainer`` CPU run (tests/helpers/hftrainer_ddp.py, started as
torchrun starts it: gloo), per-device batch 4, ``gradient_accumulation_steps`` 2, traced back to the
process and the row.

The Trainer's DataLoader goes through ``accelerator.prepare``: one order of every row
(``torch.randperm`` from a generator seeded ``seed + epoch``, accelerate's ``SeedableRandomSampler``) cut
into batches of 4 that ``BatchSamplerShard`` deals whole, batch ``k`` to process ``k % 2``. torch's
``DistributedSampler`` would deal the same order row by row instead: the same rows per step over both
processes, but another process for each row. So trace without a ledger, under a ``[batch]`` that says
nothing of the loader, must plan a Trainer's log as accelerate deals it; it named the wrong process
(and the wrong rows per process) before.

Data: the first 300 rows of dair-ai emotion's ``train.txt`` (/work/shared/realdata/emotion, PROVENANCE:
``;``-separated, header ``text;label_name``, 6 classes), two features per text (its length / 100 and its
vowel fraction) and the class index; one ``x1`` NaN, placed from the arithmetic above in micro-batch 1
of process 1 at optimizer step 5 (the Trainer logs it as step 6) and checked against the rows each
process's forward saw. Expected values computed here, never read back from datacheck.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REALDATA
from realruns import place, trace_json, write_shards

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("accelerate")
pytestmark = pytest.mark.slow  # two processes start the Trainer and gloo: 10 s or more

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "tests" / "helpers" / "hftrainer_ddp.py"
EMOTION = REALDATA / "emotion" / "train.txt"
if not EMOTION.is_file():
    pytest.skip("../shared/realdata is not present", allow_module_level=True)
N, SIZES, B, GA, SEED, WORLD = 300, (100, 100, 100), 4, 2, 7, 2
STEP, MB, PROC, POS = 5, 1, 1, 2  # the NaN: optimizer step (0-based), micro-batch, process, position
CONFIG = ('[columns]\nfeatures = ["x1", "x2"]\nlabel = "label"\n'
          f"[batch]\nbatch_size = {B}\nworld_size = {WORLD}\ngrad_accum = {GA}\nseed = {SEED}\n")
_PORT_LOST = ("address already in use", "distnetworkerror", "connection refused", "connection reset",
              "terminate called without an active exception")


def _order() -> list[int]:
    g = torch.Generator()
    g.manual_seed(SEED + 0)
    return torch.randperm(N, generator=g).tolist()


def _batch(k: int) -> list[int]:
    return _order()[k * B:(k + 1) * B]


def _step_rows(step: int, proc: int) -> list[int]:
    """Rows of ``proc``'s micro-batches of optimizer ``step``: its micro-batch ``m`` is global batch ``m x 2 + proc``."""
    return [g for m in range(step * GA, (step + 1) * GA) for g in _batch(m * WORLD + proc)]


def _rows() -> list[dict]:
    lines = EMOTION.read_text().splitlines()
    assert lines[0] == "text;label_name"  # PROVENANCE: the header
    recs = [ln.rsplit(";", 1) for ln in lines[1:N + 1]]
    names = sorted({lab for _, lab in recs})
    assert names == ["anger", "fear", "joy", "love", "sadness", "surprise"]  # PROVENANCE: 6 classes
    return [{"x1": len(t) / 100, "x2": sum(c in "aeiou" for c in t) / len(t), "label": names.index(lab)}
            for t, lab in recs]


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
            spec = json.dumps({"seed": SEED, "batch": B, "ga": GA})
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
    root = tmp_path_factory.mktemp("hf_ddp")
    bad = _batch((STEP * GA + MB) * WORLD + PROC)[POS]
    rows = _rows()
    rows[bad]["x1"] = float("nan")
    write_shards(root / "data", rows, SIZES)
    (root / "rows.json").write_text(json.dumps(rows))
    (root / "datacheck.toml").write_text(CONFIG)
    res = _launch(root)
    assert all(p.returncode == 0 for p in res), [p.stderr[-3000:] for p in res]
    (root / "console.log").write_text(res[0].stdout)  # python train.py > console.log, the main process's
    return root, bad


def test_each_process_trained_the_batches_accelerate_dealt_it(run):
    root, bad = run
    for p in range(WORLD):
        seen = json.loads((root / f"seen{p}.json").read_text())
        assert seen[:(STEP + 1) * GA] == [_batch(m * WORLD + p) for m in range((STEP + 1) * GA)]
    seen1 = json.loads((root / "seen1.json").read_text())
    assert [k for k, s in enumerate(seen1) if bad in s] == [STEP * GA + MB]


@pytest.mark.parametrize("source", ["plan", "ledger", "console"])
def test_trace_names_the_step_the_process_and_the_row(run, source):
    # console: the printed dicts carry an epoch; the [batch] plan's steps per epoch place them, and the
    # plan is accelerate's there too (the loader is told from the log's lines before any is placed)
    root, bad = run
    log = str(root / {"plan": "out/trainer_state.json", "ledger": "out", "console": "console.log"}[source])
    rc, res, err = trace_json(log, "--data", str(root / "data"), "--config", str(root / "datacheck.toml"))
    assert rc == 1, err
    hf_step = STEP + 1  # the Trainer logs the 0-based step k as global_step k + 1
    assert res["first_bad"]["step"] == hf_step
    d = res["data"]
    assert d["source"]["kind"] == ("plan" if source == "console" else source)
    got = {int(r): sorted(g) for r, g in d["rows"]["steps"][str(hf_step)].items()}
    assert got == {p: sorted(_step_rows(STEP, p)) for p in range(WORLD)}  # each process's own rows
    assert bad in got[PROC]
    assert d["rows"]["row_checks"] == {str(bad): ["finite.nan:x1"]}
    shard, row = place(bad, SIZES)
    loc = d["rows"]["failing_rows"][0]
    assert (loc["shard"], loc["shard_row"], loc["row"]) == (shard, row, bad)
    assert loc["at"] == [{"step": hf_step, "rank": PROC, "micro_batch": MB}]  # where the run loaded it
    assert f"row {row} (global {bad}) on rank {PROC}: finite.nan:x1" in res["verdict"]["answers"]["rows"]["answer"]
    if source != "ledger":  # the source says which order was simulated, and why
        assert "loader accelerate (the Hugging Face Trainer's order" in d["source"]["description"]
        assert d["source"]["facts"]["loader"] == "accelerate"
