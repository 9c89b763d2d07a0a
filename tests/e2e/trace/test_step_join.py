"""The join of a log step to the rows of that optimizer step, on a real torch loop: a
DistributedSampler (shuffle, seed 42), batch 16, grad_accum 2, record_batches writing the ledger, one
NaN planted in the third of three JSONL shards, a JSONL log written after each optimizer update
counting from 1 (as Hugging Face and Megatron count) and another counting from 0. The expected step,
global row, shard and shard row come from the loop's own batches, never from datacheck."""
from __future__ import annotations

import json

import polars as pl
import pytest
from conftest import run_cli

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader, DistributedSampler  # noqa: E402

from datacheck.torch import record_batches  # noqa: E402

SHARD_ROWS, SHARDS, BATCH, ACCUM, SEED = 400, 3, 16, 2, 42
ROWS = SHARD_ROWS * SHARDS
POISON = 2 * SHARD_ROWS + 234  # part-00002 row 234


@pytest.fixture(scope="module")
def loop(tmp_path_factory):
    root = tmp_path_factory.mktemp("join")
    g = torch.Generator().manual_seed(0)
    x = torch.randn(ROWS, 2, generator=g)
    y = (x[:, 0] + x[:, 1] > 0).long()
    x[POISON, 1] = float("nan")
    data = root / "data"
    data.mkdir()
    (root / "run").mkdir()
    for i in range(SHARDS):
        sl = slice(i * SHARD_ROWS, (i + 1) * SHARD_ROWS)
        with open(data / f"part-{i:05d}.jsonl", "w") as f:
            for a, b, c in zip(x[sl, 0].tolist(), x[sl, 1].tolist(), y[sl].tolist()):
                f.write(json.dumps({"x1": a, "x2": b, "label": c}) + "\n")  # NaN written as the JSON token NaN
    (root / "datacheck.toml").write_text(
        '[columns]\nfeatures = ["x1", "x2"]\nlabel = "label"\n'
        f"[batch]\nbatch_size = {BATCH}\ngrad_accum = {ACCUM}\nseed = {SEED}\n")
    sampler = DistributedSampler(range(ROWS), num_replicas=1, rank=0, shuffle=True, seed=SEED)
    loader = record_batches(DataLoader(range(ROWS), batch_size=BATCH, sampler=sampler), root / "run",
                            grad_accum=ACCUM)
    torch.manual_seed(0)  # the model's initial weights: one run, the same in every session
    model = torch.nn.Sequential(torch.nn.Linear(2, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    step, seen, first_nan, total, losses = 0, {}, None, 0.0, []
    with open(root / "run" / "metrics.jsonl", "w") as one, open(root / "run" / "metrics0.jsonl", "w") as zero:
        for i, idx in enumerate(loader):
            loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx]) / ACCUM
            loss.backward()
            total += loss.item()  # the step's loss: the mean over its micro-batches, as Hugging Face logs it
            seen.setdefault(step, []).extend(idx.tolist())
            if (i + 1) % ACCUM == 0:
                opt.step()
                opt.zero_grad()
                if first_nan is None and total != total:
                    first_nan = step
                losses.append(total)
                one.write(json.dumps({"step": step + 1, "loss": total}) + "\n")
                zero.write(json.dumps({"step": step, "loss": total}) + "\n")
                step, total = step + 1, 0.0
    del loader
    bad_step = next(k for k, rows in seen.items() if POISON in rows)
    return root, data, seen, bad_step, first_nan, losses


def _trace(root, log, *more):
    return run_cli("trace", str(root / "run" / log), "--data", str(root / "data"), "--config",
                   str(root / "datacheck.toml"), *more)


@pytest.mark.slow
@pytest.mark.parametrize("source", [[], ["--ledger", "LEDGER"]], ids=["plan", "ledger"])
def test_log_step_after_the_update_joins_the_optimizer_step(loop, source):
    root, _, seen, bad_step, first_nan, _ = loop
    assert first_nan == bad_step  # the loop went NaN at the step that loaded the row
    more = [str(root / "run") if a == "LEDGER" else a for a in source]
    r = _trace(root, "metrics.jsonl", "--first-step", "1", "--format", "json", *more)
    assert r.returncode == 1, r.stderr
    res = json.loads(r.stdout)["result"]
    d = res["data"]
    assert res["first_bad"]["step"] == bad_step + 1
    assert d["rows"]["steps"] == {str(bad_step + 1): {"0": seen[bad_step]}}  # the rows of optimizer step bad_step
    assert res["first_bad"]["optimizer_step"] == bad_step
    assert d["step_map"] == f"log step {bad_step + 1} = optimizer step {bad_step}"
    assert d["convention"] == {"first_step": 1, "source": "--first-step", "assumed": False, "unplaced": []}
    assert d["rows"]["failing_rows"] == [{"row": POISON, "shard": "part-00002.jsonl", "shard_row": 234,
                                         "severity": "error", "checks": ["finite.nan:x2"],
                                         # one process, no accumulation: loaded by rank 0 in micro-batch 0
                                         "at": [{"step": bad_step + 1, "rank": 0, "micro_batch": 0}]}]


@pytest.mark.slow
def test_a_log_counting_from_zero_needs_first_step_zero(loop):
    root, _, seen, bad_step, _, _ = loop
    r = _trace(root, "metrics0.jsonl", "--ledger", str(root / "run"), "--first-step", "0", "--format", "json")
    res = json.loads(r.stdout)["result"]
    assert r.returncode == 1 and res["first_bad"]["step"] == bad_step
    assert res["data"]["rows"]["steps"] == {str(bad_step): {"0": seen[bad_step]}}
    assert res["data"]["rows"]["row_checks"] == {str(POISON): ["finite.nan:x2"]}


@pytest.mark.slow
def test_one_output_window_policy_indexing_and_export(loop):
    root, _, seen, bad_step, _, _ = loop
    export = root / "rows.parquet"
    r = _trace(root, "metrics.jsonl", "--ledger", str(root / "run"), "--window", "1", "--export", str(export),
               "--format", "json")
    res = json.loads(r.stdout)["result"]
    d = res["data"]
    assert d["audited_steps"] == [bad_step, bad_step + 1] and res["first_bad"]["audited_window"] == d["audited_steps"]
    # fails_policy follows the policy (--fail-on error): the error findings fail, in the log and the rows
    assert all(f["fails_policy"] == (f["severity"] == "error") for f in res["findings"] + d["rows"]["findings"])
    nan = next(f for f in d["rows"]["findings"] if f["check"] == "finite.nan")
    audited = len(set(seen[bad_step - 1]) | set(seen[bad_step]))
    assert d["rows"]["audited_rows"] == audited and nan["ratio"] == pytest.approx(1 / audited)
    assert nan["rows"] == [POISON] and [e["row"] for e in nan["examples"]] == [POISON]
    assert nan["details"]["locations"] == [{"row": POISON, "shard": "part-00002.jsonl", "shard_row": 234,
                                            "line": 235}]
    ex = pl.read_parquet(export)
    assert ex.columns[:10] == ["_datacheck_row", "_datacheck_line", "_datacheck_shard", "_datacheck_shard_hash",
                               "_datacheck_checks", "_datacheck_step", "_datacheck_rank", "_datacheck_micro_batch",
                               "_datacheck_global_index", "_datacheck_log_step"]
    hit = ex.filter(pl.col("_datacheck_global_index") == POISON).row(0, named=True)
    mb = seen[bad_step].index(POISON) // BATCH
    assert (hit["_datacheck_shard"], hit["_datacheck_row"], hit["_datacheck_step"], hit["_datacheck_micro_batch"],
            hit["_datacheck_log_step"]) == ("part-00002.jsonl", 234, bad_step, mb, bad_step + 1)
    assert ex.height == len(seen[bad_step - 1]) + len(seen[bad_step])
    text = _trace(root, "metrics.jsonl", "--ledger", str(root / "run"), "--window", "1").stdout
    assert (f"first anomaly: log.non_finite at log step {bad_step + 1} = optimizer step {bad_step} (assumed) (metrics.jsonl"
            in text.replace(str(root / "run") + "/", ""))
    assert f"window {bad_step}..{bad_step + 1} audited" in text
    assert "[error] part-00002.jsonl row 234 (global 1034): finite.nan:x2" in text


@pytest.mark.slow
def test_plan_and_trace_export_one_schema(loop, tmp_path):
    root, _, _, bad_step, _, _ = loop
    plan_out, trace_out = tmp_path / "plan.parquet", tmp_path / "trace.parquet"
    r = run_cli("plan", str(root / "data"), "--config", str(root / "datacheck.toml"), "--step", str(bad_step),
                "--export", str(plan_out))
    assert r.returncode == 0, r.stderr
    _trace(root, "metrics.jsonl", "--export", str(trace_out))
    p, t = pl.read_parquet(plan_out), pl.read_parquet(trace_out)
    assert t.columns[:9] == p.columns[:9]
    keys = ["_datacheck_shard", "_datacheck_row", "_datacheck_step", "_datacheck_micro_batch", "_datacheck_global_index"]
    assert t.select(keys).rows() == p.select(keys).rows()


def test_first_step_without_data_is_not_ignored(tmp_path):
    log = tmp_path / "m.jsonl"
    log.write_text("".join(json.dumps({"step": s, "loss": 1.0 if s != 5 else float("nan")}) + "\n" for s in range(1, 9)))
    r = run_cli("trace", str(log), "--first-step", "0")
    assert r.returncode == 1 and "log step 5 = optimizer step 5" in r.stdout
    r = run_cli("trace", str(log), "--window", "2")
    assert r.returncode == 2 and "--window needs --data" in r.stderr


MICRO = ROWS // BATCH  # the loader's length: Hugging Face's steps_in_epoch
HF_HEADER = ("***** Running training *****\n  Num examples = 1,200\n  Num Epochs = 1\n"
             f"  Gradient Accumulation steps = {ACCUM}\n  Total optimization steps = {-(-MICRO // ACCUM)}\n")


EVERY = 5  # logging_steps


def _console(losses, header):
    """The Trainer's console with logging_steps 5 and disable_tqdm: one dict per 5 steps, the mean loss
    of those steps, epoch = micro-batches done / the loader's length (``Trainer._inner_training_loop``)."""
    out = [HF_HEADER] if header else []
    for k in range(EVERY, len(losses) + 1, EVERY):
        mean = sum(losses[k - EVERY:k]) / EVERY
        out.append("{'loss': %r, 'grad_norm': %r, 'learning_rate': 0.05, 'epoch': %r}\n"
                   % (mean, mean, round(ACCUM * k / MICRO, 4)))
    return "".join(out)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["header", "config", "trainer_state"])
def test_hf_console_without_steps_is_placed_by_epoch(loop, how):
    root, _, seen, bad_step, _, losses = loop
    log = root / "run" / how / "console.log"
    log.parent.mkdir(exist_ok=True)
    log.write_text(_console(losses, how == "header"))
    if how == "trainer_state":  # the Trainer's own log_history beside the console: the same epochs, with steps
        hist = [{"loss": 0.5, "epoch": round(ACCUM * k / MICRO, 4), "step": k} for k in range(EVERY, len(losses) + 1, EVERY)]
        (log.parent / "checkpoint-30").mkdir(exist_ok=True)
        (log.parent / "checkpoint-30" / "trainer_state.json").write_text(json.dumps({"log_history": hist}))
    logged = -(-(bad_step + 1) // EVERY) * EVERY  # the first logged step at or after the bad one
    assert logged <= len(losses)
    more = ["--config", str(root / "nobatch.toml")] if how == "trainer_state" else []
    (root / "nobatch.toml").write_text('[columns]\nfeatures = ["x1", "x2"]\nlabel = "label"\n')
    r = run_cli("trace", str(log), "--data", str(root / "data"), "--config", str(root / "datacheck.toml"), *more,
                "--ledger", str(root / "run"), "--format", "json")
    assert r.returncode == 1, r.stderr
    res = json.loads(r.stdout)["result"]
    assert res["first_bad"]["step"] == logged and res["first_bad"]["window"] == [logged - EVERY + 1, logged]
    assert res["convention"]["first_step"] == 1 and not res["convention"]["unplaced"]
    d = res["data"]
    assert d["audited_steps"] == [logged - EVERY + 1, logged]
    assert d["rows"]["steps"][str(bad_step + 1)] == {"0": seen[bad_step]}
    assert [r["row"] for r in d["rows"]["failing_rows"]] == [POISON]


@pytest.mark.slow
def test_hf_console_without_steps_or_facts_names_no_rows(loop, tmp_path):
    root, _, _, _, _, losses = loop
    log = root / "run" / "console-bare.log"
    log.write_text(_console(losses, False))
    cfg = tmp_path / "nobatch.toml"
    cfg.write_text('[columns]\nfeatures = ["x1", "x2"]\nlabel = "label"\n')
    r = run_cli("trace", str(log), "--data", str(root / "data"), "--config", str(cfg), "--ledger", str(root / "run"))
    assert r.returncode == 2 and "--steps-per-epoch N" in r.stderr and "trainer_state.json" in r.stderr
    r = run_cli("trace", str(log), "--data", str(root / "data"), "--config", str(cfg), "--ledger", str(root / "run"),
                "--steps-per-epoch", str(-(-MICRO // ACCUM)), "--format", "json")
    assert r.returncode == 1 and json.loads(r.stdout)["result"]["data"]["rows"]["failing_rows"][0]["row"] == POISON


def test_options_that_would_do_nothing_are_refused(tmp_path):
    log = tmp_path / "m.jsonl"
    log.write_text(json.dumps({"step": 1, "loss": 1.0}) + "\n")
    r = run_cli("trace", str(log), "--allow-data-mismatch")
    assert r.returncode == 2 and "--allow-data-mismatch needs --data" in r.stderr
    r = run_cli("trace", str(log), "--steps-per-epoch", "10")
    assert r.returncode == 2 and "the logs have none" in r.stderr


@pytest.mark.slow
def test_a_step_before_the_first_is_refused(loop):
    root = loop[0]
    r = _trace(root, "metrics.jsonl", "--step", "0", "--first-step", "1")
    assert r.returncode == 2 and "log step 0 is before the log's first optimizer step, 1" in r.stderr
