"""JSONL is decompressed as a stream and parsed in chunks of whole lines: the
report of a file parsed in 64-byte chunks equals the report of the same file in one chunk, for
plain, .gz and .zst files, clean or with a bad line, blank lines or mixed types (those take the
exact per-line path, with the right line numbers)."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl
import pytest
import zstandard
from conftest import examples
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import datacheck
from datacheck.formats import jsonl as jsonl_stream
from datacheck.formats import jsonvalues as readers
from datacheck.io.shardbytes import Unreadable, line_chunks

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


MORE = {
    # the majority kind of "label" differs between chunks: numbers in the file, strings in one chunk
    "mixed_across_chunks": _lines(ROWS[:25]) + _lines([{"text": "t", "label": "s", "input_ids": [1]}] * 6)
    + b'{"text": broken}\n' + _lines(ROWS[25:]),
    "ints_then_floats": _lines([{"x": i} for i in range(20)]) + _lines([{"x": i + 0.5} for i in range(20)]),
    "column_absent_first": _lines([{"a": i} for i in range(20)]) + _lines([{"a": i, "b": "t"} for i in range(20)]),
    "ints_then_floats_bad_line": _lines([{"x": i} for i in range(20)]) + b"{\n" + _lines([{"x": i + 0.5} for i in range(20)]),
    "nan_infinity": _lines(ROWS[:20]) + b'{"text": "a", "label": NaN, "input_ids": [1]}\n'
    + b'{"text": "b", "label": Infinity, "input_ids": [2]}\n' + _lines(ROWS[20:]),
    "invalid_utf8": _lines(ROWS[:20]) + b'{"text": "caf\xe9", "label": 1, "input_ids": [1]}\n' + _lines(ROWS[20:]),
    "bom": b"\xef\xbb\xbf" + _lines(ROWS[:10]) + b"[1]\n" + _lines(ROWS[10:]),
    "empty_lists_and_strings": _lines([{"l": []} for _ in range(8)]) + _lines([{"l": ["a"]} for _ in range(3)])
    + _lines([{"l": [1, 2]} for _ in range(12)]) + b"\n",
    "all_blank": b"\n \n\n",
    "all_bad": b"{\n[1]\n",
}


@pytest.mark.parametrize("chunk", [1, 64, 300])
@pytest.mark.parametrize("case", sorted(MORE))
def test_chunks_with_the_per_line_path_equal_one_chunk(tmp_path, monkeypatch, case, chunk):
    """Findings (bad records, blank lines, invalid UTF-8, mixed types with their lines, finite.* of
    NaN/Infinity), rows, column dtypes and examples do not depend on where the chunks are cut."""
    path = _write(tmp_path / "shard.jsonl.gz", MORE[case])
    whole = _report(path)
    monkeypatch.setattr(readers, "JSONL_CHUNK_BYTES", chunk)
    assert _report(path) == whole


def test_types_that_change_between_chunks_are_unified_like_a_whole_file_read(tmp_path, monkeypatch):
    path = _write(tmp_path / "s.jsonl", MORE["ints_then_floats"] + MORE["column_absent_first"])
    monkeypatch.setattr(readers, "JSONL_CHUNK_BYTES", 64)
    got = jsonl_stream.open_jsonl(path, 5)
    df = got.lf.collect()
    assert df.schema == {"x": pl.Float64, "a": pl.Int64, "b": pl.String}
    assert df.height == 80 and df["x"].to_list()[:21] == [float(i) for i in range(20)] + [0.5]
    assert df["b"].null_count() == 60 and not got.decode_findings


def test_only_the_chunk_with_the_bad_line_takes_the_per_line_path(tmp_path, monkeypatch):
    data = _lines(ROWS) * 10
    cut = len(_lines(ROWS) * 5)
    path = _write(tmp_path / "s.jsonl.zst", data[:cut] + b"not json\n" + data[cut:])
    seen: list[int] = []
    real = readers.jsonl_records

    def spy(raw: bytes, *args):
        seen.append(len(raw))
        return real(raw, *args)

    monkeypatch.setattr(readers, "jsonl_records", spy)
    monkeypatch.setattr(readers, "JSONL_CHUNK_BYTES", 1024)
    rep = datacheck.audit(str(path), {})
    # one chunk, not the 40 KB file, in each of the three reads (the first pass of the streamed source, the
    # layout recognizer's sample of the first rows, the engine's)
    assert len(seen) == 3 and max(seen) < 3 * 1024
    bad = next(f for f in rep.findings if f.check == "decode.bad_record")
    assert list(bad.lines) == [201] and rep.summary["rows"] == 400


def test_mixed_types_across_chunks_report_every_line(tmp_path, monkeypatch):
    monkeypatch.setattr(readers, "JSONL_CHUNK_BYTES", 64)
    rep = datacheck.audit(str(_write(tmp_path / "s.jsonl", MORE["mixed_across_chunks"])), {})
    f = next(f for f in rep.findings if f.check == "schema.dtype" and f.column == "label")
    assert f.count == 6 and list(f.lines[:3]) == [26, 27, 28]
    assert f.details["read_as"] == "number" and f.details["json_types"]["string"][:2] == [26, 27]
    assert [e.row for e in f.examples[:2]] == [25, 26]


_VALUE = st.one_of(st.none(), st.integers(-5, 5), st.floats(-2, 2, allow_nan=False), st.sampled_from(["a", "b", ""]),
                   st.lists(st.integers(0, 3), max_size=3), st.lists(st.sampled_from(["x", "y"]), max_size=2))
_LINE = st.one_of(
    st.dictionaries(st.sampled_from(["a", "b", "c"]), _VALUE, max_size=3).map(lambda d: json.dumps(d).encode()),
    st.sampled_from([b"", b"{", b"[1]", b'{"a": NaN}', b'{"b": Infinity}', b'{"c": "\xff"}']),
)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(lines=st.lists(_LINE, min_size=1, max_size=30), chunk=st.integers(1, 200))
def test_any_chunk_size_gives_the_one_chunk_result(tmp_path_factory, lines, chunk):
    """Property: for random records mixing JSON types, bad, blank and non-UTF-8 lines, the frame,
    line numbers and findings of any chunk size equal those of one chunk."""
    path = tmp_path_factory.mktemp("p") / "s.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")

    def read(size: int):
        old = readers.JSONL_CHUNK_BYTES
        readers.JSONL_CHUNK_BYTES = size
        try:
            got = jsonl_stream.open_jsonl(path, 5)
        finally:
            readers.JSONL_CHUNK_BYTES = old
        df = got.lf.collect()
        # column order aside (polars' NDJSON reader orders the columns of one chunk its own way; the
        # schema.dtype findings follow the column order)
        return (dict(df.schema), repr([dict(sorted(r.items())) for r in df.to_dicts()]), got.lines_of(list(range(df.height))),
                sorted((f.to_dict() if hasattr(f, "to_dict") else f for f in got.decode_findings), key=repr))

    one = read(10**9)
    assert read(chunk) == one


def _streamed(path: Path, chunk: int, keep: int = 0):
    """``path`` opened by the streamed source at ``chunk`` bytes a chunk; ``keep``: the decoded bytes
    of pass 1's frames kept for pass 2 (0: pass 2 reads the file again, as for a large file)."""
    old, old_keep = readers.JSONL_CHUNK_BYTES, jsonl_stream.KEEP_BYTES
    readers.JSONL_CHUNK_BYTES, jsonl_stream.KEEP_BYTES = chunk, keep
    try:
        return jsonl_stream.open_jsonl(path, 5)
    finally:
        readers.JSONL_CHUNK_BYTES, jsonl_stream.KEEP_BYTES = old, old_keep


def _same_frame(a: pl.DataFrame, b: pl.DataFrame) -> None:
    assert a.schema == b.schema  # column order included
    assert repr(a.to_dicts()) == repr(b.to_dicts())  # NaN-safe, nested values compared exactly


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(lines=st.lists(_LINE, min_size=1, max_size=30), chunk=st.integers(1, 200), rows=st.integers(1, 9),
       keep=st.sampled_from([0, 2**30]))
@example(lines=[b'{"b": null}', b'{"a": null, "b": null}'], chunk=1, rows=1, keep=0)
def test_streamed_source_at_any_chunk_size_equals_one_chunk(tmp_path_factory, lines, chunk, rows, keep):
    """Property: the JSONL reader (:mod:`datacheck.formats.jsonl`) at any chunk size gives the
    frame of one chunk (the same columns and values), line numbers and findings; its batches of
    any size are that frame cut in order; the lazy frame answers projections, filters and heads;
    whether pass 2 reads the file again (``keep`` 0) or pass 1's kept frames."""
    path = tmp_path_factory.mktemp("p") / "s.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    ref = _streamed(path, 10**9)  # one chunk, held in memory
    got = _streamed(path, chunk, keep)
    # the same columns and values; their order may differ, as polars' NDJSON reader orders the
    # columns of one chunk its own way ({"b": 1} then {"a": 2, "b": 3} is a, b in one chunk and
    # b, a in two; found by this test: lines [{"b": null}, {"a": null, "b": null}])
    whole = got.lf.collect()
    one = ref.lf.collect()
    assert sorted(one.columns) == sorted(whole.columns)
    _same_frame(one.select(sorted(one.columns)), whole.select(sorted(whole.columns)))
    assert got.lines_of(list(range(whole.height))) == ref.lines_of(list(range(whole.height)))
    # the schema.dtype findings follow the column order
    assert sorted((f.to_dict() for f in got.decode_findings), key=repr) == sorted((f.to_dict() for f in ref.decode_findings), key=repr)
    if got.stream is not None and whole.width:
        cols = list(whole.columns)[::-1]
        parts = list(got.stream.batches(cols, rows))
        assert all(p.height == rows for p in parts[:-1]) and parts[-1].height <= rows
        _same_frame(pl.concat(parts), whole.select(cols))
        first = whole.columns[0]
        _same_frame(got.lf.select(first).head(3).collect(), whole.select(first).head(3))
        _same_frame(got.lf.filter(pl.col(first).is_not_null()).collect(), whole.filter(pl.col(first).is_not_null()))
        assert got.lf.select(pl.len()).collect().item() == whole.height


def test_streamed_source_reads_a_file_changed_between_reads_as_unreadable(tmp_path):
    path = _write(tmp_path / "s.jsonl", _lines(ROWS))
    got = _streamed(path, 64)
    assert got.stream is not None and got.stream.rows == 40
    path.write_bytes(_lines(ROWS[:30]))
    with pytest.raises(Unreadable, match="changed while it was being read"):
        list(got.stream.batches(["text"], 7))


def test_small_files_keep_pass_1_frames_and_are_not_read_again(tmp_path):
    """A file whose fast-parsed chunks fit KEEP_BYTES is parsed once: pass 2 reads the kept frames
    (the file is not opened again: changing it after pass 1 changes nothing); a chunk that took the
    per-line path, or frames over the budget, send pass 2 back to the file."""
    path = _write(tmp_path / "s.jsonl", _lines(ROWS))
    got = _streamed(path, 64, keep=jsonl_stream.KEEP_BYTES)
    assert got.stream is not None and got.stream.pieces is not None
    assert sum(p.rows for p in got.stream.pieces) == 40
    whole = got.lf.collect()
    path.write_bytes(_lines(ROWS[:30]))
    _same_frame(pl.concat(list(got.stream.batches(list(whole.columns), 7))), whole)
    assert _streamed(path, 64, keep=100).stream.pieces is None  # over the budget
    bad = _write(tmp_path / "b.jsonl", _lines(ROWS[:20]) + b'{"text": "broken\n' + _lines(ROWS[20:]))
    slow = _streamed(bad, 64, keep=jsonl_stream.KEEP_BYTES)
    assert slow.stream is not None and slow.stream.pieces is None
    assert slow.stream.rows == 40


def test_one_chunk_files_are_held_in_memory(tmp_path):
    got = _streamed(_write(tmp_path / "s.jsonl", _lines(ROWS)), 10**9)
    assert got.stream is None and got.lf.collect().height == 40
