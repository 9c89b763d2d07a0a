"""Bounded reads of files that come with the data: only regular files are opened, compressed files
are inflated as a stream, and no read takes more bytes than a stated limit (never what a header or
a compressed stream claims).

A reader states its limits (the ``[dataset] max_member_bytes`` / ``max_record_bytes`` /
``max_file_bytes`` of :class:`datacheck.model.config.DatasetSection`, or a bound of its own) and
calls these; :class:`OverLimit` carries the reason (what, where, the limit and the key that raises
it) for the reader to turn into a ``decode.*`` finding.
"""
from __future__ import annotations

import bz2
import errno
import gzip
import os
import stat
from pathlib import Path
from typing import IO, Any

__all__ = ["OverLimit", "NotRegular", "dangling_link", "special_kind", "require_regular", "open_regular", "open_inflated",
           "read_capped", "human_bytes", "zstd_cut", "TRUNCATED"]

#: what a compressed stream that stops before its end-of-stream marker reads as (gzip's and bz2's own
#: ``EOFError`` text, so that every compressor says it the same way)
TRUNCATED = "Compressed file ended before the end-of-stream marker was reached"
_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_HEADER = 14  # the longest frame header: magic, descriptor, window, 4-byte dictionary id, 8-byte content size


class OverLimit(Exception):
    """A read would pass a stated limit; ``reason`` says what, where and which limit."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


class NotRegular(OSError):
    """The path is a FIFO, device, socket or folder: never opened (a FIFO blocks the open, a device
    never ends). ``reason`` names the kind."""

    def __init__(self, path: Path | str, kind: str):
        self.kind = kind
        self.reason = f"not a regular file ({kind}): never opened"
        super().__init__(self.reason)
        self.path = str(path)


def human_bytes(n: int) -> str:
    """``n`` bytes as ``"256 MiB"`` (binary units, at most one decimal)."""
    v = float(n)
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if v < 1024 or unit == "TiB":
            return f"{int(v)} {unit}" if v == int(v) else f"{v:.1f} {unit}"
        v /= 1024
    return f"{n} bytes"  # pragma: no cover


def dangling_link(path: Path | str) -> str | None:
    """Why a path that ``ls`` lists does not open, when it is a symbolic link whose target is missing
    (``"a broken symlink: its target T does not exist"``) or leads back to itself (``"a symlink loop
    (through T)"``); None when ``path`` is no such link (it exists, or nothing is there at all). The
    verbs say it instead of "no such file", which would contradict what the user sees."""
    p = str(path)
    if not os.path.islink(p) or os.path.exists(p):
        return None
    target = os.readlink(p)
    try:
        os.stat(p)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return f"a symlink loop (it leads back to itself through {target})"
    return f"a broken symlink: its target {target} does not exist"


def special_kind(path: Path | str) -> str | None:
    """What ``path`` is when it is not a regular file (following links): ``"a FIFO"``, ``"a character
    device"``, ``"a block device"``, ``"a socket"``, ``"a folder"``; None for a regular file or a path
    that cannot be stat'ed (the open then reports it)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "not a file"


def require_regular(path: Path | str) -> None:
    """Raises :class:`NotRegular` unless ``path`` is a regular file (or cannot be stat'ed)."""
    kind = special_kind(path)
    if kind is not None:
        raise NotRegular(path, kind)


def open_regular(path: Path | str) -> IO[bytes]:
    """``open(path, "rb")`` of a regular file only: opened with ``O_NONBLOCK`` (a FIFO swapped in
    after the check cannot block the open) and checked again on the open descriptor.

    Raises:
        NotRegular: a FIFO, device, socket or folder.
        OSError: the file cannot be opened.
    """
    require_regular(path)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegular(path, "a FIFO" if stat.S_ISFIFO(mode) else "not a regular file")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def zstd_cut(f: IO[bytes]) -> str | None:
    """Why the zstd data of the seekable binary file ``f`` (read from its position to its end) is not
    a sequence of whole frames, or None when it is. Only the frame and block headers are read (3 bytes
    per block, RFC 8878 section 3.1): the data are not inflated. ``f``'s position is left anywhere.

    A frame cut before its last block, or before the 4-byte checksum its descriptor announces, is
    what the zstd library's streaming reader (``zstandard`` ``stream_reader``) returns as a quiet end
    of data; gzip and bz2 raise ``EOFError`` there. The text starts with :data:`TRUNCATED`.
    Bytes after the last frame that are not a frame are left to the library (it raises on them).
    """
    start = pos = f.tell()
    end = f.seek(0, 2)

    def cut(what: str) -> str:
        return f"{TRUNCATED} (zstd {what} cut at byte {end - start} of the data)"

    while pos < end:
        f.seek(pos)
        head = f.read(_ZSTD_HEADER)
        if len(head) < 5:
            return cut("frame header")
        magic = int.from_bytes(head[:4], "little")
        if magic & 0xFFFFFFF0 == 0x184D2A50:  # a skippable frame: magic, 4-byte size, that many bytes
            if len(head) < 8:
                return cut("skippable frame header")
            pos += 8 + int.from_bytes(head[4:8], "little")
            if pos > end:
                return cut("skippable frame")
            continue
        if magic != _ZSTD_MAGIC:
            return None  # not a frame: the library reports the bytes
        desc = head[4]
        single = desc >> 5 & 1
        fcs = (1 if single else 0, 2, 4, 8)[desc >> 6]
        hlen = 5 + (0 if single else 1) + (0, 1, 2, 4)[desc & 3] + fcs
        if len(head) < hlen:
            return cut("frame header")
        pos += hlen
        while True:
            f.seek(pos)
            bh = f.read(3)
            if len(bh) < 3:
                return cut("block header")
            v = int.from_bytes(bh, "little")
            btype, size = v >> 1 & 3, v >> 3
            pos += 3 + (1 if btype == 1 else size)
            if pos > end:
                return cut("block")
            if v & 1:
                break
        if desc & 4:
            pos += 4
            if pos > end:
                return cut("frame checksum")
    return None


def open_inflated(path: Path | str, name: str | None = None) -> IO[bytes]:
    """A regular file opened for reading, inflated as a stream by its name's last suffix
    (``.gz``, ``.zst``/``.zstd``, ``.bz2``; ``name`` overrides the path's name). Nothing is inflated
    before it is read. A ``.gz`` or ``.bz2`` stream read to its end raises ``EOFError`` when its
    end-of-stream marker is missing; a ``.zst`` file is checked to hold whole frames when opened
    (:func:`zstd_cut`, headers only), as its reader ends quietly at a cut frame.

    Raises:
        NotRegular, OSError: as :func:`open_regular`.
        EOFError: a ``.zst`` file whose last frame is cut (the text starts with :data:`TRUNCATED`).
    """
    raw = open_regular(path)
    lname = (name or Path(path).name).lower()
    try:
        if lname.endswith(".gz"):
            return gzip.GzipFile(fileobj=raw)  # type: ignore[return-value]
        if lname.endswith((".zst", ".zstd")):
            import zstandard

            why = zstd_cut(raw)
            if why is not None:
                raise EOFError(why)
            raw.seek(0)
            return zstandard.ZstdDecompressor().stream_reader(raw, closefd=True)  # type: ignore[return-value]
        if lname.endswith(".bz2"):
            return bz2.BZ2File(raw)  # type: ignore[return-value]
    except BaseException:
        raw.close()
        raise
    return raw


def read_capped(f: Any, n: int, cap: int, what: str, key: str) -> bytes:
    """Exactly ``n`` bytes from the stream ``f`` (fewer only at its end), in blocks of at most 16 MiB,
    after checking ``n`` against ``cap``: the allocation follows the bytes that arrive, never a
    declared size.

    Raises:
        OverLimit: ``n`` is over ``cap`` (``what`` and ``key`` name the thing and the config key).
    """
    if n > cap:
        raise OverLimit(f"{what} declares {n} bytes, over the limit of {human_bytes(cap)} ([dataset] {key}); "
                        "not read (raise the key if such sizes are real)")
    parts = []
    left = n
    while left > 0:
        b = f.read(min(left, 1 << 24))
        if not b:
            break
        parts.append(b)
        left -= len(b)
    return b"".join(parts)
