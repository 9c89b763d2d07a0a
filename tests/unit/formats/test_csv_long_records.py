"""A CSV/TSV record whose quoted field spans lines, each within ``[dataset] max_row_bytes`` but together
more, is never held whole: the shard is ``decode.unreadable`` naming the record's first line, its byte
offset and the bytes read by the line that passed the bound (formats/csv.py ``_Splitter``); a record at
the bound is read as before. Expected lines, offsets and byte counts are computed here from the bytes."""
from __future__ import annotations

import pytest

import datacheck
from datacheck.formats import csv as csv_format

LIMIT = 200


def _audit(path, limit=LIMIT):
    cfg = {"dataset": {"max_row_bytes": limit}, "columns": {"text": "text", "label": "label"},
           "labels": {"num_classes": 2}}
    return datacheck.audit([str(path)], config=cfg, workers=1).shards[0]


def _file(tmp_path, pieces: int) -> tuple:
    """header, a short record, a record whose quoted text spans ``pieces`` lines of 60 letters, a short one."""
    lines = [b"text,label", b"a,0", b'"' + b"x" * 59] + [b"y" * 60] * (pieces - 2) + [b"z" * 57 + b'",1', b"b,0"]
    path = tmp_path / "a.csv"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path, lines


@pytest.mark.parametrize("read", [7, 1 << 20])
def test_a_record_over_the_bound_makes_the_shard_unreadable_naming_it(tmp_path, monkeypatch, read):
    monkeypatch.setattr(csv_format, "_READ_BYTES", read)
    path, lines = _file(tmp_path, 6)
    record = lines[2:-1]
    assert all(len(r) <= LIMIT for r in lines) and sum(map(len, record)) > LIMIT
    held, k = 0, 0
    while held <= LIMIT:  # the line of the record at which its bytes (breaks not counted) pass the bound
        held += len(record[k])
        k += 1
    offset = sum(len(r) + 1 for r in lines[:2])
    shard = _audit(path)
    found = [f for f in shard.findings if f.check == "decode.unreadable"]
    assert len(found) == 1, [f.message for f in shard.findings]
    assert (f"the record from line 3 (byte offset {offset}) holds {held:,} bytes by line {2 + k} (a quoted field "
            f"spanning lines), more than the {LIMIT} bytes a row datacheck decodes") in found[0].message


def test_a_record_within_the_bound_is_read(tmp_path):
    path, lines = _file(tmp_path, 3)
    assert sum(map(len, lines[2:-1])) <= LIMIT
    shard = _audit(path)
    assert not [f for f in shard.findings if f.check.startswith("decode.")]
    assert shard.rows == 3
