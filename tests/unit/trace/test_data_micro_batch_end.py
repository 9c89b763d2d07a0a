"""The data leg (datacheck.trace.data) of a log that counts micro-batches (``--step-unit
micro-batch``) asked for a micro-batch the data does not have: the last optimizer step of a run whose
micro-batches are not a multiple of ``grad_accum`` holds fewer of them. That log step lies past the
end of the data: said so (exit 2 when it is the only step asked; beside the audited rows in a window),
never "0 row(s) ... look sound"."""
from __future__ import annotations

import json
import math

from conftest import run_cli

N, B, GA = 10, 4, 2
MICRO = math.ceil(N / B)  # drop_last false: 3 micro-batches of 4, 4, 2 rows
LAST = (MICRO - 1) // GA  # the last optimizer step (1), holding MICRO - GA * LAST micro-batches (1)
HELD = MICRO - GA * LAST
PAST = LAST * GA + HELD  # the first log step (from 0) past the data: micro-batch 1 of step 1


def _run(tmp_path, *extra):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "part.jsonl").write_text(
        "".join(json.dumps({"x1": float(i), "x2": 1.0, "label": i % 2}) + "\n" for i in range(N)))
    (tmp_path / "log.jsonl").write_text(
        "".join(json.dumps({"step": s, "loss": 0.5 if s < PAST else float("nan")}) + "\n" for s in range(PAST + 1)))
    (tmp_path / "dc.toml").write_text('[columns]\nfeatures = ["x1", "x2"]\nlabel = "label"\n[batch]\n'
                                      f"batch_size = {B}\ngrad_accum = {GA}\nshuffle = false\n")
    return run_cli("trace", str(tmp_path / "log.jsonl"), "--data", str(tmp_path / "data"), "--config",
                   str(tmp_path / "dc.toml"), "--step-unit", "micro-batch", "--first-step", "0", *extra)


def test_a_micro_batch_past_the_data_is_said_so_not_sound(tmp_path):
    assert (HELD, PAST) == (1, 3)
    r = _run(tmp_path, "--step", str(PAST))
    assert r.returncode == 2, r.stdout + r.stderr
    assert "look sound" not in r.stdout + r.stderr
    assert (f"log step {PAST} = optimizer step {LAST}, micro-batch {PAST - GA * LAST} of {GA} lies past the end of "
            f"the data: optimizer step {LAST} holds {HELD} micro-batch(es) (0)") in r.stderr
    assert f"the data's {N} rows over 1 epoch(s)" in r.stderr


def test_in_a_window_the_past_step_is_named_beside_the_audited_rows(tmp_path):
    r = _run(tmp_path, "--step", str(PAST), "--window", "1", "--format", "json")
    assert r.returncode == 1, r.stderr
    d = json.loads(r.stdout)["result"]
    data = d["data"]
    assert data["audited_steps"] == [PAST - 1, PAST - 1] and data["source"]["outside"] == [PAST]
    assert data["rows"]["steps"] == {str(PAST - 1): {"0": list(range(B * (MICRO - 1), N))}}
    assert f"log step {PAST} = optimizer step {LAST}" in d["verdict"]["answers"]["rows"]["answer"]
    assert "lies past the end of the data" in data["message"]


def test_the_plans_last_log_step_is_its_last_micro_batch(tmp_path):
    r = _run(tmp_path, "--step", str(PAST + 1))
    assert r.returncode == 2 and f"it has log steps 0..{PAST - 1}:" in r.stderr
