"""``datacheck trace OUTPUT_DIR/``: a Trainer output folder is read as its trainer_state.json (its own,
else the latest checkpoint's) and, with --data and no --ledger, its data-indices/ ledger."""
from __future__ import annotations

import gzip
import json

from conftest import run_cli

from datacheck.trace.rundir import expand_run_dirs, trainer_state_of


def _state(path, steps):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"log_history": [{"step": s, "loss": 1.0} for s in steps], "global_step": steps[-1]}))


def test_own_state_then_latest_checkpoint(tmp_path):
    out = tmp_path / "out"
    _state(out / "checkpoint-9" / "trainer_state.json", [9])
    _state(out / "checkpoint-10" / "trainer_state.json", [10])  # 10 > 9 by number, not by name
    assert trainer_state_of(out) == out / "checkpoint-10" / "trainer_state.json"
    _state(out / "trainer_state.json", [12])
    assert trainer_state_of(out) == out / "trainer_state.json"
    assert trainer_state_of(tmp_path) is None


def test_ledger_taken_only_with_data_and_without_ledger(tmp_path):
    out = tmp_path / "out"
    _state(out / "trainer_state.json", [1])
    (out / "data-indices").mkdir()
    (out / "data-indices" / "rank0.tsv.gz").write_bytes(gzip.compress(b"#datacheck-ledger\t1\n"))
    tb = tmp_path / "tb"
    tb.mkdir()
    rd = expand_run_dirs([str(out), str(tb)], None, True)
    assert rd.logs == [str(out / "trainer_state.json"), str(tb)] and rd.ledger == str(out)
    assert rd.found == [f"{out}: a Trainer output folder; read trainer_state.json and the ledger in data-indices/"]
    assert expand_run_dirs([str(out)], None, False).ledger is None
    assert expand_run_dirs([str(out)], "elsewhere", True).ledger == "elsewhere"


def test_trace_cli_reads_the_folder(tmp_path):
    out = tmp_path / "out"
    _state(out / "trainer_state.json", [1, 2, 3])
    r = run_cli("trace", str(out), "--format", "json")
    res = json.loads(r.stdout)["result"]
    assert r.returncode == 0 and res["logs"][0]["format"] == "hf_state" and res["logs"][0]["records"] == 3
    assert f"datacheck trace: {out}: a Trainer output folder; read trainer_state.json" in r.stderr
