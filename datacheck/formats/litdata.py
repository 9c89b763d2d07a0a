"""Lightning ``litdata`` optimized datasets: an ``index.json`` and its ``chunk-<worker>-<n>.bin`` files.

A small reader written from the chunk layout of ``litdata/streaming/writer.py`` (and its predecessor
``lightning.data.streaming``). The maintained package is not used: it requires torch, torchvision,
boto3 and obstore (a training stack). All integers are little-endian uint32::

    N              the item count of the chunk
    offset[N+1]    byte offsets of the items from the start of the file; offset[0] = 4*(N+2),
                   offset[N] = the file size
    items          each item: uint32 size of each of its fields, then the fields' bytes

The folder's ``index.json`` gives ``config.data_format`` (one format per field of an item, e.g.
``["jpeg", "pickle"]``) and, per chunk, ``filename``, ``chunk_size`` (items) and ``chunk_bytes``.
Writers differ on ``chunk_bytes``: ``lightning.data`` (2023) stored the items' bytes without the
``4*(N+2)``-byte header, ``litdata`` stores the file size; both are accepted (see
:func:`datacheck.io.litdataindex.expected_chunk_sizes`). The set-level rules (missing, orphan, resized and duplicated chunks,
item counts) are checked against the index in :mod:`datacheck.io.dataindex`.

Columns: ``field_<i>`` per field, decoded by format: ``int`` (Int64, 8-byte little-endian),
``float`` (Float64), ``str`` (String), any other (``jpeg``, ``png``, ``bytes``, ``numpy``, ``tensor``,
``pickle``) Binary. ``pickle`` is never unpickled (unpickling runs code from the data).

Layout rules (a break raises :class:`~datacheck.formats.base.FormatError`, ``decode.unreadable``): the
file holds its offset table, ``offset[0] = 4*(N+2)``, offsets never decrease, ``offset[N]`` is the file
size, and each item's field sizes add up to its length. The field count comes from the folder's
``index.json`` (a chunk without one is read as one Binary field per item).
"""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from datacheck.formats.base import Format, FormatError, ReadOptions, read_whole
from datacheck.io import safejson
from datacheck.io.bounded import NotRegular, OverLimit, human_bytes, open_regular, read_capped
from datacheck.io.litdataindex import is_litdata_index
from datacheck.model.config import MAX_FILE_BYTES, MAX_MEMBER_BYTES, MAX_RECORD_BYTES

__all__ = ["FORMAT", "is_litdata_index", "litdata_folder", "read_litdata_chunk", "sniff"]


#: most fields an item may have (litdata items are tuples or flattened dicts of a few fields)
_MAX_FIELDS = 4096


def _formats(path: Path) -> list[str] | None:
    """``config.data_format`` of the folder's ``index.json`` (read by :mod:`datacheck.io.safejson`:
    depth- and size-bounded, never a FIFO), or None when there is no usable one."""
    try:
        doc = safejson.read_json_file(path.parent / "index.json")
    except (OSError, safejson.JsonInputError):
        return None
    if not is_litdata_index(doc):
        return None
    fmt = doc["config"].get("data_format")
    if not isinstance(fmt, list) or not 0 < len(fmt) <= _MAX_FIELDS:
        return None
    return [f if isinstance(f, str) else str(f)[:40] for f in fmt]


def _decode(fmt: str, b: bytes) -> Any:
    if fmt == "int":
        return int(np.frombuffer(b, "<i8")[0]) if len(b) == 8 else None
    if fmt == "float":
        return float(np.frombuffer(b, "<f8")[0]) if len(b) == 8 else None
    if fmt == "str":
        return b.decode("utf-8", errors="replace")
    return bytes(b)


def read_litdata_chunk(path: Path, opts: ReadOptions | None = None) -> pl.DataFrame:
    """Read one chunk file: one row per item, one column per field.

    Bounds (``[dataset]`` keys of ``opts``): the file over ``max_file_bytes``, an item over
    ``max_record_bytes`` or a field over ``max_member_bytes`` is refused (the reason names the item).

    Raises:
        FormatError: a layout rule of the module docstring is broken, or a bound is passed.
    """
    ds = opts.dataset if opts is not None else None
    file_cap = int(getattr(ds, "max_file_bytes", None) or MAX_FILE_BYTES)
    record_cap = int(getattr(ds, "max_record_bytes", None) or MAX_RECORD_BYTES)
    member_cap = int(getattr(ds, "max_member_bytes", None) or MAX_MEMBER_BYTES)
    try:
        with open_regular(path) as f:
            size = f.seek(0, 2)
            f.seek(0)
            data = read_capped(f, size, file_cap, "the chunk", "max_file_bytes")
    except NotRegular as exc:
        raise FormatError(exc.reason) from None
    except OSError as exc:
        raise FormatError(f"cannot read file: {exc.strerror or exc}") from None
    except OverLimit as exc:
        raise FormatError(exc.reason) from None
    size = len(data)
    if size < 8:
        raise FormatError(f"{size} bytes: too short for a litdata chunk (item count and offsets); a cut write?")
    n = int(np.frombuffer(data[:4], "<u4")[0])
    head = 4 * (n + 2)
    if head > size:
        raise FormatError(f"the chunk says {n} items but its {size} bytes cannot hold their offset table")
    offsets = np.frombuffer(data[4:head], "<u4").astype(np.int64)
    if offsets[0] != head or np.any(np.diff(offsets) < 0):
        raise FormatError(f"the item offsets start at {int(offsets[0])} (expected {head}) or decrease: not a "
                          "litdata chunk, or corrupt")
    if offsets[-1] != size:
        raise FormatError(f"the last item ends at byte {int(offsets[-1])} but the file holds {size} bytes "
                          f"({'truncated' if offsets[-1] > size else 'trailing bytes'}); re-run the optimize step")
    listed = _formats(path)
    formats = listed or ["bytes"]
    k = len(formats)
    cols: list[list[Any]] = [[] for _ in formats]
    for i in range(n):
        b, e = int(offsets[i]), int(offsets[i + 1])
        if listed is None:
            cols[0].append(data[b:e])
            continue
        if b + 4 * k > e:
            raise FormatError(f"item {i}: {e - b} bytes cannot hold the sizes of its {k} fields")
        if e - b > record_cap:
            raise FormatError(f"item {i}: {e - b} bytes, over the limit of {human_bytes(record_cap)} "
                              "([dataset] max_record_bytes)")
        sizes = np.frombuffer(data[b:b + 4 * k], "<u4").astype(np.int64)
        if b + 4 * k + int(sizes.sum()) != e:
            raise FormatError(f"item {i}: its {k} fields take {4 * k + int(sizes.sum())} bytes but the offsets give "
                              f"it {e - b} (index.json data_format {formats} does not fit the chunk)")
        at = b + 4 * k
        if int(sizes.max(initial=0)) > member_cap:
            raise FormatError(f"item {i}: a field of {int(sizes.max())} bytes, over the limit of "
                              f"{human_bytes(member_cap)} ([dataset] max_member_bytes)")
        for j, (fmt, ln) in enumerate(zip(formats, sizes)):
            cols[j].append(_decode(fmt, data[at:at + int(ln)]))
            at += int(ln)
    dtypes = {"int": pl.Int64, "float": pl.Float64, "str": pl.String}
    return pl.DataFrame({f"field_{j}": pl.Series(f"field_{j}", cols[j], dtype=dtypes.get(fmt, pl.Binary))
                         for j, fmt in enumerate(formats)})


def litdata_folder(folder: str) -> bool:
    """True when ``folder/index.json`` is a litdata index (cached per file version)."""
    index = Path(folder) / "index.json"
    try:
        st = index.stat()
    except OSError:
        return False
    return _litdata_index_file(str(index), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=256)
def _litdata_index_file(index: str, _mtime_ns: int, _size: int) -> bool:
    try:
        return is_litdata_index(safejson.read_json_file(Path(index)))
    except (OSError, safejson.JsonInputError):
        return False


def sniff(path: Path) -> str | None:
    """``litdata`` for a ``.bin`` in a folder whose ``index.json`` is a litdata index."""
    return "litdata" if path.name.lower().endswith(".bin") and litdata_folder(str(path.parent)) else None


FORMAT = Format(names=("litdata",), open=read_whole(lambda path, opts: (read_litdata_chunk(path, opts), [])), sniff=sniff,
                refusals={"litdata": "its writer owns the layout (the folder's index.json lists every "
                                     "chunk and its samples); rebuild it with litdata optimize"})
