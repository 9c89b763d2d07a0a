"""End to end: a tiny torch model trained 300 steps on data with one planted NaN feature, its own logs
(JSONL, trainer_state.json, CSV, TensorBoard) and per-step ledger (OLMo data-indices format) written by
the loop; ``datacheck trace`` names the step whose loss first went non-finite, the poisoned row among
that step's rows, and its finding."""
from __future__ import annotations

import contextlib
import csv
import gzip
import io
import json

import polars as pl
import pytest

from datacheck import api
from datacheck.cli.main import main
from datacheck.model.identity import log_data_identity

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader, DistributedSampler  # noqa: E402

from datacheck.torch import record_batches  # noqa: E402

ROWS, BATCH, STEPS, POISON = 1200, 8, 300, 1000


def cli(*args):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(args))
    assert "Traceback" not in err.getvalue()
    return rc, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("e2e")
    g = torch.Generator().manual_seed(0)
    x = torch.randn(ROWS, 2, generator=g)
    y = (x[:, 0] + x[:, 1] > 0).long()
    x[POISON, 0] = float("nan")
    data = root / "data"
    data.mkdir()
    pl.DataFrame({"x1": x[:, 0].tolist(), "x2": x[:, 1].tolist(), "label": y.tolist()}).write_parquet(data / "train.parquet")
    # written here, not by a test: the config lookup from data/ finds it whichever tests ran before
    (root / "datacheck.toml").write_text('[columns]\nfeatures = ["x1", "x2"]\nlabel = "label"\n')
    report = api.audit([str(data)], config={"columns": {"features": ["x1", "x2"], "label": "label"}})
    ident = io.StringIO()
    log_data_identity(report, stream=ident)
    torch.manual_seed(0)  # the model's initial weights: one run, the same in every session
    model = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    order = torch.randperm(ROWS, generator=g)
    ledger = root / "run" / "data-indices"
    ledger.mkdir(parents=True)
    hist, first_nan = [], None
    from torch.utils.tensorboard import SummaryWriter
    tb = SummaryWriter(str(root / "run" / "tb"))
    with gzip.open(ledger / "rank0.tsv.gz", "wt") as led, open(root / "run" / "metrics.jsonl", "w") as js:
        js.write(ident.getvalue())  # not JSON: counted as an unparsed line, the identity is in the text log below
        for step in range(1, STEPS + 1):
            idx = order[(step - 1) * BATCH % ROWS:][:BATCH]
            loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1e9)
            opt.step()
            led.write(f"{step}\t" + "\t".join(str(int(i)) for i in idx) + "\n")
            rec = {"step": step, "loss": loss.item(), "grad_norm": gn.item(), "learning_rate": 0.1, "epoch": step * BATCH / ROWS}
            hist.append(rec)
            js.write(json.dumps(rec) + "\n")
            tb.add_scalar("train/loss", loss.item(), step)
            tb.add_scalar("train/grad_norm", gn.item(), step)
            tb.add_scalar("train/learning_rate", 0.1, step)
            if first_nan is None and loss.item() != loss.item():
                first_nan = step
    tb.close()
    (root / "run" / "trainer_state.json").write_text(json.dumps({"log_history": hist, "logging_steps": 1}))
    with open(root / "run" / "metrics.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["step", "epoch", "train_loss", "grad_norm", "lr"])
        w.writeheader()
        for r in hist:
            w.writerow({"step": r["step"], "epoch": r["epoch"], "train_loss": r["loss"], "grad_norm": r["grad_norm"],
                        "lr": r["learning_rate"]})
    (root / "run" / "console.log").write_text(ident.getvalue() + "".join(
        f"step={r['step']} loss={r['loss']} lr=0.1\n" for r in hist))
    poison_step = 1 + list(order.tolist()).index(POISON) // BATCH
    return root, data, first_nan, poison_step


@pytest.mark.slow
def test_the_loop_went_nan_at_the_poisoned_step(run):
    _, _, first_nan, poison_step = run
    assert poison_step <= 300 and first_nan == poison_step


@pytest.mark.slow  # its module fixture takes 2 s or more
@pytest.mark.parametrize("log", ["metrics.jsonl", "trainer_state.json", "metrics.csv", "tb", "console.log"])
def test_trace_names_the_step_the_row_and_its_finding(run, log):
    root, data, first_nan, _ = run
    cfg = root / "datacheck.toml"
    export = root / f"replay-{log}.parquet"
    rc, out, err = cli("trace", str(root / "run" / log), "--data", str(data), "--config", str(cfg),
                       "--ledger", str(root / "run"), "--window", "1", "--export", str(export), "--format", "json")
    assert rc == 1, err
    res = json.loads(out)["result"]
    assert res["first_bad"]["check"] == "log.non_finite" and res["first_bad"]["step"] == first_nan
    rows = res["data"]["rows"]
    assert POISON in rows["steps"][str(first_nan)]["0"]
    assert set(rows["steps"]) == {str(first_nan - 1), str(first_nan)}
    assert rows["row_checks"] == {str(POISON): ["finite.nan:x1"]}
    f = [x for x in rows["findings"] if x["check"] == "finite.nan"]
    assert f and f[0]["rows"] == [POISON] and f[0]["column"] == "x1"
    ex = pl.read_parquet(export)
    hit = ex.filter(pl.col("_datacheck_global_index") == POISON)
    assert ex.height == 2 * BATCH and hit["_datacheck_log_step"].to_list() == [first_nan]
    # one export schema with plan and inspect: the shard row, the 0-based optimizer step, the checks
    assert hit["_datacheck_shard"].to_list() == ["train.parquet"] and hit["_datacheck_row"].to_list() == [POISON]
    assert hit["_datacheck_step"].to_list() == [first_nan - 1] and hit["_datacheck_checks"].to_list() == [["finite.nan:x1"]]
    assert hit["x1"].is_nan().to_list() == [True]
    if log == "trainer_state.json":
        assert "logging_nan_inf_filter" in res["findings"][0]["message"]


@pytest.mark.slow  # its module fixture takes 2 s or more
def test_identity_mismatch_is_refused(run, tmp_path):
    root, data, first_nan, _ = run
    other = tmp_path / "other"
    other.mkdir()
    df = pl.read_parquet(data / "train.parquet")
    df.with_columns(pl.col("x2") * 2).write_parquet(other / "train.parquet")
    rc, _, err = cli("trace", str(root / "run" / "console.log"), "--data", str(other), "--ledger", str(root / "run"))
    assert rc == 2 and "differs from the one the run logged" in err
    rc, out, _ = cli("trace", str(root / "run" / "console.log"), "--data", str(data), "--ledger", str(root / "run"),
                     "--format", "json")
    assert rc == 1 and json.loads(out)["result"]["logs"][0]["identity"] is not None


# The same poisoned data, trained the way trainers load it: one DataLoader per rank with torch's
# DistributedSampler (world_size 2, seed 7, set_epoch each epoch) and batch size 8, the ranks' losses
# averaged as DDP averages their gradients. [batch] in datacheck.toml states those facts: trace without
# --ledger takes the step's rows from the simulated plan and must name the same rows as the ledger
# record_batches wrote during that loop (steps numbered from 1, as the log numbers them).
WS, SEED, EPOCHS = 2, 7, 2


@pytest.fixture(scope="module")
def sampled_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("e2e_sampled")
    (root / "run").mkdir()
    g = torch.Generator().manual_seed(1)
    x = torch.randn(ROWS, 2, generator=g)
    y = (x[:, 0] - x[:, 1] > 0).long()
    x[POISON, 0] = float("nan")
    data = root / "data"
    data.mkdir()
    half = ROWS // 2  # two shards: global index = row of train-0 then train-1, in index order
    for i, sl in enumerate((slice(0, half), slice(half, ROWS))):
        pl.DataFrame({"x1": x[sl, 0].tolist(), "x2": x[sl, 1].tolist(), "label": y[sl].tolist()}).write_parquet(
            data / f"train-{i}.parquet")
    cfg = root / "datacheck.toml"
    cfg.write_text('[columns]\nfeatures = ["x1", "x2"]\nlabel = "label"\n'
                   f"[batch]\nbatch_size = {BATCH}\nworld_size = {WS}\nseed = {SEED}\nepochs = {EPOCHS}\n")
    idx = list(range(ROWS))
    samplers = [DistributedSampler(idx, num_replicas=WS, rank=r, shuffle=True, seed=SEED) for r in range(WS)]
    loaders = [record_batches(DataLoader(idx, batch_size=BATCH, sampler=s), root / "run", rank=r)  # steps from 0
               for r, s in enumerate(samplers)]
    torch.manual_seed(0)  # the model's initial weights: one run, the same in every session
    model = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    step, first_nan, seen = 0, None, {}
    with open(root / "run" / "metrics.jsonl", "w") as js:
        for epoch in range(EPOCHS):
            for s in samplers:
                s.set_epoch(epoch)
            for batches in zip(*loaders):
                step += 1
                seen[step] = {r: b.tolist() for r, b in enumerate(batches)}
                loss = sum(torch.nn.functional.cross_entropy(model(x[b]), y[b]) for b in batches) / WS
                opt.zero_grad()
                loss.backward()
                opt.step()
                js.write(json.dumps({"step": step, "loss": loss.item(), "learning_rate": 0.1}) + "\n")
                if first_nan is None and loss.item() != loss.item():
                    first_nan = step
    return root, data, cfg, first_nan, seen


@pytest.mark.slow
def test_trace_without_ledger_uses_the_simulated_plan(sampled_run):
    root, data, cfg, first_nan, seen = sampled_run
    assert first_nan is not None and any(POISON in b for b in seen[first_nan].values())
    rc, out, err = cli("trace", str(root / "run" / "metrics.jsonl"), "--data", str(data), "--config", str(cfg),
                       "--window", "1", "--format", "json")
    assert rc == 1, err
    res = json.loads(out)["result"]
    assert res["first_bad"]["step"] == first_nan
    d = res["data"]
    src = d["source"]
    assert d["convention"]["first_step"] == 1 and d["convention"]["assumed"]  # a bare "step" key: assumed from 1
    assert d["step_map"] == f"log step {first_nan} = optimizer step {first_nan - 1}"
    assert src["kind"] == "plan" and src["steps_per_epoch"] == ROWS // (BATCH * WS)
    assert src["facts"]["world_size"] == WS and src["facts"]["seed"] == SEED and "simulated batch plan" in src["description"]
    steps = d["rows"]["steps"]
    assert steps == {str(s): {str(r): seen[s][r] for r in range(WS)} for s in (first_nan - 1, first_nan)}
    assert d["rows"]["row_checks"] == {str(POISON): ["finite.nan:x1"]}
    # the ledger recorded during the same loop gives the same rows
    rc, out, _ = cli("trace", str(root / "run" / "metrics.jsonl"), "--data", str(data), "--config", str(cfg),
                     "--ledger", str(root / "run"), "--window", "1", "--format", "json")
    led = json.loads(out)["result"]["data"]
    assert rc == 1 and led["source"]["kind"] == "ledger" and led["source"]["format"] == "datacheck"
    assert led["rows"]["steps"] == steps
    rc, text, _ = cli("trace", str(root / "run" / "metrics.jsonl"), "--data", str(data), "--config", str(cfg))
    assert rc == 1 and "rows from the simulated batch plan (batch_size 8 x world_size 2 x grad_accum 1" in text
    assert "optimizer step = log step - 1" in text
    assert f"first anomaly: log.non_finite at log step {first_nan} = optimizer step {first_nan - 1} (assumed)" in text


@pytest.mark.slow  # its module fixture takes 2 s or more
def test_trace_without_ledger_needs_batch_facts(run):
    root, data, _, _ = run
    cfg = root / "nobatch.toml"
    cfg.write_text('[columns]\nfeatures = ["x1", "x2"]\nlabel = "label"\n')
    rc, _, err = cli("trace", str(root / "run" / "metrics.jsonl"), "--data", str(data), "--config", str(cfg))
    assert rc == 2 and "[batch] batch_size is not set" in err and "--ledger DIR" in err
