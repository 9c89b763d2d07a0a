"""Real tiny runs that break each way (a torch MLP on CPU, a few hundred steps each, well under a
second): the learning rate x100, an fp16 overflow under a GradScaler, a planted bad row, a logging bug.
``datacheck trace`` gives each its class and the four answers; the expectations are read from the
run's own log, never from datacheck."""
from __future__ import annotations

import json
import math

import polars as pl
import pytest
from conftest import run_cli

torch = pytest.importorskip("torch")
torch.set_num_threads(1)  # a 16-unit MLP: threads only add overhead

ROWS, BATCH = 400, 8


def _data(seed=0, bad_row=None):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(ROWS, 2, generator=g)
    y = (x[:, 0] * x[:, 1] > 0).long()
    if bad_row is not None:
        x[bad_row, 0] = float("nan")
    return x, y


def _model(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(2, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))


def _write(path, rows):
    def enc(v):
        return str(v) if isinstance(v, float) and not math.isfinite(v) else v
    path.write_text("".join(json.dumps({k: enc(v) for k, v in r.items()}) + "\n" for r in rows))
    return path


def _train(lr, steps=150, opt="adam", bad_row=None, scaler_overflow=(), log_micro=False, grad_accum=1):
    """One run; returns the records it logs (step counted after the update, from 1)."""
    x, y = _data(bad_row=bad_row)
    model = _model()
    o = torch.optim.Adam(model.parameters(), lr=lr) if opt == "adam" else torch.optim.SGD(model.parameters(), lr=lr)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 16, growth_interval=1000) if scaler_overflow is not None \
        and len(scaler_overflow) else None
    rows = []
    micro = 0
    for step in range(1, steps + 1):
        o.zero_grad()
        losses = []
        for _ in range(grad_accum):
            lo = (micro * BATCH) % ROWS
            xb, yb = x[lo:lo + BATCH], y[lo:lo + BATCH]
            micro += 1
            loss = torch.nn.functional.cross_entropy(model(xb), yb) / grad_accum
            (scaler.scale(loss) if scaler else loss).backward()
            losses.append(loss.item() * grad_accum)
            if log_micro:  # the bug: the micro-batch loss logged under the optimizer step's number
                rows.append({"step": step, "loss": losses[-1], "lr": lr})
        if scaler:
            if step in scaler_overflow:  # an fp16 overflow in backward: an inf gradient
                next(model.parameters()).grad[0, 0] = float("inf")
            scaler.unscale_(o)
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf")).item()
        if scaler:
            scaler.step(o)
            scaler.update()
        else:
            o.step()
        if not log_micro:
            r = {"step": step, "loss": sum(losses) / len(losses), "grad_norm": gn, "lr": lr}
            if scaler:
                r["loss_scale"] = scaler.get_scale()
            rows.append(r)
    return rows


def _verdict(tmp_path, name, rows, *more):
    p = _write(tmp_path / f"{name}.jsonl", rows)
    r = run_cli("trace", str(p), "--format", "json", *more)
    assert r.returncode in (0, 1), r.stderr
    text = run_cli("trace", str(p), *more).stdout
    return json.loads(r.stdout)["result"], text


def _loud(res):
    return [f for f in res["findings"] if f["severity"] in ("warn", "error")]


def test_baseline_run_is_clean(tmp_path):
    rows = _train(lr=1e-2)
    assert rows[-1]["loss"] < rows[0]["loss"]
    res, text = _verdict(tmp_path, "base", rows)
    assert _loud(res) == [] and text.startswith("1. from which step: no anomaly at warn or above")


def test_lr_x100_is_dynamics_from_the_step_the_loss_left_its_band(tmp_path):
    rows = _train(lr=1.0)  # 100x the baseline's 1e-2
    losses = [r["loss"] for r in rows]
    assert all(math.isfinite(v) for v in losses)  # Adam bounds the update: the numbers stay finite
    res, text = _verdict(tmp_path, "hot", rows)
    v = res["verdict"]
    first = v["anomalies"][0]
    assert first["class"] == "dynamics"
    # the run's own log: the loss never returns under 1.1x its early best after the onset
    onset = first["step"]
    assert losses[onset - 1] > min(losses[:onset - 1])
    assert v["answers"]["nan_or_inf"]["kind"] is None
    assert "3. NaN or inf: neither" in text and "2. all ranks or one: one log, no rank named" in text


def test_fp16_overflow_under_a_grad_scaler_is_numeric_and_transient(tmp_path):
    over = (60, 61, 62, 63)
    rows = _train(lr=1e-2, scaler_overflow=over)
    scales = [r["loss_scale"] for r in rows]
    assert scales[over[0] - 2] == 2.0 ** 16 and scales[over[-1] - 1] == 2.0 ** 16 / 2 ** len(over)
    res, text = _verdict(tmp_path, "fp16", rows)
    v = res["verdict"]
    first = v["anomalies"][0]
    assert (first["class"], first["step"]) == ("numeric", over[0])
    assert first["check"] in ("log.non_finite", "log.loss_scale_collapse")  # both start at that step
    checks = {a["check"] for a in v["anomalies"]}
    assert {"log.non_finite", "log.loss_scale_collapse"} <= checks
    nf = v["answers"]["nan_or_inf"]
    assert nf["kind"] == "inf" and nf["persistent"] is False  # the scaler skipped: finite after
    assert f"1. from which step: step {over[0]} ({first['check']}): lr 0.01, loss scale 3.277e+04" in text
    assert "last good step 59: lr 0.01, loss scale 6.554e+04" in text


def test_planted_bad_row_is_data_with_its_rows(tmp_path):
    bad = 101  # in the 13th batch of 8 (rows 96..103): log step 13, read in order (no shuffle)
    x, y = _data(bad_row=bad)
    data = tmp_path / "data"
    data.mkdir()
    pl.DataFrame({"x1": x[:, 0].tolist(), "x2": x[:, 1].tolist(), "label": y.tolist()}).write_parquet(
        data / "train.parquet")
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text('[columns]\nfeatures = ["x1", "x2"]\nlabel = "label"\n[batch]\nbatch_size = 8\nshuffle = false\n')
    rows = _train(lr=1e-2, steps=40, opt="sgd", bad_row=bad)
    first_nan = next(r["step"] for r in rows if not math.isfinite(r["loss"]))
    assert first_nan == bad // BATCH + 1
    res, text = _verdict(tmp_path, "bad", rows, "--data", str(data), "--config", str(cfg))
    v = res["verdict"]
    first = v["anomalies"][0]
    assert (first["class"], first["step"]) == ("data", first_nan)
    assert v["answers"]["rows"]["bad_rows"] == [bad]
    assert f"4. the rows of that step: 8 row(s) in step {first_nan}; 1 fail a check: train.parquet row {bad} (global {bad}): " in text
    assert f"    evidence: train.parquet row {bad} (global {bad}): fails " in text


def test_logging_bug_micro_batch_losses_under_one_step_is_metric(tmp_path):
    rows = _train(lr=1e-2, steps=30, log_micro=True, grad_accum=4)
    assert [r["step"] for r in rows[:8]] == [1, 1, 1, 1, 2, 2, 2, 2]
    res, _ = _verdict(tmp_path, "bug", rows)
    a = next(a for a in res["verdict"]["anomalies"] if a["check"] == "log.duplicate_steps")
    assert (a["class"], a["step"]) == ("metric", 1)
    assert a["evidence"][0]["loss"] == rows[0]["loss"] and a["evidence"][1]["loss"] == rows[1]["loss"]


@pytest.mark.slow
def test_replay_from_the_command_line_folds_into_the_verdict(tmp_path):
    """--replay module:fn replays the bad step's rows in train, eval and fp32: the NaN row is non-finite
    in every mode, so the anomaly is data, with the replay's modes as evidence."""
    bad = 101
    x, y = _data(bad_row=bad)
    data = tmp_path / "data"
    data.mkdir()
    pl.DataFrame({"x1": x[:, 0].tolist(), "x2": x[:, 1].tolist(), "label": y.tolist()}).write_parquet(
        data / "train.parquet")
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text('[columns]\nfeatures = ["x1", "x2"]\nlabel = "label"\n[batch]\nbatch_size = 8\nshuffle = false\n')
    ckpt = tmp_path / "init.pt"
    torch.save(_model().state_dict(), ckpt)
    (tmp_path / "replaymodel.py").write_text(
        "import torch\n"
        "def build():\n"
        "    m = torch.nn.Sequential(torch.nn.Linear(2, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))\n"
        "    return m, lambda out, y: torch.nn.functional.cross_entropy(out, y, reduction='none')\n")
    rows = _train(lr=1e-2, steps=40, opt="sgd", bad_row=bad)
    p = _write(tmp_path / "bad.jsonl", rows)
    r = run_cli("trace", str(p), "--data", str(data), "--config", str(cfg), "--replay",
                f"{tmp_path / 'replaymodel.py'}:build", "--checkpoint", str(ckpt), "--format", "json")
    assert r.returncode == 1, r.stderr
    v = json.loads(r.stdout)["result"]["verdict"]
    step = bad // BATCH + 1
    assert v["replay"]["step"] == step and v["replay"]["class"] == "data"
    assert all(m["bad_rows"] == [bad] and m["finite"] is False for m in v["replay"]["modes"].values())
    first = v["anomalies"][0]
    assert first["class"] == "data" and first["why"].startswith("replay: rows [101] give a non-finite loss in every mode")
    assert {e.get("replay") for e in first["evidence"]} >= {"train", "eval", "fp32"}
    text = run_cli("trace", str(p), "--data", str(data), "--config", str(cfg), "--replay",
                   f"{tmp_path / 'replaymodel.py'}:build").stdout
    assert f"replay of step {step} (" in text and "train loss nan, non-finite rows [101]" in text
    assert run_cli("trace", str(p), "--replay", "x:y").returncode == 2  # --replay needs --data


def test_periodic_spikes_at_the_epoch_boundary_are_data(tmp_path):
    """100 rows in batches of 8: 13 steps per epoch, the 13th holds the 4-row tail. A loss that spikes on
    every epoch's last step has the plan's period: the verdict puts it in the data class (the tail batch)."""
    rows_n, bs = 100, 8
    spe = -(-rows_n // bs)
    data = tmp_path / "data"
    data.mkdir()
    pl.DataFrame({"x1": [float(i) for i in range(rows_n)], "x2": [1.0] * rows_n,
                  "label": [i % 2 for i in range(rows_n)]}).write_parquet(data / "train.parquet")
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text(f'[columns]\nfeatures = ["x1", "x2"]\nlabel = "label"\n[batch]\nbatch_size = {bs}\nshuffle = false\n'
                   'epochs = 5\n')
    log = [{"step": s, "loss": 4.0 if s % spe == 0 else 1.0 + 0.01 * (s % 3)} for s in range(1, 5 * spe + 1)]
    res, text = _verdict(tmp_path, "per", log, "--data", str(data), "--config", str(cfg))
    a = next(a for a in res["verdict"]["anomalies"] if a["check"] == "log.periodic_spikes")
    assert a["class"] == "data" and f"the plan's {spe} steps per epoch" in a["why"]
    assert res["data"]["rows"]["steps"] == {str(spe): {"0": list(range((spe - 1) * bs, rows_n))}}  # the 4-row tail
