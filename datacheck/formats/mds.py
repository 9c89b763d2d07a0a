"""MosaicML Streaming MDS shards (``shard.NNNNN.mds``, also ``.mds.zstd``/``.mds.gz``/``.mds.bz2``).

A small reader written from the layout of ``mosaicml-streaming``'s ``streaming/base/format/mds/``
(``writer.py``, ``reader.py``, ``encodings.py``, version 2). The maintained package is not used: it
requires torch, torchvision, transformers and the cloud SDKs (a training stack), and datacheck only
needs the byte layout. All integers are little-endian::

    uint32      N, the sample count
    uint32[N+1] sample offsets (bytes from the start of the file); offset[N] = the file size
    bytes       the shard's config as JSON (column_names, column_encodings, column_sizes, ...),
                from offset 4*(N+2) to offset[0]
    per sample  uint32 size of each variable-size column (column_sizes null), then the columns' bytes

Encodings read into columns: ``str`` (String), ``int`` (int64), ``int8``...``uint64``, ``float16``
(as float32), ``float32``, ``float64``, ``str_int`` (Int64), ``str_float`` (Float64), ``json`` (the
JSON text, String), ``ndarray[:dtype[:shape]]`` (a flat List of the values), and ``bytes``/``pil``/
``jpeg``/``png``/``jpeg_array``/``list[...]``/``str_decimal`` as Binary. ``pkl`` stays Binary: it is
never unpickled (unpickling runs code from the data).

Layout rules (a break raises :class:`~datacheck.formats.base.FormatError`, i.e. ``decode.unreadable``):
the file holds the offset table, offsets never decrease, ``offset[N]`` equals the file size, the
config is JSON with as many encodings as names, every encoding is known, and every sample's sizes fit
inside it. A ``str`` value that is not UTF-8 is ``decode.invalid_utf8`` (sample, column, byte and its
offset in the value; the text read with replacement characters, as the line formats read an invalid
line). A value that does not decode under its encoding (bad UTF-8 in a ``str_int``/``str_float``/
``json``, a scalar of the wrong width, bad JSON) is a ``decode.bad_record`` finding for that sample;
the other samples are still audited.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from datacheck.formats.base import Format, FormatError, Nulled, ReadOptions, read_whole
from datacheck.formats.findings import bad_rows_finding, decode_utf8, utf8_rows_finding
from datacheck.io import safejson
from datacheck.io.bounded import NotRegular, OverLimit, human_bytes, open_inflated, read_capped
from datacheck.model.config import MAX_FILE_BYTES, MAX_MEMBER_BYTES, MAX_RECORD_BYTES
from datacheck.model.findings import Finding

__all__ = ["MDS_SUFFIXES", "read_mds", "FORMAT"]

#: file name endings of MDS shards (plain and compressed, as the MDS writer names them)
MDS_SUFFIXES = (".mds", ".mds.zstd", ".mds.gz", ".mds.bz2")
_SCALARS = {"uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64, "int8": np.int8,
            "int16": np.int16, "int32": np.int32, "int64": np.int64, "int": np.int64, "float16": np.float16,
            "float32": np.float32, "float64": np.float64}
_BINARY = {"bytes", "pil", "jpeg", "png", "jpeg_array", "jpegarray", "list[pil]", "list[jpeg]", "list[png]",
           "pkl", "str_decimal"}
# ndarray encodings (streaming encodings.NDArray): value dtype codes and shape dtype codes
_ND_VALUE = {8: "uint8", 9: "int8", 16: "uint16", 17: "int16", 32: "uint32", 33: "int32", 64: "uint64",
             65: "int64", 66: "float16", 67: "float32", 68: "float64"}
_ND_SHAPE = {0: np.uint8, 1: np.uint16, 2: np.uint32, 3: np.uint64}
#: the ``ndarray:<dtype>`` names MDS writes (``streaming.base.format.mds.encodings``: the dtypes of
#: :data:`_ND_VALUE`); any other dtype string (``O``, ``V8``, ``<U3``, ``xyz``) is refused
_ND_DTYPES = frozenset(_ND_VALUE.values())
_DEFAULT_LIMITS = {"max_file_bytes": MAX_FILE_BYTES, "max_member_bytes": MAX_MEMBER_BYTES,
                   "max_record_bytes": MAX_RECORD_BYTES}
#: the encodings read as text/number columns besides the scalars, binaries and ndarrays
_OTHER = frozenset({"str", "json", "str_int", "str_float"})
#: the most dimensions an MDS ndarray may declare (6 bits of its header byte)
_ND_MAX_DIMS = 63


def _raw(path: Path, opts: ReadOptions) -> bytes:
    """The shard's bytes (inflated as a stream for ``.zstd``/``.gz``/``.bz2``): the sample count and
    offset table are read first, and no more than ``offset[N]`` bytes (the size the table declares,
    checked against ``[dataset] max_file_bytes`` before it is read) plus one, to tell trailing bytes."""
    cap = _limit(opts, "max_file_bytes")
    try:
        with open_inflated(path) as f:
            head = f.read(8)
            if len(head) < 8:
                return head
            n = int(np.frombuffer(head[:4], "<u4")[0])
            table = head + read_capped(f, 4 * n, cap, f"the offset table of {n} samples", "max_file_bytes")
            if len(table) < 4 * (n + 2):
                return table
            end = int(np.frombuffer(table[-4:], "<u4")[0])
            rest = read_capped(f, max(0, end - len(table)) + 1, cap, f"the shard (offset[{n}] = {end})",
                               "max_file_bytes")
            return table + rest
    except OverLimit as exc:
        raise FormatError(exc.reason) from None
    except NotRegular as exc:
        raise FormatError(exc.reason) from None
    except OSError as exc:
        raise FormatError(f"cannot read file: {exc.strerror or exc}") from None
    except Exception as exc:  # noqa: BLE001 - any decompressor error is a broken shard
        raise FormatError(f"cannot decompress {path.suffix} data: {exc}") from None


def _limit(opts: ReadOptions, key: str) -> int:
    return int(getattr(opts.dataset, key, None) or _DEFAULT_LIMITS[key])


def _encoding_problem(enc: Any) -> str | None:
    """Why ``enc`` is not an encoding MDS writes (None: it is one). ``ndarray`` takes an optional
    dtype of :data:`_ND_DTYPES` and an optional shape of positive integers (``ndarray:int32:3,4``)."""
    if not isinstance(enc, str):
        return f"{enc!r} is a JSON {type(enc).__name__}, not an encoding name"
    if enc in _SCALARS or enc in _BINARY or enc in _OTHER:
        return None
    parts = enc.split(":")
    if parts[0] != "ndarray" or len(parts) > 3:
        return f"unknown encoding {enc[:80]!r}"
    if len(parts) > 1 and parts[1] and parts[1] not in _ND_DTYPES:
        return (f"ndarray dtype {parts[1][:40]!r} is not one MDS writes ({', '.join(sorted(_ND_DTYPES))}); "
                "object and other dtypes are refused")
    if len(parts) == 3:
        dims = parts[2].split(",")
        if not (0 < len(dims) <= _ND_MAX_DIMS and all(d.isdigit() and len(d) <= 12 and int(d) > 0 for d in dims)):
            return f"ndarray shape {parts[2][:40]!r} is not a list of positive integers"
    return None


def _polars_type(enc: str) -> pl.DataType:
    if enc in _SCALARS:
        return pl.Float32() if enc == "float16" else pl.from_numpy(np.zeros(1, _SCALARS[enc])).dtypes[0]
    if enc in ("str", "json"):
        return pl.String()
    if enc == "str_int":
        return pl.Int64()
    if enc == "str_float":
        return pl.Float64()
    if enc.startswith("ndarray"):
        parts = enc.split(":")
        dt = parts[1] if len(parts) > 1 and parts[1] else "float64"
        inner = pl.from_numpy(np.zeros(1, dt if dt in _ND_DTYPES else "float64")).dtypes[0]
        return pl.List(pl.Float32() if inner == pl.Float16() else inner)
    return pl.Binary()


def _decode(enc: str, b: bytes) -> Any:
    if enc in _SCALARS:
        width = np.dtype(_SCALARS[enc]).itemsize
        if len(b) != width:
            raise ValueError(f"{len(b)} bytes for a {enc} (needs {width})")
        v = np.frombuffer(b, _SCALARS[enc])[0]
        return float(v) if enc.startswith("float") else int(v)
    if enc == "str":
        return b.decode("utf-8")
    if enc == "json":
        text = b.decode("utf-8")
        safejson.loads(b)
        return text
    if enc == "str_int":
        return int(b.decode("utf-8"))
    if enc == "str_float":
        return float(b.decode("utf-8"))
    if enc.startswith("ndarray"):
        parts = enc.split(":")
        i = 0
        if len(parts) > 1 and parts[1]:
            dt = parts[1]
        else:
            dt = _ND_VALUE[b[0]]
            i = 1
        if dt not in _ND_DTYPES:
            raise ValueError(f"ndarray dtype {dt!r} is not one MDS writes")
        if len(parts) <= 2:  # dynamic shape: [ndim << 2 | shape dtype code] [shape]
            ndim, sdt = b[i] >> 2, _ND_SHAPE[b[i] % 4]
            i += 1 + ndim * np.dtype(sdt).itemsize
            if i > len(b):
                raise ValueError(f"the ndarray header declares {ndim} dimensions but the value holds {len(b)} bytes")
        arr = np.frombuffer(b[i:], dt)
        return arr.astype(np.float32).tolist() if dt == "float16" else arr.tolist()
    return bytes(b)


def read_mds_cells(path: Path, opts: ReadOptions) -> tuple[pl.DataFrame, list[Finding], Nulled]:
    """Read one MDS shard: one row per sample, one column per MDS column.

    Returns:
        (frame, findings): ``decode.bad_record`` (error) when values do not decode (their cells are null);
        ``decode.invalid_utf8`` (error) for ``str`` values that are not UTF-8 (read with U+FFFD).

    Raises:
        FormatError: a layout rule of the module docstring is broken.
    """
    max_examples = opts.max_examples
    data = _raw(path, opts)
    size = len(data)
    if size < 8:
        raise FormatError(f"{size} bytes: too short for an MDS shard (sample count and offsets); a cut write?")
    n = int(np.frombuffer(data[:4], "<u4")[0])
    table_end = 4 * (n + 2)
    if table_end > size:
        raise FormatError(f"the header says {n} samples but the {size}-byte file cannot hold their offset table "
                          "(a cut write, or not an MDS shard)")
    offsets = np.frombuffer(data[4:table_end], "<u4").astype(np.int64)
    if np.any(np.diff(offsets) < 0) or offsets[0] < table_end:
        raise FormatError("the sample offsets decrease or point into the header: not an MDS shard, or corrupt")
    if offsets[-1] != size:
        raise FormatError(f"the last sample ends at byte {int(offsets[-1])} but the file holds {size} bytes "
                          f"({'truncated' if offsets[-1] > size else 'trailing bytes'}); rewrite the shard")
    where = f"the shard's JSON config (bytes {table_end}..{int(offsets[0])})"
    try:
        cfg = safejson.loads(data[table_end:int(offsets[0])])
    except safejson.JsonInputError as exc:
        raise FormatError(f"{where} does not parse: {exc.reason}") from None
    if not isinstance(cfg, dict):
        raise FormatError(f"{where} is a JSON {type(cfg).__name__}, not an object")
    names, encs, sizes = cfg.get("column_names"), cfg.get("column_encodings"), cfg.get("column_sizes")
    if sizes is None and isinstance(names, list):
        sizes = [None] * len(names)
    for key, val in (("column_names", names), ("column_encodings", encs), ("column_sizes", sizes)):
        if not isinstance(val, list):
            raise FormatError(f"{where}: {key} is {type(val).__name__ if val is not None else 'missing'}, not a list")
    assert isinstance(names, list) and isinstance(encs, list) and isinstance(sizes, list)
    if not (len(names) == len(encs) == len(sizes)):
        raise FormatError(f"the config lists {len(names)} column names, {len(encs)} encodings and {len(sizes)} sizes")
    bad_name = next((nm for nm in names if not isinstance(nm, str)), None)
    if bad_name is not None or len(set(names)) != len(names):
        raise FormatError(f"{where}: column_names must be distinct strings (got {str(names)[:120]})")
    member_cap = _limit(opts, "max_member_bytes")
    for nm, sz in zip(names, sizes):
        if sz is not None and (not isinstance(sz, int) or isinstance(sz, bool) or not 0 <= sz <= member_cap):
            raise FormatError(f"{where}: column_sizes of column {nm!r} is {str(sz)[:40]!r}, not null or a byte "
                              f"count in 0..{member_cap} ([dataset] max_member_bytes)")
    problems = [f"column {nm!r}: {p}" for nm, e in zip(names, encs) if (p := _encoding_problem(e)) is not None]
    if problems:
        raise FormatError(f"unsupported MDS encoding(s): {'; '.join(problems[:3])} (datacheck reads the encodings "
                          "mosaicml-streaming 0.13 writes)")
    record_cap = _limit(opts, "max_record_bytes")
    cols: list[list[Any]] = [[] for _ in names]
    bad: list[tuple[int, str]] = []
    nulled: Nulled = {}  # the cells read as null for a decode.bad_record
    bad_utf8: list[tuple[int, str, int, bytes]] = []
    for r in range(n):
        b, end = int(offsets[r]), int(offsets[r + 1])
        at, lens = b, []
        for sz in sizes:
            if sz:
                lens.append(int(sz))
            else:
                if at + 4 > end:
                    raise FormatError(f"sample {r}: its column sizes run past its end (byte {end})")
                lens.append(int(np.frombuffer(data[at:at + 4], "<u4")[0]))
                at += 4
        if at + sum(lens) != end:
            raise FormatError(f"sample {r}: its columns take {at + sum(lens) - b} bytes but the offsets give it {end - b}")
        problem = None
        over = end - b > record_cap
        for k, (enc, ln) in enumerate(zip(encs, lens)):
            if over or ln > member_cap:
                cols[k].append(None)
                nulled.setdefault(names[k], []).append(r)
                problem = problem or (f"sample of {end - b} bytes, over the limit of {human_bytes(record_cap)} "
                                      "([dataset] max_record_bytes)" if over else
                                      f"column {names[k]!r}: {ln} bytes, over the limit of {human_bytes(member_cap)} "
                                      "([dataset] max_member_bytes)")
                at += ln
                continue
            try:
                if enc == "str":  # invalid UTF-8: decode.invalid_utf8, the text read with U+FFFD
                    text, off = decode_utf8(data[at:at + ln])
                    cols[k].append(text)
                    if off is not None:
                        bad_utf8.append((r, f"column {names[k]!r}", off, data[at:at + ln]))
                else:
                    cols[k].append(_decode(enc, data[at:at + ln]))
            except (ValueError, KeyError, IndexError, UnicodeDecodeError, OverflowError) as exc:
                cols[k].append(None)
                nulled.setdefault(names[k], []).append(r)
                problem = problem or f"column {names[k]!r} ({enc}): {exc}"
            at += ln
        if problem:
            bad.append((r, problem))
    try:
        frame = pl.DataFrame({nm: pl.Series(nm, v, dtype=_polars_type(e)) for nm, v, e in zip(names, cols, encs)})
    except (ValueError, TypeError, OverflowError, pl.exceptions.PolarsError) as exc:
        raise FormatError(f"the decoded values do not form columns of their encodings' types: "
                          f"{(str(exc).splitlines() or [type(exc).__name__])[0][:200]}") from None
    findings = []
    if bad:
        findings.append(bad_rows_finding(
            bad, n, max_examples,
            f"{len(bad)} MDS sample(s) hold values that do not decode (first: sample {bad[0][0]}, {bad[0][1]}); "
            "their cells are read as null, the other samples were audited"))
    if bad_utf8:
        findings.append(utf8_rows_finding(bad_utf8, n, max_examples, "MDS sample(s)"))
    return frame, findings, nulled


def read_mds(path: Path, opts: ReadOptions) -> tuple[pl.DataFrame, list[Finding]]:
    """One MDS shard read whole: the frame and its findings of :func:`read_mds_cells`."""
    df, findings, _ = read_mds_cells(path, opts)
    return df, findings


FORMAT = Format(names=("mds",), open=read_whole(read_mds_cells), extensions=tuple((e, "mds") for e in MDS_SUFFIXES),
                refusals={"mds": "its writer owns the layout (the folder's index.json lists every shard's "
                                 "samples and sizes); rebuild it with MosaicML's MDSWriter"})
