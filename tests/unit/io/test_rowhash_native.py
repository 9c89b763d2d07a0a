"""The compiled row-hash kernel (datacheck._rowhash, datacheck/csrc/rowhash.c) against plain-Python
references computed here (``struct`` + the xxhash library), its checks of hostile offsets and
buffer sizes, and ``row_hash_series`` on the kernel against the numpy path (``native.rowhash``
None) on random columns of every dtype the fast path takes (and the general path's around them):
the row hashes must be the same, byte for byte. The kernel's tests run on both of its XXH3 loops
(AVX2 where the CPU has it, and the baseline's)."""
from __future__ import annotations

import contextlib
import math
import struct
from unittest import mock

import numpy as np
import polars as pl
import pytest
import xxhash
from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from datacheck.io import native
from datacheck.io.rowhash import row_hash_series

pytestmark = pytest.mark.skipif(native.rowhash is None, reason="datacheck._rowhash not built or DATACHECK_NATIVE=0")

#: numpy storage -> (smallest, largest) value drawn
INTS = {"<i1": (-128, 127), "<i2": (-2**15, 2**15 - 1), "<i4": (-2**31, 2**31 - 1), "<i8": (-2**63, 2**63 - 1),
        "<u1": (0, 255), "<u2": (0, 2**16 - 1), "<u4": (0, 2**32 - 1), "<u8": (0, 2**64 - 1)}


@contextlib.contextmanager
def _xxh3_loop(avx2: bool):
    """The kernel's XXH3 loop for inputs over 240 bytes: AVX2 (skipped where the CPU or the build
    lacks it) or the baseline's."""
    before = native.rowhash._avx2()
    try:
        if native.rowhash._avx2(avx2) != avx2:
            pytest.skip("no AVX2 loop on this CPU or build")
        yield
    finally:
        native.rowhash._avx2(before)


LOOPS = pytest.mark.parametrize("avx2", [True, False], ids=["avx2", "baseline"])


def _canonical(v: float) -> float:
    return math.nan if math.isnan(v) else v + 0.0


def _ref_row(values: list, kind: str) -> bytes:
    """XXH3-128 big-endian digest of a row's values as 8 little-endian bytes each."""
    if kind == "u" and any(v > 2**63 - 1 for v in values):
        return xxhash.xxh3_128_digest(struct.pack(f"<{len(values)}Q", *values))
    if kind == "f":
        return xxhash.xxh3_128_digest(struct.pack(f"<{len(values)}d", *[_canonical(v) for v in values]))
    if kind == "d":
        values = [int(v) for v in values]
    return xxhash.xxh3_128_digest(struct.pack(f"<{len(values)}q", *values))


def _kernel(flat: np.ndarray, off: list[int], kind: str) -> list[bytes]:
    out = np.empty((len(off) - 1, 16), dtype=np.uint8)
    native.rowhash.list_digests(flat, np.asarray(off, dtype=np.int64), kind, flat.dtype.itemsize, out)
    return [bytes(r) for r in out]


#: row lengths around the kernel's stack buffer (1,024 values: longer rows are hashed by XXH3's
#: streaming state) and XXH3's own block sizes (16, 128, 240 bytes; 1,024-byte stripes)
LENGTHS = st.one_of(st.integers(0, 40), st.sampled_from([127, 128, 129, 240, 1023, 1024, 1025, 2048, 2049, 3001]))


@LOOPS
@settings(max_examples=examples(200), deadline=None)
@given(st.sampled_from(sorted(INTS)), st.lists(LENGTHS, min_size=0, max_size=6), st.integers(0, 5), st.data())
def test_integer_rows_hash_as_their_int64_bytes(avx2, dtype, lengths, head, data):
    lo, hi = INTS[dtype]
    total = head + sum(lengths)
    seed = data.draw(st.integers(0, 2**32 - 1))
    flat = np.random.default_rng(seed).integers(lo, hi, total, dtype=dtype, endpoint=True)
    extremes = data.draw(st.lists(st.sampled_from([lo, hi, 0, -1 if lo < 0 else 1]), max_size=min(total, 8)))
    flat[:len(extremes)] = extremes
    off = [head]
    for n in lengths:
        off.append(off[-1] + n)
    want = [_ref_row([int(v) for v in flat[a:b]], dtype[1]) for a, b in zip(off, off[1:])]
    with _xxh3_loop(avx2):
        assert _kernel(flat, off, dtype[1]) == want


FLOAT_SPECIALS = [0.0, -0.0, math.nan, -math.nan, math.inf, -math.inf, 1.0, -5.0, 0.5, 2.0**63, -2.0**63,
                  struct.unpack("<d", struct.pack("<Q", 0x7FF0000000000001))[0],  # a signalling NaN
                  struct.unpack("<d", struct.pack("<Q", 0xFFF8000000000001))[0]]


@LOOPS
@settings(max_examples=examples(200), deadline=None)
@given(st.sampled_from(["<f4", "<f8"]), st.lists(st.lists(st.one_of(st.sampled_from(FLOAT_SPECIALS), st.floats()),
                                                          max_size=9), max_size=6),
       st.sampled_from([0, 31, 1030, 2100]))
def test_float_rows_hash_as_canonical_float64(avx2, dtype, rows, long_row):
    if long_row:  # a row longer than the stack buffer, with a NaN and a -0.0 past it
        rows = [*rows, [1.5] * (long_row - 2) + [math.nan, -0.0]]
    with np.errstate(over="ignore"):
        flat = np.array([v for r in rows for v in r], dtype=dtype)
    off = [0]
    for r in rows:
        off.append(off[-1] + len(r))
    want = [_ref_row([float(v) for v in flat[a:b]], "f") for a, b in zip(off, off[1:])]
    with _xxh3_loop(avx2):
        assert _kernel(flat, off, "f") == want


@LOOPS
@settings(max_examples=examples(100), deadline=None)
@given(st.sampled_from(["<f4", "<f8"]), st.lists(st.lists(st.integers(-2**24, 2**24), max_size=60), max_size=6))
def test_integral_float_rows_hash_as_their_int64_bytes(avx2, dtype, rows):
    flat = np.array([v for r in rows for v in r], dtype=dtype)
    off = [0]
    for r in rows:
        off.append(off[-1] + len(r))
    want = [_ref_row(r, "i") for r in rows]
    with _xxh3_loop(avx2):
        assert _kernel(flat, off, "d") == want


@pytest.mark.parametrize("value", [0.5, math.nan, math.inf, 2.0**63, -2.0**64])
def test_a_float_that_is_no_int64_is_refused_as_an_integral_row(value):
    with pytest.raises(ValueError, match="no integer within int64"):
        _kernel(np.array([1.0, value]), [0, 2], "d")
    assert _kernel(np.array([-2.0**63]), [0, 1], "d") == [_ref_row([-2**63], "i")]


@pytest.mark.parametrize("off", [[0, 6], [1, 0, 2], [-1, 2], [0, 3, 2], [0, 2**62], [6, 6]])
def test_offsets_out_of_order_or_beyond_the_values_raise(off):
    # hostile shards reach the kernel: nothing outside the buffers is read
    for dtype, kind in (("<i4", "i"), ("<i8", "i"), ("<f4", "f"), ("<u1", "u")):
        with pytest.raises(ValueError, match="offsets"):
            _kernel(np.zeros(5, dtype=dtype), off, kind)


def test_buffer_sizes_and_kinds_are_checked():
    flat, off = np.zeros(4, dtype=np.int32), np.array([0, 2, 4], dtype=np.int64)
    with pytest.raises(ValueError, match="out holds"):
        native.rowhash.list_digests(flat, off, "i", 4, np.empty(31, dtype=np.uint8))
    with pytest.raises(ValueError, match="offsets must be"):
        native.rowhash.list_digests(flat, np.zeros(0, dtype=np.int64), "i", 4, np.empty(0, dtype=np.uint8))
    with pytest.raises(ValueError, match="offsets must be"):
        native.rowhash.list_digests(flat, b"\0" * 12, "i", 4, np.empty(16, dtype=np.uint8))
    for kind, size in (("i", 3), ("f", 2), ("d", 1), ("x", 8)):
        with pytest.raises(ValueError, match="unsupported kind"):
            native.rowhash.list_digests(flat, off, kind, size, np.empty((2, 16), dtype=np.uint8))
    with pytest.raises(ValueError, match="contiguous"):
        native.rowhash.list_digests(np.zeros(8, dtype=np.int32)[::2], off, "i", 4, np.empty((2, 16), dtype=np.uint8))
    with pytest.raises(TypeError):  # a read-only out
        native.rowhash.list_digests(flat, off, "i", 4, bytes(32))
    # a value buffer shorter than whole values: only its whole values count
    with pytest.raises(ValueError, match="offsets"):
        native.rowhash.list_digests(b"\0" * 7, np.array([0, 2], dtype=np.int64), "i", 4, np.empty(16, dtype=np.uint8))
    assert _kernel(np.zeros(0, dtype=np.int8), [0], "i") == []
    assert _kernel(np.zeros(0, dtype=np.int8), [0, 0], "i") == [xxhash.xxh3_128_digest(b"")]


@LOOPS
@settings(max_examples=examples(100), deadline=None)
@given(st.one_of(st.integers(1, 300), st.sampled_from([1024, 1025, 5000])), st.integers(0, 30), st.integers(0, 2**32 - 1))
def test_fixed_rows_give_the_high_and_low_halves(avx2, width, n, seed):
    data = np.random.default_rng(seed).integers(0, 256, (n, width), dtype=np.uint8)
    out = np.empty((n, 2), dtype=np.uint64)
    with _xxh3_loop(avx2):
        native.rowhash.fixed_rows(data, width, out)
    assert [(int(h) << 64) | int(lo) for h, lo in out] == [xxhash.xxh3_128_intdigest(r.tobytes()) for r in data]
    with pytest.raises(ValueError):
        native.rowhash.fixed_rows(np.zeros(10, dtype=np.uint8), 3, np.empty((3, 2), dtype=np.uint64))
    with pytest.raises(ValueError):
        native.rowhash.fixed_rows(np.zeros(9, dtype=np.uint8), 3, np.empty((2, 2), dtype=np.uint64))


# --------------------------------------- row_hash_series: the kernel against the numpy path

#: polars dtype -> values drawn (floats: NaN of any bits, -0.0, integral values and others)
VALUES = {pl.Int8: st.integers(-128, 127), pl.Int16: st.integers(-2**15, 2**15 - 1),
          pl.Int32: st.integers(-2**31, 2**31 - 1), pl.Int64: st.integers(-2**63, 2**63 - 1),
          pl.UInt8: st.integers(0, 255), pl.UInt16: st.integers(0, 2**16 - 1),
          pl.UInt32: st.integers(0, 2**32 - 1), pl.UInt64: st.integers(0, 2**64 - 1),
          pl.Boolean: st.booleans(), pl.Float32: st.floats(width=32), pl.Float64: st.floats()}


@st.composite
def list_columns(draw, n: int):
    inner = draw(st.sampled_from(list(VALUES)))
    value = VALUES[inner]
    if inner in (pl.Float32, pl.Float64) and draw(st.booleans()):  # mostly integral floats (token ids)
        value = st.one_of(st.integers(-2**20, 2**20).map(float), st.integers(-2**20, 2**20).map(float), value)
    if inner not in (pl.Float32, pl.Float64, pl.Boolean) and draw(st.booleans()):  # small values (masks, ids)
        value = st.sampled_from([0, 1])
    elem = st.one_of(st.none(), value) if draw(st.booleans()) else value
    length = st.integers(0, 9) if draw(st.booleans()) else st.sampled_from([0, 3, 300, 1100])
    if draw(st.booleans()):  # rows of one length (padded rows; an Array column sometimes)
        k = draw(st.sampled_from([1, 4, 300]))
        length = st.just(k)
    rows = []
    for _ in range(n):
        if draw(st.integers(0, 9)) == 0:
            rows.append(None)
        else:
            m = draw(length)
            rows.append(draw(st.lists(elem, min_size=m, max_size=m)))
    return rows, inner


@st.composite
def frames(draw):
    n = draw(st.integers(1, 14))
    cols = [draw(list_columns(n)) for _ in range(draw(st.integers(1, 3)))]
    other = draw(st.sampled_from([None, "str", "int", "float"]))
    return n, cols, other


def _series(rows: list, inner: pl.DataType, head: int, chunked: bool, array: bool) -> pl.Series:
    pad = [rows[0]] * head  # rows before the slice: its Arrow offsets start past them
    if array and rows and all(r is not None and len(r) == len(rows[0]) for r in rows):
        s = pl.Series("c", pad + rows, dtype=pl.Array(inner, len(rows[0]) if rows else 0))
    else:
        s = pl.Series("c", pad + rows, dtype=pl.List(inner))
    s = s.slice(head, len(rows))
    if chunked and len(rows) > 1:
        k = len(rows) // 2
        s = pl.concat([s.slice(0, k), s.slice(k)], rechunk=False)
    return s


@LOOPS
@settings(max_examples=examples(300), deadline=None)
@given(frames(), st.integers(0, 3), st.booleans(), st.booleans())
def test_row_hashes_on_the_kernel_equal_the_numpy_path(avx2, frame, head, chunked, array):
    """Every integer width signed and unsigned, booleans, floats (NaN, -0.0, integral), empty rows,
    null rows and null elements, slices (non-zero Arrow offsets), two chunks, Array columns, and a
    general-path column beside them: the same UInt128 row hashes on both paths."""
    n, cols, other = frame
    series = [_series(rows, inner, head, chunked, array) for rows, inner in cols]
    if other == "str":
        series.append(pl.Series("s", ["a", None, "bc"] * n)[:n])
    elif other == "int":
        series.append(pl.Series("i", list(range(n)), dtype=pl.Int16))
    elif other == "float":
        series.append(pl.Series("f", [1.0, 2.5, math.nan, None, -0.0] * n, dtype=pl.Float64)[:n])
    with _xxh3_loop(avx2):
        got = row_hash_series(series)
    with mock.patch.object(native, "rowhash", None):
        want = row_hash_series(series)
    assert got.dtype == want.dtype == pl.UInt128 and got.name == want.name == "hash"
    assert got.to_list() == want.to_list()


def test_a_token_shard_hashes_the_same_on_both_paths():
    # the f100 shape (input_ids int32, attention_mask int8 of two runs, labels int64 with -100),
    # 300 rows x 256, the mask's rows through the numpy path's distinct-row build
    rng = np.random.default_rng(3)
    ids = rng.integers(0, 50_000, (300, 256), dtype=np.int32)
    keep = rng.integers(1, 257, 300)
    mask = (np.arange(256)[None, :] < keep[:, None]).astype(np.int8)
    labels = np.where(mask == 1, ids, -100).astype(np.int64)
    series = [pl.Series("input_ids", ids.tolist(), dtype=pl.List(pl.Int32)),
              pl.Series("attention_mask", mask.tolist(), dtype=pl.List(pl.Int8)),
              pl.Series("labels", labels.tolist(), dtype=pl.List(pl.Int64))]
    got = row_hash_series(series).to_list()
    with mock.patch.object(native, "rowhash", None):
        assert row_hash_series(series).to_list() == got
    # and the documented encoding, computed here: three parts of tag 0x14 + the int64 digest
    for i in (0, 7, 299):
        parts = b"".join(b"\x14" + xxhash.xxh3_128_digest(a[i].astype("<i8").tobytes()) for a in (ids, mask, labels))
        assert got[i] == xxhash.xxh3_128_intdigest(parts)
