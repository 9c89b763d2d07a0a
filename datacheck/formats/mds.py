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
inside it. A value that does not decode under its encoding (bad UTF-8 in a ``str``, a scalar of the
wrong width, bad JSON) is a ``decode.bad_record`` finding for that sample; the other samples are
still audited.
"""
from __future__ import annotations

import bz2
import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from datacheck.formats.base import Format, FormatError, read_whole
from datacheck.model.findings import Example, Finding

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


def _raw(path: Path) -> bytes:
    name = path.name.lower()
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise FormatError(f"cannot read file: {exc.strerror or exc}") from None
    try:
        if name.endswith(".zstd"):
            import zstandard

            return zstandard.ZstdDecompressor().stream_reader(raw).read()
        if name.endswith(".gz"):
            return gzip.decompress(raw)
        if name.endswith(".bz2"):
            return bz2.decompress(raw)
    except Exception as exc:  # noqa: BLE001 - any decompressor error is a broken shard
        raise FormatError(f"cannot decompress {path.suffix} data: {exc}") from None
    return raw


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
        inner = pl.from_numpy(np.zeros(1, parts[1])).dtypes[0] if len(parts) > 1 and parts[1] else pl.Float64()
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
        json.loads(text)
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
        if len(parts) <= 2:  # dynamic shape: [ndim << 2 | shape dtype code] [shape]
            ndim, sdt = b[i] >> 2, _ND_SHAPE[b[i] % 4]
            i += 1 + ndim * np.dtype(sdt).itemsize
        arr = np.frombuffer(b[i:], dt)
        return arr.astype(np.float32).tolist() if dt == "float16" else arr.tolist()
    return bytes(b)


def read_mds(path: Path, max_examples: int) -> tuple[pl.DataFrame, list[Finding]]:
    """Read one MDS shard: one row per sample, one column per MDS column.

    Returns:
        (frame, findings): ``decode.bad_record`` (error) when values do not decode (their cells are null).

    Raises:
        FormatError: a layout rule of the module docstring is broken.
    """
    data = _raw(path)
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
    try:
        cfg = json.loads(data[table_end:int(offsets[0])].decode("utf-8"))
        names, encs = list(cfg["column_names"]), list(cfg["column_encodings"])
        sizes = list(cfg.get("column_sizes") or [None] * len(names))
    except (ValueError, KeyError, TypeError) as exc:
        raise FormatError(f"the shard's JSON config (bytes {table_end}..{int(offsets[0])}) does not parse: {exc}") from None
    if not (len(names) == len(encs) == len(sizes)):
        raise FormatError(f"the config lists {len(names)} column names, {len(encs)} encodings and {len(sizes)} sizes")
    unknown = [e for e in encs if e not in _SCALARS and e not in _BINARY and e not in ("str", "json", "str_int", "str_float")
               and not e.startswith("ndarray")]
    if unknown:
        raise FormatError(f"unknown MDS encoding(s) {unknown}: datacheck reads the encodings of mosaicml-streaming 0.13")
    cols: list[list[Any]] = [[] for _ in names]
    bad: list[tuple[int, str]] = []
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
        for k, (enc, ln) in enumerate(zip(encs, lens)):
            try:
                cols[k].append(_decode(enc, data[at:at + ln]))
            except (ValueError, KeyError, IndexError, UnicodeDecodeError) as exc:
                cols[k].append(None)
                problem = problem or f"column {names[k]!r} ({enc}): {exc}"
            at += ln
        if problem:
            bad.append((r, problem))
    frame = pl.DataFrame({nm: pl.Series(nm, v, dtype=_polars_type(e)) for nm, v, e in zip(names, cols, encs)})
    findings = []
    if bad:
        findings.append(Finding(
            check="decode.bad_record", severity="error", count=len(bad), ratio=len(bad) / n,
            rows=tuple(r for r, _ in bad[:max_examples]),
            examples=tuple(Example(row=r, value=msg) for r, msg in bad[:max_examples]),
            message=(f"{len(bad)} MDS sample(s) hold values that do not decode (first: sample {bad[0][0]}, {bad[0][1]}); "
                     "their cells are read as null, the other samples were audited"),
            rows_truncated=len(bad) > max_examples,
        ))
    return frame, findings


FORMAT = Format(names=("mds",), open=read_whole(lambda path, opts: read_mds(path, opts.max_examples)), extensions=tuple((e, "mds") for e in MDS_SUFFIXES),
                refusals={"mds": "its writer owns the layout (the folder's index.json lists every shard's "
                                 "samples and sizes); rebuild it with MosaicML's MDSWriter"})
