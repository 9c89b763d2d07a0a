"""The data leg (datacheck.trace.data) of a log that counts micro-batches (``--step-unit
micro-batch``) when the data's micro-batches per epoch are not a multiple of ``grad_accum``: each
epoch's last optimizer step holds fewer (torch's loader ends the epoch; accelerate and the Trainer
step there). A log step past the data is said so, with the data's rows and micro-batches (exit 2 when
it is the only step asked; beside the audited rows in a window), never "0 row(s) ... look sound"; a
count that runs on into the next epoch is joined to that epoch's steps (the epoch's micro-batches
start it, not ``grad_accum`` x steps); a ledger that lacks the micro-batch says so.

10 rows, batch 4, grad_accum 2, no shuffle: micro-batches [0..3], [4..7], [8, 9] per epoch; optimizer
steps {mb 0, 1}, {mb 2} per epoch."""
from __future__ import annotations

import json
import math

import pytest
from conftest import run_cli

N, B, GA = 10, 4, 2
MICRO = math.ceil(N / B)  # drop_last false: 3 micro-batches of 4, 4, 2 rows per epoch
SPE = math.ceil(MICRO / GA)  # 2 optimizer steps per epoch, the last holding MICRO - GA * (SPE - 1) = 1
ROWS = [list(range(m * B, min(N, (m + 1) * B))) for m in range(MICRO)]  # each micro-batch's rows (no shuffle)


def _data(tmp_path, epochs: int = 1, steps: int = 8):
    (tmp_path / "data").mkdir(exist_ok=True)
    (tmp_path / "data" / "part.jsonl").write_text(
        "".join(json.dumps({"x1": float(i), "x2": 1.0, "label": i % 2}) + "\n" for i in range(N)))
    (tmp_path / "log.jsonl").write_text(
        "".join(json.dumps({"step": s, "loss": 0.5 if s < steps - 1 else float("nan")}) + "\n" for s in range(steps)))
    (tmp_path / "dc.toml").write_text('[columns]\nfeatures = ["x1", "x2"]\nlabel = "label"\n[batch]\n'
                                      f"batch_size = {B}\ngrad_accum = {GA}\nshuffle = false\nepochs = {epochs}\n")


def _trace(tmp_path, *extra):
    return run_cli("trace", str(tmp_path / "log.jsonl"), "--data", str(tmp_path / "data"), "--config",
                   str(tmp_path / "dc.toml"), "--step-unit", "micro-batch", "--first-step", "0", *extra)


def test_a_micro_batch_past_the_data_is_said_so_not_sound(tmp_path):
    _data(tmp_path)
    r = _trace(tmp_path, "--step", str(MICRO))  # log step 3: the data has micro-batches 0..2
    assert r.returncode == 2, r.stdout + r.stderr
    assert "look sound" not in r.stdout + r.stderr
    assert (f"log step {MICRO} is outside the simulated plan (it has log steps 0..{MICRO - 1}: {SPE} per epoch x 1 "
            f"epoch(s), [batch] epochs; {N} rows make {MICRO} micro-batch(es) per epoch, {GA} per optimizer step)"
            ) in r.stderr


def test_in_a_window_the_step_past_the_data_is_named_beside_the_audited_rows(tmp_path):
    _data(tmp_path)
    r = _trace(tmp_path, "--step", str(MICRO), "--window", "1", "--format", "json")
    assert r.returncode == 1, r.stderr
    d = json.loads(r.stdout)["result"]
    data = d["data"]
    assert data["audited_steps"] == [MICRO - 1, MICRO - 1] and data["source"]["outside"] == [MICRO]
    assert data["rows"]["steps"] == {str(MICRO - 1): {"0": ROWS[MICRO - 1]}}
    assert f"log step {MICRO} is outside the simulated plan" in d["verdict"]["answers"]["rows"]["answer"]
    assert f"log step {MICRO} is outside the simulated plan" in data["message"]


@pytest.mark.parametrize("rows_from", ["plan", "ledger"])
def test_a_count_that_runs_on_across_epochs_joins_the_next_epochs_steps(tmp_path, rows_from):
    """Log step 3 is epoch 1's first micro-batch: optimizer step 2 (it was taken as micro-batch 1 of
    step 1, which does not exist: "0 row(s) ... look sound"); log step 5 its last, step 3."""
    _data(tmp_path, epochs=2)
    extra: list[str] = []
    if rows_from == "ledger":
        torch = pytest.importorskip("torch")
        from datacheck.torch import record_batches
        dl = record_batches(torch.utils.data.DataLoader(range(N), batch_size=B), tmp_path / "run", grad_accum=GA)
        for _epoch in range(2):  # record_batches counts the epochs its loader runs
            for _ in dl:
                pass
        extra = ["--ledger", str(tmp_path / "run")]
    for log_step, (step, mb) in {MICRO: (SPE, 0), MICRO + 1: (SPE, 1), 2 * MICRO - 1: (2 * SPE - 1, 0)}.items():
        r = _trace(tmp_path, "--step", str(log_step), "--format", "json", *extra)
        assert r.returncode == 1, r.stderr
        data = json.loads(r.stdout)["result"]["data"]
        assert data["rows"]["optimizer_steps"] == {str(log_step): step}
        assert data["rows"]["steps"] == {str(log_step): {"0": ROWS[(log_step % MICRO)]}}
        assert data["rows"]["micro_batches"] == {str(log_step): mb}
        assert data["convention"]["epoch_micro_batches"] == MICRO


def test_a_ledger_that_lacks_the_micro_batch_says_so(tmp_path):
    """A run that stopped after micro-batch 0 of step 1 (16 rows: 4 micro-batches, a multiple of 2):
    log step 3 is micro-batch 1 of step 1, which the ledger does not hold."""
    torch = pytest.importorskip("torch")
    from datacheck.torch import record_batches
    _data(tmp_path)
    (tmp_path / "data" / "part.jsonl").write_text(
        "".join(json.dumps({"x1": float(i), "x2": 1.0, "label": i % 2}) + "\n" for i in range(16)))
    for k, _ in enumerate(record_batches(torch.utils.data.DataLoader(range(16), batch_size=B), tmp_path / "run",
                                         grad_accum=GA)):
        if k == 2:  # micro-batch 0 of step 1 is recorded when the loop takes it
            break
    r = _trace(tmp_path, "--step", "3", "--ledger", str(tmp_path / "run"))
    assert r.returncode == 2 and "look sound" not in r.stdout
    assert f"log step 3 = optimizer step 1, micro-batch 1 of {GA} lies past what the ledger {tmp_path / 'run'}" \
        in r.stderr
    assert "recorded: it holds 1 micro-batch(es) of optimizer step 1 (0), not micro-batch 1" in r.stderr
