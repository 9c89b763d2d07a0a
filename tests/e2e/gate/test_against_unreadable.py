"""``audit EVAL --against TRAIN`` where a shard of TRAIN cannot be read: its rows cannot be compared,
so a leak into it would be missed; the audit says so (a ``skipped`` entry of ``dup.split_overlap``
naming the shard), never a silent pass. A readable TRAIN draws no such entry."""
from __future__ import annotations

import gzip
import json

import polars as pl
from conftest import run_cli


def _data(tmp_path, *, broken: bool):
    ev, tr = tmp_path / "eval", tmp_path / "train"
    ev.mkdir()
    tr.mkdir()
    pl.DataFrame({"text": ["alpha", "beta"], "label": [0, 1]}).write_parquet(ev / "e.parquet")
    pl.DataFrame({"text": ["gamma", "delta"], "label": [0, 1]}).write_parquet(tr / "ok.parquet")
    whole = gzip.compress(b"".join(json.dumps({"text": f"t{i}", "label": i % 2}).encode() + b"\n"
                                   for i in range(500)))
    (tr / "more.jsonl.gz").write_bytes(whole[: len(whole) // 2] if broken else whole)
    return ev, tr


def _audit(tmp_path, ev, tr):
    out = tmp_path / "report.json"
    r = run_cli("audit", str(ev), "--against", str(tr), "--output", str(out), "--report-dir", str(tmp_path / "r"))
    return r, json.loads(out.read_text())


def test_an_unreadable_against_shard_is_named_under_skipped(tmp_path):
    ev, tr = _data(tmp_path, broken=True)
    r, rep = _audit(tmp_path, ev, tr)
    reasons = [s["reason"] for s in rep["skipped"] if s["check"] == "dup.split_overlap"]
    assert len(reasons) == 1 and "more.jsonl.gz" in reasons[0] and "could not be read" in reasons[0], reasons
    assert "cannot decompress .gz data" in reasons[0]  # the shard's own reason
    assert "more.jsonl.gz" in r.stdout


def test_a_readable_against_dataset_draws_no_such_entry(tmp_path):
    ev, tr = _data(tmp_path, broken=False)
    r, rep = _audit(tmp_path, ev, tr)
    assert r.returncode == 0, r.stdout
    assert [s for s in rep["skipped"] if s["check"] == "dup.split_overlap"] == []
