"""A real two-process CPU run of a Hugging Face ``accelerate`` loop with ``even_batches=False``
(tests/helpers/acceleraterun_ddp.py over gloo, no join), three epochs,
``record_batches(accelerator.prepare(loader), folder)`` on each process.

68 rows in batches of 8 are 9 DataLoader batches per epoch (the last of 4 rows); accelerate's
``BatchSamplerShard`` deals batch ``k`` to process ``k % 2`` and, without ``even_batches``, pads nothing:
process 0 trains 5 batches an epoch (the short one included), process 1 trains 4. Nothing joins the
processes at an epoch's end: each counts its own optimizer steps (``ceil(its batches / grad_accum)`` an
epoch: its own log's steps, and the k-th backward DDP's all-reduce pairs), so process 1's epoch 1 starts
at its own step ``ceil(4 / grad_accum)``, not process 0's ``ceil(5 / grad_accum)``.

Every expected row and step is computed here from the sampler arithmetic (``DistributedSampler(
num_replicas=1, shuffle=True, seed 7)`` is ``torch.randperm(68)`` of a generator seeded ``7 + epoch``) and
checked against the batches each process received from accelerate itself and the optimizer step its own
loop counted at each (``seen{p}.jsonl``), never read back from datacheck: the order model (``epoch_order``
with ``[batch] loader = "accelerate"``, ``even_batches = false``) gives each process's batches in every
epoch; the ledger puts process ``p``'s micro-batch ``k`` of epoch ``e`` at its own step
``e x ceil(share_p / grad_accum) + k // grad_accum``; ``order verify`` passes with no divergent step; a NaN
feature in a row of process 0's micro-batch 2 of epoch 2: ``trace --step`` of that step (process 0's log)
names the rows each process trained at its own step of that number (process 1, with fewer steps an
epoch, has none there: its run ended sooner) and the NaN row among them; ``trace --step`` of process 1's
own log in epoch 1 names exactly the rows process 1 trained at that step.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from realruns import cli, trace_json, write_nan_feature_rows

torch = pytest.importorskip("torch")
pytest.importorskip("accelerate")
pytestmark = pytest.mark.slow  # two processes start accelerate and gloo

from test_real_runs_accelerate_ddp import WORLD, _launch  # noqa: E402

from datacheck.io.ledger import read_ledger  # noqa: E402
from datacheck.model.config import BatchSection  # noqa: E402
from datacheck.model.order import epoch_order  # noqa: E402

N, BATCH, SEED, EPOCHS = 68, 8, 7, 3
LOADER_BATCHES = math.ceil(N / BATCH)  # 9: the last holds 4 rows
MOST = math.ceil(LOADER_BATCHES / WORLD)  # process 0's 5 batches an epoch
SIZES = (20, 30, 18)  # the shards of the 68 rows
BAD_EPOCH, BAD_MICRO, BAD_POS = 2, 2, 1  # process 0's micro-batch and the row in it whose x1 is NaN
COLUMNS = '[columns]\nfeatures = ["x1", "x2"]\nlabel = "label"\n'


def _shares(epoch: int) -> list[list[list[int]]]:
    """Process p's batches of ``epoch``: every 2nd DataLoader batch of the one order from batch p."""
    order = torch.randperm(N, generator=torch.Generator().manual_seed(SEED + epoch)).tolist()
    batches = [order[i:i + BATCH] for i in range(0, N, BATCH)]
    return [batches[p::WORLD] for p in range(WORLD)]


@pytest.fixture(scope="module", params=[1, 2], ids=["ga1", "ga2"])
def uneven_run(request, tmp_path_factory):
    ga = request.param
    root = tmp_path_factory.mktemp(f"accelerate_uneven_ga{ga}")
    write_nan_feature_rows(torch, root, _shares(BAD_EPOCH)[0][BAD_MICRO][BAD_POS], SIZES)
    (root / "cols.toml").write_text(COLUMNS)
    res = _launch(root, ga=ga, epochs=EPOCHS, order="prepared", batch=BATCH, even_batches=False)
    assert all(p.returncode == 0 for p in res), [p.stderr[-3000:] for p in res]
    return root, ga


def _seen(root: Path, p: int) -> list[dict]:
    return [json.loads(line) for line in (root / f"seen{p}.jsonl").read_text().splitlines()]


def _own_steps(p: int, ga: int) -> list[list[list[int]]]:
    """Process p's optimizer steps in its own count, from 0 across epochs: each its micro-batches (a
    process's epoch ends with a step of the remainder micro-batches)."""
    out: list[list[list[int]]] = []
    for e in range(EPOCHS):
        share = _shares(e)[p]
        out += [share[i:i + ga] for i in range(0, len(share), ga)]
    return out


def test_the_order_model_gives_each_process_its_batches_in_every_epoch(uneven_run):
    root, ga = uneven_run
    batch = BatchSection(batch_size=BATCH, world_size=WORLD, grad_accum=ga, seed=SEED, loader="accelerate",
                         even_batches=False)
    for e in range(EPOCHS):
        want = _shares(e)
        assert [len(w) for w in want] == [MOST, MOST - 1]
        order = epoch_order(N, batch, e)
        for p in range(WORLD):
            got = [s["rows"] for s in _seen(root, p) if s["epoch"] == e]
            assert got == want[p], (e, p)  # accelerate itself
            assert [mb.tolist() for mb in order.ranks[p]] == want[p], (e, p)  # the order model
        assert order.steps == math.ceil(MOST / ga)


def test_the_ledger_numbers_every_process_by_its_own_steps(uneven_run):
    """Process 1 trains fewer micro-batches an epoch (4 to process 0's 5); each process's epoch e starts at
    its own step ``e x ceil(share / ga)``, the count its own loop keeps (``seen{p}.jsonl``). Before, process
    1's epochs were numbered by process 0's count (its epoch 1 from step 5 with ga 1)."""
    root, ga = uneven_run
    led = read_ledger(root / "run")
    for p in range(WORLD):
        share = len(_shares(0)[p])
        assert share == (MOST if p == 0 else MOST - 1)
        spe = math.ceil(share / ga)
        want = sorted((e * spe + k // ga, k % ga, e, rows) for e in range(EPOCHS) for k, rows in enumerate(_shares(e)[p]))
        seen = _seen(root, p)  # what the process's own loop counted
        assert sorted((s["optimizer_step"], s["micro_batch"] % ga, s["epoch"], s["rows"]) for s in seen) == want, p
        got = sorted((b.step, b.micro_batch, b.epoch, list(b.indices)) for per in led.batches[p].values() for b in per)
        assert got == want, p


def test_order_verify_passes_with_no_divergent_step(uneven_run):
    root, _ga = uneven_run
    rc, out, err = cli("order", "verify", str(root / "run"), "--rows", str(N), "--format", "json")
    assert rc == 0, out + err
    res = json.loads(out)["result"]
    assert res["passed"] and res["first_divergent_step"] is None and not res["findings"], res
    assert res["seen_twice"]["count"] == 0 and res["never_seen"]["count"] == 0
    assert res["plan"]["even_batches"] is False


def test_trace_names_the_bad_step_and_each_process_s_rows_of_it(uneven_run):
    root, ga = uneven_run
    spe = math.ceil(MOST / ga)
    step = BAD_EPOCH * spe + BAD_MICRO // ga
    bad = _shares(BAD_EPOCH)[0][BAD_MICRO][BAD_POS]
    rc, res, err = trace_json(str(root / "log.jsonl"), "--data", str(root / "data"), "--ledger", str(root / "run"),
                              "--config", str(root / "cols.toml"), "--step", str(step))
    assert rc == 1, err  # the loss is NaN from the row's first step (epoch 0) on
    want = {str(p): [i for mb in _own_steps(p, ga)[step] for i in mb]
            for p in range(WORLD) if step < len(_own_steps(p, ga))}
    assert list(want) == ["0"]  # process 1's own count ends at 3 x ceil(4 / ga) steps, before this one
    assert [s["rows"] for s in _seen(root, 0) if s["optimizer_step"] == step] == _own_steps(0, ga)[step]
    assert max(s["optimizer_step"] for s in _seen(root, 1)) < step
    assert res["data"]["rows"]["steps"][str(step)] == want
    assert res["data"]["rows"]["row_checks"] == {str(bad): ["finite.nan:x1"]}


@pytest.mark.parametrize("source", ["ledger", "plan"])
def test_trace_of_process_1_s_own_log_in_a_later_epoch_names_its_rows(uneven_run, source):
    """Process 1's own log (``log-rank1.jsonl``, its own step count) at its step 1 of epoch 1: the rows it
    trained there (``seen1.jsonl``), from the ledger and from the plan alike. Before, process 1's epoch 1
    was taken to start at process 0's count (step 5 with ga 1: [34, 63, 19, ...] trained, [40, 13, 46, ...]
    named)."""
    root, ga = uneven_run
    spe1 = math.ceil((MOST - 1) / ga)  # process 1's own steps an epoch
    step = 1 * spe1 + 1
    trained = [s["rows"] for s in _seen(root, 1) if s["optimizer_step"] == step]
    assert trained == _own_steps(1, ga)[step] == _shares(1)[1][ga:2 * ga]
    assert [s["epoch"] for s in _seen(root, 1) if s["optimizer_step"] == step] == [1] * ga
    if source == "ledger":
        args = ["--ledger", str(root / "run"), "--config", str(root / "cols.toml")]
    else:
        (root / "plan.toml").write_text(COLUMNS + f"[batch]\nbatch_size = {BATCH}\nworld_size = {WORLD}\n"
                                        f"seed = {SEED}\nepochs = {EPOCHS}\ngrad_accum = {ga}\n"
                                        'loader = "accelerate"\neven_batches = false\n')
        args = ["--config", str(root / "plan.toml")]
    rc, res, err = trace_json(str(root / "log-rank1.jsonl"), "--data", str(root / "data"), *args,
                              "--step", str(step))
    assert rc in (0, 1), err
    got = res["data"]["rows"]["steps"][str(step)]
    assert got["1"] == [i for mb in trained for i in mb]
    if source == "plan":  # the own numbering's one blind spot said: a loop joined at each epoch's end
        assert "enters DDP's join" in res["data"]["source"]["description"]


def test_a_log_counting_micro_batches_names_the_rows_of_a_later_epoch(uneven_run):
    """The main process's log counts its own micro-batches across epochs (``log_micro.jsonl``), 5 an epoch;
    the ranks' ``#state`` counts differ (5 and 4). Log step ``n`` is micro-batch ``n % 5`` of epoch
    ``n // 5``: process 0's optimizer step ``e x ceil(5 / ga) + k // ga``, micro-batch ``k % ga``; each
    other process's micro-batch ``k % ga`` of its own step of that number, where it has one (process 1,
    ``ceil(4 / ga)`` steps an epoch, has run out by then). Before, the differing counts left the join to
    the plain count ``n // ga`` (epoch 2's micro-batch 2 was taken for step 6's micro-batch 0: another
    micro-batch's rows, the NaN row missed)."""
    root, ga = uneven_run
    if ga == 1:
        pytest.skip("a log of micro-batches needs grad_accum > 1")
    seen0 = _seen(root, 0)
    log = [json.loads(line) for line in (root / "log_micro.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == list(range(len(seen0))) == list(range(EPOCHS * MOST))
    n = BAD_EPOCH * MOST + BAD_MICRO  # the log step of process 0's micro-batch holding the NaN row
    assert seen0[n]["epoch"] == BAD_EPOCH and seen0[n]["micro_batch"] == BAD_MICRO  # what process 0 received
    bad = _shares(BAD_EPOCH)[0][BAD_MICRO][BAD_POS]
    rc, res, err = trace_json(str(root / "log_micro.jsonl"), "--data", str(root / "data"), "--ledger",
                              str(root / "run"), "--config", str(root / "cols.toml"), "--step", str(n),
                              "--step-unit", "micro-batch", "--first-step", "0")
    assert rc == 1, err
    step, mb = seen0[n]["optimizer_step"], BAD_MICRO % ga
    assert step == BAD_EPOCH * math.ceil(MOST / ga) + BAD_MICRO // ga
    want = {str(p): _own_steps(p, ga)[step][mb] for p in range(WORLD)
            if step < len(_own_steps(p, ga)) and mb < len(_own_steps(p, ga)[step])}
    assert want == {"0": _shares(BAD_EPOCH)[0][BAD_MICRO]}
    assert res["data"]["rows"]["steps"][str(n)] == want
    assert res["data"]["rows"]["row_checks"] == {str(bad): ["finite.nan:x1"]}
    assert res["convention"]["epoch_micro_batches"] == MOST
