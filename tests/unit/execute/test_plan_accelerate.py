"""``datacheck plan`` under ``[batch] loader = "accelerate"``: step -> process -> rows as accelerate deals a
prepared DataLoader's batches, held to accelerate's own ``BatchSamplerShard`` over the epoch's permutation
(tests/helpers/acceleratehelp.py), and to the ledger ``record_batches`` writes around the prepared loaders:
an uneven last batch (``even_batches`` padding), gradient accumulation, two epochs."""
from __future__ import annotations

import contextlib
import io
import json

import polars as pl
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("accelerate")
from acceleratehelp import record_run, reference_shards, step_rows  # noqa: E402

import datacheck  # noqa: E402
from datacheck.cli.main import main  # noqa: E402
from datacheck.execute.plan import build_plan, rows_of_step  # noqa: E402
from datacheck.io.ledger import read_ledger  # noqa: E402
from datacheck.model.config import config_from_dict  # noqa: E402

N, P, BS, SEED, GA = 50, 2, 4, 3, 2


@pytest.fixture(autouse=True)
def accelerate_state():
    state = pytest.importorskip("accelerate.state")
    yield
    state.PartialState._reset_state()


def _dataset(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    pl.DataFrame({"gid": list(range(30)), "x": [0.5] * 30}).write_parquet(d / "train-00000-of-00002.parquet")
    pl.DataFrame({"gid": list(range(30, N)), "x": [0.5] * 20}).write_parquet(d / "train-00001-of-00002.parquet")
    return d


BATCH = {"batch_size": BS, "world_size": P, "grad_accum": GA, "seed": SEED, "epochs": 2, "loader": "accelerate"}


def test_plan_rows_of_each_step_are_accelerates(tmp_path):
    data = _dataset(tmp_path)
    plan = build_plan([str(data)], config_from_dict({"batch": BATCH}))
    refs = [reference_shards(N, P, BS, SEED, e) for e in range(2)]
    spe = -(-len(refs[0][0]) // GA)  # 14 batches (the 13th filled up, a 14th of first rows): 7 each, 4 steps
    assert plan.steps_per_epoch == spe == 4
    record_run(tmp_path / "run", N, P, BS, SEED, ga=GA, epochs=2)
    led = read_ledger(tmp_path / "run")
    for step in range(2 * spe):
        want = step_rows(refs[step // spe], step % spe, GA)
        got = rows_of_step(plan, step)
        assert {p: [x.global_index for x in got if x.rank == p] for p in want} == want, step
        assert [tuple(x) for x in rows_of_step(led, step, space=plan.space)] == [tuple(x) for x in got], step
    frames = {p.name: pl.read_parquet(p) for p in data.iterdir()}
    assert all(frames[x.shard]["gid"][x.row] == x.global_index for x in rows_of_step(plan, 3))
    s = plan.summary(0)
    padded = 14 * BS - N  # the rows of the first batches trained again to fill the last round
    assert (s["loader"], s["even_batches"], s["split_batches"]) == ("accelerate", True, False)
    assert (s["micro_batches_per_rank"], s["rows_per_rank"], s["wraparound_repeats"]) == (7, 7 * BS, padded)


def test_plan_cli_step_under_loader_accelerate(tmp_path):
    data = _dataset(tmp_path)
    cfg = tmp_path / "dc.toml"
    cfg.write_text("[batch]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in BATCH.items()))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(["plan", str(data), "--config", str(cfg), "--step", "5", "--format", "json"])
    assert rc == 0
    res = json.loads(out.getvalue())["result"]
    want = step_rows(reference_shards(N, P, BS, SEED, 1), 1, GA)  # step 5 = epoch 1's step 1
    got: dict[int, list[int]] = {}
    for r in res["step"]["rows"]:
        got.setdefault(r["rank"], []).append(r["global_index"])
    assert got == want
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        assert main(["plan", str(data), "--config", str(cfg)]) == 0
    assert "accelerate deals the batches (even_batches true, split_batches false)" in text.getvalue()


def test_audit_wraparound_counts_accelerates_padding(tmp_path):
    """batch.wraparound under loader accelerate: the rows even_batches trains again per epoch (the 13th
    batch's 2 missing rows and the 14th batch's 4, all from the epoch's first batches); torch's
    DistributedSampler repeats none of the 50 rows over 2 ranks."""
    data = _dataset(tmp_path)
    rep = datacheck.audit([str(data)], config=config_from_dict({"batch": BATCH}))
    f = next(f for f in rep.findings if f.check == "batch.wraparound")
    assert f.count == 14 * BS - N == 6 and "even_batches" in f.message
    keep = {k: v for k, v in BATCH.items() if k != "loader"}  # torch: 50 rows deal evenly to 2 ranks
    assert N % P == 0
    assert not [f for f in datacheck.audit([str(data)], config=config_from_dict({"batch": keep})).findings
                if f.check == "batch.wraparound"]


def test_uneven_plan_steps_are_each_process_s_own_count_and_the_ledger_s(tmp_path):
    """``even_batches = false``: process 0 gets 7 micro-batches an epoch (4 steps with GA 2), process 1 gets 6
    (3 steps). Each process's step ``s`` is its own ``s``-th step, epoch after epoch (process 1's epoch 1
    starts at its step 3), the ledger ``record_batches`` wrote around the prepared loaders agrees, process 1
    has no rows at process 0's last steps (its 2 epochs are done), and ``datacheck plan --step --rank 1``
    says so. Before, the plan put process 1's epoch 1 at process 0's step 4."""
    data = _dataset(tmp_path)
    plan = build_plan([str(data)], config_from_dict({"batch": {**BATCH, "even_batches": False}}))
    refs = [reference_shards(N, P, BS, SEED, e, even_batches=False) for e in range(2)]
    assert [len(s) for s in refs[0]] == [7, 6]
    own = {p: [sum(refs[e][p][i:i + GA], []) for e in range(2) for i in range(0, len(refs[e][p]), GA)]
           for p in range(P)}  # process p's steps in its own count: each its micro-batches' rows
    assert [len(own[p]) for p in range(P)] == [8, 6]
    record_run(tmp_path / "run", N, P, BS, SEED, ga=GA, epochs=2, even_batches=False)
    led = read_ledger(tmp_path / "run")
    for step in range(8):
        want = {p: own[p][step] for p in range(P) if step < len(own[p])}
        got = rows_of_step(plan, step)
        assert {p: [x.global_index for x in got if x.rank == p] for p in want} == want, step
        assert {x.rank for x in got} == set(want), step
        assert [tuple(x) for x in rows_of_step(led, step, space=plan.space)] == [tuple(x) for x in got], step
    cfg = tmp_path / "dc.toml"
    cfg.write_text("[batch]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in {**BATCH, "even_batches": False}.items()))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(["plan", str(data), "--config", str(cfg), "--step", "4", "--rank", "1", "--format", "json"])
    assert rc == 0
    res = json.loads(out.getvalue())["result"]["step"]
    assert [r["global_index"] for r in res["rows"]] == own[1][4] == sum(refs[1][1][2:4], [])
    assert (res["epoch"], res["epoch_step"]) == (1, 1)  # process 1's own epoch 1 began at its step 3


def _plan_step(data, cfg, *args: str) -> tuple[dict, str]:
    """``datacheck plan DATA --step ...``: (its JSON step, its text output)."""
    res, text = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(res):
        assert main(["plan", str(data), "--config", str(cfg), *args, "--format", "json"]) == 0
    with contextlib.redirect_stdout(text):
        assert main(["plan", str(data), "--config", str(cfg), *args]) == 0
    return json.loads(res.getvalue())["result"]["step"], text.getvalue()


@pytest.mark.parametrize("even", [True, False])
def test_plan_step_without_rank_places_it_for_every_process(tmp_path, even):
    """``datacheck plan --step N`` without ``--rank`` gives every process's epoch, in-epoch step and rows.
    With ``even_batches = true`` every process is at ``N // steps_per_epoch``, ``N % steps_per_epoch``
    (4 steps an epoch: ceil(7 micro-batches / GA 2)). With ``even_batches = false`` process 0 has 7
    micro-batches an epoch (4 steps), process 1 has 6 (3 steps), each counting its own: at step 4 process 0
    is at epoch 1 step 0, process 1 at epoch 1 step 1; at step 6 process 1's 2 epochs (6 steps) are done.
    Before, the step was placed by process 0's count alone ("epoch 1, step 0" for both)."""
    data = _dataset(tmp_path)
    cfg = tmp_path / "dc.toml"
    cfg.write_text("[batch]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in {**BATCH, "even_batches": even}.items()))
    refs = reference_shards(N, P, BS, SEED, 0, even_batches=even)
    per = [-(-len(refs[p]) // GA) for p in range(P)]  # each process's steps an epoch
    assert per == ([4, 4] if even else [4, 3])
    for step in (4, 6):
        want = {}
        for p in range(P):
            e, k = (step // per[0], step % per[0]) if even else divmod(step, per[p])
            want[str(p)] = (e, k) if e < 2 else (None, None)
        st, text = _plan_step(data, cfg, "--step", str(step))
        assert {r: (v["epoch"], v["epoch_step"]) for r, v in st["ranks"].items()} == want, step
        assert {r: v["rows"] for r, v in st["ranks"].items()} == \
            {str(p): sum(1 for x in st["rows"] if x["rank"] == p) for p in range(P)}
        assert all(v["rows"] > 0 for r, v in st["ranks"].items() if want[r][0] is not None)
        assert all(v["rows"] == 0 for r, v in st["ranks"].items() if want[r][0] is None)
        if len(set(want.values())) == 1:
            assert (st["epoch"], st["epoch_step"]) == want["0"]
            assert f"step {step} (epoch {want['0'][0]}, step {want['0'][1]} of the epoch)" in text
        else:  # no one place: each process's is said
            assert (st["epoch"], st["epoch_step"]) == (None, None)
            for r, (e, k) in want.items():
                assert (f"rank {r} epoch {e}, step {k} of its epoch" if e is not None
                        else f"rank {r} none: its epochs are done") in text
        assert ("a loop that enters DDP's join" in text) == (not even)  # own numbering: the join caveat said
        one, _ = _plan_step(data, cfg, "--step", str(step), "--rank", "0")
        assert list(one["ranks"]) == ["0"] and (one["epoch"], one["epoch_step"]) == want["0"]
