"""A real two-process CPU run of a plain Hugging Face ``accelerate`` loop with ``even_batches=False`` and no
join (tests/helpers/acceleraterun_ddp.py over gloo: the loader prepared, the model not, so no all-reduce
waits for the process with a batch fewer), three epochs, each process logging its own loss under its rank
(``log-rank0.jsonl``, ``log-rank1.jsonl``: its own step count from 0), traced with ``--data`` from the
simulated plan (``[batch] loader = "accelerate"``, ``even_batches = false``): no ledger, no ``--step``.

68 rows in batches of 8 are 9 DataLoader batches an epoch; accelerate's ``BatchSamplerShard`` deals batch
``k`` to process ``k % 2`` and pads nothing: process 0 trains 5 batches an epoch, process 1 trains 4. The
NaN ``x1`` row is in process 1's third batch of epoch 0 (its step 2), and process 0 trains it first in a
later epoch: process 1's loss is NaN from its step 2, process 0's only from that later step (its model is
its own). Every expected process, step and row is computed here from the sampler arithmetic
(``torch.randperm(68)`` of a generator seeded ``7 + epoch``, cut into batches of 8, dealt in turn), checked
against the batches each process received, never read back from datacheck."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from realruns import place, trace_json, write_nan_feature_rows

torch = pytest.importorskip("torch")
pytest.importorskip("accelerate")
pytestmark = pytest.mark.slow  # two processes start accelerate and gloo

from test_real_runs_accelerate_ddp import WORLD, _launch  # noqa: E402

N, BATCH, SEED, EPOCHS, SIZES = 68, 8, 7, 3, (20, 30, 18)
BAD_PROC, BAD_MICRO = 1, 2  # the process and its 0-based batch of epoch 0 that hold the NaN row
CONFIG = ('[columns]\nfeatures = ["x1", "x2"]\nlabel = "label"\n'
          f"[batch]\nbatch_size = {BATCH}\nworld_size = {WORLD}\nseed = {SEED}\nepochs = {EPOCHS}\n"
          'loader = "accelerate"\neven_batches = false\n')


def _shares(epoch: int) -> list[list[list[int]]]:
    """Process p's batches of ``epoch``: every 2nd DataLoader batch of the one order, from batch p."""
    order = torch.randperm(N, generator=torch.Generator().manual_seed(SEED + epoch)).tolist()
    batches = [order[i:i + BATCH] for i in range(0, N, BATCH)]
    return [batches[p::WORLD] for p in range(WORLD)]


def _own_steps(p: int, row: int) -> list[int]:
    """The own step counts (from 0, across epochs) at which process ``p`` trains ``row``."""
    out, base = [], 0
    for e in range(EPOCHS):
        share = _shares(e)[p]
        out += [base + k for k, b in enumerate(share) if row in b]
        base += len(share)
    return out


def _bad_row() -> int:
    """A row of process 1's batch 2 of epoch 0 that process 0 trains only later (its own count past 2)."""
    return next(r for r in _shares(0)[BAD_PROC][BAD_MICRO] if min(_own_steps(0, r), default=99) > BAD_MICRO)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("accelerate_uneven_ranks")
    bad = _bad_row()
    write_nan_feature_rows(torch, root, bad, SIZES)
    (root / "plan.toml").write_text(CONFIG)
    res = _launch(root, ga=1, epochs=EPOCHS, order="prepared", batch=BATCH, even_batches=False)
    assert all(p.returncode == 0 for p in res), [p.stderr[-3000:] for p in res]
    return root, bad


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(t) for t in path.read_text().splitlines()]


def test_each_process_trained_and_logged_its_own_share(run):
    root, bad = run
    for p in range(WORLD):
        seen = _jsonl(root / f"seen{p}.jsonl")
        assert [s["rows"] for s in seen] == [b for e in range(EPOCHS) for b in _shares(e)[p]]
        log = _jsonl(root / f"log-rank{p}.jsonl")
        assert [r["step"] for r in log] == list(range(len(seen)))  # its own count: 15 and 12 steps
        first_nan = next(r["step"] for r in log if r["train_loss"] != r["train_loss"])
        assert first_nan == min(_own_steps(p, bad))
    assert [len(s) for s in _shares(0)] == [5, 4]


def test_trace_names_the_process_the_step_and_the_rows(run):
    root, bad = run
    rc, res, err = trace_json(str(root / "log-rank0.jsonl"), str(root / "log-rank1.jsonl"), "--data",
                              str(root / "data"), "--config", str(root / "plan.toml"))
    assert rc == 1, err
    fb, d = res["first_bad"], res["data"]
    assert (fb["check"], fb["rank"], fb["step"]) == ("log.non_finite", f"rank {BAD_PROC}", BAD_MICRO)
    assert d["source"]["kind"] == "plan"
    assert d["rows"]["steps"] == {str(BAD_MICRO): {str(p): _shares(0)[p][BAD_MICRO] for p in range(WORLD)}}
    assert d["rows"]["row_checks"] == {str(bad): ["finite.nan:x1"]}
    shard, row = place(bad, SIZES)
    loc = d["rows"]["failing_rows"][0]
    assert (loc["shard"], loc["shard_row"], loc["row"]) == (shard, row, bad)
    assert loc["at"] == [{"step": BAD_MICRO, "rank": BAD_PROC, "micro_batch": 0}]
    later = min(_own_steps(0, bad))  # process 0's model goes NaN when it trains the row itself
    assert later > BAD_MICRO
    assert res["verdict"]["answers"]["ranks"]["answer"] == \
        f"rank {BAD_PROC} first, at step {BAD_MICRO} (ranks [0] still finite there, non-finite later)"
