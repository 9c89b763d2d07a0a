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
``index.json`` (a chunk without one is read as one Binary field per item); an index whose
``data_format`` is not a list of format names, or that declares a compressor other than ``zstd``, is a
break too, as is a chunk that does not inflate as the ``zstd`` its index declares (litdata compresses
each whole chunk file). A field that does not decode under its format (an ``int``/``float`` not 8
bytes) is a ``decode.bad_record`` finding for that item, its cell null; a ``str`` not UTF-8 is
``decode.invalid_utf8`` (item, field, byte and its offset in the value), its text read with
replacement characters as the line formats read an invalid line.
"""
from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from datacheck.formats.base import Format, FormatError, Nulled, ReadOptions, read_whole
from datacheck.formats.findings import bad_rows_finding, decode_utf8, utf8_rows_finding
from datacheck.io import safejson
from datacheck.io.bounded import NotRegular, OverLimit, human_bytes, open_inflated, open_regular, read_capped
from datacheck.io.litdataindex import is_litdata_index
from datacheck.model.config import MAX_FILE_BYTES, MAX_MEMBER_BYTES, MAX_RECORD_BYTES
from datacheck.model.findings import Finding

__all__ = ["FORMAT", "is_litdata_index", "litdata_folder", "read_litdata_chunk", "sniff"]


#: most fields an item may have (litdata items are tuples or flattened dicts of a few fields)
_MAX_FIELDS = 4096


class _Config:
    """What the folder's ``index.json`` says about its chunks: ``formats`` (``config.data_format``:
    one format per field) and ``compression`` (``config.compression``; None: none)."""

    def __init__(self, formats: list[str], compression: str | None):
        self.formats, self.compression = formats, compression


def _config(path: Path) -> _Config | None:
    """The chunk's folder's litdata ``index.json`` config (read by :mod:`datacheck.io.safejson`:
    depth- and size-bounded, never a FIFO), or None when the folder has no litdata index.

    Raises:
        FormatError: the index is a litdata index whose ``config.data_format`` is not a list of 1 to
            :data:`_MAX_FIELDS` format names, or whose ``config.compression`` is neither null nor a name:
            litdata cannot read its chunks by it, and neither can datacheck.
    """
    try:
        doc = safejson.read_json_file(path.parent / "index.json")
    except (OSError, safejson.JsonInputError):
        return None
    if not is_litdata_index(doc):
        return None
    fmt = doc["config"].get("data_format")
    if not isinstance(fmt, list) or not 0 < len(fmt) <= _MAX_FIELDS or not all(isinstance(f, str) for f in fmt):
        raise FormatError(f"index.json config.data_format is {str(fmt)[:80]!r}, not a list of 1 to {_MAX_FIELDS} "
                          "format names (one per field of an item): the chunk's items cannot be split into "
                          "fields; fix or rebuild the index with litdata optimize")
    comp = doc["config"].get("compression")
    if comp is not None and not isinstance(comp, str):
        raise FormatError(f"index.json config.compression is {str(comp)[:40]!r}, neither null nor a compressor "
                          "name; fix or rebuild the index with litdata optimize")
    return _Config(list(fmt), comp or None)


def _decode(fmt: str, b: bytes) -> Any:
    """One field's value under its ``data_format``: ``int``/``float`` 8 little-endian bytes, ``str``
    UTF-8, any other format the bytes themselves.

    Raises:
        ValueError: the bytes are not a value of that format (the message says why).
    """
    if fmt in ("int", "float"):
        if len(b) != 8:
            raise ValueError(f"{len(b)} bytes for an {fmt} (litdata writes 8)")
        return int(np.frombuffer(b, "<i8")[0]) if fmt == "int" else float(np.frombuffer(b, "<f8")[0])
    if fmt == "str":
        return b.decode("utf-8")
    return bytes(b)


def _chunk_bytes(path: Path, compression: str | None, file_cap: int) -> bytes:
    """The chunk's bytes: the file, or for ``compression`` ``zstd`` (litdata's one compressor, which
    compresses each whole chunk file) the file inflated as a stream, at most ``file_cap`` bytes.

    Raises:
        FormatError: unreadable, over the bound, another compressor, or not inflatable as declared.
    """
    try:
        if compression is None:
            with open_regular(path) as f:
                size = f.seek(0, 2)
                f.seek(0)
                return read_capped(f, size, file_cap, "the chunk", "max_file_bytes")
        if not compression.lower().startswith("zstd"):
            raise FormatError(f"index.json declares compression {compression[:40]!r}: datacheck inflates litdata "
                              "chunks compressed with zstd only")
        parts, total = [], 0
        with open_inflated(path, "chunk.zst") as f:
            while b := f.read(1 << 24):
                total += len(b)
                if total > file_cap:
                    raise FormatError(f"the chunk inflates past {human_bytes(file_cap)} ([dataset] max_file_bytes); "
                                      "not read (raise the key if such sizes are real)")
                parts.append(b)
        return b"".join(parts)
    except NotRegular as exc:
        raise FormatError(exc.reason) from None
    except OverLimit as exc:
        raise FormatError(exc.reason) from None
    except FormatError:
        raise
    except OSError as exc:
        raise FormatError(f"cannot read file: {exc.strerror or exc}") from None
    except Exception as exc:  # noqa: BLE001 - any decompressor error is a chunk that is not what the index says
        raise FormatError(f"index.json declares compression {compression!r} but the chunk does not inflate as "
                          f"zstd ({str(exc)[:120] or type(exc).__name__}): a raw chunk beside a compressed index, "
                          "or a cut file; litdata cannot read it either") from None


def read_litdata_chunk_cells(path: Path, opts: ReadOptions | None = None) -> tuple[pl.DataFrame, list[Finding], Nulled]:
    """Read one chunk file: one row per item, one column per field.

    Bounds (``[dataset]`` keys of ``opts``): the file over ``max_file_bytes``, an item over
    ``max_record_bytes`` or a field over ``max_member_bytes`` is refused (the reason names the item).

    Returns:
        (frame, findings): ``decode.bad_record`` (error) for the items holding a field that does not
        decode under its ``data_format`` (an ``int``/``float`` not 8 bytes): those cells are null, the
        other items are audited; ``decode.invalid_utf8`` (error) for ``str`` fields that are not UTF-8
        (read with U+FFFD).

    Raises:
        FormatError: a layout rule of the module docstring is broken, the folder's index is not one
            litdata can read the chunk by, or a bound is passed.
    """
    ds = opts.dataset if opts is not None else None
    max_examples = opts.max_examples if opts is not None else 5
    file_cap = int(getattr(ds, "max_file_bytes", None) or MAX_FILE_BYTES)
    record_cap = int(getattr(ds, "max_record_bytes", None) or MAX_RECORD_BYTES)
    member_cap = int(getattr(ds, "max_member_bytes", None) or MAX_MEMBER_BYTES)
    cfg = _config(path)
    data = _chunk_bytes(path, cfg.compression if cfg is not None else None, file_cap)
    size = len(data)
    if size < 8:
        raise FormatError(f"{size} bytes: too short for a litdata chunk (item count and offsets); a cut write?")
    n = int(np.frombuffer(data[:4], "<u4")[0])
    head = 4 * (n + 2)
    if head > size:
        raise FormatError(f"the chunk says {n} items but its {size} bytes cannot hold their offset table")
    offsets = np.frombuffer(data[4:head], "<u4").astype(np.int64)
    if offsets[0] != head:
        raise FormatError(f"the item offsets start at {int(offsets[0])}, not at {head} (the end of the offset table "
                          f"of {n} items): not a litdata chunk, or corrupt")
    back = np.flatnonzero(np.diff(offsets) < 0)
    if back.size:
        i = int(back[0])
        raise FormatError(f"item {i + 1}'s offset {int(offsets[i + 1])} is below item {i}'s {int(offsets[i])} "
                          "(offsets never decrease): not a litdata chunk, or corrupt")
    if offsets[-1] != size:
        raise FormatError(f"the last item ends at byte {int(offsets[-1])} but the file holds {size} bytes "
                          f"({'truncated' if offsets[-1] > size else 'trailing bytes'}); re-run the optimize step")
    listed = cfg.formats if cfg is not None else None
    formats = listed or ["bytes"]
    k = len(formats)
    cols: list[list[Any]] = [[] for _ in formats]
    bad: list[tuple[int, str]] = []
    nulled: Nulled = {}  # the cells read as null for a decode.bad_record
    bad_utf8: list[tuple[int, str, int, bytes]] = []
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
        problem = None
        for j, (fmt, ln) in enumerate(zip(formats, sizes)):
            try:
                if fmt == "str":  # invalid UTF-8: decode.invalid_utf8, the text read with U+FFFD
                    text, off = decode_utf8(data[at:at + int(ln)])
                    cols[j].append(text)
                    if off is not None:
                        bad_utf8.append((i, f"field_{j}", off, data[at:at + int(ln)]))
                    at += int(ln)
                    continue
                cols[j].append(_decode(fmt, data[at:at + int(ln)]))
            except (ValueError, UnicodeDecodeError) as exc:
                cols[j].append(None)
                nulled.setdefault(f"field_{j}", []).append(i)
                problem = problem or f"field_{j} ({fmt}): {exc}"
            at += int(ln)
        if problem:
            bad.append((i, problem))
    dtypes = {"int": pl.Int64, "float": pl.Float64, "str": pl.String}
    frame = pl.DataFrame({f"field_{j}": pl.Series(f"field_{j}", cols[j], dtype=dtypes.get(fmt, pl.Binary))
                          for j, fmt in enumerate(formats)})
    findings = []
    if bad:
        findings.append(bad_rows_finding(
            bad, n, max_examples,
            f"{len(bad)} litdata item(s) hold fields that do not decode under index.json's data_format "
            f"{formats[:8]} (first: item {bad[0][0]}, {bad[0][1]}); their cells are read as null, the "
            "other items were audited"))
    if bad_utf8:
        findings.append(utf8_rows_finding(bad_utf8, n, max_examples, "litdata item(s)"))
    return frame, findings, nulled


def litdata_folder(folder: str) -> bool:
    """True when ``folder/index.json`` is a litdata index (cached per file version: size,
    modification and status-change times, inode; any write changes the status-change time)."""
    version = _index_version(Path(folder) / "index.json")
    return version is not None and _litdata_index_file(*version)


def _index_version(index: Path) -> tuple[str, int, int, int, int] | None:
    """(path, size, modification and status-change times in ns, inode) of ``index``: the key of the
    per-version caches below; None when it cannot be stat'ed."""
    try:
        st = index.stat()
    except OSError:
        return None
    return str(index), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino


@functools.lru_cache(maxsize=256)
def _litdata_index_file(index: str, _size: int, _mtime_ns: int, _ctime_ns: int, _ino: int) -> bool:
    try:
        return is_litdata_index(safejson.read_json_file(Path(index)))
    except (OSError, safejson.JsonInputError):
        return False


def read_context(path: Path) -> str | None:
    """The folder's litdata ``index.json`` ``config`` as canonical JSON (what :func:`_config` reads
    the chunk by: ``data_format``, ``compression``), or None when the folder has no litdata index.
    Part of the result cache's key (:attr:`~datacheck.formats.base.Format.context`): the index is not
    the chunk's bytes, yet decides its fields. Read once per index file version (path, size,
    modification and status-change times, inode)."""
    version = _index_version(Path(path).parent / "index.json")
    return None if version is None else _index_config(*version)


@functools.lru_cache(maxsize=256)
def _index_config(index: str, _size: int, _mtime_ns: int, _ctime_ns: int, _ino: int) -> str | None:
    try:
        doc = safejson.read_json_file(Path(index))
    except (OSError, safejson.JsonInputError):
        return None
    if not is_litdata_index(doc):
        return None
    return json.dumps(doc.get("config"), sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=repr)


def sniff(path: Path) -> str | None:
    """``litdata`` for a ``.bin`` in a folder whose ``index.json`` is a litdata index."""
    return "litdata" if path.name.lower().endswith(".bin") and litdata_folder(str(path.parent)) else None


def read_litdata_chunk(path: Path, opts: ReadOptions | None = None) -> tuple[pl.DataFrame, list[Finding]]:
    """One litdata chunk read whole: the frame and its findings of :func:`read_litdata_chunk_cells`."""
    df, findings, _ = read_litdata_chunk_cells(path, opts)
    return df, findings


FORMAT = Format(names=("litdata",), open=read_whole(read_litdata_chunk_cells), sniff=sniff, context=read_context,
                refusals={"litdata": "its writer owns the layout (the folder's index.json lists every "
                                     "chunk and its samples); rebuild it with litdata optimize"})
