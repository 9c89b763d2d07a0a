"""Row content hashes: the one row-hash module (every verb hashes rows here: the audit's
cross-shard payload, ``--against``, ``clean``'s verification).

Canonical encoding (``ROW_ENCODING = "datacheck-row-v3"``), stable across library versions. It
depends on the values, not on their storage (CHECKS.md, dup): each content column is first brought
to its *value dtype* (:func:`value_dtype`): integers of any width (int8 ... int64, uint8 ...
uint32; uint64 when every value fits in int64) as int64, float32 as float64 (an exact widening),
categorical / enum (Arrow dictionary) as string, fixed-size ``Array`` and ``large_list`` as
``List`` (Arrow ``string``/``large_string`` are one polars ``String`` already), a struct's fields in
name order (:mod:`datacheck.io.structs`: a JSON object's keys have no order), at any nesting depth.
So the same integers stored as int32 in one file and int64 in another hash the same.

1. each content column gives, per row, one *part* of 17 bytes: a 1-byte tag and a 16-byte digest.

   - fast path, tag ``0x10 + code`` (code from :data:`LIST_CODES`: int64=4, uint64=8 (values
     above int64), float64=10 after the value dtype): a non-null ``List`` of those numbers with no
     null element; digest = XXH3-128 (seed 0, big-endian digest bytes) of the values'
     little-endian bytes (8 bytes each). Float lists compare by their bits (``-0.0`` differs from
     ``0.0``; NaNs with equal bits are equal).
   - general path, tag ``0x01``: every other value (strings, scalars, nested lists, null lists and
     lists holding a null); digest = XXH3-128 of ``polars_hash.hash_rows(column, version=1)``, the
     plugin's frozen, type-tagged, length-prefixed encoding, of the value-dtype column (null is a
     value of its own).

2. row hash = XXH3-128 (seed 0) of the concatenated parts, in content-column order, as ``UInt128``.

Versions: v1 encoded integer and float lists at their storage width (tag ``0x10 + width code``),
so ``list<int32> [1, 2]`` and ``list<int64> [1, 2]`` differed. v2 keeps every v1 hash of int64 and
float64 lists, strings and scalars, and moves the other storages onto them. v3 (this one) takes a
struct's fields in name order: v2 hashed them in the order the reader gave, so the same chat
``messages`` hashed differently in a JSONL shard (whose struct fields datacheck now sorts) and a
parquet shard written as ``{role, content}``; every v2 hash of a row without a struct whose fields
were out of name order is unchanged. The version is in the
report (``row_content.encoding``) and in the shard cache key.

All hashing is done by the ``polars-hash`` plugin (xxh3_128); polars' own ``hash()`` is never used.
The fast path exists for speed: on the benchmark shard (400,000 rows x 128 tokens, three list
columns) the general encoding costs about as much as ``pl.read_parquet`` itself (2.7 s), the fast
path about 0.16 s (``benchmarks/bench_crossdup.py --hash-cost``). Multi-chunk columns are hashed
chunk by chunk (never rechunked).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
import polars_hash as plh
import pyarrow as pa

from datacheck.io.structs import sorted_series

__all__ = ["ROW_ENCODING", "LIST_CODES", "row_hash_series", "row_hash_expr", "value_dtype", "to_value_dtype"]

#: fast-path dtype codes (tag = 0x10 + code); part of the stable encoding, never renumber (v2 uses
#: int64=4, uint64=8 and float64=10 only: the others are widened first)
LIST_CODES: dict[Any, int] = {
    pl.Int8: 1, pl.Int16: 2, pl.Int32: 3, pl.Int64: 4,
    pl.UInt8: 5, pl.UInt16: 6, pl.UInt32: 7, pl.UInt64: 8,
    pl.Float32: 9, pl.Float64: 10,
}

ROW_ENCODING = "datacheck-row-v3"

_WIDEN = {pl.Int8, pl.Int16, pl.Int32, pl.UInt8, pl.UInt16, pl.UInt32}
_INT64_MAX = 2**63 - 1


def value_dtype(dtype: pl.DataType, uint64_fits: bool = True) -> pl.DataType:
    """The dtype a column is hashed at (see the module docstring): integers as Int64 (UInt64 only
    when ``uint64_fits``), Float32 as Float64, Categorical/Enum as String, Array as List, a struct's
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


def _digests_binary(s: pl.Series) -> np.ndarray:
    """``(n, 16)`` uint8: XXH3-128 big-endian digests of a Binary series without nulls."""
    h = s.to_frame("b").select(plh.col("b").nchash.xxh3_128(return_binary=True, byte_order="big")).to_series()
    arr = h.to_arrow()
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    arr = arr.cast(pa.large_binary())
    data = arr.buffers()[2]
    off = np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset:arr.offset + len(arr) + 1]
    buf = np.frombuffer(data, dtype=np.uint8)[off[0]:off[-1]]
    return buf.reshape(len(arr), 16)


def _general_digests(s: pl.Series) -> np.ndarray:
    """``(n, 16)`` digests of ``polars_hash.hash_rows(s, version=1)`` (the general path)."""
    enc = s.to_frame("v").select(plh.hash_rows(pl.col("v"), version=1).alias("b")).to_series()
    return _digests_binary(enc)


def _list_code(dtype: pl.DataType) -> int | None:
    if isinstance(dtype, (pl.List, pl.Array)):
        inner = dtype.inner
        for k, code in LIST_CODES.items():
            if inner == k:
                return code
    return None


def _column_parts(s: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """Tags ``(n,)`` and digests ``(n, 16)`` of one content column (see the module docstring)."""
    n = len(s)
    fits = True
    if _has_uint64(s.dtype):
        fits = _uint64_fits(s)
    target = value_dtype(s.dtype, fits)
    code = _list_code(target)
    if code is None:
        return np.full(n, _TAG_GENERAL, dtype=np.uint8), _general_digests(to_value_dtype(s))
    if isinstance(s.dtype, pl.Array):
        s = s.cast(pl.List(s.dtype.inner))
    if s.n_chunks() > 1:  # chunk by chunk: no copy of the whole column (rows never span chunks)
        got = [_list_parts(c, code, target) for c in s.get_chunks()]
        return np.concatenate([t for t, _ in got]), np.concatenate([d for _, d in got])
    return _list_parts(s, code, target)


def _uint64_fits(s: pl.Series) -> bool:
    """Whether every UInt64 value of ``s`` (at any depth) fits in int64 (see :func:`to_value_dtype`)."""
    flat = s
    while isinstance(flat.dtype, (pl.List, pl.Array)):
        flat = flat.explode() if isinstance(flat.dtype, pl.List) else flat.arr.explode()
    return flat.dtype != pl.UInt64 or not (flat.max() or 0) > _INT64_MAX


def _list_parts(s: pl.Series, code: int, target: pl.DataType) -> tuple[np.ndarray, np.ndarray]:
    """Fast path of :func:`_column_parts` for one chunk of a numeric ``List`` column whose value
    dtype ``target`` is a list of code ``code`` (int64, uint64 or float64). The digest input of a
    row, its values' little-endian bytes at the value width, is built over the Arrow value buffer:
    no copy where the storage is the value width (int64, float64, and uint64: a uint64 that fits
    in int64 has the same 8 bytes), one numpy widening of the whole buffer otherwise; the rows'
    byte strings are a zero-copy ``large_binary`` view of it. Rows with a null list or a null
    element take the general path (their value-dtype column, hashed by ``hash_rows``)."""
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
    if store.itemsize != width:  # a narrower storage, widened to the value dtype
        flat = flat.astype(_NP[code])
    data = pa.py_buffer(flat) if flat.size else pa.py_buffer(b"")
    rows = pa.Array.from_buffers(pa.large_binary(), n, [None, pa.py_buffer((off - base) * width), data])
    digests = _digests_binary(pl.Series(rows)).copy()
    tags = np.full(n, 0x10 + code, dtype=np.uint8)
    # rows that take the general path: a null list, or a list holding a null element
    slow = np.zeros(n, dtype=bool)
    if arr.null_count:
        slow |= ~np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    vseg = vals.slice(base, end - base)
    if vseg.null_count:
        nulls = np.asarray(vseg.is_null().to_numpy(zero_copy_only=False), dtype=np.int64)
        csum = np.concatenate([[0], np.cumsum(nulls)])
        rel = off - base
        slow |= (csum[rel[1:]] - csum[rel[:-1]]) > 0
    if slow.any():
        idx = np.flatnonzero(slow)
        digests[idx] = _general_digests(s.gather(idx).cast(target))
        tags[idx] = _TAG_GENERAL
    return tags, digests


def row_hash_series(columns: list[pl.Series]) -> pl.Series:
    """Row content hashes of ``columns`` (equal lengths), ``UInt128``, one per row.

    Args:
        columns: the content columns, in content order (any dtypes; see the module docstring for
            the encoding of each).

    Returns:
        ``UInt128`` Series named ``hash``, no nulls. Stable across polars/polars-hash versions as long
        as ``hash_rows`` version 1 and XXH3-128 are unchanged (a golden test pins known values).
    """
    n = len(columns[0]) if columns else 0
    if n == 0:
        return pl.Series("hash", [], dtype=pl.UInt128)
    k = len(columns)
    mat = np.empty((n, 17 * k), dtype=np.uint8)
    for j, s in enumerate(columns):
        tags, dig = _column_parts(s)
        mat[:, 17 * j] = tags
        mat[:, 17 * j + 1:17 * (j + 1)] = dig
    offsets = pa.py_buffer(np.arange(0, 17 * k * (n + 1), 17 * k, dtype=np.int64))
    parts = pl.Series(pa.Array.from_buffers(pa.large_binary(), n, [None, offsets, pa.py_buffer(mat)]))
    return parts.to_frame("p").select(plh.col("p").nchash.xxh3_128().alias("hash")).to_series()


def row_hash_expr(cols: list[str]) -> pl.Expr:
    """Per-row ``UInt128`` content hash of ``cols`` as a polars expression (for the fused query)."""
    return pl.map_batches([pl.col(c) for c in cols], lambda ss: row_hash_series(list(ss)),
                          return_dtype=pl.UInt128, is_elementwise=True)
