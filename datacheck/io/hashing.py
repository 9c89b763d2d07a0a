"""Content hashes: xxh3-128 of a shard's bytes (``xxhash`` package), and the index hash.

A shard in an object store (a URL, :mod:`datacheck.io.stores`) is hashed streaming from the store, or
identified by the store's own hash of its bytes where it gives one (``md5:``/``sha256:``; the rules and
why they are safe: :mod:`datacheck.io.stores`).

Stored hashes are always of bytes or of a canonical encoding, never a dataframe library's
internal row hash (those change between versions).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import xxhash

from datacheck.io.stores import filesystem, hash_object, is_url, object_state, store_checksum
from datacheck.model.constants import HASH_ALGORITHM

__all__ = ["hash_file", "hash_files", "hash_bytes", "index_hash", "file_state"]

#: bytes read at a time, into one reused buffer: a fresh 16 MiB ``bytes`` per read cost three times
#: the CPU of hashing (allocation and page faults): 37 vs 12 ms for a 125 MiB file
_CHUNK = 1 << 20


def _update_from(h: "xxhash.xxh3_128", path: str | Path) -> int:
    """Feed the bytes of ``path`` to ``h``; returns their count. Raises OSError."""
    buf = bytearray(_CHUNK)
    view = memoryview(buf)
    size = 0
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(buf):
            h.update(view[:n])
            size += n
    return size


def hash_bytes(data: bytes) -> str:
    """``"xxh3-128:<32 hex>"`` of ``data``."""
    return f"{HASH_ALGORITHM}:{xxhash.xxh3_128_hexdigest(data)}"


def hash_file(path: str | Path) -> tuple[str, int]:
    """Stream ``path`` through xxh3-128. Returns (``"xxh3-128:<hex>"``, size in bytes).

    Raises:
        OSError: the file cannot be read (the caller reports the shard as unreadable).
    """
    h = xxhash.xxh3_128()
    size = _update_from(h, path)
    return f"{HASH_ALGORITHM}:{h.hexdigest()}", size


def _hash_url(url: str, companions: list[str], bytes_only: bool) -> tuple[str, int]:
    fs, p = filesystem(url)
    paths = [*companions, p]
    try:
        if len(paths) == 1 and not bytes_only:
            info = fs.info(paths[0])  # type: ignore[attr-defined]
            checksum = store_checksum(fs, paths[0], info)
            if checksum is not None:
                return checksum, int(info.get("size") or 0)
        return hash_object(fs, paths)
    except OSError as exc:
        raise OSError(f"{url}: {exc.strerror or exc}") from None
    except Exception as exc:  # noqa: BLE001 - a store client's error after its retries is a failed read
        raise OSError(f"{url}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None


def hash_files(path: str | Path, companions: list[str], *, bytes_only: bool = False) -> tuple[str, int]:
    """Content hash and size of a shard as :func:`hash_file`, over every file the shard is read from:
    its ``companions`` (the files that belong to it, e.g. a Megatron ``.idx``: in the same folder, or
    keys of the same store) then its own bytes, as one stream, so a changed companion changes the hash
    (and the cache key). Which files a shard has: :func:`datacheck.formats.registry.hash_shard`.

    ``path`` may be the URL of an object in a store: its bytes are hashed streaming, or, unless
    ``bytes_only`` (the data index needs xxh3-128 of the bytes) or it has companions, the store's hash
    of the bytes is used (:func:`datacheck.io.stores.store_checksum`: ``md5:<hex>``/``sha256:<hex>``,
    no data read).

    Raises:
        OSError: a file cannot be read (for a URL: after the store client's retries; the message names it).
    """
    if isinstance(path, str) and is_url(path):
        return _hash_url(path, companions, bytes_only)
    files = [*(Path(c) for c in companions), Path(path)]
    h = xxhash.xxh3_128()
    size = sum(_update_from(h, p) for p in files)
    return f"{HASH_ALGORITHM}:{h.hexdigest()}", size


def file_state(path: str | Path) -> tuple[int, int, int, int]:  # for a URL: (int, str, str, str)
    """(size in bytes, modification time in ns, status-change time in ns, inode) of ``path``: equal
    before and after a read when no writer touched the file in between (an append, a rewrite in
    place, or a replacement by rename all change one of them).

    ``path`` may be the URL of an object in a store: (size, modified, version tag, version tag) from
    a fresh metadata request (:func:`datacheck.io.stores.object_state`).

    Raises:
        OSError: the file cannot be stat'ed.
    """
    if isinstance(path, str) and is_url(path):
        fs, p = filesystem(path)
        try:
            return object_state(fs, p)  # type: ignore[return-value]
        except OSError as exc:
            raise OSError(f"{path}: {exc.strerror or exc}") from None
    st = os.stat(path)
    return st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino


def index_hash(pairs: list[tuple[str, str]]) -> str:
    """Hash of the canonical, sorted list of (relative POSIX path, content hash) pairs.

    The canonical form is compact JSON (``[["a.parquet","xxh3-128:…"],…]``, sorted by path, UTF-8).
    The same bytes give the same key on any machine; any changed byte or path gives a new key.
    Returns 32 hex digits (xxh3-128), usable as a folder name.
    """
    canon = json.dumps(sorted([list(p) for p in pairs]), separators=(",", ":"), ensure_ascii=False)
    return xxhash.xxh3_128_hexdigest(canon.encode("utf-8"))
