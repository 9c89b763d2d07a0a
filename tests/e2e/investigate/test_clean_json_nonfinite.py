"""``datacheck clean`` on JSONL holding the literals ``NaN``, ``Infinity`` and ``-Infinity`` (what
Python's ``json.dumps`` writes for non-finite floats, and what the audit reads as NaN / inf): the rows
``finite.nan`` / ``finite.inf`` name are quarantined and the rest copied byte for byte, never an
internal error. Expected rows are computed here with ``json.loads`` and ``math``."""
from __future__ import annotations

import json
import math

from conftest import run_cli

ROWS = [{"text": "a", "score": 0.5}, {"text": "b", "score": float("nan")}, {"text": "c", "score": 1.5},
        {"text": "d", "score": float("inf")}, {"text": "e", "score": -float("inf")}, {"text": "f", "score": 2.0}]


def test_nan_and_infinity_literals_are_cleaned(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    lines = [json.dumps(r) for r in ROWS]  # NaN, Infinity, -Infinity literals
    assert "NaN" in lines[1] and "Infinity" in lines[3]
    (data / "a.jsonl").write_text("\n".join(lines) + "\n")
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text('[columns]\ntext = ["text"]\ntarget = "score"\n')
    r = run_cli("clean", str(data), "--out", str(tmp_path / "out"), "--config", str(cfg), "--format", "json")
    assert r.returncode == 0, r.stderr
    bad = [i for i, x in enumerate(ROWS) if not math.isfinite(x["score"])]
    (shard,) = json.loads(r.stdout)["result"]["shards"]
    assert (shard["input_rows"], shard["kept"], shard["quarantined"]) == (len(ROWS), len(ROWS) - len(bad), len(bad))
    kept = (tmp_path / "out" / "a.jsonl").read_text().splitlines()
    assert kept == [ln for i, ln in enumerate(lines) if i not in bad]  # the good lines, as written


def test_fields_that_change_type_and_wide_integers_are_cleaned(tmp_path):
    # the reader reads these rows (a schema.dtype finding names the mixed column); clean copies them
    lines = ['{"text": "a", "n": 18446744073709551616}', '{"text": "b", "n": 1}', '{"text": "c", "n": [1, 2]}',
             '{"text": "d", "ids": [1, "x"]}', '{"text": "", "n": %d}' % 2**200, '{"text": "f", "ids": [1]}']
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.jsonl").write_text("\n".join(lines) + "\n")
    r = run_cli("clean", str(data), "--out", str(tmp_path / "out"), "--drop", "empty.text", "--format", "json")
    assert r.returncode == 0, r.stderr
    empty = [i for i, ln in enumerate(lines) if json.loads(ln)["text"] == ""]
    (shard,) = json.loads(r.stdout)["result"]["shards"]
    assert (shard["input_rows"], shard["kept"], shard["quarantined"]) == (len(lines), len(lines) - len(empty), len(empty))
    assert (tmp_path / "out" / "a.jsonl").read_text().splitlines() == [ln for i, ln in enumerate(lines) if i not in empty]
