"""The row content hash of numeric list columns (io/rowhash.py's fast path over the Arrow value
buffers) against a plain-Python reference of the documented encoding, for every storage width,
null lists and null elements, slices, several chunks, uint64 values beyond int64, narrower storage
widened group of rows by group of rows, long rows hashed one by one; and rows of at most two runs
(attention masks), built and hashed once per distinct row. Each property runs on the compiled
kernel (``native.rowhash``) and on the numpy path (``native.rowhash`` None)."""
from __future__ import annotations

import math
import random
import struct
import subprocess
import sys
from pathlib import Path
from unittest import mock

import polars as pl
import polars_hash as plh
import pytest
import xxhash
from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from datacheck.io import native, rowhash
from datacheck.io.rowhash import row_hash_series

#: storage dtype -> (smallest value, largest value) drawn
STORAGE = {pl.Int8: (-128, 127), pl.Int16: (-2**15, 2**15 - 1), pl.Int32: (-2**31, 2**31 - 1),
           pl.Int64: (-2**63, 2**63 - 1), pl.UInt8: (0, 255), pl.UInt16: (0, 2**16 - 1),
           pl.UInt32: (0, 2**32 - 1), pl.UInt64: (0, 2**64 - 1)}


def _path(kernel: bool):
    """The row hashes' path: the compiled kernel (skipped where it is not built or turned off),
    or the numpy path (``native.rowhash`` None)."""
    if kernel and native.rowhash is None:
        pytest.skip("datacheck._rowhash is not built or DATACHECK_NATIVE=0")
    return mock.patch.object(native, "rowhash", native.rowhash if kernel else None)


def _general(value, dtype) -> bytes:
    enc = pl.DataFrame({"v": pl.Series([value], dtype=dtype)}).select(plh.hash_rows(pl.col("v"), version=1)).item()
    return xxhash.xxh3_128_digest(enc)


def _integral(v: float) -> bool:
    return math.isfinite(v) and v == math.trunc(v) and -2**63 <= v < 2**63


def _reference(rows: list, floats: bool) -> list[int]:
    """One column's row hashes, plain Python: a list with no null element hashes its values'
    8-byte little-endian bytes (tag 0x10 + 4 int64, + 8 uint64 when a value of the column exceeds
    int64, + 10 float64); anything else the general encoding of the value dtype. datacheck-row-v5:
    a float row whose values are all integers within int64 (an empty row too) is that int64 list
    (tag 0x14; a row with a null element: the Int64 list's general encoding); other float rows
    hash every NaN as the one quiet NaN and -0.0 as 0.0."""
    flat = [v for r in rows if r is not None for v in r if v is not None]
    big = not floats and any(v > 2**63 - 1 for v in flat)
    code, fmt, dtype = (10, "d", pl.Float64) if floats else (8, "Q", pl.UInt64) if big else (4, "q", pl.Int64)
    out = []
    for r in rows:
        c, f, t = code, fmt, dtype
        if floats and r is not None and all(v is None or _integral(v) for v in r):
            c, f, t = 4, "q", pl.Int64
            r = [None if v is None else int(v) for v in r]
        elif floats and r is not None:
            r = [v if v is None else math.nan if math.isnan(v) else v + 0.0 for v in r]
        if r is not None and None not in r:
            part = bytes([0x10 + c]) + xxhash.xxh3_128_digest(struct.pack(f"<{len(r)}{f}", *r))
        else:
            part = b"\x01" + _general(r, pl.List(t))
        out.append(xxhash.xxh3_128_intdigest(part))
    return out


@st.composite
def columns(draw):
    floats = draw(st.booleans())
    if floats:
        storage = draw(st.sampled_from([pl.Float32, pl.Float64]))
        # NaN of any bits, -0.0, integral values (hashed as int64: datacheck-row-v5) and others
        value = st.floats(width=32) if storage == pl.Float32 else st.floats()
    else:
        storage = draw(st.sampled_from(list(STORAGE)))
        lo, hi = STORAGE[storage]
        value = st.integers(lo, hi)
    elem = st.one_of(st.none(), value) if draw(st.booleans()) else value
    row = st.one_of(st.none(), st.lists(elem, max_size=6)) if draw(st.booleans()) else st.lists(elem, max_size=6)
    rows = draw(st.lists(row, min_size=1, max_size=12))
    return rows, storage, floats


@pytest.mark.parametrize("kernel", [True, False], ids=["native", "numpy"])
@settings(max_examples=examples(150), deadline=None)
@given(columns(), st.integers(0, 3), st.integers(0, 3), st.booleans(), st.sampled_from([None, 8, 24]),
       st.sampled_from([None, 0, 16]))
def test_list_row_hashes_match_the_plain_python_reference(kernel, col, head, tail, chunked, group, loop):
    """``group``: the widening's group size in bytes (one value, three, or as shipped: 4 MiB);
    ``loop``: the row size from which rows are hashed one by one (always, from two values, or as
    shipped: 2 KiB)."""
    rows, storage, floats = col
    s = pl.Series("c", [None] * head + rows + [[1]] * tail, dtype=pl.List(storage)).slice(head, len(rows))
    if chunked and len(rows) > 1:  # the same rows in two chunks
        k = len(rows) // 2
        s = pl.concat([s.slice(0, k), s.slice(k)], rechunk=False)
    with _path(kernel), mock.patch.object(rowhash, "_WIDEN_GROUP_BYTES", group or rowhash._WIDEN_GROUP_BYTES), \
            mock.patch.object(rowhash, "_LOOP_ROW_BYTES", rowhash._LOOP_ROW_BYTES if loop is None else loop):
        got = row_hash_series([s]).to_list()
    assert got == _reference(rows, floats)


# ------------------------------------------- rows of at most two runs (attention masks, constant rows)


@st.composite
def run_rows(draw):
    """Integer list rows that are mostly two runs of one value each (``[a] * r + [b] * (n - r)``), of
    one length or of several, with sometimes a row of three runs, a null row, a null element or an
    empty row; run values mostly small, sometimes past the packed key's range (2**15)."""
    storage = draw(st.sampled_from([pl.Int8, pl.Int16, pl.Int32, pl.Int64, pl.UInt8, pl.UInt16, pl.UInt32,
                                    pl.UInt64]))
    lo, hi = STORAGE[storage]
    small = st.integers(max(lo, -3), min(hi, 3))
    value = st.one_of(small, small, small, st.integers(lo, hi))
    width = draw(st.integers(1, 12))
    one_length = draw(st.booleans())
    rows = []
    for _ in range(draw(st.integers(1, 30))):
        n = width if one_length else draw(st.integers(0, 12))
        r = draw(st.integers(0, n))
        row = [draw(value)] * r + [draw(value)] * (n - r)
        kind = draw(st.sampled_from(["runs"] * 12 + ["three", "null", "null element"]))
        if kind == "three" and n >= 3:
            row[n // 2] = draw(value)
        elif kind == "null":
            row = None
        elif kind == "null element" and n:
            row[draw(st.integers(0, n - 1))] = None
        rows.append(row)
    return rows, storage


@pytest.mark.parametrize("kernel", [True, False], ids=["native", "numpy"])
@settings(max_examples=examples(200), deadline=None)
@given(run_rows(), st.integers(0, 3), st.booleans(), st.booleans())
def test_rows_of_two_runs_hash_as_the_plain_python_reference(kernel, col, head, chunked, loop):
    """Rows of two runs are built and hashed once per distinct row (io/rowhash.py's numpy path; the
    kernel hashes every row): the same hashes as the reference, whatever the storage, lengths,
    nulls, slices and chunks."""
    rows, storage = col
    s = pl.Series("c", [[1, 2, 3]] * head + rows, dtype=pl.List(storage)).slice(head, len(rows))
    if chunked and len(rows) > 1:
        k = len(rows) // 2
        s = pl.concat([s.slice(0, k), s.slice(k)], rechunk=False)
    with _path(kernel), mock.patch.object(rowhash, "_RUNS_MIN_VALUES", 0), \
            mock.patch.object(rowhash, "_RUNS_MIN_MEAN", 0), \
            mock.patch.object(rowhash, "_LOOP_ROW_BYTES", 0 if loop else rowhash._LOOP_ROW_BYTES):
        got = row_hash_series([s]).to_list()
    assert got == _reference(rows, False)


def test_a_padded_attention_mask_takes_the_distinct_row_path_and_hashes_as_the_reference():
    # the numpy path (without the kernel, which hashes every row on the fly); 400 rows x 256 (102,400 values, past the path's threshold): ones then zeros, all ones, all zeros
    rng = random.Random(7)
    rows = [[1] * k + [0] * (256 - k) for k in (rng.randint(0, 256) for _ in range(400))]
    s = pl.Series("attention_mask", rows, dtype=pl.List(pl.Int8))
    seen = []
    real = rowhash._two_run_rows

    def spy(flat, off):
        got = real(flat, off)
        seen.append(got is not None)
        return got

    with _path(False), mock.patch.object(rowhash, "_two_run_rows", spy):
        got = row_hash_series([s]).to_list()
        assert seen == [True]
        assert got == _reference(rows, False)
        # one row of three runs: the column is hashed row by row, with the same hashes
        rows[5] = [1] * 10 + [0] * 10 + [1] * 236
        assert row_hash_series([pl.Series("m", rows, dtype=pl.List(pl.Int8))]).to_list() == _reference(rows, False)


@pytest.mark.parametrize("kernel", [True, False], ids=["native", "numpy"])
def test_long_rows_of_one_length_hash_as_the_reference_from_a_slice(kernel):
    # 40 rows of 300 int64 values (2,400 bytes: hashed row by row), taken from row 3 on (the values
    # start past the buffer's first row), then one row longer: the rows no longer have one length
    rng = random.Random(11)
    rows = [[rng.randint(-2**63, 2**63 - 1) for _ in range(300)] for _ in range(43)]
    s = pl.Series("labels", rows, dtype=pl.List(pl.Int64)).slice(3, 40)
    with _path(kernel):
        assert row_hash_series([s]).to_list() == _reference(rows[3:], False)
        rows[20].append(5)
        s = pl.Series("labels", rows, dtype=pl.List(pl.Int64)).slice(3, 40)
        assert row_hash_series([s]).to_list() == _reference(rows[3:], False)


def test_row_hashes_do_not_import_pyarrow_compute():
    # polars' constructor of a bare Arrow array imports pyarrow.compute (40-60 ms in a fresh process,
    # once per pool worker); the row hashes take their arrays in as record batches
    code = ("import sys, polars as pl\n"
            "from datacheck.io.rowhash import row_hash_series\n"
            "row_hash_series([pl.Series('a', [[1, 2, 3]] * 3000, dtype=pl.List(pl.Int32)),\n"
            "                 pl.Series('b', [[1] * 700] * 3000, dtype=pl.List(pl.Int8)),\n"
            "                 pl.Series('c', ['x', None, 'z'] * 1000)])\n"
            "print('pyarrow.compute' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[3])
    assert out.stdout.strip() == "False"
