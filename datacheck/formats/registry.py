"""The one registry of shard formats: every format module of :mod:`datacheck.formats` registers its
:class:`~datacheck.formats.base.Format` here, and discovery, the read path, hashing and ``clean``
(:func:`rewriter`, :func:`refusal`) ask it (never a format name test of their own); the engine's
batches and rows read again come from the reader the format's ``open`` puts on the opened shard.

:func:`open_shard` is the one way a shard is opened: a local file by its format's reader; the URL
of an object in a store (:mod:`datacheck.io.stores`): by the format's ``open_remote`` where it has
one (parquet: scanned lazily through the store's filesystem, only the footer and the needed columns
fetched), every other format copied with its
companions (a Megatron ``.bin`` with its ``.idx``) to a temporary local folder (streaming), opened by
the same reader as a local file, its rows read into memory, and the copy deleted.
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from datacheck.formats import arrow, csv, jsonl, litdata, mds, megatron, parquet, text, webdataset
from datacheck.formats.base import Format, ReadOptions, ShardData, normalize_shard
from datacheck.formats.rewrite import Rewriter, RewriteRefused, TableRewrite
from datacheck.io.hashing import hash_files
from datacheck.io.shardbytes import READ_ERRORS, Unreadable, store_reason
from datacheck.io.stores import filesystem, is_url
from datacheck.model.roles import TEXT_NAMES

__all__ = ["FORMATS", "REWRITABLE", "companions", "format_named", "hash_shard", "open_shard", "read_context", "read_table", "refusal",
           "rewrite_mode", "rewriter"]

#: every format, in the order discovery tries their extensions and sniffers
FORMATS: tuple[Format, ...] = (jsonl.FORMAT, csv.FORMAT, parquet.FORMAT, arrow.FORMAT, mds.FORMAT,
                               webdataset.FORMAT, megatron.FORMAT, litdata.FORMAT, text.FORMAT)

_BY_NAME: dict[str, Format] = {n: f for f in FORMATS for n in f.names}


#: the format names ``datacheck clean`` rewrites -> how (``"records"`` or ``"table"``)
REWRITABLE: dict[str, str] = {n: r.mode for f in FORMATS for n, r in f.rewrite.items()}


def rewrite_mode(fmt: str) -> str | None:
    """How ``clean`` writes the kept rows of a shard of format ``fmt`` (``"records"``: JSONL/CSV
    records copied; ``"table"``: the Arrow table written again), or None: it cannot."""
    return REWRITABLE.get(fmt)


def refusal(fmt: str) -> str | None:
    """Why ``clean`` cannot rewrite a shard of format ``fmt``, naming the format (None: it can)."""
    f = _BY_NAME.get(fmt)
    if f is not None and fmt in f.rewrite:
        return None
    why = f.refusals.get(fmt) if f is not None else None
    return f"format {fmt!r}: " + (why or "datacheck clean has no writer for it")


def rewriter(fmt: str) -> Rewriter:
    """The rewrite of format ``fmt`` (:mod:`datacheck.formats.rewrite`). Raises
    :class:`~datacheck.formats.rewrite.RewriteRefused` (:func:`refusal`) for a format that has none."""
    f = _BY_NAME.get(fmt)
    if f is None or fmt not in f.rewrite:
        raise RewriteRefused(refusal(fmt))
    return f.rewrite[fmt]


def read_table(path: Path | str, fmt: str) -> tuple[Any, str]:
    """The whole shard ``path`` of a ``"table"``-rewritten format as one pyarrow Table and the writer
    kind to write kept rows back with (:func:`datacheck.formats.arrowtypes.write_table`). Raises
    ValueError for a format that is not rewritten as a table, and what reading raises."""
    f = _BY_NAME.get(fmt)
    r = f.rewrite.get(fmt) if f is not None else None
    if not isinstance(r, TableRewrite):
        raise ValueError(f"format {fmt!r} is not rewritten as a table")
    return r.read(path)


def format_named(name: str) -> Format | None:
    """The format that reads format name ``name`` (``"tsv"`` -> the CSV format), or None."""
    return _BY_NAME.get(name)


def companions(path: str, fmt: str) -> list[str]:
    """The files that belong to the shard ``path`` of format ``fmt`` besides itself (a local path or
    an object key; hashed before the shard's bytes, copied with it from a store)."""
    f = _BY_NAME.get(fmt)
    return f.companions(path) if f is not None else []


def read_context(path: Path | str, fmt: str) -> str | None:
    """What reading the local shard ``path`` of format ``fmt`` takes from files that are neither the
    shard nor its companions (:attr:`~datacheck.formats.base.Format.context`: a litdata folder's
    ``index.json`` config), or None: nothing (also for a shard in an object store, read without them)."""
    f = _BY_NAME.get(fmt)
    if f is None or (isinstance(path, str) and is_url(path)):
        return None
    return f.context(Path(path))


def hash_shard(path: Path | str, fmt: str, *, bytes_only: bool = False) -> tuple[str, int]:
    """Content hash and size of the shard ``path`` of format ``fmt`` over every file it is read from:
    its companions (a Megatron ``.idx``) then its own bytes (:func:`datacheck.io.hashing.hash_files`;
    ``path`` may be the URL of an object in a store). Raises ``OSError``."""
    key = filesystem(path)[1] if isinstance(path, str) and is_url(path) else str(path)
    return hash_files(path, companions(key, fmt), bytes_only=bytes_only)


def open_shard(path: Path | str, fmt: str, dataset_cfg, max_examples: int,
               string_columns: tuple[str, ...] = TEXT_NAMES) -> ShardData:
    """Open ``path`` as format ``fmt``. Raises :class:`Unreadable` with the reason and where.

    ``path``: a local file, or the URL of an object in a store (:mod:`datacheck.io.stores`; a read that
    fails after the store client's retries is :class:`Unreadable` naming the URL).

    ``string_columns``: CSV/TSV columns read as strings whatever their values look like (text
    columns: :func:`datacheck.model.roles.text_column_names`); other CSV columns get inferred dtypes.

    Fixed-size list (``Array``) columns come back as ``List`` columns.
    """
    f = _BY_NAME.get(fmt)
    if f is None:
        raise Unreadable(f"unknown format {fmt!r}")
    opts = ReadOptions(dataset=dataset_cfg, max_examples=max_examples, string_columns=string_columns)
    if isinstance(path, str) and is_url(path):
        return _open_remote(path, f, fmt, opts)
    return f.open(Path(path), fmt, opts)


def _open_remote(url: str, f: Format, fmt: str, opts: ReadOptions) -> ShardData:
    """Open a shard in an object store (see the module docstring). Raises :class:`Unreadable`."""
    fs, path = filesystem(url)
    if f.open_remote is not None:  # read in place (parquet: only the footer and the needed columns)
        return f.open_remote(fs, path, url, opts)
    with tempfile.TemporaryDirectory(prefix="datacheck-store-") as tmp:
        local = Path(tmp) / (path.rpartition("/")[2] or "shard")
        sources = [(path, local)] + [(c, Path(tmp) / c.rpartition("/")[2]) for c in f.companions(path)]
        for src, dst in sources:
            try:
                fs.get_file(src, str(dst))
            except READ_ERRORS as exc:
                raise Unreadable(store_reason(url if src == path else src, exc)) from None
        data = f.open(local, fmt, opts)
        try:
            data.lf = data.lf.collect().lazy()  # the copy is deleted when this block ends
        except Unreadable:
            raise
        except READ_ERRORS as exc:
            raise Unreadable(f"reading the data failed: {str(exc).splitlines()[0] if str(exc) else exc}") from None
        data.stream = None  # its batches are slices of the rows in memory
        return normalize_shard(data)
