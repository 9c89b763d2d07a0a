"""The ledger's ``#in_flight`` line (written by the Hugging Face callback's recorder when the process stops
without the Trainer ending the training): its micro-batches are held apart from the steps' batches,
superseded by a later ``#state`` line at or before their step like any record, and a malformed one is
refused naming the file and line."""
from __future__ import annotations

import gzip
import json

import pytest

from datacheck.io.ledger import read_ledger
from datacheck.model.errors import UsageError


def _write(folder, lines):
    d = folder / "data-indices"
    d.mkdir(parents=True, exist_ok=True)
    (d / "rank0.tsv.gz").write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))


STATE = "#state\t" + json.dumps({"epoch": 0, "start_step": 0, "grad_accum": 1})
FLIGHT = "#in_flight\t" + json.dumps({"rank": 0, "batches": [
    {"step": 2, "micro_batch": 0, "epoch": 0, "indices": [7, 8]},
    {"step": 3, "micro_batch": 0, "epoch": 0, "indices": [9, 1]}]})


def test_in_flight_batches_are_no_steps_batches(tmp_path):
    _write(tmp_path, ["#datacheck-ledger\t1", STATE, "0\t0\t0\t0\t0\t5", "1\t0\t0\t0\t2\t3", FLIGHT])
    led = read_ledger(tmp_path)
    assert led.steps == [0, 1]
    assert {s: [list(b.indices) for b in bs] for s, bs in led.in_flight[0].items()} == {2: [[7, 8]], 3: [[9, 1]]}
    assert [(b.step, b.rank, b.micro_batch, b.epoch) for b in led.in_flight[0][2]] == [(2, 0, 0, 0)]


def test_a_resume_supersedes_them(tmp_path):
    resumed = "#state\t" + json.dumps({"epoch": 0, "start_step": 2, "grad_accum": 1})
    _write(tmp_path, ["#datacheck-ledger\t1", STATE, "0\t0\t0\t0\t0\t5", "1\t0\t0\t0\t2\t3", FLIGHT, resumed,
                      "2\t0\t0\t0\t7\t8"])
    led = read_ledger(tmp_path)
    assert led.steps == [0, 1, 2] and led.in_flight == {}


@pytest.mark.parametrize("bad", [{"step": -1, "micro_batch": 0, "epoch": 0, "indices": [1]},
                                 {"step": 1, "micro_batch": 0, "epoch": 0, "indices": ["x"]},
                                 {"step": 1, "micro_batch": 0, "indices": [1]}])
def test_a_malformed_line_is_refused(tmp_path, bad):
    _write(tmp_path, ["#datacheck-ledger\t1", STATE, "0\t0\t0\t0\t0\t5",
                      "#in_flight\t" + json.dumps({"rank": 0, "batches": [bad]})])
    with pytest.raises(UsageError, match=r"rank0\.tsv\.gz:4: an #in_flight batch"):
        read_ledger(tmp_path)
