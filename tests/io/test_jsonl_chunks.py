"""JSONL is decompressed as a stream and parsed in chunks of whole lines (issue 15 item 8): the
report of a file parsed in 64-byte chunks equals the report of the same file in one chunk, for
plain, .gz and .zst files, clean or with a bad line, blank lines or mixed types (those take the
exact per-line path, with the right line numbers)."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import zstandard

import datacheck
from datacheck.io import readers
from datacheck.io.readers import Unreadable, line_chunks

ROWS = [{"text": f"row {i} " + "x" * (i % 7), "label": i % 3, "input_ids": list(range(i % 5 + 1))} for i in range(40)]


def _lines(rows: list[dict]) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in rows)


def _write(path: Path, data: bytes) -> Path:
    if path.name.endswith(".gz"):
        path.write_bytes(gzip.compress(data))
    elif path.name.endswith(".zst"):
        path.write_bytes(zstandard.ZstdCompressor().compress(data))
    else:
        path.write_bytes(data)
    return path


def _report(path: Path) -> dict:
    rep = datacheck.audit(str(path), {"labels": {"num_classes": 3}}).to_dict()
    rep.pop("created_at")
    return rep


CASES = {
    "clean": _lines(ROWS),
    "no_final_newline": _lines(ROWS).rstrip(b"\n"),
    "bad_line": _lines(ROWS[:20]) + b'{"text": "broken\n' + _lines(ROWS[20:]),
    "blank_lines": _lines(ROWS[:10]) + b"\n  \n" + _lines(ROWS[10:]),
    "mixed_types": _lines(ROWS[:30]) + _lines([{"text": 5, "label": "x", "input_ids": [1]}]),
    "schema_change": _lines(ROWS[:30]) + _lines([{"text": "t", "label": 1, "input_ids": [1], "extra": 1}]),
}


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz", ".jsonl.zst"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_chunked_parse_equals_one_chunk(tmp_path, monkeypatch, suffix, case):
    path = _write(tmp_path / f"shard{suffix}", CASES[case])
    whole = _report(path)
    monkeypatch.setattr(readers, "JSONL_CHUNK_BYTES", 64)
    assert _report(path) == whole
    streamed = readers._jsonl_streamed(path)  # clean files take the chunked fast path, the others the exact one
    assert (streamed is not None) == (case in ("clean", "no_final_newline"))
    if streamed is not None:
        assert streamed.lf.collect().height == 40


def test_bad_line_keeps_its_line_number_across_chunks(tmp_path, monkeypatch):
    monkeypatch.setattr(readers, "JSONL_CHUNK_BYTES", 64)
    rep = datacheck.audit(str(_write(tmp_path / "s.jsonl.gz", CASES["bad_line"])), {})
    bad = next(f for f in rep.findings if f.check == "decode.bad_record")
    assert bad.count == 1 and list(bad.lines) == [21]
    assert rep.summary["rows"] == 40


def test_line_chunks_end_at_newlines_and_rebuild_the_stream(tmp_path):
    data = _lines(ROWS) * 3
    path = _write(tmp_path / "s.jsonl.gz", data)
    chunks = list(line_chunks(path, 100))
    assert b"".join(chunks) == data
    assert all(c.endswith(b"\n") for c in chunks)
    assert max(len(c) for c in chunks) < 100 + max(len(ln) for ln in data.split(b"\n")) + 100


def test_corrupt_stream_is_unreadable_with_the_reason(tmp_path):
    good = gzip.compress(_lines(ROWS))
    path = tmp_path / "s.jsonl.gz"
    path.write_bytes(good[: len(good) // 2])
    with pytest.raises(Unreadable, match="cannot decompress"):
        list(line_chunks(path, 64))
