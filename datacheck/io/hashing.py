"""Content hashes: xxh3-128 of a shard's bytes (``xxhash`` package), and the index hash.

Stored hashes are always of bytes or of a canonical encoding, never a dataframe library's
internal row hash (those change between versions).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import xxhash

from datacheck.model.constants import HASH_ALGORITHM

__all__ = ["hash_file", "hash_shard", "hash_bytes", "index_hash", "file_state"]

_CHUNK = 1 << 24  # 16 MiB reads


def hash_bytes(data: bytes) -> str:
    """``"xxh3-128:<32 hex>"`` of ``data``."""
    return f"{HASH_ALGORITHM}:{xxhash.xxh3_128_hexdigest(data)}"


def hash_file(path: str | Path) -> tuple[str, int]:
    """Stream ``path`` through xxh3-128. Returns (``"xxh3-128:<hex>"``, size in bytes).

    Raises:
        OSError: the file cannot be read (the caller turns this into ``decode.unreadable``).
    """
    h = xxhash.xxh3_128()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
            size += len(chunk)
    return f"{HASH_ALGORITHM}:{h.hexdigest()}", size


def hash_shard(path: str | Path, fmt: str) -> tuple[str, int]:
    """Content hash and size of a shard as :func:`hash_file`, over every file the shard is read from:
    a Megatron shard (format ``megatron``) is its ``.idx`` then its ``.bin`` (one stream), so a changed
    index changes the hash (and the cache key); every other format is its one file.

    Raises:
        OSError: a file cannot be read.
    """
    path = Path(path)
    files = [path.with_suffix(".idx"), path] if fmt == "megatron" else [path]
    h = xxhash.xxh3_128()
    size = 0
    for p in files:
        with open(p, "rb") as f:
            while chunk := f.read(_CHUNK):
                h.update(chunk)
                size += len(chunk)
    return f"{HASH_ALGORITHM}:{h.hexdigest()}", size


def file_state(path: str | Path) -> tuple[int, int, int, int]:
    """(size in bytes, modification time in ns, status-change time in ns, inode) of ``path``: equal
    before and after a read when no writer touched the file in between (an append, a rewrite in
    place, or a replacement by rename all change one of them).

    Raises:
        OSError: the file cannot be stat'ed.
    """
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
