"""Real single-process loops over ``DataLoader(ds, batch_size, shuffle=True, drop_last,
generator=torch.Generator().manual_seed(SEED))`` (torch's RandomSampler), 3 epochs, traced back to their
rows with ``[batch] sampler = "random"``: every step's rows are what the loop itself received from the
loader here, never read back from datacheck.

The data: 200 two-feature rows in 3 JSONL shards, ``x1`` of global row ``BAD`` NaN. The loop skips the
update of a step whose loss is not finite (so the model stays finite) and logs every optimizer step,
0-based; the loss is NaN once per epoch, at the step holding ``BAD``. ``record_batches`` records the
ledger ``order verify`` reads.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from realruns import SHARD_NAMES, cli, place, trace_json, write_shards

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader  # noqa: E402

from datacheck.execute.plan import build_plan, rows_of_step  # noqa: E402
from datacheck.io.ledger import read_ledger  # noqa: E402
from datacheck.model.config import load_config  # noqa: E402
from datacheck.torch import record_batches  # noqa: E402

N, SIZES, BATCH, SEED, EPOCHS, BAD = 200, (70, 60, 70), 16, 9, 3, 123
FEATURES = '[columns]\nfeatures = ["x1", "x2"]\nlabel = "label"\n'


def _facts(drop_last: bool, sampler: str | None = "random") -> str:
    return (FEATURES + f"[batch]\nbatch_size = {BATCH}\nseed = {SEED}\nepochs = {EPOCHS}\n"
            f"drop_last = {str(drop_last).lower()}\n" + (f'sampler = "{sampler}"\n' if sampler else ""))


def _run(root: Path, drop_last: bool, workers: int) -> list[list[int]]:
    """The loop; returns the rows (dataset indices) of each optimizer step, as the loader gave them."""
    g = torch.Generator().manual_seed(3)
    xs = torch.randn(N, 2, generator=g)
    rows = [{"x1": float(a), "x2": float(b), "label": int(a + b > 0)} for a, b in xs.tolist()]
    rows[BAD]["x1"] = float("nan")
    write_shards(root / "data", rows, SIZES)
    (root / "run").mkdir()
    (root / "datacheck.toml").write_text(_facts(drop_last))
    (root / "distributed.toml").write_text(_facts(drop_last, None))
    x = torch.tensor([[r["x1"], r["x2"]] for r in rows])
    y = torch.tensor([r["label"] for r in rows])
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(list(range(N)), batch_size=BATCH, shuffle=True, drop_last=drop_last, num_workers=workers,
                        generator=torch.Generator().manual_seed(SEED))
    loader = record_batches(loader, root / "run")
    steps: list[list[int]] = []
    with open(root / "run" / "metrics.jsonl", "w") as log:
        for _epoch in range(EPOCHS):
            for idx in loader:
                loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
                if torch.isfinite(loss):
                    loss.backward()
                    opt.step()
                    opt.zero_grad()
                log.write(json.dumps({"step": len(steps), "loss": loss.item(), "lr": 0.1}) + "\n")
                steps.append(idx.tolist())
    return steps


@pytest.fixture(scope="module", params=[(False, 0), (True, 0), (False, 1)], ids=["keep_last", "drop_last", "one_worker"])
def run(request, tmp_path_factory):
    drop_last, workers = request.param
    root = tmp_path_factory.mktemp("random_sampler")
    steps = _run(root, drop_last, workers)
    per_epoch = N // BATCH if drop_last else -(-N // BATCH)
    assert len(steps) == EPOCHS * per_epoch
    return root, steps, per_epoch


def _args(root: Path, config: str = "datacheck.toml") -> list[str]:
    return ["--data", str(root / "data"), "--config", str(root / config)]


def _bad_steps(steps: list[list[int]]) -> list[int]:
    return [s for s, rows in enumerate(steps) if BAD in rows]


def test_every_step_of_the_plan_is_the_loops(run):
    root, steps, per_epoch = run
    plan = build_plan([str(root / "data")], load_config(root / "datacheck.toml"))
    assert plan.steps_per_epoch == per_epoch and plan.run_steps == len(steps)
    for s, want in enumerate(steps):
        got = rows_of_step(plan, s)
        assert [r.global_index for r in got] == want, s
        assert [(r.shard, r.row) for r in got] == [place(g, SIZES) for g in want], s


def test_plan_step_on_the_command_line(run):
    root, steps, per_epoch = run
    asked = sorted({0, per_epoch - 1, per_epoch, 2 * per_epoch + 1, len(steps) - 1, *_bad_steps(steps)})
    for s in asked:
        rc, out, err = cli("plan", str(root / "data"), "--config", str(root / "datacheck.toml"), "--step", str(s),
                           "--format", "json", "--no-progress")
        assert rc == 0, err
        res = json.loads(out)["result"]
        assert res["step"]["epoch"] == s // per_epoch and res["step"]["epoch_step"] == s % per_epoch
        assert [r["global_index"] for r in res["step"]["rows"]] == steps[s], s
        assert [(r["shard"], r["row"]) for r in res["step"]["rows"]] == [place(g, SIZES) for g in steps[s]]
        assert res["plan"]["sampler"] == "random" and res["plan"]["world_size"] == 1


def test_the_default_plan_names_other_rows(run):
    """The control: without ``sampler = "random"`` the plan is DistributedSampler's (seed + epoch), whose
    rows are not the loop's at any epoch."""
    root, steps, per_epoch = run
    plan = build_plan([str(root / "data")], load_config(root / "distributed.toml"))
    for e in range(EPOCHS):
        assert [[r.global_index for r in rows_of_step(plan, e * per_epoch + k)] for k in range(per_epoch)] != \
            steps[e * per_epoch:(e + 1) * per_epoch]


def test_trace_finds_the_bad_row_at_the_loops_step(run):
    root, steps, _ = run
    first = _bad_steps(steps)[0]
    rc, res, err = trace_json(str(root / "run" / "metrics.jsonl"), *_args(root), "--first-step", "0")
    assert rc == 1, err
    assert res["first_bad"]["step"] == first and res["data"]["source"]["kind"] == "plan"
    rows = res["data"]["rows"]
    assert rows["steps"][str(first)]["0"] == steps[first]
    assert rows["row_checks"] == {str(BAD): ["finite.nan:x1"]}


def test_trace_of_a_step_in_the_last_epoch(run):
    root, steps, per_epoch = run
    last = _bad_steps(steps)[-1]
    assert last >= 2 * per_epoch  # the row's step in epoch 2
    rc, res, err = trace_json(str(root / "run" / "metrics.jsonl"), *_args(root), "--first-step", "0",
                              "--step", str(last))
    assert rc == 1, err
    assert res["data"]["rows"]["steps"][str(last)]["0"] == steps[last]


def test_the_ledger_and_order_verify_agree(run):
    root, steps, per_epoch = run
    led = read_ledger(root / "run")
    assert [[g for b in led.batches[0][s] for g in b.indices] for s in led.steps] == steps
    rc, out, err = cli("order", "verify", str(root / "run"), "--config", str(root / "datacheck.toml"),
                       "--rows", str(N), "--format", "json")
    res = json.loads(out)["result"]
    assert rc == 0, out + err
    assert res["first_divergent_step"] is None and not res["findings"], res["findings"]
    assert res["plan"]["sampler"] == "random" and res["plan"]["steps_per_epoch"] == per_epoch
    # a config without sampler = "random": the ledger's #state lines record each epoch's RandomSampler draw
    # (its generator's state, which g moved by the base-seed draws and the epochs before), replayed as they are
    rc, out, err = cli("order", "verify", str(root / "run"), "--config", str(root / "distributed.toml"),
                       "--rows", str(N), "--format", "json")
    res = json.loads(out)["result"]
    assert rc == 0, out + err
    assert res["first_divergent_step"] is None and not res["findings"], res["findings"]
    assert res["plan"]["sampler"] == "random_recorded" and list(res["plan"]["epoch_draws"]) == ["0", "1", "2"]


def test_world_size_two_is_refused(tmp_path):
    write_shards(tmp_path / "data", [{"x1": 0.0, "x2": 0.0, "label": 0}] * 20, (20,))
    (tmp_path / "datacheck.toml").write_text(_facts(False) + "world_size = 2\n")
    rc, out, err = cli("plan", str(tmp_path / "data"), "--config", str(tmp_path / "datacheck.toml"), "--no-progress")
    assert rc == 2 and out == ""
    assert "sampler = \"random\" with world_size = 2" in err and "single process" in err
    assert SHARD_NAMES[0] in {p.name for p in (tmp_path / "data").iterdir()}
