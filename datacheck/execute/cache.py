"""Per-shard result cache for incremental audits, and the binary encoding of shard results.

A nightly audit over a shard set that grows every day should only read the shards that changed.
Each :class:`~datacheck.model.results.ShardResult` is stored under a key made of

- the shard's content hash (xxh3-128 of its bytes) and its path relative to the audited root
  (findings' messages name the shard, so the path is part of what the result says),
- the shard format (the same bytes read as CSV or as TSV give different results),
- the config hash (:meth:`Config.hash`) and, for ``[dataset] schema`` naming a file, that
  file's content hash,
- the datacheck version, a fingerprint of datacheck's own source files (a changed check must
  never be answered from an old result) and the polars version.

A rerun over unchanged shards hashes each shard (the hash *is* the key) and reads no shard data:
no scan, no parse. A changed shard has a new content hash, misses and is re-audited.

Moved shards (:meth:`ShardCache.get_moved`): beside each entry whose result names no path (no text of
its findings, skipped checks, layout, roles, columns or stats holds the shard's relative path, file name
or file name stem: a result of the bytes alone), a *move record* is kept under a key made of everything
in the entry's key but the file name (the folder, the file name's suffixes, the format, the content
hash, ...). A shard renamed or copied within its folder (``train-00000-of-00004.parquet`` renumbered
``-of-00005`` when a shard is added, a duplicated shard) misses under its new path and is then answered
from the entry of the same bytes under the old name, its path set to the new one, and stored under its
new key. A result that names its path (``decode.unreadable``: "train-00004.parquet: truncated ...") has
no move record: that shard is read again under a new name.

File identities (``--trust-mtime``, :meth:`ShardCache.known_hash`): beside the entries, the cache
records for each local shard file the content hash it had together with the file's state (size,
modification time, status-change time and inode of the shard and of each of its companions, in ns).
Only where the user allows it does a later audit take the recorded hash for a file whose state is
exactly the recorded one, without reading its bytes. A write, an append, a rename over it or a copy
changes the status-change time (which no user call can set back), so such a file is hashed again. A
state is recorded only when the file was last modified more than :data:`SETTLE_NS` before it was
stat-ed (a write within the same clock tick as the stat would leave the times unchanged: git's "racy
clean" case). A record carries the digest of its fields; one whose digest does not match (a byte
flipped, a field edited or restored from an older record) or that names other files than those of its
key (a record copied or swapped from another key's place) is never trusted: said by a
:class:`CacheWarning`, removed, and the file hashed. Without the permission every shard is hashed, as above.

Entries (the ``.dcr`` "datacheck results" layout, also used for part sidecars; see
:func:`encode_results`)::

    b"DCR1\\n"                       magic (5 bytes)
    u64 little-endian H            length of the header
    H bytes                         header: UTF-8 JSON {"meta": ..., "results": [...], "blobs": [[offset, length], ...]}; dict
                                    key order is kept (it is part of what a result says)
    blobs                           Arrow IPC streams (polars Series/DataFrames) and .npy arrays of payloads
    16 bytes                        xxh3-128 digest of everything before it

An entry whose magic, lengths, digest or JSON do not check out is corrupt or truncated: it is
never trusted, it is counted, removed and recomputed. Entries are written to a temporary file in
the entry's folder, fsynced and renamed (``os.replace``), so a reader sees either no entry or a
complete one, and two audits writing the same entry at once both leave a complete entry.

The same folder holds the whole-audit memo of the CLI (``memo/``: :mod:`datacheck.execute.rerun`),
which answers a rerun over unchanged inputs before any shard is looked up here.

Entries are never deleted during an audit; ``--cache-prune`` (:meth:`ShardCache.prune`) deletes,
after the audit, the entries it did not use (the old versions of changed or removed shards) and the
temporary files of writers that are gone (a killed audit's: no process holds the ``flock`` a writer
keeps on its temporary file until it renames it; a temporary file without that lock, an earlier
datacheck's, after an hour), for a cache folder kept for one dataset (nightly CI).

A cache folder that exists but is read-only (no write permission bits, or writes refused by the
file system) is a usage error (exit 2) raised before any shard is read: pass ``--cache-dir`` to a
writable folder or ``--no-cache``. Write permission bits are honoured even for root (containers
often run as root; writing into a folder someone marked read-only would be a surprise).
"""
from __future__ import annotations

import base64
import copy
import dataclasses
import io
import json
import os
import shutil
import stat
import struct
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import xxhash

from datacheck._version import __version__
from datacheck.derive.tokfiles import loaded_files
from datacheck.execute.rerun import SETTLE_NS, code_fingerprint, runtime_fingerprint
from datacheck.io import safejson
from datacheck.io.hashing import hash_file
from datacheck.io.outputs import TEMP_LOCKED_SUFFIX, probe_writable, replace_file, temp_writer_gone
from datacheck.io.rowhash import ROW_ENCODING
from datacheck.model.config import Config
from datacheck.model.errors import InternalError, UsageError
from datacheck.model.findings import Finding, Skipped
from datacheck.model.results import ShardResult

__all__ = [
    "DEFAULT_CACHE_DIR",
    "ShardCache",
    "CacheStats",
    "CacheWarning",
    "CorruptEntry",
    "EncodeError",
    "encode_results",
    "decode_results",
    "code_fingerprint",
    "cache_salt",
]

#: Default cache folder, relative to the working directory (beside ``.datacheck/reports``).
DEFAULT_CACHE_DIR = ".datacheck/cache"
#: Layout version of cache entries; part of every key, so a layout change never reads old entries.
ENTRY_LAYOUT = 1
#: Seconds an unlocked temporary file of the cache is kept by :meth:`ShardCache.prune`: its writer takes
#: the lock right after creating it (:func:`~datacheck.io.outputs.replace_file`, two system calls
#: later); 2 s, the coarsest modification-time step of common file systems (FAT; NFS servers may round
#: to 1 s: :data:`~datacheck.execute.rerun.SETTLE_NS`), below which a file's age cannot be told.
TEMP_LOCK_GRACE_S = SETTLE_NS / 1e9
_MAGIC = b"DCR1\n"
_DIGEST_LEN = 16  # xxh3-128
_TAG = "__dc__"


class CacheWarning(UserWarning):
    """The cache could not be used for one entry (the audit went on without it)."""


class CorruptEntry(ValueError):
    """A ``.dcr`` blob is truncated, has a wrong digest or cannot be decoded."""


class EncodeError(TypeError):
    """A shard result holds a value the ``.dcr`` layout cannot store (e.g. a polars Object column)."""


# --------------------------------------------------------------------------- value encoding


def _encode_value(v: Any, blobs: list[bytes], where: str) -> Any:
    """JSON-able form of ``v``; polars Series/DataFrames and numpy values go to ``blobs``."""
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        if v != v or v in (float("inf"), float("-inf")):
            return {_TAG: "float", "repr": repr(v)}
        return v
    if isinstance(v, tuple):
        return {_TAG: "tuple", "items": [_encode_value(x, blobs, where) for x in v]}
    if isinstance(v, list):
        return [_encode_value(x, blobs, where) for x in v]
    if isinstance(v, dict):
        if all(isinstance(k, str) for k in v) and _TAG not in v:
            return {k: _encode_value(x, blobs, where) for k, x in v.items()}
        return {_TAG: "dict", "items": [[_encode_value(k, blobs, where), _encode_value(x, blobs, where)]
                                        for k, x in v.items()]}
    if isinstance(v, (bytes, bytearray)):
        return {_TAG: "bytes", "b64": base64.b64encode(bytes(v)).decode("ascii")}
    import polars as pl

    if isinstance(v, pl.Series):
        return {_TAG: "series", "blob": _add_blob(blobs, _ipc(v.to_frame(), where))}
    if isinstance(v, pl.DataFrame):
        return {_TAG: "frame", "blob": _add_blob(blobs, _ipc(v, where))}
    import numpy as np

    if isinstance(v, (np.ndarray, np.generic)):
        arr = np.asarray(v)
        if arr.dtype == object:
            raise EncodeError(f"{where}: numpy object arrays cannot be stored")
        buf = io.BytesIO()
        np.save(buf, arr, allow_pickle=False)
        return {_TAG: "ndarray" if isinstance(v, np.ndarray) else "npscalar", "blob": _add_blob(blobs, buf.getvalue())}
    raise EncodeError(f"{where}: values of type {type(v).__name__} cannot be stored in a result entry")


def _add_blob(blobs: list[bytes], data: bytes) -> int:
    blobs.append(data)
    return len(blobs) - 1


def _ipc(df: Any, where: str) -> bytes:
    buf = io.BytesIO()
    try:
        df.write_ipc_stream(buf, compression="uncompressed")
    except Exception as exc:  # polars raises several types (e.g. for Object columns)
        raise EncodeError(f"{where}: cannot write as Arrow IPC: {str(exc).splitlines()[0]}") from None
    return buf.getvalue()


def _decode_value(v: Any, blobs: list[memoryview]) -> Any:
    if isinstance(v, list):
        return [_decode_value(x, blobs) for x in v]
    if not isinstance(v, dict):
        return v
    tag = v.get(_TAG)
    if tag is None:
        return {k: _decode_value(x, blobs) for k, x in v.items()}
    if tag == "float":
        return float(v["repr"])
    if tag == "tuple":
        return tuple(_decode_value(x, blobs) for x in v["items"])
    if tag == "dict":
        return {_hashable(_decode_value(k, blobs)): _decode_value(x, blobs) for k, x in v["items"]}
    if tag == "bytes":
        return base64.b64decode(v["b64"])
    if tag in ("series", "frame"):
        import polars as pl

        df = pl.read_ipc_stream(io.BytesIO(bytes(blobs[v["blob"]])))
        return df.to_series(0) if tag == "series" else df
    if tag in ("ndarray", "npscalar"):
        import numpy as np

        arr = np.load(io.BytesIO(bytes(blobs[v["blob"]])), allow_pickle=False)
        return arr if tag == "ndarray" else arr[()]
    raise CorruptEntry(f"unknown value tag {tag!r}")


def _hashable(k: Any) -> Any:
    return tuple(_hashable(x) for x in k) if isinstance(k, list) else k


# --------------------------------------------------------------------------- ShardResult <-> JSON


def _result_to_obj(r: Any, blobs: list[bytes]) -> dict[str, Any]:
    where = f"shard result of {r.path}"
    return {
        "path": r.path,
        "format": r.format,
        "content_hash": r.content_hash,
        "bytes": r.bytes,
        "rows": r.rows,
        "findings": [_encode_value(f.to_dict(dataset_level=True), blobs, where) for f in r.findings],
        "stats": _encode_value(r.stats, blobs, where + " (stats)"),
        "skipped": [s.to_dict() for s in r.skipped],
        "roles": _encode_value(r.roles, blobs, where + " (roles)"),
        "columns": _encode_value(r.columns, blobs, where + " (columns)"),
        "failing_rows": _encode_value(r.failing_rows, blobs, where + " (failing_rows)"),
        "payload": _encode_value(r.payload, blobs, where + " (payload)"),
        "layout": dict(r.layout),
        "not_applicable": list(r.not_applicable),
    }


def _result_from_obj(o: dict[str, Any], blobs: list[memoryview]) -> Any:
    findings = []
    for fd in o["findings"]:
        findings.append(Finding.from_dict(_decode_value(fd, blobs)))
    return ShardResult(
        path=o["path"], format=o["format"], content_hash=o["content_hash"], bytes=o["bytes"], rows=o["rows"],
        findings=findings,
        stats=_decode_value(o["stats"], blobs),
        skipped=[Skipped.from_dict(s) for s in o["skipped"]],
        roles=_decode_value(o["roles"], blobs),
        columns=_decode_value(o["columns"], blobs),
        failing_rows=_decode_value(o["failing_rows"], blobs),
        payload=_decode_value(o["payload"], blobs),
        layout=dict(o.get("layout") or {}),
        not_applicable=list(o.get("not_applicable") or ()),
    )


def encode_results(results: list[Any], meta: dict[str, Any] | None = None) -> bytes:
    """Encode shard results (and a JSON ``meta`` mapping) in the ``.dcr`` layout (module docstring).

    Findings, stats, roles, columns, skipped checks and ``failing_rows`` are stored as JSON;
    payload values that are polars Series/DataFrames are stored as Arrow IPC streams, numpy arrays
    as ``.npy``; tuples, bytes, non-string dict keys and non-finite floats are tagged, so that
    :func:`decode_results` gives back equal values of the same types.

    Raises:
        EncodeError: a value cannot be stored (e.g. a polars Object column, an arbitrary object).
    """
    blobs: list[bytes] = []
    objs = [_result_to_obj(r, blobs) for r in results]
    offsets, pos = [], 0
    for b in blobs:
        offsets.append([pos, len(b)])
        pos += len(b)
    header = json.dumps({"layout": ENTRY_LAYOUT, "meta": meta or {}, "results": objs, "blobs": offsets},
                        separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")
    body = b"".join([_MAGIC, struct.pack("<Q", len(header)), header, *blobs])
    return body + xxhash.xxh3_128_digest(body)


def _checked_header(data: bytes) -> tuple[Any, memoryview]:
    """The header (parsed JSON) and the blob area of a ``.dcr`` entry, once its magic, length, digest
    over every byte and header bounds check out.

    Raises:
        CorruptEntry: wrong magic, truncated, digest mismatch, header beyond the end or not JSON.
    """
    if len(data) < len(_MAGIC) + 8 + _DIGEST_LEN or not data.startswith(_MAGIC):
        raise CorruptEntry("not a datacheck result entry (bad magic or too short)")
    body, digest = data[:-_DIGEST_LEN], data[-_DIGEST_LEN:]
    if xxhash.xxh3_128_digest(body) != digest:
        raise CorruptEntry("checksum mismatch (truncated or modified entry)")
    (hlen,) = struct.unpack_from("<Q", body, len(_MAGIC))
    start = len(_MAGIC) + 8
    if start + hlen > len(body):
        raise CorruptEntry("header length beyond the end of the entry")
    try:
        header = safejson.loads(bytes(body[start:start + hlen]))
    except Exception as exc:  # a well-formed digest over undecodable content: still never trusted
        raise CorruptEntry(f"cannot decode entry: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None
    return header, memoryview(body)[start + hlen:]


def decode_results(data: bytes) -> tuple[list[Any], dict[str, Any]]:
    """Decode a ``.dcr`` blob into (shard results, meta).

    Raises:
        CorruptEntry: wrong magic, truncated, digest mismatch, or undecodable content. A corrupt
            blob is never partly trusted.
    """
    header, view = _checked_header(data)
    try:
        blobs = []
        for off, n in header["blobs"]:
            if off + n > len(view):
                raise CorruptEntry("blob beyond the end of the entry")
            blobs.append(view[off:off + n])
        results = [_result_from_obj(o, blobs) for o in header["results"]]
    except CorruptEntry:
        raise
    except Exception as exc:  # a well-formed digest over undecodable content: still never trusted
        raise CorruptEntry(f"cannot decode entry: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None
    if header.get("layout") != ENTRY_LAYOUT:
        raise CorruptEntry(f"entry layout {header.get('layout')!r}, expected {ENTRY_LAYOUT}")
    return results, header.get("meta", {})


def _header_rows(data: bytes, key: str, content_hash: str) -> tuple[int | None] | None:
    """``(rows,)`` of the one result a ``.dcr`` entry of ``key`` holds for bytes of ``content_hash``,
    from its header alone (the blobs not decoded), or None when the entry does not check out as
    :func:`decode_results` checks it (magic, length, digest over every byte, header JSON, layout) or
    is not of that key and content hash, or its rows are no count."""
    try:
        header, _ = _checked_header(data)
    except CorruptEntry:
        return None
    if not isinstance(header, dict) or header.get("layout") != ENTRY_LAYOUT:
        return None
    meta, results = header.get("meta"), header.get("results")
    if not isinstance(meta, dict) or meta.get("key") != key or not isinstance(results, list) or len(results) != 1:
        return None
    one = results[0]
    if not isinstance(one, dict) or one.get("content_hash") != content_hash:
        return None
    rows = one.get("rows")
    if rows is not None and (type(rows) is not int or rows < 0):
        return None
    return (rows,)


# --------------------------------------------------------------------------- keys


def _schema_file_hash(cfg: Config) -> str | None:
    """Content hash of the schema file ``[dataset] schema`` names (a ``.yaml``/``.json`` path or
    ``file.py:ClassName``), found where the audit loads it (:meth:`Config.schema_spec`: a relative
    path from the config file's folder, whatever the working folder); None for a built-in layout
    name (covered by :func:`code_fingerprint`)."""
    name = cfg.schema_spec()
    if not name:
        return None

    for candidate in (name, name.rsplit(":", 1)[0] if ":" in name else None):
        if candidate and Path(candidate).is_file():
            return hash_file(candidate)[0]
    return None


def _tokenizer_hash(cfg: Config) -> str | None:
    """Content hash of the files of the ``[tokens] tokenizer`` folder that the tokenizer's load
    reads (:func:`~datacheck.derive.tokfiles.loaded_files`: its own files and the ``*.jinja`` of its
    ``additional_chat_templates`` sub-folder; a chat
    template renders ``messages``: an edited template must not meet results rendered with the old
    one), with the transformers version that renders; None when no tokenizer is configured or the
    path is missing."""
    path = cfg.tokenizer_path()
    if not path or not Path(path).exists():
        return None
    folder = Path(path) if Path(path).is_dir() else Path(path).parent
    files = loaded_files(folder)
    try:
        import transformers  # lazy: the optional ``chat`` extra
        version = transformers.__version__
    except ImportError:
        version = None
    return json.dumps([version, [(f.relative_to(folder).as_posix(), hash_file(f)[0]) for f in files]])


def cache_salt(cfg: Config) -> str:
    """Everything besides the shard that decides a shard result, as one hex digest (32 chars):
    entry layout, datacheck version, code fingerprint, row encoding (``ROW_ENCODING``: cached row
    hashes of another encoding never meet this one's), polars version, the installed packages that
    decide a result (:func:`~datacheck.execute.rerun.runtime_fingerprint`: a decoder removed, e.g.
    zstandard, or any of them reinstalled), config hash, schema file hash, the tokenizer folder's file
    hashes (:func:`_tokenizer_hash`)."""
    import polars as pl

    parts = {"layout": ENTRY_LAYOUT, "datacheck": __version__, "code": code_fingerprint(), "rows": ROW_ENCODING,
             "polars": pl.__version__, "runtime": runtime_fingerprint(), "config": cfg.hash(),
             "schema_file": _schema_file_hash(cfg), "tokenizer": _tokenizer_hash(cfg)}
    return xxhash.xxh3_128_hexdigest(json.dumps(parts, sort_keys=True).encode())


# --------------------------------------------------------------------------- the cache


def _identity_digest(files: Any, states: Any, content_hash: Any, size: Any) -> str:
    """xxh3-128 (32 hex) of a file identity record's fields (compact JSON of ``[files, states, hash,
    size]``, as :meth:`ShardCache.remember` writes them): a record whose fields no longer give its
    digest was damaged (a byte flipped, a field edited or restored from an older record) and is not
    trusted. A check against damage, not against someone who rewrites the digest too (whoever can
    write the cache folder can write its entries)."""
    blob = json.dumps([files, states, content_hash, size], separators=(",", ":"))
    return xxhash.xxh3_128_hexdigest(blob.encode("utf-8", "surrogateescape"))


@dataclass
class CacheStats:
    """Counters of one audit's cache use. ``answered``: the shards whose result the audit took
    from the cache (none of their data read; :func:`datacheck.execute.audit.audit_shards`): what the
    CLI's summary calls "from the cache" (``hits`` also counts a found entry the audit then did not
    take, its file having changed meanwhile)."""

    hits: int = 0
    misses: int = 0
    corrupt: int = 0
    writes: int = 0
    write_errors: int = 0
    answered: int = 0


def _check_writable(root: Path) -> None:
    """Create ``root`` if needed and prove it writable, else raise :class:`UsageError`."""
    remedy = "pass --cache-dir with a writable folder, or --no-cache"
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cache folder {root}: cannot create it ({exc.strerror or exc}); {remedy}") from None
    if not root.is_dir():
        raise UsageError(f"cache folder {root}: exists and is not a folder; {remedy}")
    mode = root.stat().st_mode
    if not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
        raise UsageError(f"cache folder {root} is read-only (mode {stat.filemode(mode)}); {remedy}")
    try:
        probe_writable(root)
    except OSError as exc:
        raise UsageError(f"cache folder {root} is not writable ({exc.strerror or exc}); {remedy}") from None


class ShardCache:
    """The per-shard result cache under ``root`` (default ``.datacheck/cache``).

    Args:
        root: the cache folder; created when missing.
        cfg: the validated config of this audit (its hash is part of every key).
        salt: the key salt of another audit (:func:`cache_salt` as that audit computed it, e.g. a
            part's, recorded in its sidecar: ``datacheck merge --cache-dir`` stores the parts' results
            under the keys their audits use); None (default): ``cache_salt(cfg)``.

        read_only: only look entries up (:meth:`recorded_rows`): the folder is neither created nor
            probed for writing (``datacheck index verify`` reads the audit's cache, never writes it).

    Raises:
        UsageError: ``root`` cannot be created or is read-only (checked here, before any shard is read;
            not with ``read_only``).
    """

    def __init__(self, root: str | Path, cfg: Config | None, *, trust_mtime: bool = False, salt: str | None = None,
                 read_only: bool = False):
        self.root = Path(root)
        if not read_only:
            _check_writable(self.root)
        if salt is None:
            if cfg is None:
                raise InternalError("ShardCache needs a config or the salt of the audit whose keys it uses")
            salt = cache_salt(cfg)
        self.salt = salt
        self.trust_mtime = trust_mtime
        self.stats = CacheStats()
        self.used: set[str] = set()  # keys read or written by this audit (kept by :meth:`prune`)
        self.used_ids: set[str] = set()  # identity records read or written (kept by :meth:`prune`)
        # ``used`` also holds ``"m:" + stem`` of each move record read or written (kept by :meth:`prune`)

    def key(self, rel: str, fmt: str, content_hash: str, keep_rows: bool = False, cross_shard: bool = True,
            context: str | None = None) -> str:
        """The entry key (32 hex digits) of a shard at relative path ``rel`` with ``content_hash``.
        ``cross_shard`` is part of the key: a result computed without the row-hash payload (a
        one-shard audit) never answers an audit that needs it. ``context``: what the shard's reading
        takes from other files (:func:`datacheck.formats.registry.read_context`: a litdata folder's
        ``index.json`` config); None adds nothing (the keys of other formats are unchanged)."""
        parts: list = [self.salt, rel, fmt, content_hash, bool(keep_rows)]
        if not cross_shard:
            parts.append("single-shard")
        if context is not None:
            parts.append(["context", context])
        blob = json.dumps(parts, separators=(",", ":"))
        return xxhash.xxh3_128_hexdigest(blob.encode("utf-8"))

    def moved_key(self, rel: str, fmt: str, content_hash: str, keep_rows: bool = False,
                  cross_shard: bool = True, context: str | None = None) -> str:
        """The move record's key (32 hex digits, module docstring): :meth:`key`'s parts with the
        file name replaced by its folder and suffixes (``.parquet``, ``.jsonl.gz``: a check may tell
        formats by name; files beside the shard are those of the same folder)."""
        folder, _, base = rel.rpartition("/")
        suffixes = base[base.find("."):] if "." in base else ""
        parts: list = [self.salt, "moved", folder, suffixes, fmt, content_hash, bool(keep_rows)]
        if not cross_shard:
            parts.append("single-shard")
        if context is not None:
            parts.append(["context", context])
        return xxhash.xxh3_128_hexdigest(json.dumps(parts, separators=(",", ":")).encode("utf-8", "surrogateescape"))

    def moved_path(self, mkey: str) -> Path:
        """``<root>/v<layout>/moved/<mkey[:2]>/<mkey>.json``."""
        return self.root / f"v{ENTRY_LAYOUT}" / "moved" / mkey[:2] / f"{mkey}.json"

    def get_moved(self, rel: str, fmt: str, content_hash: str, cross_shard: bool = True,
                  context: str | None = None) -> Any | None:
        """The cached result of the same bytes under another name in ``rel``'s folder (with the same
        suffixes, format, config, ...), its path set to ``rel``, also stored under ``rel``'s own key; None
        when no move record names an entry, the entry is gone or corrupt, or it is not of these bytes (a
        move record that does not parse or has not its shape is said by a :class:`CacheWarning` and removed)."""
        mkey = self.moved_key(rel, fmt, content_hash, cross_shard=cross_shard, context=context)
        path = self.moved_path(mkey)
        try:
            rec = safejson.loads(self._read_entry(path))
        except OSError:
            return None
        except ValueError as exc:
            return self._spoiled(path, f"not JSON: {exc}", f"looking {rel} up by its own name only")
        if not isinstance(rec, dict) or not isinstance(rec.get("rel"), str) or not isinstance(rec.get("key"), str):
            return self._spoiled(path, "not a move record", f"looking {rel} up by its own name only")
        if (rec["rel"] == rel
                or rec["key"] != self.key(rec["rel"], fmt, content_hash, cross_shard=cross_shard, context=context)):
            return None
        got = self.get(rec["key"], rel)
        if got is None:
            return None
        if got.content_hash != content_hash or got.format != fmt:
            return None
        self.used.add("m:" + mkey)
        self.put(self.key(rel, fmt, content_hash, cross_shard=cross_shard, context=context), got,
                 cross_shard=cross_shard, context=context)
        return got

    def _remember_move(self, key: str, result: Any, data: bytes, cross_shard: bool, context: str | None) -> None:
        """Write the move record of ``result`` (stored under ``key`` as ``data``) when the result names
        no path (module docstring); a failed write is only a later miss."""
        rel = result.path
        if not isinstance(rel, str) or not rel or key != self.key(rel, result.format, result.content_hash,
                                                                   cross_shard=cross_shard, context=context):
            return
        base = rel.rpartition("/")[2]
        stem = base[:base.find(".")] if "." in base else base
        try:
            (hlen,) = struct.unpack_from("<Q", data, len(_MAGIC))
            header = json.loads(data[len(_MAGIC) + 8:len(_MAGIC) + 8 + hlen])
            header["results"][0].pop("path")
            text = json.dumps(header["results"][0], ensure_ascii=False)
        except (ValueError, KeyError, IndexError, struct.error):
            return
        if any(name and name in text for name in (rel, base, stem)):
            return  # the result names its path: a copy under another name would say the old one
        mkey = self.moved_key(rel, result.format, result.content_hash, cross_shard=cross_shard, context=context)
        p = self.moved_path(mkey)
        self.used.add("m:" + mkey)
        rec = json.dumps({"rel": rel, "key": key}, separators=(",", ":")).encode("utf-8", "surrogateescape")
        try:
            if self._read_entry(p) == rec:
                return
        except OSError:
            pass
        try:
            self._entry_dir(p)
            replace_file(p, rec, durable=False)  # a torn record does not parse: only a miss
        except OSError:
            pass

    def entry_path(self, key: str) -> Path:
        """``<root>/v<layout>/<key[:2]>/<key>.dcr`` (256 sub-folders keep folder listings short)."""
        return self.root / f"v{ENTRY_LAYOUT}" / key[:2] / f"{key}.dcr"

    def identity_path(self, files: list[str]) -> Path:
        """``<root>/v<layout>/ids/<h[:2]>/<h>.json``, ``h`` the xxh3-128 of the files' absolute paths."""
        h = xxhash.xxh3_128_hexdigest("\0".join(os.path.abspath(f) for f in files).encode("utf-8", "surrogateescape"))
        return self.root / f"v{ENTRY_LAYOUT}" / "ids" / h[:2] / f"{h}.json"

    def known_hash(self, files: list[str], states: list[tuple[int, int, int, int]]) -> tuple[str, int] | None:
        """The recorded (content hash, size) of the shard read from ``files`` (its companions, then
        the shard file; local paths) when the cache may trust file states (``trust_mtime``) and the
        record's states equal ``states`` (:func:`datacheck.io.hashing.file_state` of each file) exactly;
        else None (the bytes are hashed). A record that cannot be read, or one written by an earlier
        datacheck (no digest), is None too. A record that is not trusted is None said by a
        :class:`CacheWarning`, and removed: one that does not parse or has not the record's shape (torn,
        garbage, emptied), whose digest (:func:`_identity_digest`) does not match its fields (a field
        edited, a byte flipped, a stale hash restored into it), or that names other files than those of
        its key (a record copied or swapped from another key's place)."""
        if not self.trust_mtime:
            return None
        p = self.identity_path(files)
        try:
            rec = safejson.loads(self._read_entry(p))
        except OSError:
            return None
        except ValueError as exc:
            return self._spoiled(p, f"not JSON: {exc}", f"hashing {files[-1]}")
        if (not isinstance(rec, dict) or not isinstance(rec.get("hash"), str) or not isinstance(rec.get("size"), int)
                or not isinstance(rec.get("files"), list) or not isinstance(rec.get("states"), list)):
            return self._spoiled(p, "not a file identity record", f"hashing {files[-1]}")
        if "digest" not in rec:
            return None  # a record of an earlier datacheck: the file is hashed and the record written anew
        if rec["digest"] != _identity_digest(rec["files"], rec["states"], rec["hash"], rec["size"]):
            return self._spoiled(p, "its digest does not match its fields", f"hashing {files[-1]}")
        if rec["files"] != [os.path.abspath(f) for f in files]:
            return self._spoiled(p, "the record of other files, not of this key", f"hashing {files[-1]}")
        if rec["states"] != [list(s) for s in states]:
            return None
        self.used_ids.add(p.stem)
        return rec["hash"], rec["size"]

    def remember(self, files: list[str], states: list[tuple[int, int, int, int]], content_hash: str, size: int) -> None:
        """Record that ``files`` with ``states`` hold bytes of ``content_hash`` and ``size`` (see
        :meth:`known_hash`), with the digest of those fields (:func:`_identity_digest`); nothing is
        recorded for a file modified less than :data:`SETTLE_NS` before now (its state may not tell a
        later write apart). A failed write is ignored: the next audit hashes the file."""
        now = time.time_ns()
        if any(now - st[1] < SETTLE_NS for st in states):
            return
        p = self.identity_path(files)
        self.used_ids.add(p.stem)
        abs_files = [os.path.abspath(f) for f in files]
        rec = {"files": abs_files, "states": [list(s) for s in states], "hash": content_hash, "size": size,
               "digest": _identity_digest(abs_files, [list(s) for s in states], content_hash, size)}
        data = json.dumps(rec, separators=(",", ":")).encode("utf-8", "surrogateescape")
        try:
            if self._read_entry(p) == data:
                return
        except OSError:
            pass
        try:
            self._entry_dir(p)
            replace_file(p, data, durable=False)  # no fsync: a torn record fails its digest and is only a miss
        except OSError:
            pass

    def _spoiled(self, p: Path, why: str, instead: str) -> None:
        """A record of the cache (a file identity or a move record) that does not parse or has not its
        shape: a miss (``stats.corrupt``), said by a :class:`CacheWarning` naming it, why and what is
        done ``instead``; removed, so the next audit writes it anew. Returns None (the miss)."""
        warnings.warn(f"cache record {p} is corrupt ({why[:200]}); {instead}", CacheWarning, stacklevel=3)
        self.stats.corrupt += 1
        try:
            p.unlink()
        except OSError:
            pass
        return None

    def _repair(self, p: Path) -> bool:
        """Remove what stands at ``p`` inside the cache when it is not a regular file (a symlink, a
        FIFO, a device, a folder): the cache never follows or blocks on it.
        True when something was removed."""
        try:
            st = os.lstat(p)
        except OSError:
            return False
        if stat.S_ISREG(st.st_mode):
            return False
        try:
            if stat.S_ISDIR(st.st_mode):
                shutil.rmtree(p)
            else:
                os.unlink(p)
        except OSError:
            return False
        return True

    def _entry_dir(self, p: Path) -> Path:
        """The entry's folders ``<root>/v<layout>/<xx>`` as real folders of the cache: a symlink (dangling
        or not) or a file standing there is removed first, so nothing is created or written outside
        (also the deeper ``<root>/v<layout>/ids/<xx>`` of an identity record)."""
        chain = []
        up = p.parent
        while up != self.root and self.root in up.parents:
            chain.append(up)
            up = up.parent
        for d in reversed(chain):
            try:
                st = os.lstat(d)
            except FileNotFoundError:
                self._mkdir(d)
                continue
            if not stat.S_ISDIR(st.st_mode):  # lstat: a link (dangling or not) is no folder
                try:
                    os.unlink(d)
                except FileNotFoundError:  # another writer removed it first
                    pass
                self._mkdir(d)
        return p.parent

    @staticmethod
    def _mkdir(d: Path) -> None:
        """Create the folder ``d``; another writer (thread or process) that created it a moment
        earlier is no failure when what stands there now is a real folder (not a link)."""
        try:
            os.mkdir(d)
        except FileExistsError:
            if not stat.S_ISDIR(os.lstat(d).st_mode):
                raise

    def _read_entry(self, p: Path) -> bytes:
        """The entry's bytes, opened without following a link and only as a regular file (a FIFO
        never blocks: ``O_NONBLOCK``). Raises FileNotFoundError (also after repairing a non-file)."""
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        try:
            fd = os.open(p, flags)
        except OSError as exc:
            if isinstance(exc, FileNotFoundError):
                raise
            if self._repair(p):  # ELOOP (a link) or EISDIR (a folder): repaired, a miss
                raise FileNotFoundError(str(p)) from None
            raise
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                fd = -1
                self._repair(p)
                raise FileNotFoundError(str(p))
            with os.fdopen(fd, "rb") as f:
                fd = -1
                return f.read()
        finally:
            if fd >= 0:
                os.close(fd)

    def recorded_rows(self, rel: str, fmt: str, content_hash: str, context: str | None = None) -> tuple[bool, int | None]:
        """(found, rows): the row count the cached result of the shard at ``rel`` with ``content_hash``
        records (:attr:`ShardResult.rows <datacheck.model.results.ShardResult.rows>`: an int, or None for
        a shard its audit found unreadable), looked up under the keys an audit of one shard and of
        several shards use (:meth:`key`'s ``cross_shard``), without decoding the entry's payloads: its
        digest is checked over every byte (:func:`decode_results`' rule: a truncated, bit-flipped or
        garbled entry, or one of another key or shard, is not found, never trusted) and only its header
        JSON is parsed. (False, None) on a miss. Nothing is counted, written or removed but what stands
        at an entry's place without being a regular file (:meth:`_read_entry`)."""
        for cross in (True, False):
            key = self.key(rel, fmt, content_hash, cross_shard=cross, context=context)
            try:
                data = self._read_entry(self.entry_path(key))
            except OSError:
                continue
            got = _header_rows(data, key, content_hash)
            if got is not None:
                return True, got[0]
        return False, None

    def get(self, key: str, rel: str) -> Any | None:
        """The cached :class:`ShardResult` for ``key`` (its path set to ``rel``), or None on a miss.

        A corrupt or truncated entry counts as a miss (``stats.corrupt``) and is removed; a symlink,
        FIFO or folder in place of an entry is never followed or read, and is removed (a miss).
        """
        p = self.entry_path(key)
        try:
            data = self._read_entry(p)
        except FileNotFoundError:
            self.stats.misses += 1
            return None
        except OSError as exc:
            warnings.warn(f"cache entry {p}: cannot read ({exc.strerror or exc}); re-auditing {rel}", CacheWarning,
                          stacklevel=2)
            self.stats.misses += 1
            return None
        try:
            results, meta = decode_results(data)
            if meta.get("key") != key or len(results) != 1:
                raise CorruptEntry("entry does not belong to this key")
        except CorruptEntry as exc:
            warnings.warn(f"cache entry {p} is corrupt ({exc}); re-auditing {rel}", CacheWarning, stacklevel=2)
            self.stats.corrupt += 1
            self.stats.misses += 1
            try:
                p.unlink()
            except OSError:
                pass
            return None
        self.stats.hits += 1
        self.used.add(key)
        r = results[0]
        r.path = rel
        return r

    def put(self, key: str, result: Any, cross_shard: bool = True, context: str | None = None) -> None:
        """Store ``result`` atomically (temporary file in the entry's folder, fsync, ``os.replace``, which
        replaces a link standing at the entry path instead of writing through it).

        A result that cannot be encoded, or a failed write (disk full), is not cached: a
        :class:`CacheWarning` says so (once per audit for write failures) and the audit goes on.
        A result that names no path also gets its move record (:meth:`get_moved`; ``cross_shard`` and
        ``context`` as in :meth:`key`).
        """
        try:
            data = encode_results([result], meta={"key": key})
        except EncodeError as exc:
            warnings.warn(f"not cached: {exc}", CacheWarning, stacklevel=2)
            self.stats.write_errors += 1
            return
        p = self.entry_path(key)
        self.used.add(key)
        try:
            self._entry_dir(p)
            self._repair(p)
            replace_file(p, data)  # 0o666 minus the umask, like any output
        except OSError as exc:
            self.stats.write_errors += 1
            if self.stats.write_errors == 1:
                warnings.warn(f"cache entry {p}: cannot write ({exc.strerror or exc}); continuing without the "
                              "cache (said once per audit)", CacheWarning, stacklevel=2)
            return
        self.stats.writes += 1
        self._remember_move(key, result, data, cross_shard, context)


    def worker_view(self) -> "ShardCache":
        """A copy of this cache for a worker process (same folder and key salt, fresh counters and
        used keys, picklable); hand its ``stats`` and ``used`` back with :meth:`absorb`."""
        view = copy.copy(self)
        view.stats = CacheStats()
        view.used = set()
        view.used_ids = set()
        return view

    def absorb(self, stats: CacheStats, used: set[str]) -> None:
        """Add a worker view's counters and used keys to this cache's (so :meth:`prune` keeps the
        entries the workers read or wrote)."""
        for f in dataclasses.fields(CacheStats):
            setattr(self.stats, f.name, getattr(self.stats, f.name) + getattr(stats, f.name))
        self.used |= used

    def prune(self, temp_max_age_s: float = 3600.0) -> int:
        """Delete every entry this audit did not use, entries of other layouts, every whole-audit memo
        record (``memo/``, :mod:`datacheck.execute.rerun`: an audit with ``--cache-prune`` neither reads
        nor writes one) with the remembered code fingerprints (``memo/code/``) and the temporary files
        of writers that are gone (a killed audit's): a temporary file of
        :func:`~datacheck.io.outputs.replace_file` (``*.lk.tmp``) that no process holds locked
        (:func:`~datacheck.io.outputs.temp_writer_gone`) and older than :data:`TEMP_LOCK_GRACE_S`; one
        still locked is being written and kept, whatever its age; any other ``*.tmp`` (an earlier
        datacheck's, or one on a file system without ``flock``) when older than ``temp_max_age_s``
        seconds. Returns the files removed.

        For a cache folder dedicated to one dataset and config (e.g. restored by ``actions/cache``
        in a nightly job): entries of the shard versions that are gone would otherwise pile up.
        Another audit running at the same time over the same folder loses at most some hits.
        """
        import time

        removed = 0
        now = time.time()
        for p in sorted(self.root.rglob("*")):
            if not p.is_file():
                continue
            rel = p.relative_to(self.root).parts
            stale = False
            if p.name.endswith(".tmp"):
                try:
                    age = now - p.stat().st_mtime
                except OSError:
                    continue
                gone = temp_writer_gone(p) if p.name.endswith(TEMP_LOCKED_SUFFIX) else None
                stale = age > (TEMP_LOCK_GRACE_S if gone else temp_max_age_s) and gone is not False
            elif p.suffix == ".dcr" and rel[0].startswith("v"):
                stale = rel[0] != f"v{ENTRY_LAYOUT}" or p.stem not in self.used
            elif p.suffix == ".json" and len(rel) == 4 and rel[0].startswith("v") and rel[1] == "ids":
                stale = rel[0] != f"v{ENTRY_LAYOUT}" or p.stem not in self.used_ids
            elif p.suffix == ".json" and len(rel) == 4 and rel[0].startswith("v") and rel[1] == "moved":
                stale = rel[0] != f"v{ENTRY_LAYOUT}" or "m:" + p.stem not in self.used
            elif p.suffix == ".dcm" and rel[0] == "memo":  # whole-audit memo records (execute/rerun.py)
                stale = True
            elif rel[:2] == ("memo", "code"):  # the remembered code fingerprints (rerun.code_memo_dir)
                stale = True
            if stale:
                try:
                    p.unlink()
                    removed += 1
                except FileNotFoundError:
                    pass
        for d in sorted((x for x in self.root.rglob("*") if x.is_dir()), key=lambda x: len(x.parts), reverse=True):
            try:
                d.rmdir()  # only empty folders go
            except OSError:
                pass
        return removed



