"""CSV/TSV and Arrow IPC shards audited batch by batch straight from the file: the readers
(:mod:`datacheck.formats.csv`, :mod:`datacheck.formats.arrow`) give
in tiny batches the report of one batch, and never build the whole frame.
"""
from __future__ import annotations

import gzip
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest
from batchhelp import _same_result, batch_rows
from conftest import ROOT, examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from datacheck.engine.shard import audit_shard
from datacheck.formats import csv as csv_stream
from datacheck.io.discover import DiscoveredShard
from datacheck.io.hashing import hash_file
from datacheck.model.config import config_from_dict

CONFIG = {
    "tokens": {"vocab_size": 50, "max_seq_len": 5},
    "labels": {"num_classes": 3},
    "dup": {"near": True},
}


def _result(path: Path, fmt: str, config: dict):
    chash, size = hash_file(path)
    return audit_shard(DiscoveredShard(path=path, rel=path.name, format=fmt), config_from_dict(config),
                       chash, size, keep_rows=True)


def _one_batch(path: Path, fmt: str, config: dict):
    """The shard checked in one batch."""
    with batch_rows(None):
        return _result(path, fmt, config)


# ------------------------------------------------------------------ CSV

def _cell(kind: int, i: int) -> str:
    return ["", str(i - 3), f"{i / 4:.2f}", "true" if i % 2 else "false", f"t{i % 3}",
            'say "hi", then\nleave', "99999999999999999999", "-18446744073709551615", "1e400"][kind]


def _write_csv(path: Path, kinds: list[list[int]], bad: set[int], blank: set[int], crlf: bool,
               latin1: set[int]) -> None:
    nl = "\r\n" if crlf else "\n"
    out = [b"text,label,score,flag" + nl.encode()]
    for i, row in enumerate(kinds):
        if i in blank:
            out.append(nl.encode())
        cells = [_cell(k, i) for k in row]
        if i in bad:
            cells = cells[:2]
        line = ",".join('"' + c.replace('"', '""') + '"' if any(x in c for x in ',"\n') else c for c in cells)
        data = line.encode()
        if i in latin1:
            data = data + b" caf\xe9"
        out.append(data + nl.encode())
    path.write_bytes(b"".join(out))


csv_rows = st.lists(st.lists(st.integers(0, 8), min_size=4, max_size=4), min_size=1, max_size=25)


@settings(max_examples=examples(int(os.environ.get("DATACHECK_HYPOTHESIS_EXAMPLES", "25"))), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(rows=csv_rows, cut=st.integers(1, 9), data=st.data(), crlf=st.booleans())
def test_csv_in_tiny_batches_equals_one_batch(monkeypatch, rows, cut, data, crlf):
    idx = st.sets(st.integers(0, len(rows) - 1), max_size=3)
    bad, blank, latin1 = data.draw(idx), data.draw(idx), data.draw(idx)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "shard.csv"
        _write_csv(path, rows, bad, blank, crlf, latin1 if not crlf else set())
        one = _one_batch(path, "csv", CONFIG)
        with batch_rows(cut):
            many = _result(path, "csv", CONFIG)
        assert many.readable == one.readable
        if one.readable:
            assert many.columns == one.columns  # the inferred dtypes do not change
        _same_result(one, many)


WIDE = "99999999999999999999"  # beyond Int64: polars infers Int128 for the column


@pytest.mark.parametrize("column", ["text", "label", "score", "flag"])
@pytest.mark.parametrize("cells", [
    ["", WIDE], [WIDE, ""], ["1", WIDE], [WIDE, "1"], ["", "-" + WIDE], ["1.5", WIDE], ["x", WIDE],
    ["18446744073709551615", "1"], ["", "", WIDE], ["true", WIDE],
])
@pytest.mark.parametrize("cut", [1, 2])
@pytest.mark.parametrize("fmt", ["csv", "tsv"])
def test_csv_wide_integers_decode_alike_in_any_batches(tmp_path, column, cells, cut, fmt):
    """A column whose value in one batch is beyond Int64 (polars infers Int128 for the file): the
    batches decode it exactly as the one-batch read does (same dtypes, same values, same findings),
    in a role column (``label``: read as the role's Int64, the wide value null) and in a plain one."""
    cols = ["text", "label", "score", "flag"]
    sep = "," if fmt == "csv" else "\t"
    lines = [sep.join(cols)] + [sep.join(v if c == column else "0" for c in cols) for v in cells]
    path = tmp_path / f"shard.{fmt}"
    path.write_text("\n".join(lines) + "\n")
    one = _one_batch(path, fmt, CONFIG)
    with batch_rows(cut):
        many = _result(path, fmt, CONFIG)
    assert one.readable and many.readable, [f.message for f in many.findings]
    assert many.columns == one.columns
    _same_result(one, many)


@pytest.mark.parametrize("cut", [None, 1])
def test_csv_integer_beyond_128_bits_is_unreadable_naming_line_column_and_value(tmp_path, cut):
    """An integer polars cannot hold (beyond Int128) makes no number column in any batch size: the
    shard is decode.unreadable, and the message names the file, the line, the column, the value
    and what to write instead (not polars' advice about its own read_csv arguments)."""
    huge = str(2**127)
    path = tmp_path / "shard.csv"
    path.write_text(f"text,n\na,1\n\nb,{huge}\nc,2\n")
    with batch_rows(cut):
        res = _result(path, "csv", CONFIG)
    assert not res.readable
    (f,) = [f for f in res.findings if f.check == "decode.unreadable"]
    assert f"line 4, column 'n': {huge}" in f.message
    assert "infer_schema_length" not in f.message and "text" in f.message


def test_csv_dtypes_combine_like_one_inference():
    """combine_dtypes over chunk dtypes is polars' inference over the whole column."""
    values = ["1", "-2", "1.5", "true", "x", "", "99999999999999999999", "inf"]
    import itertools

    for a, b in itertools.combinations_with_replacement(values, 2):
        whole = pl.read_csv(f"c\n{a}\n{b}\n".encode(), infer_schema_length=None, null_values=[""],
                            try_parse_dates=False).dtypes[0]
        seen = [pl.read_csv(f"c\n{v}\n".encode(), infer_schema_length=None, null_values=[""],
                            try_parse_dates=False).dtypes[0] for v in (a, b) if v]
        assert csv_stream.combine_dtypes(seen) == whole, (a, b)


def test_csv_chunks_do_not_change_the_findings(monkeypatch, tmp_path):
    """Dtype inference and findings over several pass-1 chunks (chunk of 4 records): an int column
    that turns float in a later chunk, a bad line, a blank line, invalid UTF-8; gzip too."""
    monkeypatch.setattr(csv_stream, "CSV_CHUNK_ROWS", 4)
    lines = ["text,n,x"] + [f"r{i},{i},{i}" for i in range(10)] + ["r10,1.5,2", "", "bad line", "r11,3,4"]
    raw = ("\n".join(lines) + "\n").encode().replace(b"r3,", b"r\xe93,")
    (tmp_path / "s.csv").write_bytes(raw)
    (tmp_path / "s.csv.gz").write_bytes(gzip.compress(raw))
    for name in ("s.csv", "s.csv.gz"):
        one = _one_batch(tmp_path / name, "csv", CONFIG)
        monkeypatch.setattr(csv_stream, "CSV_CHUNK_ROWS", 4)
        with batch_rows(3):
            many = _result(tmp_path / name, "csv", CONFIG)
        assert one.rows == many.rows == 12
        assert many.columns == one.columns and dict(many.columns)["n"] == "Float64"
        checks = {f.check: f for f in many.findings}
        assert checks["decode.invalid_utf8"].lines == (5,)
        bad = [f for f in many.findings if f.check == "decode.bad_record"]
        assert sorted((f.severity, f.lines) for f in bad) == [("error", (14,)), ("info", (13,))]
        _same_result(one, many)


def test_csv_lazy_frame_reads_the_file_again(tmp_path):
    """ShardData.lf of a CSV stays a LazyFrame for inspect/clean/contracts: projection, filter, head."""
    (tmp_path / "s.csv").write_text("a,b\n" + "".join(f"{i},x{i}\n" for i in range(100)))
    data = csv_stream.open_csv(tmp_path / "s.csv", "csv", config_from_dict({}).dataset, 5, ())
    assert data.lf.collect_schema() == {"a": pl.Int64, "b": pl.String}
    assert data.lf.filter(pl.col("a") > 95).select("b").collect()["b"].to_list() == ["x96", "x97", "x98", "x99"]
    assert data.lf.head(3).collect()["a"].to_list() == [0, 1, 2]
    assert data.lf.select(pl.len()).collect().item() == 100


# ------------------------------------------------------------------ Arrow IPC

def _table(n: int) -> pa.Table:
    return pa.table({
        "text": pa.array([f"t{i % 4}" if i % 7 else None for i in range(n)]).dictionary_encode(),
        "input_ids": pa.array([[i % 50, 1, 2] for i in range(n)], type=pa.list_(pa.int64(), 3)),
        "label": pa.array([i % 5 for i in range(n)], type=pa.int64()),
        "score": pa.array([float(i) / 3 for i in range(n)]),
    })


def _write_ipc(path: Path, table: pa.Table, stream: bool, chunk: int) -> None:
    with pa.OSFile(str(path), "wb") as sink:
        w = pa.ipc.new_stream(sink, table.schema) if stream else pa.ipc.new_file(sink, table.schema)
        with w:
            w.write_table(table, max_chunksize=chunk)


@settings(max_examples=examples(int(os.environ.get("DATACHECK_HYPOTHESIS_EXAMPLES", "25"))), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 40), chunk=st.integers(1, 12), cut=st.integers(1, 9), stream=st.booleans())
def test_ipc_in_tiny_batches_equals_one_batch(monkeypatch, n, chunk, cut, stream):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "shard.arrow"
        _write_ipc(path, _table(n), stream, chunk)
        one = _one_batch(path, "arrow", CONFIG)
        with batch_rows(cut):
            many = _result(path, "arrow", CONFIG)
        assert one.readable and many.rows == one.rows == n
        assert many.columns == one.columns
        _same_result(one, many)


def test_ipc_types_polars_cannot_take_are_converted_per_batch(monkeypatch, tmp_path):
    """Run-end-encoded and decimal256 converted batch by batch, a union dropped with one schema.dtype
    finding counted over the whole shard (one finding for the shard)."""
    n = 10
    table = pa.table({
        "label": pa.array([i % 3 for i in range(n)], type=pa.int64()),
        "ree": pa.compute.run_end_encode(pa.array([1, 1, 2, 2, 2, 3, 3, 3, 3, 4], type=pa.int64())),
        "dec": pa.array([i for i in range(n)], type=pa.decimal256(10, 0)),
        "u": pa.UnionArray.from_sparse(pa.array([0] * n, type=pa.int8()), [pa.array(range(n), type=pa.int64())]),
    })
    for stream in (False, True):
        path = tmp_path / f"s{int(stream)}.arrow"
        _write_ipc(path, table, stream, 3)
        one = _one_batch(path, "arrow", CONFIG)
        with batch_rows(4):
            many = _result(path, "arrow", CONFIG)
        dtype = [f for f in many.findings if f.check == "schema.dtype" and f.column == "u"]
        assert len(dtype) == 1 and dtype[0].count == n
        assert dict(many.columns)["ree"] == "Int64"
        _same_result(one, many)


def test_ipc_corrupt_batch_in_the_middle_is_unreadable(tmp_path):
    """A string offset of the second record batch pointing past its buffer: decode.unreadable naming
    the batch, before polars sees any of it (full validation)."""
    path = tmp_path / "s.arrow"
    _write_ipc(path, pa.table({"text": [f"row{i:04d}" for i in range(6)]}), False, 3)
    raw = bytearray(path.read_bytes())
    at = raw.rfind((21).to_bytes(4, "little"), 0, raw.rfind(b"row0003"))  # 2nd batch's offsets 0,7,14,21
    raw[at:at + 4] = (1 << 20).to_bytes(4, "little")
    path.write_bytes(bytes(raw))
    res = _result(path, "arrow", CONFIG)
    assert not res.readable
    f = next(f for f in res.findings if f.check == "decode.unreadable")
    assert "record batch 1" in f.message and "full validation failed" in f.message


# ------------------------------------------------------------------ the whole frame is never built

_RSS = r"""
import sys
from pathlib import Path
from datacheck.engine.shard import audit_shard
from datacheck.io.discover import DiscoveredShard
from datacheck.formats import jsonvalues as readers
from datacheck.model.config import config_from_dict
from datacheck.formats import jsonl as jsonl_stream
readers.JSONL_CHUNK_BYTES = 1 << 20  # JSONL: 1 MiB chunks, so both files are streamed,
jsonl_stream.KEEP_BYTES = 0  # and read from the file again (not pass 1's frames kept for small files)
from datacheck.formats import csv as csv_stream
csv_stream.CSV_CHUNK_CHARS = 1 << 20  # CSV: pass 1 infers 1 Mi characters at a time in both files (its own
# bound, 16 Mi characters, held about 40 MiB of records and their parse: past the small file's 8 MB, not the big one's)
from datacheck.formats import text as text_stream
text_stream.TEXT_CHUNK_BYTES = 1 << 20  # plain text: 1 MiB chunks, read from the file again
text_stream.KEEP_BYTES = 0
p = Path(sys.argv[1])
r = audit_shard(DiscoveredShard(path=p, rel=p.name, format=sys.argv[2]), config_from_dict({}), "x", p.stat().st_size)
assert r.readable and r.rows == int(sys.argv[3]), (r.rows, [f.message for f in r.findings])
print(next(int(ln.split()[1]) for ln in open("/proc/self/status") if ln.startswith("VmHWM:")) // 1024)
"""  # VmHWM: the peak of this process' own memory (ru_maxrss is inherited from the forking parent)


def _peak_mib(path: Path, fmt: str, rows: int, batch: int | None) -> int:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("DATACHECK_BATCH_ROWS", None)
    if batch:
        env["DATACHECK_BATCH_ROWS"] = str(batch)
    p = subprocess.run([sys.executable, "-c", _RSS, str(path), fmt, str(rows)], capture_output=True, text=True,
                       env=env, timeout=600, cwd=path.parent)
    assert p.returncode == 0, p.stderr
    return int(p.stdout.split()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("fmt,stream", [("csv", False), ("arrow", False), ("arrow", True), ("jsonl", False),
                                        ("text", False)],
                         ids=["csv", "arrow-file", "arrow-stream", "jsonl", "text"])
def test_peak_memory_does_not_grow_with_the_shard(tmp_path, fmt, stream):
    """Peak RSS (VmHWM) of auditing a shard of 1x and 12x the rows (1 KB of text each) in batches
    of 2,000 rows, in child processes: the 11x more data (~88 MiB more file and frame) costs less
    than 48 MiB more (measured +10-14 MiB alone, up to +34 MiB beside other tests under pytest -n). Both
    files are past the readers' own chunk bounds (set small in the child), so the difference is what grows
    with the rows, not a chunk the small file does not fill."""
    def write(n: int) -> Path:
        text = [f"row {i} " + "abcdefghij" * 100 for i in range(n)]
        if fmt == "csv":
            path = tmp_path / f"s{n}.csv"
            pl.DataFrame({"id": range(n), "text": text}).write_csv(path)
        elif fmt == "text":  # a plain-text corpus by line, a blank line between rows (not a row)
            path = tmp_path / f"s{n}.txt"
            path.write_text("".join(t + "\n\n" for t in text))
        elif fmt == "jsonl":
            path = tmp_path / f"s{n}.jsonl"
            pl.DataFrame({"id": range(n), "text": text}).write_ndjson(path)
        else:
            path = tmp_path / f"s{n}.arrow"
            _write_ipc(path, pa.table({"id": list(range(n)), "text": text}), stream, 1_000)
        return path

    small, big = 8_000, 96_000
    a = _peak_mib(write(small), fmt, small, 2_000)
    b = _peak_mib(write(big), fmt, big, 2_000)
    assert b - a < 48, (a, b)
