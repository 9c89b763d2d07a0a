"""A real two-process CPU run of a Hugging Face ``accelerate`` loop with ``even_batches=False``
(tests/helpers/acceleraterun_ddp.py over gloo, the epochs under ``join_uneven_inputs``), three epochs,
``record_batches(accelerator.prepare(loader), folder)`` on each process.

68 rows in batches of 8 are 9 DataLoader batches per epoch (the last of 4 rows); accelerate's
``BatchSamplerShard`` deals batch ``k`` to process ``k % 2`` and, without ``even_batches``, pads nothing:
process 0 trains 5 batches an epoch (the short one included), process 1 trains 4. The run's optimizer
steps are process 0's: ``ceil(5 / grad_accum)`` an epoch; process 1 has no micro-batch in the epoch's last
step (grad_accum 1 and 2 alike), yet its next epoch starts at the same step as process 0's.

Every expected row and step is computed here from the sampler arithmetic (``DistributedSampler(
num_replicas=1, shuffle=True, seed 7)`` is ``torch.randperm(68)`` of a generator seeded ``7 + epoch``) and
checked against the batches each process received from accelerate itself, never read back from datacheck:
the order model (``epoch_order`` with ``[batch] loader = "accelerate"``, ``even_batches = false``) gives
each process's batches in every epoch; the ledger puts process ``p``'s micro-batch ``k`` of epoch ``e`` at
step ``e x ceil(5 / grad_accum) + k // grad_accum``; ``order verify`` passes with no divergent step; a NaN
feature in a row of process 0's micro-batch 2 of epoch 2: ``trace --step`` of that step names both
processes' rows of it (process 1's from its own epoch 2, which began at the run's step, not at its own
count) and the NaN row among them.
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


def test_the_ledger_numbers_every_process_by_the_runs_steps(uneven_run):
    """Process 1 trains fewer micro-batches an epoch; its epoch e still starts at step e x spe, where process
    0's (whose own counter is the run's: the logged steps) does."""
    root, ga = uneven_run
    spe = math.ceil(MOST / ga)
    assert [s["optimizer_step"] for s in _seen(root, 0)] == [e * spe + k // ga for e in range(EPOCHS)
                                                             for k in range(MOST)]
    led = read_ledger(root / "run")
    for p in range(WORLD):
        got = sorted((b.step, b.micro_batch, b.epoch, list(b.indices)) for per in led.batches[p].values() for b in per)
        want = sorted((e * spe + k // ga, k % ga, e, rows) for e in range(EPOCHS) for k, rows in enumerate(_shares(e)[p]))
        assert got == want, p


def test_order_verify_passes_with_no_divergent_step(uneven_run):
    root, _ga = uneven_run
    rc, out, err = cli("order", "verify", str(root / "run"), "--rows", str(N), "--format", "json")
    assert rc == 0, out + err
    res = json.loads(out)["result"]
    assert res["passed"] and res["first_divergent_step"] is None and not res["findings"], res
    assert res["seen_twice"]["count"] == 0 and res["never_seen"]["count"] == 0
    assert res["plan"]["even_batches"] is False


def test_trace_names_the_bad_step_and_both_processes_rows(uneven_run):
    root, ga = uneven_run
    spe = math.ceil(MOST / ga)
    step = BAD_EPOCH * spe + BAD_MICRO // ga
    bad = _shares(BAD_EPOCH)[0][BAD_MICRO][BAD_POS]
    rc, res, err = trace_json(str(root / "log.jsonl"), "--data", str(root / "data"), "--ledger", str(root / "run"),
                              "--config", str(root / "cols.toml"), "--step", str(step))
    assert rc == 1, err  # the loss is NaN from the row's first step (epoch 0) on
    ks = range((step - BAD_EPOCH * spe) * ga, (step - BAD_EPOCH * spe + 1) * ga)
    want = {str(p): [i for k in ks if k < len(_shares(BAD_EPOCH)[p]) for i in _shares(BAD_EPOCH)[p][k]]
            for p in range(WORLD)}
    assert all(want.values())
    assert res["data"]["rows"]["steps"][str(step)] == want
    assert res["data"]["rows"]["row_checks"] == {str(bad): ["finite.nan:x1"]}


def test_a_log_counting_micro_batches_names_the_rows_of_a_later_epoch(uneven_run):
    """The main process's log counts its own micro-batches across epochs (``log_micro.jsonl``), 5 an epoch;
    the ranks' ``#state`` counts differ (5 and 4). Log step ``n`` is micro-batch ``n % 5`` of epoch
    ``n // 5``: optimizer step ``e x ceil(5 / ga) + k // ga``, micro-batch ``k % ga`` of every process that
    has one. Before, the differing counts left the join to the plain count ``n // ga`` (epoch 2's micro-batch
    2 was taken for step 6's micro-batch 0: another micro-batch's rows, the NaN row missed)."""
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
    want = {str(p): _shares(BAD_EPOCH)[p][BAD_MICRO] for p in range(WORLD) if BAD_MICRO < len(_shares(BAD_EPOCH)[p])}
    assert len(want) == WORLD
    assert res["data"]["rows"]["steps"][str(n)] == want
    assert res["data"]["rows"]["row_checks"] == {str(bad): ["finite.nan:x1"]}
    assert res["convention"]["epoch_micro_batches"] == MOST
