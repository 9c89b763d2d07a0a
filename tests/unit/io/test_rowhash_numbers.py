"""datacheck-row-v5: a number's row identity is its value, as the loss sees it. A float whose value
is an integer within int64 hashes as that integer (a CSV column inferred Float64 in one shard and
Int64 in another: ``1.0`` and ``1`` are one row), at any storage width, as a scalar or in a list of
numbers; other floats hash by value with every NaN one value (any sign or payload) and ``-0.0`` as
``0.0``; null stays null, never NaN. Expected equalities are computed here from the values."""
from __future__ import annotations

import math
import struct

import numpy as np
import polars as pl
import pytest

from datacheck.io.rowhash import ROW_ENCODING, row_hash_series

#: NaN of another sign and payload than Python's (x86 gives 0xfff8... for 0 * inf)
OTHER_NAN = struct.unpack("<d", struct.pack("<Q", 0xFFF8000000000001))[0]


def _h(values: list, dtype: pl.DataType) -> list[int]:
    return row_hash_series([pl.Series("c", values, dtype=dtype)]).to_list()


def _same(a: float | int | None, b: float | int | None) -> bool:
    """Value identity as v5 states it: null is null; NaN is NaN; else numeric equality."""
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, float) and math.isnan(a) or isinstance(b, float) and math.isnan(b):
        return isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)
    return a == b


INTS = [1, 0, -5, 2**62, None, 3, 7]
FLOATS = [1.0, -0.0, -5.0, 2.0**62, None, 3.5, math.nan]


def test_the_encoding_is_v5():
    assert ROW_ENCODING == "datacheck-row-v5"


@pytest.mark.parametrize("ftype", [pl.Float32, pl.Float64])
@pytest.mark.parametrize("itype", [pl.Int32, pl.Int64, pl.UInt64])
def test_an_integral_float_scalar_hashes_as_its_integer(ftype, itype):
    lo, hi = (0, 2**64) if itype == pl.UInt64 else (-2**31, 2**31) if itype == pl.Int32 else (-2**63, 2**63)
    ints = [v if v is None or lo <= v < hi else None for v in INTS]
    if ftype == pl.Float32:
        floats = [v if v is None or math.isnan(v) or float(struct.unpack("<f", struct.pack("<f", v))[0]) == v else None
                  for v in FLOATS]
    else:
        floats = FLOATS
    a, b = _h(ints, itype), _h(floats, ftype)
    for k, (i, f) in enumerate(zip(ints, floats)):
        assert (a[k] == b[k]) == _same(i, f), (k, i, f)


def test_a_mixed_float_column_hashes_each_value_by_its_kind():
    """A Float64 column of integral and other values (as CSV inference gives when one value has a
    fraction): its integral rows equal the Int64 rows, its others the same floats of any column."""
    mixed = [1.0, 2.5, 4.0, None, math.nan, -0.0]
    got = _h(mixed, pl.Float64)
    assert got[0] == _h([1], pl.Int64)[0] and got[2] == _h([4], pl.Int64)[0] and got[5] == _h([0], pl.Int64)[0]
    assert got[1] == _h([2.5, 9.5], pl.Float64)[0] and got[1] != _h([2], pl.Int64)[0]
    assert got[3] == _h([None], pl.Int64)[0]
    assert got[4] == _h([OTHER_NAN, 0.5], pl.Float64)[0]
    assert got[3] != got[4]  # null is no NaN


LISTS_I = [[1, 2, 3], [], [0, -7], [1, None], None, [4, 5], [2**62, 1]]
LISTS_F = [[1.0, 2.0, 3.0], [], [-0.0, -7.0], [1.0, None], None, [4.0, 5.5], [2.0**62, 1.0]]


@pytest.mark.parametrize("ftype", [pl.Float32, pl.Float64])
def test_an_integral_float_list_hashes_as_its_integer_list(ftype):
    a, b = _h(LISTS_I, pl.List(pl.Int64)), _h(LISTS_F, pl.List(ftype))
    for k, (i, f) in enumerate(zip(LISTS_I, LISTS_F)):
        eq = (i is None and f is None) or (i is not None and f is not None and len(i) == len(f)
                                             and all(_same(x, y) for x, y in zip(i, f)))
        assert (a[k] == b[k]) == eq, (k, i, f)


def test_float_lists_compare_nan_and_zero_by_value():
    """A float row with a fraction: every NaN is one value, -0.0 is 0.0 (on the fast path as on the
    general path of a row with a null element)."""
    a = _h([[0.5, math.nan, -0.0], [0.5, None, -0.0]], pl.List(pl.Float64))
    b = _h([[0.5, OTHER_NAN, 0.0], [0.5, None, 0.0]], pl.List(pl.Float64))
    assert a == b
    assert _h([[0.5, 1.0]], pl.List(pl.Float64)) != _h([[0.5, 1.5]], pl.List(pl.Float64))


def test_large_float32_chunks_hash_as_small_ones():
    """A float32 batch past the widening group (4 MiB widened): rows with a fraction hash as the same
    rows alone, rows of integers as int64 rows."""
    n, w = 600, 1024
    rows = [[(r * 31 + c) % 97 + (0.5 if r % 3 else 0.0) for c in range(w)] for r in range(n)]
    big = _h(rows, pl.List(pl.Float32))
    for r in (0, 1, 2, n - 1):
        alone = _h([rows[r]], pl.List(pl.Float32))[0]
        assert big[r] == alone
        if r % 3 == 0:
            assert alone == _h([[int(v) for v in rows[r]]], pl.List(pl.Int16))[0]


def test_large_float32_chunks_compare_nan_and_zero_by_value():
    """A float32 batch past the widening group with one -0.0 and one NaN of other bits: that row
    hashes as the same row with 0.0 and Python's NaN."""
    n, w = 600, 1024
    m = (np.arange(n * w, dtype=np.float32).reshape(n, w) % 97) + np.float32(0.25)
    odd = m.copy()
    odd[1, 3] = -0.0
    odd[1, 5] = np.array([0xFFC00001], dtype=np.uint32).view(np.float32)[0]
    ref = m[1].astype(np.float64).tolist()
    ref[3], ref[5] = 0.0, math.nan
    got = row_hash_series([pl.Series("c", odd.tolist(), dtype=pl.List(pl.Float32))]).to_list()
    assert got[1] == _h([ref], pl.List(pl.Float64))[0]
    assert got[2] == _h([m[2].tolist()], pl.List(pl.Float32))[0]
