"""Row content hashes: the one row-hash module (every verb hashes rows here: the audit's
cross-shard payload, ``--against``, ``clean``'s verification).

Canonical encoding (``ROW_ENCODING = "datacheck-row-v5"``), stable across library versions. It
depends on the values, not on their storage (CHECKS.md, dup): each content column is first brought
to its *value dtype* (:func:`value_dtype`): integers of any width (int8 ... int64, uint8 ...
uint32; uint64 when every value fits in int64) and booleans (``False``/``True`` as 0/1) as int64,
float32 as float64 (an exact widening),
categorical / enum (Arrow dictionary) as string, fixed-size ``Array`` and ``large_list`` as
``List`` (Arrow ``string``/``large_string`` are one polars ``String`` already), a struct's fields in
name order (:mod:`datacheck.io.structs`: a JSON object's keys have no order), at any nesting depth.
So the same integers stored as int32 in one file and int64 in another hash the same, and so do an
attention mask stored as booleans in one file and as 0/1 integers (int8, int64) in another: every
collator and model reads them alike (``torch.tensor``/``np.asarray`` of ``True`` is 1; transformers'
mask preparation casts either to the model's dtype).

Numbers are compared by value, as the loss sees them (v5): a float (float32 or float64) whose value
is an integer within int64's range (``-0.0`` included, as 0) is hashed as that int64, a scalar as
an Int64 value, a list of numbers whose values are all such integers as that int64 list; so a CSV
column inferred Int64 in one shard (``1``) and Float64 in another (``1.0``, a float column as
pandas writes it) holds the same rows, and token ids or class indices stored as floats equal the
integers. Any other float (a fraction, NaN, +/-inf, beyond int64) stays a float: it never equals an
integer. Every NaN is one value, equal to itself whatever its sign and payload bits, and never null
(a null equals only null, whatever the column's dtype: an empty CSV cell is no NaN); -0.0 equals
0.0. Floats inside structs or nested lists (a list of lists) are compared as floats (not moved onto
integers).

1. each content column gives, per row, one *part* of 17 bytes: a 1-byte tag and a 16-byte digest.

   - fast path, tag ``0x10 + code`` (code from :data:`LIST_CODES`: int64=4, uint64=8 (values
     above int64), float64=10 after the value dtype): a non-null ``List`` of those numbers with no
     null element; digest = XXH3-128 (seed 0, big-endian digest bytes) of the values'
     little-endian bytes (8 bytes each). A float row whose values are all integers within int64
     (an empty row too) takes code 4 with those int64 values; any other float row code 10, its
     values' bits with every NaN as ``0x7ff8000000000000`` and ``-0.0`` as ``0.0``.
   - general path, tag ``0x01``: every other value (strings, scalars, nested lists, null lists and
     lists holding a null); digest = XXH3-128 of ``polars_hash.hash_rows(column, version=1)``, the
     plugin's frozen, type-tagged, length-prefixed encoding, of the value-dtype column (null is a
     value of its own, the same in every dtype; the plugin writes every NaN and -0.0 as above). A
     float scalar that is an integer within int64, and a float list (with a null element) whose
     values are all such integers or null, are encoded as the Int64 value or ``List(Int64)``.

2. row hash = XXH3-128 (seed 0) of the concatenated parts, in content-column order, as ``UInt128``.

Versions: v1 encoded integer and float lists at their storage width (tag ``0x10 + width code``),
so ``list<int32> [1, 2]`` and ``list<int64> [1, 2]`` differed. v2 keeps every v1 hash of int64 and
float64 lists, strings and scalars, and moves the other storages onto them. v3 takes a
struct's fields in name order: v2 hashed them in the order the reader gave, so the same chat
``messages`` hashed differently in a JSONL shard (whose struct fields datacheck now sorts) and a
parquet shard written as ``{role, content}``; every v2 hash of a row without a struct whose fields
were out of name order is unchanged. v4 (this one) widens booleans as the other integers (0/1 as int64, at
any depth): under v3 a ``list<bool>`` mask took the general path as booleans and never equalled the
same 0/1 mask stored as integers; only hashes of rows holding a boolean moved. v5 (this one) hashes
an integral float as its integer and float lists' NaN and -0.0 by value (above): under v4 a CSV
shard's ``1.0`` never equalled another's ``1`` (cross-shard copies and train/eval leaks between
them were missed); only hashes of rows holding a float column moved (integer, string and boolean
rows keep their v4 hashes). The version is in the report (``row_content.encoding``) and in the
shard cache key.

The hashing is XXH3-128 (seed 0) throughout: the compiled kernel's (``datacheck._rowhash``, the
vendored xxHash 0.8.2), the ``polars-hash`` plugin's (xxh3_128) or the xxhash library's, which give
the same digests; polars' own ``hash()`` is never used.
The fast path exists for speed: on the benchmark shard (400,000 rows x 128 tokens, three list
columns) the general encoding costs about as much as ``pl.read_parquet`` itself (2.7 s), the fast
path about 0.16 s (``benchmarks/bench_crossdup.py --hash-cost``). Multi-chunk columns are hashed
chunk by chunk (never rechunked).

How the digests are computed (the encoding above is unchanged by it). With the compiled kernel
(:data:`datacheck.io.native.rowhash`, ``datacheck/csrc/rowhash.c``; not None where the install
built it and ``DATACHECK_NATIVE`` is not 0), a fast-path chunk's digests are computed in C from
the Arrow value buffer at its storage width and the row offsets (``list_digests``): each row's
values are widened to 8 little-endian bytes on the fly (integers of any width to int64, a uint64
keeping its bytes; float rows to canonical float64, or to int64 when all their values are
integral), in an 8 KiB stack buffer, and hashed there (longer rows through XXH3's streaming state,
which gives the same digest; XXH3's AVX2 loop where the CPU has it), the GIL released; no widened
copy of a column is made (a 5,000 x 256 int32 column widened is 10 MB). The kernel checks the
offsets against the value buffer (ValueError, never a read out of bounds: hostile shards reach
it). The rows' parts (17 bytes a column) are hashed by it too (``fixed_rows``), the UInt128 row
hash joined from the digest's two 64-bit halves. On a ``f100`` shard (5,000 x 256, ``input_ids``
int32, ``attention_mask`` int8, ``labels`` int64) this costs 2.7-3.5 ms CPU against 6-9 for the
numpy path (``benchmarks/bench_rowhash_kernel.py``). Rows with a null list or a null element, and
the general path, are as below on both paths (their digests overwrite the kernel's; the kernel
only reads their values' bytes).

Without it (the numpy path, whose digests are the same: property tests compare the two): every
column's digest inputs of a batch are hashed by one plugin call, the general-path columns encoded
by one ``hash_rows`` query, the rows' parts by one more call. An integer list column whose rows
are each at most two runs of one value (an attention mask: ones, then zeros) has each distinct row
built at the value width and hashed once, its rows taking their distinct row's digest: a row of two
runs is given by its first and last values, the length of its first run and its length. On a 5,000
x 256 shard's int8 mask this replaces a widening to 10 MB and its hashing (about 1.8 ms) by about
0.6 ms; a property test holds it to the reference. (The kernel hashes such a mask whole, widened on
the fly, in about 0.7 ms: less than telling its rows apart.)
"""
from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
import polars_hash as plh
import pyarrow as pa
import xxhash

from datacheck.io import native
from datacheck.io.structs import sorted_series

__all__ = ["ROW_ENCODING", "LIST_CODES", "row_hash_series", "row_hash_expr", "value_dtype", "to_value_dtype"]

#: fast-path dtype codes (tag = 0x10 + code); part of the stable encoding, never renumber (v2 uses
#: int64=4, uint64=8 and float64=10 only: the others are widened first)
LIST_CODES: dict[Any, int] = {
    pl.Int8: 1, pl.Int16: 2, pl.Int32: 3, pl.Int64: 4,
    pl.UInt8: 5, pl.UInt16: 6, pl.UInt32: 7, pl.UInt64: 8,
    pl.Float32: 9, pl.Float64: 10,
}

ROW_ENCODING = "datacheck-row-v5"

_WIDEN = {pl.Int8, pl.Int16, pl.Int32, pl.UInt8, pl.UInt16, pl.UInt32, pl.Boolean}
_INT64_MAX = 2**63 - 1


def value_dtype(dtype: pl.DataType, uint64_fits: bool = True) -> pl.DataType:
    """The dtype a column is hashed at (see the module docstring): integers and booleans as Int64
    (UInt64 only when ``uint64_fits``), Float32 as Float64, Categorical/Enum as String, Array as List, a struct's
    fields in name order, recursively through lists and structs; any other dtype unchanged."""
    if isinstance(dtype, (pl.List, pl.Array)):
        return pl.List(value_dtype(dtype.inner, uint64_fits))
    if isinstance(dtype, pl.Struct):  # its fields in name order (v3)
        return pl.Struct([pl.Field(f.name, value_dtype(f.dtype, uint64_fits))
                          for f in sorted(dtype.fields, key=lambda f: f.name)])
    if isinstance(dtype, (pl.Categorical, pl.Enum)):
        return pl.String()
    if dtype in _WIDEN or (dtype == pl.UInt64 and uint64_fits):
        return pl.Int64()
    if dtype == pl.Float32:
        return pl.Float64()
    return dtype


def _has_uint64(dtype: pl.DataType) -> bool:
    if isinstance(dtype, (pl.List, pl.Array)):
        return _has_uint64(dtype.inner)
    if isinstance(dtype, pl.Struct):
        return any(_has_uint64(f.dtype) for f in dtype.fields)
    return dtype == pl.UInt64


def to_value_dtype(s: pl.Series) -> pl.Series:
    """``s`` cast to its :func:`value_dtype` (a no-op when it is there already). A UInt64 column
    (at any depth) holding a value above int64's maximum keeps UInt64 (no int64 value can equal it)."""
    target = value_dtype(s.dtype, _uint64_fits(s) if _has_uint64(s.dtype) else True)
    if s.dtype == target:
        return s
    return sorted_series(s).cast(target)  # polars casts a struct only to one with its field order


_NP = {1: "<i1", 2: "<i2", 3: "<i4", 4: "<i8", 5: "<u1", 6: "<u2", 7: "<u4", 8: "<u8", 9: "<f4", 10: "<f8"}


_TAG_GENERAL = 0x01
#: 2**64 as a one-value UInt128 Series: a row hash is high * 2**64 + low of its XXH3-128
_TWO_64 = pl.Series("two_64", [1 << 64], dtype=pl.UInt128)

#: rows of at most two runs (:func:`_two_run_rows`) are hashed once per distinct row when the rows
#: hold at least this many values on average (shorter rows hash faster than they are told apart)
_RUNS_MIN_MEAN = 8
#: ... and the chunk at least this many values (below it, telling rows apart costs more than it saves)
_RUNS_MIN_VALUES = 1 << 16
#: widened values hashed per plugin call (:func:`_widened_digests`): 4 MiB, cache-sized (hashing a
#: 5,000 x 1024 int32 batch widened whole cost 61-68 ms CPU, in groups of 4 MiB 14-15 ms)
_WIDEN_GROUP_BYTES = 4 << 20
#: rows of at least this many bytes on average are hashed by the xxhash library, row by row (its
#: XXH3 uses the CPU's vector units: 5,000 rows of 8 KiB in 4.1 ms against the plugin's 6.8 ms; a
#: 5,000 x 256 token batch's row hashes 6.3 against 7.1 ms; at 1 KiB a row both cost the same, the
#: call's 0.2 us a row then weighing as much as the hashing)
_LOOP_ROW_BYTES = 2048
#: run values packed into the distinct-row key: within [-2**15, 2**15) (masks, type ids, small labels)
_RUN_VALUE = 1 << 15


def _digests_of(s: pl.Series) -> np.ndarray:
    """``(n, 16)`` uint8: XXH3-128 big-endian digests of a Binary series without nulls (any number
    of chunks: one plugin call for all of them)."""
    h = s.to_frame("b").select(plh.col("b").nchash.xxh3_128(return_binary=True, byte_order="big")).to_series()
    arr = h.to_arrow(compat_level=pl.CompatLevel.oldest())  # large_binary: no cast (pyarrow.compute's import)
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if arr.type != pa.large_binary():
        arr = arr.cast(pa.large_binary())
    data = arr.buffers()[2]
    off = np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset:arr.offset + len(arr) + 1]
    buf = np.frombuffer(data, dtype=np.uint8)[off[0]:off[-1]]
    return buf.reshape(len(arr), 16)


def _looped_digests(offsets: np.ndarray, data: np.ndarray) -> np.ndarray:
    """``(n, 16)`` uint8: XXH3-128 big-endian digests of the rows ``data``'s bytes
    ``offsets[i]:offsets[i + 1]`` (``data`` contiguous), by the xxhash library row by row (the
    digests of :func:`_digests_of`). Rows of one length (padded token rows) are the rows of a
    ``(n, length)`` byte matrix over ``data``, handed to the hash by ``map`` (no slice built in
    Python: 5,000 rows of 2 KiB in 1.5 ms against 1.8-2.3)."""
    n = len(offsets) - 1
    digest = xxhash.xxh3_128_digest
    width = int(offsets[1] - offsets[0]) if n else 0
    if width > 0 and int(offsets[-1] - offsets[0]) == n * width and bool((np.diff(offsets) == width).all()):
        raw = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        rows = raw[int(offsets[0]):int(offsets[-1])].reshape(n, width)
        return np.frombuffer(b"".join(map(digest, rows)), dtype=np.uint8).reshape(n, 16)
    mv = memoryview(np.ascontiguousarray(data)).cast("B")
    at = offsets.tolist()
    return np.frombuffer(b"".join([digest(mv[at[i]:at[i + 1]]) for i in range(n)]),
                         dtype=np.uint8).reshape(n, 16)


def _native_digests(flat: np.ndarray, rel: np.ndarray, kind: str) -> np.ndarray:
    """``(n, 16)`` uint8: XXH3-128 big-endian digests of the rows ``flat[rel[i]:rel[i + 1]]`` (a
    numpy array of 1, 2, 4 or 8-byte values; ``rel`` int64, ``n + 1`` of them) brought to 8
    little-endian bytes a value by the compiled kernel (``native.rowhash.list_digests``, on the
    fly: no widened copy): ``kind`` ``"i"``/``"u"`` integers as int64 (a uint64 keeps its bytes),
    ``"f"`` floats as float64 with NaN and -0.0 canonical (:func:`_canonical_floats`), ``"d"``
    integral floats as int64. Raises ValueError where ``rel`` is out of order or beyond ``flat``
    (or, for ``"d"``, a value is no integer within int64). Only called when ``native.rowhash`` is
    not None."""
    n = len(rel) - 1
    out = np.empty((n, 16), dtype=np.uint8)
    native.rowhash.list_digests(np.ascontiguousarray(flat),  # type: ignore[union-attr]
                                np.ascontiguousarray(rel, dtype=np.int64), kind, flat.dtype.itemsize, out)
    return out


def _bytes_digests(offsets: np.ndarray, data: np.ndarray) -> np.ndarray | None:
    """The digests of :func:`_looped_digests` (rows of ``data``'s bytes ``offsets[i]:offsets[i + 1]``)
    by the compiled kernel, where it is built and the rows are of 8-byte values; else None."""
    if native.rowhash is None or data.dtype.itemsize != 8 or (offsets.size and bool((offsets % 8).any())):
        return None
    return _native_digests(np.ascontiguousarray(data).reshape(-1).view(np.int64), offsets // 8, "i")


def _long_rows(offsets: np.ndarray) -> bool:
    """Whether rows of these byte offsets are hashed row by row (:data:`_LOOP_ROW_BYTES`)."""
    n = len(offsets) - 1
    return n > 0 and int(offsets[-1] - offsets[0]) >= _LOOP_ROW_BYTES * n


def _binary(offsets: np.ndarray, data: np.ndarray) -> pl.Series:
    """A Binary series over ``data``'s bytes (no copy), row ``i`` = bytes ``offsets[i]:offsets[i + 1]``."""
    n = len(offsets) - 1
    buf = pa.py_buffer(data) if data.size else pa.py_buffer(b"")
    return _series(pa.Array.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(offsets.astype(np.int64)), buf]))


def _series(arr: pa.Array) -> pl.Series:
    """``arr`` as a polars Series, taken in as a record batch: polars' constructor of a bare
    Arrow array imports ``pyarrow.compute`` (``coerce_arrow``), 40-60 ms CPU the first time in a
    process, so in each pool worker's first shard."""
    return pl.from_arrow(pa.RecordBatch.from_arrays([arr], names=[""]), rechunk=False).to_series()  # type: ignore[union-attr]


def _encodings(frame: pl.DataFrame) -> list[pl.Series]:
    """``polars_hash.hash_rows(column, version=1)`` of every column of ``frame`` (one query):
    the digest inputs of the general path."""
    return frame.select(plh.hash_rows(pl.col(c), version=1).alias(c) for c in frame.columns).get_columns()


class _Digests:
    """The digest inputs of every content column of a batch, hashed together by one plugin call
    (:meth:`compute`), then placed into each column's ``(n, 16)`` digests: an input's digests fill
    a column's rows from a first row on, in order or spread by an index (rows hashed once per
    distinct row), or overwrite some rows (those taking the general path; added after the others
    of their column). Digests computed already (:meth:`ready`) are placed the same way."""

    def __init__(self, n: int, k: int):
        #: per entry: (column, first row or the rows overwritten, index or None, the inputs or their digests)
        self.entries: list[tuple[int, int | np.ndarray, np.ndarray | None, pl.Series | np.ndarray]] = []
        self.out = np.empty((k, n, 16), dtype=np.uint8)

    def fill(self, column: int, inputs: pl.Series, first: int, index: np.ndarray | None = None) -> None:
        """The digests of ``inputs`` are those of ``column``'s rows ``first, first + 1, ...``, or
        with ``index`` row ``first + i`` has digest ``index[i]``."""
        self.entries.append((column, first, index, inputs))

    def ready(self, column: int, digests: np.ndarray, first: int, index: np.ndarray | None = None) -> None:
        """``digests`` are those of ``column``'s rows ``first, first + 1, ...`` (with ``index``: as
        in :meth:`fill`)."""
        self.entries.append((column, first, index, digests))

    def fill_bytes(self, column: int, offsets: np.ndarray, data: np.ndarray, first: int,
                   index: np.ndarray | None = None) -> None:
        """:meth:`fill` with the digest inputs ``data``'s bytes ``offsets[i]:offsets[i + 1]``: long
        rows hashed at once row by row (:func:`_looped_digests`), others with the batch's call; with
        the compiled kernel, all of them at once by it (:func:`_bytes_digests`)."""
        got = _bytes_digests(offsets, data)
        if got is not None:
            self.ready(column, got, first, index)
        elif _long_rows(offsets):
            self.ready(column, _looped_digests(offsets, data), first, index)
        else:
            self.fill(column, _binary(offsets, data), first, index)

    def place_bytes(self, column: int, offsets: np.ndarray, data: np.ndarray, rows: np.ndarray) -> None:
        """The digest inputs of ``column``'s ``rows`` (added after the column's others, which they
        overwrite) are ``data``'s bytes ``offsets[i]:offsets[i + 1]``, hashed as :meth:`fill_bytes`."""
        got = _bytes_digests(offsets, data)
        if got is not None:
            self.entries.append((column, rows, None, got))
        elif _long_rows(offsets):
            self.entries.append((column, rows, None, _looped_digests(offsets, data)))
        else:
            self.overwrite(column, _binary(offsets, data), rows)

    def overwrite(self, column: int, inputs: pl.Series, rows: np.ndarray) -> None:
        """The digests of ``inputs`` are those of ``column``'s ``rows``."""
        self.entries.append((column, rows, None, inputs))

    def compute(self) -> np.ndarray:
        """``(k, n, 16)``: the digests of each column's rows."""
        inputs = [e[3] for e in self.entries if isinstance(e[3], pl.Series)]
        flat = (_digests_of(pl.concat(inputs, rechunk=False) if len(inputs) > 1 else inputs[0]) if inputs
                else np.empty((0, 16), dtype=np.uint8))
        at = 0
        for j, rows, index, got in self.entries:
            if isinstance(got, pl.Series):
                d = flat[at:at + len(got)]
                at += len(got)
            else:
                d = got
            if isinstance(rows, np.ndarray):
                self.out[j][rows] = d
            elif index is None:
                self.out[j][rows:rows + len(d)] = d
            else:
                self.out[j][rows:rows + len(index)] = d[index]
        return self.out


def _widened_digests(flat: np.ndarray, rel: np.ndarray, dtype: str) -> np.ndarray:
    """``(n, 16)`` digests of the rows ``flat[rel[i]:rel[i + 1]]`` widened to ``dtype``, group of
    rows by group of rows: each group (whole rows, at most :data:`_WIDEN_GROUP_BYTES` widened, or
    one longer row) is widened into one buffer and hashed at once, so the widened values are
    hashed while in cache and never written out whole (a 5,000 x 1024 int32 batch: 41 MB)."""
    n = len(rel) - 1
    out = np.empty((n, 16), dtype=np.uint8)
    width = np.dtype(dtype).itemsize
    group = max(1, _WIDEN_GROUP_BYTES // width)
    buf = np.empty(min(int(rel[-1]), group), dtype=dtype)
    r = 0
    while r < n:
        q = max(r + 1, int(np.searchsorted(rel, rel[r] + group, side="right")) - 1)
        lo, hi = int(rel[r]), int(rel[q])
        w = buf[:hi - lo] if hi - lo <= buf.size else np.empty(hi - lo, dtype=dtype)
        np.copyto(w, flat[lo:hi])
        at = (rel[r:q + 1] - lo) * width
        out[r:q] = _looped_digests(at, w) if _long_rows(at) else _digests_of(_binary(at, w))
        r = q
    return out


#: the fast-path codes of int64 and float64 lists (:data:`LIST_CODES`)
_INT_CODE, _FLOAT_CODE = 4, 10
#: float64 values at or beyond these are no int64 (2**63 and -2**63 are exact binary64 values)
_I64_LO, _I64_HI = -(2.0 ** 63), 2.0 ** 63


def _integral(x: np.ndarray) -> np.ndarray:
    """Per float value (any float width): whether it is an integer within int64's range, the floats
    v5 hashes as that int64 (NaN and +/-inf are not; ``-0.0`` is 0)."""
    with np.errstate(invalid="ignore"):
        return (x == np.trunc(x)) & (x >= _I64_LO) & (x < _I64_HI)


def _integral_expr(x: pl.Expr) -> pl.Expr:
    """:func:`_integral` as a polars expression (null for a null value)."""
    return x.is_finite() & (x == x.floor()) & (x >= _I64_LO) & (x < _I64_HI)


def _special_floats(flat: np.ndarray) -> bool:
    """Whether float values ``flat`` (float32 or float64) hold a NaN or a ``-0.0``, by two
    reductions and no temporary array: ``max`` is NaN when a value is, and ``-0.0``'s bits read as
    a signed integer of the same width are that integer's minimum (no other float has them)."""
    if flat.size == 0:
        return False
    ints = flat.view(np.int64 if flat.dtype.itemsize == 8 else np.int32)
    return bool(np.isnan(flat.max())) or int(ints.min()) == int(np.iinfo(ints.dtype).min)


def _canonical_floats(flat: np.ndarray) -> np.ndarray:
    """``flat`` as float64 (a copy only where it changes), every NaN the one quiet NaN
    (``0x7ff8000000000000``) and ``-0.0`` as ``0.0``: the float values v5 hashes by their bits, as
    ``hash_rows`` encodes them (it writes -0.0 and every NaN so already)."""
    if not _special_floats(flat):
        return flat if flat.dtype == np.float64 else flat.astype(np.float64)
    out = flat.astype(np.float64)  # a copy (also of float64 storage: the Arrow buffer is read-only)
    out += 0.0  # -0.0 + 0.0 is 0.0 (IEEE 754 round to nearest)
    out[np.isnan(out)] = np.nan
    return out


def _integral_scalars(v: pl.Series, j: int, general: dict[int, pl.Series],
                      late: list[tuple[int, np.ndarray, pl.Series]]) -> None:
    """A Float64 scalar column ``v`` (column ``j``) on the general path: its values that are
    integers within int64 (:func:`_integral_expr`) are encoded as that Int64, so ``1.0`` hashes as
    ``1`` (a CSV column inferred Float64 in one shard, Int64 in another). All of them: the column
    cast whole; some: those rows' encodings added to ``late`` (they overwrite the float encodings)."""
    ints = v.to_frame("v").select(_integral_expr(pl.col("v"))).to_series()
    n_int = int(ints.sum() or 0)
    if n_int == 0:
        return
    if n_int == len(v) - v.null_count():
        general[j] = v.cast(pl.Int64)
        return
    rows = np.flatnonzero(ints.fill_null(False).to_numpy())
    late.append((j, rows, v.gather(rows).cast(pl.Int64)))


def _list_code(dtype: pl.DataType) -> int | None:
    if isinstance(dtype, (pl.List, pl.Array)):
        inner = dtype.inner
        for k, code in LIST_CODES.items():
            if inner == k:
                return code
    return None


def _uint64_fits(s: pl.Series) -> bool:
    """Whether every UInt64 value of ``s`` (at any depth) fits in int64 (see :func:`to_value_dtype`)."""
    flat = s
    while isinstance(flat.dtype, (pl.List, pl.Array)):
        flat = flat.explode() if isinstance(flat.dtype, pl.List) else flat.arr.explode()
    return flat.dtype != pl.UInt64 or not (flat.max() or 0) > _INT64_MAX


def _column_tags(s: pl.Series, j: int, acc: _Digests, general: dict[int, pl.Series],
                 late: list[tuple[int, np.ndarray, pl.Series]]) -> np.ndarray:
    """Tags ``(n,)`` of one content column (see the module docstring); its digest inputs go to
    ``acc``, or, for the general path, its value-dtype column to ``general`` (encoded with the
    other general columns in one query; a float column's integral values as Int64 rows in
    ``late``: :func:`_integral_scalars`)."""
    n = len(s)
    fits = True
    if _has_uint64(s.dtype):
        fits = _uint64_fits(s)
    target = value_dtype(s.dtype, fits)
    code = _list_code(target)
    if code is None:
        general[j] = to_value_dtype(s)
        if target == pl.Float64:
            _integral_scalars(general[j], j, general, late)
        return np.full(n, _TAG_GENERAL, dtype=np.uint8)
    if isinstance(s.dtype, pl.Array):
        s = s.cast(pl.List(s.dtype.inner))
    if isinstance(s.dtype, pl.List) and s.dtype.inner == pl.Boolean:  # Arrow packs booleans in bits: as 0/1 bytes
        s = s.cast(pl.List(pl.UInt8))
    if s.n_chunks() > 1:  # chunk by chunk: no copy of the whole column (rows never span chunks)
        tags, at = [], 0
        for c in s.get_chunks():
            tags.append(_list_parts(c, code, target, j, acc, at))
            at += len(c)
        return np.concatenate(tags)
    return _list_parts(s, code, target, j, acc, 0)


def _two_run_rows(flat: np.ndarray, off: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Rows of an integer list (values ``flat`` in storage, row ``i`` = ``flat[off[i]:off[i + 1]]``)
    that are each at most two runs of one value (an attention mask, a constant row): such a row's
    values are fully given by ``(first value, last value, length of its first run, length)``, so
    equal keys are equal rows. Returns the distinct rows' values, concatenated (int64), with their
    lengths' running offsets, as ``(values, offsets)`` and per row the index of its distinct row,
    as ``((values, offsets), index)``; None when some row has more runs, a run value lies outside
    [-2**15, 2**15), a row is 40,000 values or longer (the key would not fit in 64 bits), or the
    rows hold fewer than :data:`_RUNS_MIN_MEAN` values on average or :data:`_RUNS_MIN_VALUES` in
    all (they hash faster than they are told apart)."""
    n = len(off) - 1
    total = int(off[-1] - off[0])
    if n == 0 or total < _RUNS_MIN_MEAN * n or total < _RUNS_MIN_VALUES:
        return None
    lens = np.diff(off)
    longest = int(lens.max())
    if longest >= 40_000:  # the key: (2**16)**2 * (longest + 1)**2 < 2**63
        return None
    head = flat[off[0]:off[1]]  # a quick look at the first row: token ids and labels fail here
    if head.size > 1 and np.count_nonzero(head[1:] != head[:-1]) > 1:
        return None
    if longest > 1 and int(lens.min()) == longest:  # rows of one length: the changes of the (rows, length) matrix
        m = flat[off[0]:off[-1]].reshape(n, longest)
        at_change = np.flatnonzero(m[:, 1:] != m[:, :-1])
        row, at_change = np.divmod(at_change, longest - 1)
        if row.size > 1 and np.count_nonzero(row[1:] == row[:-1]):  # a row with two changes (rows are in order)
            return None
        first = m[:, 0].astype(np.int64)
        last = m[:, -1].astype(np.int64)
        run = np.full(n, longest, dtype=np.int64)
        run[row] = at_change + 1
    else:
        change = np.flatnonzero(flat[off[0] + 1:off[-1]] != flat[off[0]:off[-1] - 1]) + (off[0] + 1)
        row = np.searchsorted(off, change, side="right") - 1
        inner = change > off[row]  # a change inside a row, not at its start
        change, row = change[inner], row[inner]
        if row.size > 1 and np.count_nonzero(row[1:] == row[:-1]):  # a row with two changes (rows are in order)
            return None
        nonempty = lens > 0
        first = np.zeros(n, dtype=np.int64)
        last = np.zeros(n, dtype=np.int64)
        first[nonempty] = flat[off[:-1][nonempty]]
        last[nonempty] = flat[off[1:][nonempty] - 1]
        run = lens.copy()  # the first run: the whole row, or up to its change
        run[row] = change - off[row]
    if min(first.min(), last.min()) < -_RUN_VALUE or max(first.max(), last.max()) >= _RUN_VALUE:
        return None
    side = longest + 1
    key = (((first + _RUN_VALUE) * (2 * _RUN_VALUE) + (last + _RUN_VALUE)) * side + run) * side + lens
    order = np.argsort(key)  # the distinct keys (np.unique with its inverse costs several times a sort)
    ordered = key[order]
    new_key = np.empty(n, dtype=bool)
    new_key[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=new_key[1:])
    index = np.empty(n, dtype=np.int64)
    index[order] = np.cumsum(new_key) - 1
    at = order[new_key]
    # the distinct rows: the first run of the first value, then the rest of the last value
    runs = np.stack([run[at], lens[at] - run[at]], axis=1).reshape(-1)
    values = np.repeat(np.stack([first[at], last[at]], axis=1).reshape(-1), runs)
    return (values, np.concatenate([[0], np.cumsum(lens[at])])), index


def _list_parts(s: pl.Series, code: int, target: pl.DataType, j: int, acc: _Digests, at: int) -> np.ndarray:
    """Fast path of :func:`_column_tags` for one chunk of a numeric ``List`` column (rows ``at`` on
    of column ``j``) whose value dtype ``target`` is a list of code ``code`` (int64, uint64 or
    float64): its tags, its digest inputs added to ``acc``. The digest input of a row, its values'
    little-endian bytes at the value width, is built over the Arrow value buffer: no copy where the
    storage is the value width (int64, float64, and uint64: a uint64 that fits in int64 has the same
    8 bytes), else a numpy widening (of the whole buffer when it is small, else group of rows by
    group of rows: :func:`_widened_digests`); the rows' byte strings are a zero-copy
    ``large_binary`` view of it. An integer column whose rows are at most two runs each
    (:func:`_two_run_rows`: attention masks) has each distinct row built and hashed once. Rows with
    a null list or a null element take the general path (their value-dtype column, hashed by
    ``hash_rows``)."""
    n = len(s)
    arr = s.to_arrow()
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    off = np.frombuffer(arr.buffers()[1], dtype=np.int64 if pa.types.is_large_list(arr.type) else np.int32)
    off = off[arr.offset:arr.offset + n + 1].astype(np.int64, copy=False)
    vals = arr.values
    store = np.dtype(_NP[_list_code(s.dtype) or code])  # the storage width (a List of one of LIST_CODES)
    width = np.dtype(_NP[code]).itemsize
    base, end = int(off[0]), int(off[-1])
    raw = vals.buffers()[1]
    flat = (np.frombuffer(raw, dtype=store, count=vals.offset + end)[vals.offset + base:]
            if raw is not None and end > base else np.empty(0, dtype=store))
    rel = off - base
    tags = np.full(n, 0x10 + code, dtype=np.uint8)
    runs = None
    if code != _FLOAT_CODE and native.rowhash is None and (
            store.kind == "i" or (store.kind == "u" and store.itemsize < 8)):
        runs = _two_run_rows(flat, rel)
    if code == _FLOAT_CODE:
        _float_rows(flat, rel, j, acc, at, tags)
    elif native.rowhash is not None:  # any integer storage, widened on the fly by the kernel
        acc.ready(j, _native_digests(flat, rel, store.kind), at)
    elif runs is not None:  # each distinct row built and hashed once (int64: the value width of an integer list)
        (values, offsets), index = runs
        acc.fill_bytes(j, offsets * width, values.astype(_NP[code], copy=False), at, index)
    elif store.itemsize == width or flat.size * width <= _WIDEN_GROUP_BYTES:
        if store.itemsize != width:  # a narrower storage, widened to the value dtype
            flat = flat.astype(_NP[code])
        acc.fill_bytes(j, rel * width, flat, at)
    else:  # a narrower storage, widened group of rows by group of rows, each hashed at once
        acc.ready(j, _widened_digests(flat, rel, _NP[code]), at)
    # rows that take the general path: a null list, or a list holding a null element
    slow = np.zeros(n, dtype=bool)
    if arr.null_count:
        slow |= ~np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    vseg = vals.slice(base, end - base)
    if vseg.null_count:
        nulls = np.asarray(vseg.is_null().to_numpy(zero_copy_only=False), dtype=np.int64)
        csum = np.concatenate([[0], np.cumsum(nulls)])
        slow |= (csum[rel[1:]] - csum[rel[:-1]]) > 0
    if slow.any():
        idx = np.flatnonzero(slow)
        g = s.gather(idx).cast(target)
        if code == _FLOAT_CODE:  # rows whose values are all integers: their Int64 list's encoding
            ints = g.to_frame("v").select(pl.col("v").list.eval(pl.element().is_null() | _integral_expr(pl.element()))
                                          .list.all().fill_null(True)).to_series().to_numpy()
            if ints.any():
                (enc,) = _encodings(g.filter(ints).cast(pl.List(pl.Int64)).to_frame("v"))
                acc.overwrite(j, enc, idx[ints] + at)
            idx, g = idx[~ints], g.filter(~ints)
        if len(idx):
            (enc,) = _encodings(g.to_frame("v"))
            acc.overwrite(j, enc, idx + at)
        tags[np.flatnonzero(slow)] = _TAG_GENERAL
    return tags


def _float_rows(flat: np.ndarray, rel: np.ndarray, j: int, acc: _Digests, at: int, tags: np.ndarray) -> None:
    """The fast path of a float list chunk (values ``flat`` in storage, float32 or float64; row ``i``
    = ``flat[rel[i]:rel[i + 1]]``; rows ``at`` on of column ``j``): a row whose values are all
    integers within int64 (:func:`_integral`; an empty row too) is the int64 list of those integers
    (tag ``0x14``: ``[1.0, 2.0]`` hashes as ``[1, 2]``); every other row its float64 values' bytes
    with NaN and -0.0 canonical (:func:`_canonical_floats`; tag ``0x1a``, set in ``tags``' rows).
    Only rows whose first value is integral (or that are empty) are looked at whole: an embedding's
    rows are told from their first value, with no pass over the buffer."""
    lens = np.diff(rel)
    nonempty = lens > 0
    ints = ~nonempty
    ints[nonempty] = _integral(flat[rel[:-1][nonempty]])
    if ints[nonempty].any():  # a candidate row: every value of it integral?
        bad = np.concatenate([[0], np.cumsum(~_integral(flat), dtype=np.int64)])
        ints &= (bad[rel[1:]] - bad[rel[:-1]]) == 0
    if ints.all():  # e.g. token ids or class indices stored as floats
        tags[:] = 0x10 + _INT_CODE
        if native.rowhash is not None:
            acc.ready(j, _native_digests(flat, rel, "d"), at)
        else:
            acc.fill_bytes(j, rel * 8, flat.astype(np.int64), at)
        return
    if native.rowhash is not None:  # canonical float64 on the fly, from either float storage
        acc.ready(j, _native_digests(flat, rel, "f"), at)
    elif flat.dtype == np.float64 or flat.size * 8 <= _WIDEN_GROUP_BYTES or _special_floats(flat):
        acc.fill_bytes(j, rel * 8, _canonical_floats(flat), at)
    else:  # a large float32 chunk of no NaN and no -0.0: widened group of rows by group of rows
        acc.ready(j, _widened_digests(flat, rel, "<f8"), at)
    if ints.any():
        rows = np.flatnonzero(ints)
        vals = flat[np.repeat(ints, lens)].astype(np.int64)
        acc.place_bytes(j, np.concatenate([[0], np.cumsum(lens[rows])]) * 8, vals, rows + at)
        tags[rows] = 0x10 + _INT_CODE


def row_hash_series(columns: list[pl.Series]) -> pl.Series:
    """Row content hashes of ``columns`` (equal lengths), ``UInt128``, one per row.

    Args:
        columns: the content columns, in content order (any dtypes; see the module docstring for
            the encoding of each).

    Returns:
        ``UInt128`` Series named ``hash``, no nulls. Stable across polars/polars-hash versions as long
        as ``hash_rows`` version 1 and XXH3-128 are unchanged (a golden test pins known values).

    Raises:
        ValueError: (with the compiled kernel) a list column's Arrow offsets out of order or beyond
            its value buffer.

    With the compiled kernel (:data:`datacheck.io.native.rowhash`) the fast path's digests and the
    rows' parts are hashed by it; the general-path columns are encoded by one ``hash_rows`` query
    and their digests computed by one plugin call. Without it, every column's digest inputs are
    hashed by one plugin call, then the rows' parts by one more.
    """
    n = len(columns[0]) if columns else 0
    if n == 0:
        return pl.Series("hash", [], dtype=pl.UInt128)
    k = len(columns)
    acc = _Digests(n, k)
    general: dict[int, pl.Series] = {}
    late: list[tuple[int, np.ndarray, pl.Series]] = []
    tags = [_column_tags(s, j, acc, general, late) for j, s in enumerate(columns)]
    if general:
        frame = pl.DataFrame([g.alias(f"c{j}") for j, g in general.items()])
        for j, enc in zip(general, _encodings(frame)):
            acc.fill(j, enc, 0)
    for j, rows, ints in late:  # a float column's integral values: their Int64 encodings
        (enc,) = _encodings(ints.to_frame("v"))
        acc.overwrite(j, enc, rows)
    dig = acc.compute()
    mat = np.empty((n, 17 * k), dtype=np.uint8)
    for j in range(k):
        mat[:, 17 * j] = tags[j]
        mat[:, 17 * j + 1:17 * (j + 1)] = dig[j]
    if native.rowhash is not None:  # the parts' XXH3-128 as (high, low) halves, joined into UInt128
        halves = np.empty((n, 2), dtype=np.uint64)
        native.rowhash.fixed_rows(mat, 17 * k, halves)
        high = pl.Series("hash", np.ascontiguousarray(halves[:, 0])).cast(pl.UInt128)
        return high * _TWO_64 + pl.Series("hash", np.ascontiguousarray(halves[:, 1])).cast(pl.UInt128)
    offsets = pa.py_buffer(np.arange(0, 17 * k * (n + 1), 17 * k, dtype=np.int64))
    parts = _series(pa.Array.from_buffers(pa.large_binary(), n, [None, offsets, pa.py_buffer(mat)]))
    return parts.to_frame("p").select(plh.col("p").nchash.xxh3_128().alias("hash")).to_series()


def row_hash_expr(cols: list[str]) -> pl.Expr:
    """Per-row ``UInt128`` content hash of ``cols`` as a polars expression (for the fused query)."""
    return pl.map_batches([pl.col(c) for c in cols], lambda ss: row_hash_series(list(ss)),
                          return_dtype=pl.UInt128, is_elementwise=True)
