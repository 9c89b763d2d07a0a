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
from datacheck.trace.identity import log_data_identity

torch = pytest.importorskip("torch")

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
    report = api.audit([str(data)], config={"columns": {"features": ["x1", "x2"], "label": "label"}})
    ident = io.StringIO()
    log_data_identity(report, stream=ident)
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


def test_the_loop_went_nan_at_the_poisoned_step(run):
    _, _, first_nan, poison_step = run
    assert poison_step <= 300 and first_nan == poison_step


@pytest.mark.parametrize("log", ["metrics.jsonl", "trainer_state.json", "metrics.csv", "tb", "console.log"])
def test_trace_names_the_step_the_row_and_its_finding(run, log):
    root, data, first_nan, _ = run
    cfg = root / "datacheck.toml"
    cfg.write_text('[columns]\nfeatures = ["x1", "x2"]\nlabel = "label"\n')
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
    assert ex.height == 2 * BATCH and ex.filter(pl.col("__dc_row") == POISON)["__dc_step"].to_list() == [first_nan]
    assert ex.filter(pl.col("__dc_row") == POISON)["x1"].is_nan().to_list() == [True]
    if log == "trainer_state.json":
        assert "logging_nan_inf_filter" in res["findings"][0]["message"]


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
