"""A shard's bytes, before any format reads them: the error every reader raises, whole files and
streamed chunks of lines (``.gz``/``.zst`` decompressed as a stream), an object store's read error.

:class:`Unreadable` is what every reader of :mod:`datacheck.formats` raises when a shard cannot be
opened or parsed (the audit reports the reason); :data:`READ_ERRORS` is what a reader catches (any
exception, and polars' ``PanicException``, a ``BaseException``, on bytes its engine cannot handle).
"""
from __future__ import annotations

import gzip
import io
from pathlib import Path
from typing import Any, Iterator

import polars as pl

from datacheck.io.bounded import zstd_cut
from datacheck.io.stores import filesystem, is_url

__all__ = ["READ_ERRORS", "Unreadable", "line_chunks", "read_bytes", "store_reason"]

READ_ERRORS: tuple[type[BaseException], ...] = (Exception, pl.exceptions.PanicException)


class Unreadable(Exception):
    """The shard cannot be opened or parsed; ``reason`` says why and where (the audit reports the shard as unreadable with it)."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


def read_bytes(path: Path | str) -> bytes:
    """The shard's bytes, decompressed for ``.gz``/``.zst``; ``path`` may be the URL of an object in a
    store (:mod:`datacheck.io.stores`). Raises :class:`Unreadable`, also for a compressed stream cut
    before its end-of-stream marker (a ``.zst`` frame cut short: :func:`datacheck.io.bounded.zstd_cut`)."""
    if isinstance(path, str) and is_url(path):
        fs, key = filesystem(path)
        try:
            raw = fs.cat_file(key)
        except READ_ERRORS as exc:
            raise Unreadable(store_reason(path, exc)) from None
        name = key.rpartition("/")[2].lower()
    else:
        path = Path(path)
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise Unreadable(f"cannot read file: {exc.strerror or exc}") from None
        name = path.name.lower()
    try:
        if name.endswith(".gz"):
            return gzip.decompress(raw)
        if name.endswith(".zst"):
            import zstandard

            why = zstd_cut(io.BytesIO(raw))
            if why is not None:
                raise EOFError(why)
            return zstandard.ZstdDecompressor().stream_reader(io.BytesIO(raw)).read()
    except READ_ERRORS as exc:  # corrupt compressed stream
        raise Unreadable(f"cannot decompress .{name.rpartition('.')[2]} data: {exc}") from None
    return raw


def line_chunks(path: Path, chunk_bytes: int) -> Iterator[bytes]:
    """The file's bytes, decompressed as a stream for ``.gz``/``.zst``, in chunks of about
    ``chunk_bytes`` that end right after a newline (the last chunk may end without one). Memory:
    one chunk plus one read block, whatever the inflated size.

    Raises:
        Unreadable: the file cannot be read, or its compressed stream is corrupt or cut before its
            end-of-stream marker (the reason says which; a cut ``.zst`` frame is found before the first
            chunk, :func:`datacheck.io.bounded.zstd_cut`).
    """
    name = path.name.lower()
    try:
        raw = open(path, "rb")
    except OSError as exc:
        raise Unreadable(f"cannot read file: {exc.strerror or exc}") from None
    try:
        if name.endswith(".gz"):
            f: Any = gzip.GzipFile(fileobj=raw)
        elif name.endswith(".zst"):
            import zstandard

            why = zstd_cut(raw)
            if why is not None:
                raise Unreadable(f"cannot decompress {path.suffix} data: {why}")
            raw.seek(0)
            f = zstandard.ZstdDecompressor().stream_reader(raw)
        else:
            f = raw
        buf = b""  # the bytes after the last newline seen (a partial line)
        while True:
            try:
                block = f.read(chunk_bytes)
            except OSError as exc:
                if exc.errno is not None:  # the disk or the file system, not the bytes
                    raise Unreadable(f"cannot read file: {exc.strerror or exc}") from None
                raise Unreadable(f"cannot decompress {path.suffix} data: {exc}") from None  # BadGzipFile
            except READ_ERRORS as exc:  # corrupt compressed stream (zlib.error, EOFError, zstd errors)
                raise Unreadable(f"cannot decompress {path.suffix} data: {exc}") from None
            if not block:
                break
            data = buf + block if buf else block
            del block  # only one copy of the chunk is kept while the caller works on it
            cut = data.rfind(b"\n")
            if cut < 0:
                buf = data
                continue
            if cut == len(data) - 1:
                buf = b""
            else:
                buf = data[cut + 1:]
                data = data[:cut + 1]
            yield data
            del data
        if buf:
            yield buf
    finally:
        raw.close()


def store_reason(url: str, exc: BaseException) -> str:
    """Why an object of a store could not be read (after the store client's retries)."""
    msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return f"cannot read {url} from the object store (after the client's retries): {msg}"
