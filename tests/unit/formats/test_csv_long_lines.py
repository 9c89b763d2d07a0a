"""A CSV/TSV line longer than ``[dataset] max_row_bytes`` is never held: the shard is ``decode.unreadable``
naming the line, its byte offset and length (a quoted field may span lines, so the records after it cannot
be told apart without reading it); a line at the bound is read as before, whatever the read size."""
from __future__ import annotations

import gzip

import pytest

import datacheck
from datacheck.formats import csv as csv_format

LIMIT = 100


def _rows() -> list[bytes]:
    return [b"text,label", b"a,0", b",1", b"b" * 300 + b",0", b"c,1", b"d" * (LIMIT - 2) + b",0"]


def _audit(path, limit=LIMIT):
    cfg = {"dataset": {"max_row_bytes": limit}, "columns": {"text": "text", "label": "label"},
           "labels": {"num_classes": 2}}
    return datacheck.audit([str(path)], config=cfg).shards[0]


@pytest.mark.parametrize("read", [7, 64, 1 << 20])
@pytest.mark.parametrize("gz", [False, True])
def test_a_long_line_makes_the_shard_unreadable_naming_it(tmp_path, monkeypatch, read, gz):
    monkeypatch.setattr(csv_format, "_READ_BYTES", read)
    rows = _rows()
    body = b"\n".join(rows) + b"\n"
    path = tmp_path / ("a.csv.gz" if gz else "a.csv")
    path.write_bytes(gzip.compress(body) if gz else body)
    long = [i for i, r in enumerate(rows) if len(r) > LIMIT]
    assert long == [3]
    offset = sum(len(r) + 1 for r in rows[:3])
    shard = _audit(path)
    found = [f for f in shard.findings if f.check == "decode.unreadable"]
    assert len(found) == 1
    assert f"line 4 (byte offset {offset}) is a line of {len(rows[3]):,} bytes, more than the {LIMIT} bytes a row " \
           "datacheck decodes ([dataset] max_row_bytes)" in found[0].message


def test_lines_at_the_bound_are_read_as_before(tmp_path):
    rows = [r for r in _rows() if len(r) <= LIMIT]  # the last one is exactly LIMIT bytes
    assert max(len(r) for r in rows) == LIMIT
    path = tmp_path / "a.csv"
    path.write_bytes(b"\n".join(rows) + b"\n")
    bounded, default = _audit(path), _audit(path, 128 << 20)
    assert not [f for f in bounded.findings if f.check.startswith("decode.")]
    assert bounded.rows == default.rows == len(rows) - 1
    assert [(f.check, f.count, f.rows) for f in bounded.findings] == [(f.check, f.count, f.rows) for f in default.findings]
