"""One dataset index per trace: ``trace --data`` discovers, hashes and opens each shard once, and the
plan and the row audit reuse it."""
from __future__ import annotations

import json
from collections import Counter

import pytest
from conftest import run_cli

import datacheck.derive.read as read
import datacheck.trace.data as tdata

pytest.importorskip("torch")  # the plan is simulated with torch's samplers


def test_trace_data_opens_and_hashes_each_shard_once(tmp_path, monkeypatch):
    data = tmp_path / "data"
    data.mkdir()
    for i in range(3):
        (data / f"part-{i}.jsonl").write_text(
            "".join(json.dumps({"x": float("nan") if (i, r) == (2, 3) else float(r)}) + "\n" for r in range(10)))
    (tmp_path / "datacheck.toml").write_text('[columns]\nfeatures = ["x"]\n[batch]\nbatch_size = 30\nshuffle = false\n')
    log = tmp_path / "m.jsonl"
    log.write_text(json.dumps({"step": 1, "loss": float("nan")}) + "\n")
    opens: Counter = Counter()
    hashes: Counter = Counter()
    real_open, real_hash = read.open_shard, tdata.hash_file

    def counting_open(source, *a, **k):
        opens[str(source)] += 1
        return real_open(source, *a, **k)

    def counting_hash(path, *a, **k):
        hashes[str(path)] += 1
        return real_hash(path, *a, **k)
    monkeypatch.setattr(read, "open_shard", counting_open)
    monkeypatch.setattr(tdata, "hash_file", counting_hash)
    r = run_cli("trace", str(log), "--data", str(data), "--config", str(tmp_path / "datacheck.toml"), "--first-step", "1",
                "--format", "json")
    assert r.returncode == 1, r.stderr
    rows = json.loads(r.stdout)["result"]["data"]["rows"]
    # one step of 30 rows in file order: row 23 loaded at log step 1 (optimizer step 0), rank 0, micro-batch 0
    assert rows["failing_rows"][0] == {"row": 23, "shard": "part-2.jsonl", "shard_row": 3, "severity": "error",
                                       "checks": ["finite.nan:x"], "at": [{"step": 1, "rank": 0, "micro_batch": 0}]}
    shards = {str(data / f"part-{i}.jsonl") for i in range(3)}
    assert dict(opens) == {s: 1 for s in shards}
    assert dict(hashes) == {s: 1 for s in shards}
