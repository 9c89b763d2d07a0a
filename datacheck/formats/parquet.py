"""Parquet shards (``.parquet``, ``.pq``).

- A local file: ``pl.scan_parquet`` (lazy; the fused query reads only the needed columns; the
  engine's batches are pyarrow record batches of only the needed columns,
  :mod:`datacheck.formats.batches`, and the candidate rows of key checks are read again from only
  the row groups that hold them, :func:`datacheck.formats.batches.read_parquet_rows`).
- Arrow types polars cannot read (union, interval, run-end-encoded, list views, decimal256): the
  file is read by pyarrow instead, converted where a lossless polars type exists and the other
  columns dropped with a ``schema.dtype`` finding each
  (:func:`datacheck.formats.arrowtypes.arrow_for_polars`), never handed to polars (whose Rust code
  panics on them).
- A shard in an object store: opened with ``pyarrow.dataset`` over the store's fsspec filesystem
  and scanned lazily by polars (``pl.scan_pyarrow_dataset``), so only the footer and the columns the
  checks need are fetched (:func:`open_remote`).
- A file that does not open: zero bytes, bad leading or footer magic, else the reader's message.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from datacheck.formats.arrowtypes import arrow_for_polars, needs_conversion, validate_arrow
from datacheck.formats.base import Format, ReadOptions, ShardData, normalize_shard
from datacheck.io.shardbytes import READ_ERRORS, Unreadable, store_reason

__all__ = ["FORMAT", "open_parquet", "open_remote"]


def _read_parquet(path: Path) -> ShardData:
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
    except READ_ERRORS:
        schema = None  # the polars reader below names the reason
    if schema is not None and needs_conversion(schema):
        try:
            table = pq.read_table(path)
            validate_arrow(table, "the parquet file")
            table, findings = arrow_for_polars(table)
            return ShardData(lf=pl.from_arrow(table).lazy(), decode_findings=findings)  # type: ignore[union-attr]
        except Unreadable:
            raise
        except READ_ERRORS as exc:
            raise Unreadable(_parquet_reason(path, exc)) from None
    try:
        lf = pl.scan_parquet(path)
        lf.collect_schema()
    except READ_ERRORS as exc:
        raise Unreadable(_parquet_reason(path, exc)) from None
    return ShardData(lf=lf)


def _parquet_reason(path: Path, exc: BaseException, fs=None, url: str = "") -> str:
    """Why a parquet file does not open: zero bytes, bad leading or footer magic, else the reader's
    message. ``fs``/``url``: the file is ``path`` in that fsspec filesystem (an object store)."""
    try:
        if fs is None:
            size = path.stat().st_size
            with open(path, "rb") as f:
                head = f.read(4)
                f.seek(max(0, size - 4))
                tail = f.read(4)
        else:
            size = int(fs.size(str(path)))
            head = fs.cat_file(str(path), start=0, end=min(4, size)) if size else b""
            tail = fs.cat_file(str(path), start=max(0, size - 4), end=size) if size else b""
    except OSError as e:
        return f"cannot read file: {e.strerror or e}" if fs is None else store_reason(url, e)
    except Exception as e:  # noqa: BLE001 - a store client's error after its retries
        return store_reason(url, e)
    if size == 0:
        return "zero-byte file (an interrupted download or write?)"
    if head != b"PAR1":
        return f"not a parquet file: bad magic bytes {head!r} at offset 0 (expected b'PAR1')"
    if tail != b"PAR1":
        return f"truncated parquet file: no footer magic at the end ({size} bytes; the write was cut off)"
    return f"parquet reader error: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"


def open_parquet(path: Path, fmt: str = "parquet", opts: ReadOptions | None = None) -> ShardData:
    """A local parquet file (see the module docstring). Raises :class:`Unreadable`."""
    return normalize_shard(_read_parquet(path))


def open_remote(fs: Any, path: str, url: str) -> ShardData:
    """The parquet object ``path`` of the fsspec filesystem ``fs`` (``url``: its URL, named in
    errors), scanned lazily. Raises :class:`Unreadable`."""
    import pyarrow.dataset as pads
    from pyarrow.fs import FSSpecHandler, PyFileSystem

    try:
        dataset = pads.dataset(path, filesystem=PyFileSystem(FSSpecHandler(fs)), format="parquet")
        lf = pl.scan_pyarrow_dataset(dataset)
        lf.collect_schema()
    except READ_ERRORS as exc:
        raise Unreadable(_parquet_reason(Path(path), exc, fs=fs, url=url)) from None
    return normalize_shard(ShardData(lf=lf))


FORMAT = Format(
    names=("parquet",),
    open=open_parquet,
    extensions=((".parquet", "parquet"), (".pq", "parquet")),
    forced_extensions={"parquet": (".parquet", ".pq")},
    rewrite={"parquet": "table"},
)
