"""Real two-process CPU runs of a Hugging Face ``accelerate`` loop (tests/helpers/acceleraterun_ddp.py,
two processes over gloo): ``Accelerator(cpu=True)``, ``gradient_accumulation_steps`` 1 and 2, a
``DistributedSampler(num_replicas=1, seed 7)`` DataLoader of batch 16 that accelerate's
``BatchSamplerShard`` deals out (process ``p`` takes global batches ``p, p + 2, ...``).

Every expected process, step and row is computed here from that arithmetic (and checked against the
batches each process saw), never read back from datacheck:

- ``record_batches(accelerator.prepare(loader), folder)``: each process records its own share under
  its ``process_index``; a NaN feature in global batch 13 (process 1, its micro-batch 6: optimizer step
  6, or 3 with accumulation 2) makes trace name that step, rank 1 and the row; ``order verify`` passes
  on a clean run of two epochs (every row once per epoch over both processes: 640 rows = 40 batches), its
  plan accelerate's dealing of batches (``[batch] loader = "accelerate"``, taken from the ledger's
  ``#state``): no divergent step; ``trace --data`` without the ledger, under a config of loader
  accelerate, names the same step, process and rows from the plan.
- ``accelerator.prepare(record_batches(loader, folder))``: each process would record both processes'
  batches; refused at the first iteration, naming the order to use.
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
from realruns import cli, distributed_order, trace_json, write_nan_feature_rows, write_shards

torch = pytest.importorskip("torch")
pytest.importorskip("accelerate")
pytestmark = pytest.mark.slow  # two processes start accelerate and gloo: 10 s or more

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "tests" / "helpers" / "acceleraterun_ddp.py"
N, SIZES, BATCH, SEED, WORLD = 640, (200, 240, 200), 16, 7, 2
COLUMNS = '[columns]\nfeatures = ["x1", "x2"]\nlabel = "label"\n'
BAD_BATCH, BAD_POS = 13, 5  # the global batch (of the one DistributedSampler order) and position of the NaN


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


#: what the processes print when the rendezvous port was taken between _free_port and gloo's bind
#: (another test or program on the machine), or when gloo's threads abort the interpreter's exit after
#: the whole run (seen now and then on this CPU-only torch, after accelerate's end_training already
#: destroyed the process group): the run is started again, on another port
_PORT_LOST = ("address already in use", "distnetworkerror", "connection refused", "connection reset",
              "terminate called without an active exception")


def _launch(root: Path, tries: int = 3, **spec) -> list[subprocess.CompletedProcess]:
    """Both processes of the run, as ``accelerate launch`` starts them (its environment variables)."""
    for _ in range(tries):
        out = _launch_once(root, **spec)
        if not any(p.returncode and any(m in p.stderr.lower() for m in _PORT_LOST) for p in out):
            break
    return out


def _launch_once(root: Path, **spec) -> list[subprocess.CompletedProcess]:
    shutil.rmtree(root / "run", ignore_errors=True)  # a run started again records afresh, not after the last
    port = _free_port()
    procs = []
    for r in range(WORLD):
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
               "RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": str(WORLD), "LOCAL_WORLD_SIZE": str(WORLD),
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1"}
        procs.append(subprocess.Popen([sys.executable, str(SCRIPT), str(root), json.dumps({"seed": SEED, "batch": BATCH,
                                                                                         **spec})],
                                      env=env, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    out = []
    for p in procs:
        o, e = p.communicate(timeout=300)
        out.append(subprocess.CompletedProcess(p.args, p.returncode, o, e))
    return out


def _global_batches() -> list[list[int]]:
    order = distributed_order(torch, N, 1, 0, SEED)
    return [order[i:i + BATCH] for i in range(0, N, BATCH)]


def _run(root: Path, ga: int, bad: int | None, epochs: int = 1, order: str = "prepared") -> list:
    """The run with a NaN ``x1`` in row ``bad`` (None: every row finite)."""
    write_nan_feature_rows(torch, root, 0 if bad is None else bad, SIZES)
    if bad is None:  # the same rows, row 0 made finite again
        rows = json.loads((root / "rows.json").read_text())
        rows[0]["x1"] = 0.25
        (root / "rows.json").write_text(json.dumps(rows))
        write_shards(root / "data", rows, SIZES)
    (root / "cols.toml").write_text(COLUMNS)
    return _launch(root, ga=ga, epochs=epochs, order=order)


@pytest.fixture(scope="module", params=[1, 2], ids=["ga1", "ga2"])
def nan_run(request, tmp_path_factory):
    ga = request.param
    root = tmp_path_factory.mktemp(f"accelerate_ddp_ga{ga}")
    bad = _global_batches()[BAD_BATCH][BAD_POS]
    res = _run(root, ga, bad)
    assert all(p.returncode == 0 for p in res), [p.stderr[-3000:] for p in res]
    return root, ga, bad


def test_each_process_trains_on_its_share(nan_run):
    root, ga, bad = nan_run
    batches = _global_batches()
    for p in range(WORLD):
        seen = [json.loads(line) for line in (root / f"seen{p}.jsonl").read_text().splitlines()]
        assert [s["rows"] for s in seen] == batches[p::WORLD]
        assert [s["optimizer_step"] for s in seen] == [k // ga for k in range(len(seen))]


def test_trace_names_the_step_the_process_and_the_row(nan_run):
    root, ga, bad = nan_run
    proc, micro = BAD_BATCH % WORLD, BAD_BATCH // WORLD
    step = micro // ga
    log = [json.loads(line) for line in (root / "log.jsonl").read_text().splitlines()]
    assert min(r["step"] for r in log if r["train_loss"] != r["train_loss"]) == step
    rc, res, err = trace_json(str(root / "log.jsonl"), "--data", str(root / "data"), "--ledger", str(root / "run"),
                              "--config", str(root / "cols.toml"))
    assert rc == 1, err
    fb = res["first_bad"]
    assert (fb["check"], fb["step"], fb["optimizer_step"]) == ("log.non_finite", step, step)
    got = res["data"]["rows"]["steps"][str(step)]
    batches = _global_batches()
    want = {str(p): [i for k in range(step * ga, (step + 1) * ga) for i in batches[WORLD * k + p]]
            for p in range(WORLD)}
    assert got == want and bad in got[str(proc)] and bad not in got[str(1 - proc)]
    assert res["data"]["rows"]["row_checks"] == {str(bad): ["finite.nan:x1"]}


@pytest.fixture(scope="module", params=[1, 2], ids=["ga1", "ga2"])
def clean_run(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(f"accelerate_ddp_clean_ga{request.param}")
    res = _run(root, request.param, None, epochs=2)
    assert all(p.returncode == 0 for p in res), [p.stderr[-3000:] for p in res]
    return root, request.param


def test_order_verify_passes_on_a_clean_two_epoch_run(clean_run):
    """Every row once per epoch over both processes: 640 rows = 40 global batches of 16, 20 per process."""
    root, _ga = clean_run
    rc, out, err = cli("order", "verify", str(root / "run"), "--rows", str(N), "--format", "json")
    assert rc == 0, out + err
    res = json.loads(out)["result"]
    assert res["passed"] and res["seen_twice"]["count"] == 0 and res["never_seen"]["count"] == 0
    assert res["never_seen"]["completed_epochs"] == [0, 1]


def test_order_verify_finds_no_divergence_on_a_clean_run(clean_run):
    """The ledger's #state says the loader is accelerate's: the plan deals whole batches of the one order
    (batch k to process k % 2), so every step of both epochs is the plan's."""
    root, ga = clean_run
    rc, out, err = cli("order", "verify", str(root / "run"), "--rows", str(N), "--format", "json")
    res = json.loads(out)["result"]
    assert rc == 0, out + err
    assert res["first_divergent_step"] is None and not res["findings"], res["findings"]
    assert (res["plan"]["loader"], res["plan"]["world_size"], res["plan"]["seed"]) == ("accelerate", WORLD, SEED)
    assert res["plan"]["steps_per_epoch"] == N // BATCH // WORLD // ga  # 40 batches, 20 per process


def test_trace_without_the_ledger_plans_accelerates_order(nan_run):
    """trace --data with no ledger, [batch] loader = "accelerate" (batch 16, 2 processes, seed 7, the run's
    grad_accum): the plan's rows of the first bad step are the batches each process trained on."""
    root, ga, bad = nan_run
    proc, micro = BAD_BATCH % WORLD, BAD_BATCH // WORLD
    step = micro // ga
    cfg = root / "accelerate.toml"
    cfg.write_text(COLUMNS + f'[batch]\nbatch_size = {BATCH}\nworld_size = {WORLD}\ngrad_accum = {ga}\nseed = {SEED}\n'
                   'loader = "accelerate"\n')
    rc, res, err = trace_json(str(root / "log.jsonl"), "--data", str(root / "data"), "--config", str(cfg))
    assert rc == 1, err
    assert res["first_bad"]["step"] == step
    batches = _global_batches()
    want = {str(p): [i for k in range(step * ga, (step + 1) * ga) for i in batches[WORLD * k + p]]
            for p in range(WORLD)}
    got = res["data"]["rows"]["steps"][str(step)]
    assert got == want and bad in got[str(proc)]
    assert res["data"]["rows"]["row_checks"] == {str(bad): ["finite.nan:x1"]}


@pytest.mark.parametrize("ga", [1, 2])
def test_prepare_of_the_recording_loader_is_refused_naming_the_order(tmp_path, ga):
    res = _run(tmp_path, ga, None, order="raw")
    for p in res:
        assert p.returncode != 0
        assert "record_batches(accelerator.prepare(loader), folder)" in p.stderr, p.stderr[-3000:]
