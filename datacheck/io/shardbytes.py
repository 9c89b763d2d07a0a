"""A shard's bytes, before any format reads them: the error every reader raises, whole files and
streamed chunks of lines (``.gz``/``.zst`` decompressed as a stream), an object store's read error.

:class:`Unreadable` is what every reader of :mod:`datacheck.formats` raises when a shard cannot be
opened or parsed (the audit reports the reason); :data:`READ_ERRORS` is what a reader catches (any
exception, and polars' ``PanicException``, a ``BaseException``, on bytes its engine cannot handle).
"""
from __future__ import annotations

import gzip
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import polars as pl

from datacheck.io.bounded import zstd_cut
from datacheck.io.stores import filesystem, is_url, unreachable_message

__all__ = ["READ_ERRORS", "LONG_LINE_HEAD", "LongLine", "Unreadable", "bounded_line_chunks", "head_bytes", "line_chunks",
           "read_bytes", "store_reason"]

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


def head_bytes(path: Path, n: int) -> bytes:
    """The first ``n`` bytes of the local file ``path``, decompressed for ``.gz``/``.zst`` (only as much
    of the stream as they take); fewer for a shorter file, ``b""`` when they cannot be read (a missing
    file, a corrupt stream: the reader that reads the file whole says why). Never raises."""
    name = path.name.lower()
    try:
        with open(path, "rb") as raw:
            f: Any = raw
            if name.endswith(".gz"):
                f = gzip.GzipFile(fileobj=raw)
            elif name.endswith(".zst"):
                import zstandard

                f = zstandard.ZstdDecompressor().stream_reader(raw)
            out = b""
            while len(out) < n:  # a decompressing read may give fewer bytes than asked before the end
                got = f.read(n - len(out))
                if not got:
                    break
                out += got
            return out
    except READ_ERRORS:
        return b""


#: bytes of a line over the bound kept to show it (:class:`LongLine`)
LONG_LINE_HEAD = 80


@dataclass(frozen=True)
class LongLine:
    """A line longer than the bound of :func:`bounded_line_chunks`, passed over without being held:
    ``length`` (its bytes, the newline not counted), ``head`` (its first :data:`LONG_LINE_HEAD`
    bytes), ``newline`` (whether a newline ends it: False for a last line without one)."""

    length: int
    head: bytes
    newline: bool

    @property
    def nbytes(self) -> int:
        """Its bytes in the file, the newline included."""
        return self.length + int(self.newline)


def line_chunks(path: Path, chunk_bytes: int) -> Iterator[bytes]:
    """The file's bytes, decompressed as a stream for ``.gz``/``.zst``, in chunks of about
    ``chunk_bytes`` that end right after a newline (the last chunk may end without one). Memory:
    one chunk plus one read block, whatever the inflated size; a line longer than a chunk is held
    whole (:func:`bounded_line_chunks` bounds it).

    Raises:
        Unreadable: the file cannot be read, or its compressed stream is corrupt or cut before its
            end-of-stream marker (the reason says which; a cut ``.zst`` frame is found before the first
            chunk, :func:`datacheck.io.bounded.zstd_cut`).
    """
    for chunk in bounded_line_chunks(path, chunk_bytes, None):
        if isinstance(chunk, bytes):  # always: without a bound no line is a LongLine
            yield chunk


def _first_break(data: bytes, universal: bool) -> int:
    """The index of the first line break of ``data``, or -1: a ``\\n``, and with ``universal`` also a
    lone ``\\r`` (one not followed by ``\\n``; the byte after every ``\\r`` is in ``data`` or the file
    ends there: :func:`bounded_line_chunks` holds a block's last ``\\r`` back)."""
    n = data.find(b"\n")
    if not universal:
        return n
    r = data.find(b"\r")
    if r < 0 or (0 <= n <= r + 1):
        return n  # no \r, or the \n comes first or ends the \r\n
    return r


def _last_break(data: bytes, universal: bool) -> int:
    """The index of the last line break of ``data``, or -1 (breaks as :func:`_first_break`): the later
    of the last ``\\n`` and the last ``\\r`` (a ``\\r`` after the last ``\\n`` is a lone one)."""
    n = data.rfind(b"\n")
    return max(n, data.rfind(b"\r")) if universal else n


def _break_ends(buf: np.ndarray) -> np.ndarray:
    """The indices of the universal line breaks of ``buf`` (uint8): every ``\\n`` and every ``\\r`` not
    followed by ``\\n`` (a last ``\\r`` is a break)."""
    cr = buf == 13
    lone = cr.copy()
    lone[:-1] &= buf[1:] != 10
    return np.flatnonzero((buf == 10) | lone)


def _split_long(data: bytes, max_line: int, universal: bool = False) -> Iterator[bytes | LongLine]:
    """``data`` (whole lines, the last one maybe without its newline) with each line of more than
    ``max_line`` bytes as a :class:`LongLine`: one vectorized pass over the newlines (with
    ``universal``, a lone ``\\r`` is a line break too)."""
    buf = np.frombuffer(data, dtype=np.uint8)
    ends = _break_ends(buf) if universal else np.flatnonzero(buf == 10)
    if ends.size == 0 or ends[-1] != len(data) - 1:
        ends = np.append(ends, len(data))  # the last line, without a newline
    starts = np.concatenate([[0], ends[:-1] + 1])
    prev = 0
    for k in np.flatnonzero(ends - starts > max_line).tolist():
        a, b = int(starts[k]), int(ends[k])
        if a > prev:
            yield data[prev:a]
        yield LongLine(b - a, data[a:a + LONG_LINE_HEAD], b < len(data))
        prev = b + 1
    if prev < len(data):
        yield data[prev:]


def _head(parts: list[bytes]) -> bytes:
    """The first :data:`LONG_LINE_HEAD` bytes of the pieces ``parts`` of a line, without joining the rest."""
    out: list[bytes] = []
    need = LONG_LINE_HEAD
    for p in parts:
        if need <= 0:
            break
        out.append(p[:need])
        need -= len(out[-1])
    return b"".join(out)


def bounded_line_chunks(path: Path, chunk_bytes: int, max_line: int | None,
                        universal: bool = False) -> Iterator[bytes | LongLine]:
    """:func:`line_chunks`, except that a line of more than ``max_line`` bytes (the newline not counted;
    None: no bound) comes as a :class:`LongLine` in its place, in file order: its bytes are read and
    dropped as they come, so memory stays one chunk plus one read block (and at most ``max_line``
    bytes of the line before it is known to be long, held once: the partial line is kept as the blocks
    read, joined only when a newline ends it). A file cut into the same chunks gives the same
    sequence (two passes over a file agree). Lines within a chunk are measured only when the chunk
    is longer than ``max_line`` (JSONL reads chunks of 16 MiB, against 128 MiB by default): no line of
    a shorter chunk can be over it.

    ``universal``: a lone ``\\r`` (old Mac OS line ends) also ends a line, as Python's universal newlines
    read it (plain text, :mod:`datacheck.formats.text`): chunks then end after a ``\\n`` or a lone
    ``\\r``, a ``\\r\\n`` is never cut in two (a block's last ``\\r`` is held until the next byte is
    read), and a line's length is measured up to its break (a ``\\r`` before ``\\n`` is counted in
    the line, as without ``universal``). Without it (JSON Lines, CSV) only ``\\n`` ends a line.

    Raises:
        Unreadable: as :func:`line_chunks`.
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
        # the bytes after the last newline seen (a partial line), in the blocks read: joined only once a
        # newline ends the line, so a line passing the bound is never held twice (buf + block, a copy)
        parts: list[bytes] = []
        held = 0
        skipped: list[Any] | None = None  # a long line being passed over: [bytes so far, its head]
        cr = b""  # universal: a block's last \r, held until the byte after it is read (a \r\n never cut)
        while True:
            try:
                block = f.read(chunk_bytes)
            except OSError as exc:
                if exc.errno is not None:  # the disk or the file system, not the bytes
                    raise Unreadable(f"cannot read file: {exc.strerror or exc}") from None
                raise Unreadable(f"cannot decompress {path.suffix} data: {exc}") from None  # BadGzipFile
            except READ_ERRORS as exc:  # corrupt compressed stream (zlib.error, EOFError, zstd errors)
                raise Unreadable(f"cannot decompress {path.suffix} data: {exc}") from None
            if universal:
                got, block, cr = bool(block), cr + block, b""
                if got and block.endswith(b"\r"):  # the byte after it decides whether a \n follows
                    cr, block = b"\r", block[:-1]
                    if not block:
                        continue
            if not block:
                break
            if skipped is not None:
                nl = _first_break(block, universal)
                if nl < 0:
                    skipped[0] += len(block)
                    continue
                yield LongLine(skipped[0] + nl, skipped[1], True)
                skipped = None
                block = block[nl + 1:]
                if not block:
                    continue
            if _first_break(block, universal) < 0:  # the partial line goes on
                held += len(block)
                parts.append(block)
                del block
                if max_line is not None and held > max_line:  # one partial line, already too long
                    skipped, parts, held = [held, _head(parts)], [], 0
                continue
            data = b"".join([*parts, block]) if parts else block
            parts, held = [], 0
            del block  # only one copy of the chunk is kept while the caller works on it
            cut = _last_break(data, universal)
            if cut != len(data) - 1:
                parts, held = [data[cut + 1:]], len(data) - cut - 1
                data = data[:cut + 1]
            if max_line is not None and len(data) > max_line:
                yield from _split_long(data, max_line, universal)
            else:
                yield data
            del data
        if skipped is not None:
            yield LongLine(skipped[0], skipped[1], False)
        elif parts:
            if max_line is not None and held > max_line:
                yield LongLine(held, _head(parts), False)
            else:
                yield b"".join(parts)
    finally:
        raw.close()


def store_reason(url: str, exc: BaseException) -> str:
    """Why an object of a store could not be read (after the store client's retries): an endpoint that
    could not be reached is named as such (:func:`datacheck.io.stores.unreachable_message`), never as a
    missing object."""
    down = unreachable_message(url, exc)
    if down is not None:
        return f"cannot read {url} from the object store (after the client's retries): {down}"
    msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return f"cannot read {url} from the object store (after the client's retries): {msg}"
