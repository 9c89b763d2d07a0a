"""Two ranks over gloo (``torch.multiprocessing.spawn``, DDP, torch's ``DistributedSampler``, seed 7,
batch 8), each recording its batches with ``record_batches`` and logging its own loss and the
all-reduced grad norm (0-based steps). Planted: an inf regression target in the row rank 1 loads at
position 2 of its step 7 (computed from the sampler's seeding rule). Rank 1's loss is inf at step 7;
the all-reduce makes both ranks' grad norms non-finite at that step. trace names step 7, rank 1 and
the row, from all ranks' logs and from rank 0's alone (the ledger has every rank)."""
from __future__ import annotations

import json

import pytest
from realruns import cli, distributed_order, gloo_rank, place, trace_json, write_shards

torch = pytest.importorskip("torch")
if not torch.distributed.is_available():  # pragma: no cover - a torch build without distributed
    pytest.skip("torch.distributed is not available", allow_module_level=True)

N, SIZES, WORLD, BATCH, SEED, STEP, POS, STEPS = 400, (150, 120, 130), 2, 8, 7, 7, 2, 12
CONFIG = '[columns]\nfeatures = ["x1", "x2"]\ntarget = "y"\n'


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("ddp")
    bad = distributed_order(torch, N, WORLD, 1, SEED)[STEP * BATCH + POS]
    assert bad not in distributed_order(torch, N, WORLD, 0, SEED)  # no padding repeat: rank 1 alone loads it
    g = torch.Generator().manual_seed(2)
    x = torch.randn(N, 2, generator=g)
    rows = [{"x1": float(a), "x2": float(b), "y": float(a - b)} for a, b in x.tolist()]
    rows[bad]["y"] = float("inf")
    write_shards(root / "data", rows, SIZES)
    (root / "rows.json").write_text(json.dumps(rows))
    (root / "run").mkdir()
    (root / "datacheck.toml").write_text(CONFIG)
    torch.multiprocessing.spawn(gloo_rank, args=(WORLD, str(root / "rendezvous"), str(root), N, BATCH, SEED, STEPS), nprocs=WORLD,
                                join=True)
    return root, bad


def _args(root, *logs):
    return [*(str(root / "run" / lg) for lg in logs), "--data", str(root / "data"), "--config",
            str(root / "datacheck.toml"), "--ledger", str(root / "run"), "--first-step", "0"]


@pytest.mark.slow
def test_the_run_went_bad_on_rank_1_at_the_planted_step(ddp_run):
    root, _ = ddp_run
    logs = {r: [json.loads(line) for line in (root / "run" / f"metrics-rank{r}.jsonl").read_text().splitlines()]
            for r in range(WORLD)}
    first = {r: min(x["step"] for x in logs[r] if x["loss"] != x["loss"] or abs(x["loss"]) == float("inf"))
             for r in range(WORLD)}
    assert first[1] == STEP and first[0] > STEP  # rank 1's loss first; rank 0's loss only after the bad update
    gn = {r: next(x["grad_norm"] for x in logs[r] if x["step"] == STEP) for r in range(WORLD)}
    assert all(v != v or v == float("inf") for v in gn.values())  # the all-reduce spread it to rank 0


@pytest.mark.parametrize("logs", [("metrics-rank0.jsonl", "metrics-rank1.jsonl"), ("metrics-rank0.jsonl",)],
                         ids=["all ranks logged", "rank 0 only"])
@pytest.mark.slow
def test_trace_names_the_step_and_the_row_on_rank_1(ddp_run, logs):
    root, bad = ddp_run
    rc, res, err = trace_json(*_args(root, *logs))
    assert rc == 1, err
    assert res["first_bad"]["check"] == "log.non_finite" and res["first_bad"]["step"] == STEP
    rows = res["data"]["rows"]
    assert bad in rows["steps"][str(STEP)]["1"] and bad not in rows["steps"][str(STEP)]["0"]
    assert rows["row_checks"] == {str(bad): ["finite.inf:y"]}
    f = [x for x in rows["findings"] if x["check"] == "finite.inf"]
    assert f and f[0]["rows"] == [bad]


@pytest.mark.slow
def test_trace_names_rank_1_from_all_ranks_logs(ddp_run):
    root, _ = ddp_run
    rc, res, err = trace_json(*_args(root, "metrics-rank0.jsonl", "metrics-rank1.jsonl"))
    assert rc == 1, err
    assert str(res["first_bad"]["rank"]) in ("1", "rank 1", "rank1")


@pytest.mark.slow
def test_text_names_shard_and_shard_row(ddp_run):
    root, bad = ddp_run
    shard, row = place(bad, SIZES)
    rc, out, _ = cli("trace", *_args(root, "metrics-rank0.jsonl", "metrics-rank1.jsonl"))
    assert rc == 1 and f"{shard} row {row}" in out
