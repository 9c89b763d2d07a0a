"""A JSONL line longer than ``[dataset] max_row_bytes`` is one ``decode.bad_record`` naming its line, byte
offset and length, never held nor parsed (as a parquet row group whose rows average more is refused from
its footer); the other lines are audited exactly as in the file without it, whatever the chunk size."""
from __future__ import annotations

import json

import pytest

import datacheck
from datacheck.formats import jsonvalues

LIMIT = 200


def _lines() -> list[bytes]:
    texts = ["a", "", "b" * 50, "c" * 1000, "a", "  ", "d" * 300, "e"]
    return [json.dumps({"text": t, "label": i % 2}).encode() for i, t in enumerate(texts)]


def _audit(path):
    cfg = {"dataset": {"max_row_bytes": LIMIT}, "columns": {"text": "text", "label": "label"},
           "labels": {"num_classes": 2}}
    return datacheck.audit([str(path)], config=cfg).shards[0]


def _others(shard) -> list[tuple]:
    return sorted((f.check, f.column, f.count, f.rows) for f in shard.findings if not f.check.startswith("decode."))


@pytest.mark.parametrize("chunk", [16, 700, 1 << 24])
def test_long_lines_are_bad_records_and_the_rest_is_audited(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(jsonvalues, "JSONL_CHUNK_BYTES", chunk)
    lines = _lines()
    long = [i for i, ln in enumerate(lines) if len(ln) > LIMIT]
    assert long == [3, 6]
    path = tmp_path / "a.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    shard = _audit(path)
    bad = [f for f in shard.findings if f.check == "decode.bad_record"]
    assert len(bad) == 1
    offsets = [sum(len(ln) + 1 for ln in lines[:i]) for i in long]
    assert bad[0].count == 2 and bad[0].lines == tuple(i + 1 for i in long)
    assert bad[0].details["byte_offsets"] == offsets
    assert f"line {long[0] + 1}, byte offset {offsets[0]}: a line of {len(lines[3]):,} bytes, more than the " \
           f"{LIMIT} bytes a row datacheck decodes ([dataset] max_row_bytes): not parsed" in bad[0].message
    assert shard.rows == len(lines) - len(long)
    # the other lines: the same findings as the file that never held the long ones
    kept = tmp_path / "kept.jsonl"
    kept.write_bytes(b"\n".join(ln for i, ln in enumerate(lines) if i not in long) + b"\n")
    alone = _audit(kept)
    assert not [f for f in alone.findings if f.check.startswith("decode.")]
    assert _others(shard) == _others(alone) and _others(shard)


def test_short_lines_are_untouched_at_the_default(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_bytes(b"\n".join(_lines()) + b"\n")
    rep = datacheck.audit([str(path)], config={"columns": {"text": "text"}})
    assert not [f for f in rep.shards[0].findings if f.check.startswith("decode.")]
    assert rep.shards[0].rows == len(_lines())
