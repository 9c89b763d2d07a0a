"""Valid Arrow IPC files (file and stream) and parquet files with column types
polars cannot read (union, interval, run-end-encoded, list views, decimal256) are not lost whole
with a Rust panic: columns with a lossless polars type are converted and audited, the others are
left out with one ``schema.dtype`` finding each, and nothing reaches stderr."""
from __future__ import annotations

import decimal
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import run_cli

import datacheck
from datacheck.formats.arrowtypes import arrow_for_polars


def _table() -> pa.Table:
    n = 4
    return pa.table({
        # text as string_view, the last row empty: empty.text must find row 3
        "text": pa.array(["one", "two", "three", ""], type=pa.string_view()),
        # labels run-end encoded: [0, 0, 1, 7]; 7 is out of range with num_classes = 2
        "label": pa.RunEndEncodedArray.from_arrays([2, 3, 4], pa.array([0, 1, 7], pa.int64())),
        "blob": pa.array([b"a", b"b", None, b"d"], type=pa.binary_view()),
        "ids": pa.array([[1], [2, 3], [], [4]], type=pa.list_view(pa.int64())),
        "sparse": pa.UnionArray.from_sparse(pa.array([0, 1, 0, 1], pa.int8()),
                                            [pa.array([1, 2, 3, 4]), pa.array(["a", "b", "c", "d"])]),
        "dense": pa.UnionArray.from_dense(pa.array([0, 1, 0, 0], pa.int8()), pa.array([0, 0, 1, 2], pa.int32()),
                                          [pa.array([1, 2, 3]), pa.array(["a"])]),
        "span": pa.array([pa.MonthDayNano([1, 2, 3])] * n, type=pa.month_day_nano_interval()),
    })


def _write(path: Path, table: pa.Table, kind: str) -> Path:
    if kind == "parquet":
        pq.write_table(table, path)
        return path
    new = pa.ipc.new_file if kind == "file" else pa.ipc.new_stream
    with pa.OSFile(str(path), "wb") as sink, new(sink, table.schema) as w:
        w.write_table(table)
    return path


CFG = {"labels": {"num_classes": 2}}


def _shard_findings(rep) -> dict[str, list]:
    out: dict[str, list] = {}
    for f in rep.shards[0].findings:
        out.setdefault(f.check, []).append(f)
    return out


@pytest.mark.parametrize("kind", ["file", "stream"])
def test_arrow_ipc_reads_what_it_can_and_names_the_rest(tmp_path, kind):
    path = _write(tmp_path / "d.arrow", _table(), kind)
    rep = datacheck.audit(path, CFG, fail_on="never")
    got = _shard_findings(rep)
    assert "decode.unreadable" not in got
    assert rep.shards[0].rows == 4
    dropped = {f.column: f.details["arrow_type"] for f in got["schema.dtype"]}
    assert dropped == {"sparse": "sparse_union<0: int64=0, 1: string=1>",
                       "dense": "dense_union<0: int64=0, 1: string=1>", "span": "month_day_nano_interval"}
    assert all("none of its checks ran" in f.message for f in got["schema.dtype"])
    assert got["empty.text"][0].rows == (3,)  # the string_view column was audited
    assert got["labels.out_of_range"][0].rows == (3,)  # the run-end-encoded labels, decoded
    assert rep.shards[0].columns["ids"] == "List(Int64)"  # list_view read as a list


def test_parquet_with_a_type_polars_cannot_read(tmp_path):
    table = pa.table({"text": pa.array(["a", "", "c"], type=pa.string_view()),
                      "price": pa.array([decimal.Decimal("1.50"), None, decimal.Decimal("2.25")], pa.decimal256(20, 2)),
                      "wide": pa.array([decimal.Decimal("1"), None, None], pa.decimal256(50, 0))})
    path = _write(tmp_path / "d.parquet", table, "parquet")
    rep = datacheck.audit(path, {}, fail_on="never")
    got = _shard_findings(rep)
    assert "decode.unreadable" not in got
    assert [(f.column, f.details["arrow_type"]) for f in got["schema.dtype"]] == [("wide", "decimal256(50, 0)")]
    assert got["empty.text"][0].rows == (1,)
    assert rep.shards[0].columns["price"] == "Decimal(precision=20, scale=2)"


@pytest.mark.parametrize("kind", ["file", "stream"])
def test_no_panic_text_on_stderr(tmp_path, kind):
    path = _write(tmp_path / "d.arrow", _table(), kind)
    p = run_cli("audit", str(path), "--format", "json", "--no-cache", "--no-progress",
                "--report-dir", str(tmp_path / ".r"))
    assert "panicked" not in p.stderr and "RUST_BACKTRACE" not in p.stderr, p.stderr
    assert p.returncode == 1  # the left-out columns are schema.dtype errors
    doc = json.loads(p.stdout)
    checks = {f["check"] for f in doc["shards"][0]["findings"]}
    assert "decode.unreadable" not in checks and "schema.dtype" in checks
    p = run_cli("inspect", str(path), "--check", "schema.dtype")
    assert "panicked" not in p.stderr, p.stderr


def test_conversion_keeps_values():
    table, findings = arrow_for_polars(_table())
    assert table.column_names == ["text", "label", "blob", "ids"]
    assert table.column("label").to_pylist() == [0, 0, 1, 7]
    assert table.column("ids").to_pylist() == [[1], [2, 3], [], [4]]
    assert [f.column for f in findings] == ["sparse", "dense", "span"]
