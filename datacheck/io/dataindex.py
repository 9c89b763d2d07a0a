"""The data index: a versioned, committed record of a shard set (``datacheck index build``), read,
validated, built and written here; and the shard lists that real datasets ship beside their shards,
read here with what their own records say about the files (sizes, hashes). Comparing either with
the shards on disk (``datacheck index verify``, ``[dataset] index`` in ``datacheck audit``) is the
index check family's (:mod:`datacheck.checks.index`).

Index file (JSON, sorted keys, written atomically)::

    {
      "format": "datacheck-index",
      "format_version": 1,
      "hash_algorithm": "xxh3-128",
      "index_hash": "<32 hex>",            # datacheck.hashing.index_hash of (path, content_hash) pairs
      "datacheck_version": "...",
      "shards": [                          # sorted by path
        {"path": "train/a.parquet", "bytes": 1234, "rows": 10, "content_hash": "xxh3-128:<32 hex>"}
      ]
    }

Paths are POSIX paths relative to the dataset root (the audited folder). A path that is absolute,
holds ``..``, a backslash, a drive letter or a NUL, or resolves (through symlinks) outside the root
is refused with a :class:`~datacheck.model.errors.UsageError` (exit 2), before any file is opened, so an
index can never make datacheck read outside the dataset. A file that is not JSON, not an index, or
has a ``format_version`` newer than :data:`INDEX_FORMAT_VERSION` is refused the same way, and so
is an index that contradicts itself: a ``bytes`` or ``rows`` that is no count (not an integer,
negative, 2**63 or more: :data:`MAX_COUNT`), or an ``index_hash`` that is not the hash of its
shards' (path, content_hash) pairs (the file was edited after it was built; it blames no shard, so
it is no ``index.changed_shard`` finding but a file to rebuild). The ``rows`` of every listed shard
are compared with the shard's own row count (``index.row_count_mismatch``), whether or not its
bytes changed: consumers read row counts from the index.

Shipped shard lists (verified where present, under the audited root):

- Hugging Face ``save_to_disk`` folders: ``state.json`` ``_data_files`` [{"filename": ...}] lists
  the Arrow files of the folder; ``dataset_info.json`` ``splits[<state _split>].num_examples`` is
  the split's row count.
- MosaicML streaming ``index.json``: ``{"version": 2, "shards": [{"raw_data": {"basename",
  "bytes", ...}, "samples": N, ...}]}``; basenames are relative to the index's folder.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Iterable

import xxhash

from datacheck._version import __version__
from datacheck.io.bounded import open_inflated
from datacheck.io.hashing import index_hash
from datacheck.io.hfmeta import hf_data_files, parse_state
from datacheck.io.litdataindex import expected_chunk_sizes, is_litdata_index
from datacheck.io.outputs import write_json_atomic
from datacheck.io.safejson import JsonInputError, read_json_file
from datacheck.io.safejson import loads as safe_loads
from datacheck.model.constants import HASH_ALGORITHM
from datacheck.model.errors import UsageError

__all__ = [
    "is_listed_file",
    "INDEX_FORMAT",
    "INDEX_FORMAT_VERSION",
    "IndexEntry",
    "DataIndex",
    "safe_relpath",
    "read_index",
    "parse_index",
    "build_index",
    "write_index",
    "shipped_lists",
    "shipped_files",
    "hf_data_files",
    "resolve_index_path",
]


def is_listed_file(path: Path) -> bool:
    """``path`` (named by a file that came with the data: an index, state.json, dataset_dict.json) is a
    regular file. False, never an exception, for a name the OS cannot take (too long:
    ``ENAMETOOLONG``; an embedded NUL: ``ValueError``) or cannot reach (a permission error): such a
    name is simply not on disk, which the index checks report as a missing shard."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False

INDEX_FORMAT = "datacheck-index"
#: Version of the index layout; a reader refuses a newer one.
INDEX_FORMAT_VERSION = 1
_DRIVE = re.compile(r"^[A-Za-z]:")
#: a non-UTF-8 byte of a file name as discovery writes it (``\xe9``: 0x80 to 0xff, never an ASCII byte)
_BYTE_ESCAPE = re.compile(r"\\x[89a-f][0-9a-f]")


@dataclass(frozen=True)
class IndexEntry:
    """One shard of an index: relative POSIX ``path``, ``bytes``, ``rows`` (None: unknown or
    unreadable) and ``content_hash`` (``"xxh3-128:<hex>"``, None when the list does not give one)."""

    path: str
    bytes: int | None
    rows: int | None
    content_hash: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "bytes": self.bytes, "rows": self.rows, "content_hash": self.content_hash}


@dataclass(frozen=True)
class DataIndex:
    """A parsed shard list: ``source`` (file it came from, for messages), ``kind`` (``datacheck``,
    ``hf-state``, ``mosaicml``) and its entries keyed by path relative to the dataset root."""

    source: str
    kind: str
    entries: dict[str, IndexEntry] = field(default_factory=dict)
    index_hash: str | None = None
    #: for ``hf-state``: the split's expected total row count, and its folder
    split_rows: int | None = None
    folder: str = ""
    #: files directly in ``folder`` matching this glob but not listed are unlisted extras
    #: (MosaicML: ``*.mds*``; litdata: ``chunk-*.bin``); None: no such rule
    extra_glob: str | None = None
    #: what the list's own records say about the files, found while reading it (the index family
    #: reports them with the comparison's findings): MosaicML: the recorded hashes a file's bytes do
    #: not match (``{path, algorithm, expected, actual}``), and whether the index lists zero shards;
    #: litdata: the chunks whose size is not one the index allows (``{path, chunk_bytes, items,
    #: actual_bytes, accepted}``) and the chunk files listed more than once (each repeat once more)
    hash_mismatches: tuple[dict[str, Any], ...] = ()
    #: MosaicML: the shards whose own config (the JSON in the shard's header) names other columns,
    #: encodings or sizes than the index entry StreamingDataset decodes them by
    #: (``{path, field, index, shard}``)
    config_mismatches: tuple[dict[str, Any], ...] = ()
    lists_no_shard: bool = False
    resized: tuple[dict[str, Any], ...] = ()
    listed_twice: tuple[str, ...] = ()


def safe_relpath(p: Any, root: Path, source: str) -> str:
    """Validate a path read from an index: relative, inside ``root``; returns it as a POSIX string.

    A ``\\xNN`` in a path is a byte of a file name that is not UTF-8, as discovery names such files
    (:func:`datacheck.io.discover.shown_rel`), not a backslash separator: it is accepted.

    Raises:
        UsageError: the path is not a string, is absolute, holds ``..``/backslashes/NUL/a drive
            letter, or resolves (symlinks included) outside ``root``. Nothing is opened.
    """
    if not isinstance(p, str) or not p:
        raise UsageError(f"{source}: shard path {p!r} is not a non-empty string; fix or rebuild the index")
    bad = (p.startswith(("/", "\\")) or "\\" in _BYTE_ESCAPE.sub("", p) or "\x00" in p or _DRIVE.match(p)
           or ".." in PurePosixPath(p).parts)
    if bad:
        raise UsageError(f"{source}: shard path {p!r} points outside the dataset root {root}; an index may only "
                         "list paths relative to the root (no '/', '..', drive letters or backslashes). "
                         "Rebuild it with `datacheck index build`")
    norm = PurePosixPath(p).as_posix()
    root_r = root.resolve()
    target = (root_r / norm).resolve()
    if not target.is_relative_to(root_r):
        raise UsageError(f"{source}: shard path {p!r} resolves outside the dataset root {root} (a symlink?); "
                         "refusing to use it")
    return norm


def _load_json(path: Path, what: str) -> Any:
    """``path`` parsed by the one bounded JSON loader (:mod:`datacheck.io.safejson`).
    Raises :class:`UsageError` naming the file and what is wrong with it."""
    try:
        return read_json_file(path)
    except FileNotFoundError:
        raise UsageError(f"{path}: no such {what}; give an existing file (build one with `datacheck index build`)") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read {what}: {exc.strerror or exc}") from None
    except JsonInputError as exc:
        raise UsageError(f"{path}: {what} is not usable: {exc.reason}; fix it or rebuild it "
                         "(`datacheck index build` for a datacheck index)") from None


#: a row or byte count an index may record is below this: Arrow and Parquet count rows, and the OS
#: counts file sizes, in signed 64-bit integers (``int64``), so no shard holds 2**63 rows or bytes
MAX_COUNT = 2**63


def _int_or_none(v: Any, key: str, source: str) -> int | None:
    """``v`` (a row or byte count read from an index) as an int, or None when absent (``null``).

    Raises:
        UsageError: ``v`` is not an integer (a bool, a float, a string), is negative or is
            :data:`MAX_COUNT` or more.
    """
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < MAX_COUNT:
        raise UsageError(f"{source}: {key} must be a non-negative integer below 2**63, got {repr(v)[:60]}; "
                         "fix or rebuild the index")
    return v


def parse_index(data: Any, root: Path, source: str) -> DataIndex:
    """Validate a parsed datacheck index. Raises :class:`UsageError` naming the bad key: among
    others a ``bytes``/``rows`` that is no count (see :func:`_int_or_none`), or an ``index_hash``
    that is not :func:`~datacheck.io.hashing.index_hash` of the entries' (path, content_hash) pairs
    (an index without the key claims none and is accepted)."""
    if not isinstance(data, dict) or data.get("format") != INDEX_FORMAT:
        raise UsageError(f"{source}: not a datacheck index (no \"format\": \"{INDEX_FORMAT}\"); "
                         "build one with `datacheck index build PATH -o FILE`")
    v = data.get("format_version")
    if isinstance(v, bool) or not isinstance(v, int):
        raise UsageError(f"{source}: format_version must be an integer, got {v!r}")
    if v > INDEX_FORMAT_VERSION:
        raise UsageError(f"{source}: index format_version {v} is newer than this datacheck reads "
                         f"({INDEX_FORMAT_VERSION}); upgrade datacheck (install a newer release from its source)")
    if data.get("hash_algorithm") != HASH_ALGORITHM:
        raise UsageError(f"{source}: hash_algorithm {data.get('hash_algorithm')!r} is not supported "
                         f"(this datacheck hashes with {HASH_ALGORITHM}); rebuild the index")
    shards = data.get("shards")
    if not isinstance(shards, list):
        raise UsageError(f"{source}: \"shards\" must be a list")
    entries: dict[str, IndexEntry] = {}
    for k, s in enumerate(shards):
        if not isinstance(s, dict):
            raise UsageError(f"{source}: shards[{k}] is not an object")
        path = safe_relpath(s.get("path"), root, source)
        ch = s.get("content_hash")
        if not isinstance(ch, str) or not ch.startswith(HASH_ALGORITHM + ":"):
            raise UsageError(f"{source}: shards[{k}].content_hash {ch!r} is not an {HASH_ALGORITHM} hash")
        if path in entries:
            raise UsageError(f"{source}: shard {path!r} is listed twice")
        entries[path] = IndexEntry(path=path, bytes=_int_or_none(s.get("bytes"), f"shards[{k}].bytes", source),
                                   rows=_int_or_none(s.get("rows"), f"shards[{k}].rows", source), content_hash=ch)
    recorded = data.get("index_hash")
    if "index_hash" in data:
        real = index_hash([(e.path, e.content_hash or "") for e in entries.values()])
        if recorded != real:
            raise UsageError(f"{source}: index_hash {repr(recorded)[:60]} is not the hash of its shards' paths and "
                             f"content hashes ({real}): the file was edited after `datacheck index build`, so "
                             "neither can be trusted to describe the data; rebuild the index from the shards it "
                             "should describe")
    return DataIndex(source=source, kind="datacheck", entries=entries, index_hash=recorded)


def resolve_index_path(index: str | Path, root: Path) -> Path:
    """``[dataset] index``: an absolute path as given (a config loaded from a file gives its relative
    ``index`` joined to the file's folder: :meth:`~datacheck.model.config.Config.index_file`); a
    relative one (a config built in memory) is looked up in the audited root first (the index travels
    with the data), then in the working folder."""
    p = Path(index)
    if p.is_absolute():
        return p
    in_root = root / p
    if in_root.is_file() or not p.is_file():
        return in_root
    return p


def read_index(path: str | Path, root: Path) -> DataIndex:
    """Read and validate a datacheck index file for the dataset at ``root``.

    Raises:
        UsageError: missing, unreadable, not JSON, not an index, newer format version, or a path
            outside ``root`` (see :func:`safe_relpath`).
    """
    path = Path(path)
    return parse_index(_load_json(path, "index file"), root, str(path))


def build_index(entries: list[IndexEntry]) -> dict[str, Any]:
    """The index document (a dict ready for JSON with sorted keys) for ``entries``."""

    shards = sorted(entries, key=lambda e: e.path)
    return {
        "format": INDEX_FORMAT,
        "format_version": INDEX_FORMAT_VERSION,
        "hash_algorithm": HASH_ALGORITHM,
        "index_hash": index_hash([(e.path, e.content_hash or "") for e in shards]),
        "datacheck_version": __version__,
        "shards": [e.to_dict() for e in shards],
    }


def write_index(doc: dict[str, Any], path: str | Path) -> Path:
    """Write the index document atomically (temporary file, fsync, rename), sorted keys."""

    return write_json_atomic(path, json.dumps(doc, sort_keys=True, indent=2, ensure_ascii=False) + "\n")


# ------------------------------------------------------------------------------ shipped shard lists


def _hf_state(state: Path, root: Path) -> DataIndex | None:
    src = state.relative_to(root).as_posix()
    st = parse_state(_load_json(state, "Hugging Face state.json"), str(state))
    if st is None:
        return None
    folder = state.parent.relative_to(root).as_posix()
    prefix = "" if folder == "." else folder + "/"
    entries: dict[str, IndexEntry] = {}
    for k, name in enumerate(st.names):
        rel = safe_relpath(prefix + name if isinstance(name, str) else name, root, f"{src} _data_files[{k}]")
        entries[rel] = IndexEntry(path=rel, bytes=None, rows=None, content_hash=None)
    split_rows = None
    info = state.parent / "dataset_info.json"
    split = st.split
    if info.is_file() and split is not None:
        try:
            di = read_json_file(info)
            n = di.get("splits", {}).get(split, {}).get("num_examples")
            if isinstance(n, int) and not isinstance(n, bool):
                split_rows = n
        except (OSError, JsonInputError, AttributeError):
            split_rows = None
    return DataIndex(source=src, kind="hf-state", entries=entries, split_rows=split_rows,
                     folder="" if folder == "." else folder)


def _file_digest(path: Path, algo: str) -> str | None:
    """Hex digest of ``path`` under MosaicML's hash name ``algo`` (hashlib's and xxhash's names, as
    ``streaming/base/hashing.py``), or None for an unknown name or an unreadable file."""
    if algo in hashlib.algorithms_available and not algo.startswith("shake_"):
        h: Any = hashlib.new(algo)
    elif algo in xxhash.algorithms_available:
        h = getattr(xxhash, algo)()
    else:
        return None
    try:
        with open(path, "rb") as f:
            while chunk := f.read(1 << 24):
                h.update(chunk)
    except OSError:
        return None
    return str(h.hexdigest())


#: the MDS config fields a shard's header and its index entry must agree on (StreamingDataset's
#: ``MDSReader`` decodes each sample by the index entry's, never by the header's)
_MDS_COLUMN_KEYS = ("column_names", "column_encodings", "column_sizes")
#: most bytes of an MDS header (sample count, offset table, config) read to compare configs
_MDS_HEADER_MAX = 64 << 20


def _mds_shard_config(path: Path) -> dict[str, Any] | None:
    """The JSON config an MDS shard carries in its header (inflated by name for ``.zstd``/``.gz``/
    ``.bz2``), or None when the header cannot be read as one (the shard's reader reports that)."""
    try:
        with open_inflated(path) as f:
            head = f.read(4)
            if len(head) < 4:
                return None
            n = int.from_bytes(head, "little")
            if 4 * (n + 1) > _MDS_HEADER_MAX:
                return None
            table = f.read(4 * (n + 1))
            if len(table) < 4 * (n + 1):
                return None
            start, end = 4 * (n + 2), int.from_bytes(table[:4], "little")
            if not start <= end <= start + _MDS_HEADER_MAX:
                return None
            cfg = safe_loads(f.read(end - start))
    except Exception:  # noqa: BLE001 - an unreadable header is the shard reader's finding, not this comparison's
        return None
    return cfg if isinstance(cfg, dict) else None


def _mds_config_mismatch(rel: str, entry: dict[str, Any], path: Path) -> list[dict[str, Any]]:
    """The column fields on which the shard's own config and its index entry disagree."""
    cfg = _mds_shard_config(path)
    if cfg is None:
        return []
    out = []
    for key in _MDS_COLUMN_KEYS:
        want, got = entry.get(key), cfg.get(key)
        if key == "column_sizes" and want is None and got is None:
            continue
        if isinstance(want, list) and isinstance(got, list) and want != got:
            out.append({"path": rel, "field": key, "index": want[:64], "shard": got[:64]})
    return out


def _mosaic(index: Path, root: Path) -> DataIndex | None:
    """A MosaicML ``index.json``: its shards (the compressed ``zip_data`` file when there is one, else
    ``raw_data``) with bytes and sample counts; the per-file ``hashes`` it records are verified here
    (:attr:`DataIndex.hash_mismatches`), and so are each listed shard's column names, encodings and
    sizes against the config in the shard's own header (:attr:`DataIndex.config_mismatches`); an index
    that lists zero shards has ``lists_no_shard``."""
    src = index.relative_to(root).as_posix()
    data = _load_json(index, "MosaicML index.json")
    if not isinstance(data, dict) or "shards" not in data or "format" in data:
        return None  # not a MosaicML index (a datacheck index carries "format")
    v = data.get("version")
    if isinstance(v, int) and v > 2:
        raise UsageError(f"{index}: MosaicML index version {v} is newer than datacheck reads (2)")
    shards = data["shards"]
    if not isinstance(shards, list):
        raise UsageError(f"{index}: \"shards\" must be a list")
    folder = index.parent.relative_to(root).as_posix()
    prefix = "" if folder == "." else folder + "/"
    entries: dict[str, IndexEntry] = {}
    bad_hash: list[dict[str, Any]] = []
    bad_cfg: list[dict[str, Any]] = []
    for k, s in enumerate(shards):
        raw = s.get("raw_data") if isinstance(s, dict) else None
        zipd = s.get("zip_data") if isinstance(s, dict) else None
        part, key = (zipd, "zip_data") if isinstance(zipd, dict) and zipd.get("basename") else (raw, "raw_data")
        name = part.get("basename") if isinstance(part, dict) else None
        rel = safe_relpath(prefix + name if isinstance(name, str) else name, root, f"{src} shards[{k}].{key}.basename")
        entries[rel] = IndexEntry(path=rel, bytes=_int_or_none(part.get("bytes"), f"shards[{k}].{key}.bytes", src),
                                  rows=_int_or_none(s.get("samples"), f"shards[{k}].samples", src), content_hash=None)
        hashes = part.get("hashes") if isinstance(part, dict) else None
        if isinstance(s, dict) and is_listed_file(root / rel):
            bad_cfg.extend(_mds_config_mismatch(rel, s, root / rel))
        if isinstance(hashes, dict) and is_listed_file(root / rel):
            for algo, want in sorted(hashes.items()):
                got = _file_digest(root / rel, str(algo))
                if got is not None and isinstance(want, str) and got != want.lower():
                    bad_hash.append({"path": rel, "algorithm": algo, "expected": want, "actual": got})
    return DataIndex(source=src, kind="mosaicml", entries=entries, folder="" if folder == "." else folder,
                     extra_glob="*.mds*", hash_mismatches=tuple(bad_hash), config_mismatches=tuple(bad_cfg),
                     lists_no_shard=not shards)


def _litdata(index: Path, root: Path) -> DataIndex | None:
    """A litdata ``index.json`` (``chunks`` + ``config``): its chunk files with their item counts
    (``chunk_size``); the chunks whose size is neither of :func:`expected_chunk_sizes`
    (:attr:`DataIndex.resized`) and the files listed twice (their items would be read twice:
    :attr:`DataIndex.listed_twice`); unlisted ``chunk-*.bin`` files of the folder match ``extra_glob``."""
    src = index.relative_to(root).as_posix()
    data = _load_json(index, "litdata index.json")
    if not is_litdata_index(data):
        return None
    folder = index.parent.relative_to(root).as_posix()
    prefix = "" if folder == "." else folder + "/"
    entries: dict[str, IndexEntry] = {}
    resized: list[dict[str, Any]] = []
    twice: list[str] = []
    for k, c in enumerate(data["chunks"]):
        name = c.get("filename") if isinstance(c, dict) else None
        rel = safe_relpath(prefix + name if isinstance(name, str) else name, root, f"{src} chunks[{k}].filename")
        items = _int_or_none(c.get("chunk_size"), f"chunks[{k}].chunk_size", src)
        nbytes = _int_or_none(c.get("chunk_bytes"), f"chunks[{k}].chunk_bytes", src)
        if rel in entries:
            twice.append(rel)
        entries[rel] = IndexEntry(path=rel, bytes=None, rows=items, content_hash=None)
        p = root / rel
        if items is not None and nbytes is not None and is_listed_file(p):
            size = p.stat().st_size
            if size not in expected_chunk_sizes(nbytes, items):
                resized.append({"path": rel, "chunk_bytes": nbytes, "items": items, "actual_bytes": size,
                                "accepted": list(expected_chunk_sizes(nbytes, items))})
    return DataIndex(source=src, kind="litdata", entries=entries, folder="" if folder == "." else folder,
                     extra_glob="chunk-*.bin", resized=tuple(resized),
                     listed_twice=tuple(twice))


def shipped_lists(root: Path, shards: Iterable[str] | None = None, found: Iterable[str] = (),
                  broken: list[tuple[str, str]] | None = None) -> list[DataIndex]:
    """The shipped shard lists of the audited shards: HF ``state.json`` and MosaicML ``index.json``.

    Looked up in the folder of each audited shard (``shards``: paths relative to ``root``) and in
    that folder's parents up to ``root``; a list in a parent folder counts only when it names an
    audited shard. No folder is walked: auditing two sibling folders never reads an unrelated list
    in their common parent (which may be ``/``). ``shards=None``: the lists in ``root`` itself.
``found``: lists discovery met while searching a folder PATH (relative paths), in scope wherever they
are (e.g. a MosaicML ``index.json`` listing zero shards, in a folder holding none).
``broken``: when given, an in-scope list that cannot be used (not JSON, too deep, a path outside
``root``) is appended as ``(relative path, reason)`` instead of raising (the audit reports it as a
finding about that file and still audits the shards).

    Args:
        broken: when given, a list that cannot be used (not JSON, nested too deep, a path outside
            ``root``, a wrong type) is appended to it as (path relative to ``root``, reason) and
            skipped, so that a hostile file inside the data is a finding, not the end of the audit.

    Raises:
        UsageError: (only when ``broken`` is None) an in-scope list is not JSON or names a path outside ``root``.
    """
    out: list[DataIndex] = []
    if root is None or not Path(root).is_dir():
        return out
    root = Path(root)
    audited = set(shards) if shards is not None else set()
    own: set[str] = {p.rpartition("/")[0] for p in audited} if shards is not None else {""}
    folders: set[str] = set()
    for f in own:
        parts = f.split("/") if f else []
        for k in range(len(parts), -1, -1):
            folders.add("/".join(parts[:k]))
    for folder in sorted(folders):
        here = root / folder if folder else root
        for name, read in (("state.json", _hf_state), ("index.json", _index_json)):
            path = here / name
            if not path.is_file():
                continue
            if folder not in own:  # a parent's list: only when it names an audited shard (without reading bad JSON)
                try:
                    lst = read(path, root)
                except UsageError:
                    continue
                if lst is not None and audited & set(lst.entries):
                    out.append(lst)
                continue
            lst = _read_list(read, path, root, broken)
            if lst is not None:
                out.append(lst)
    have = {lst.source for lst in out} | {rel for rel, _ in (broken or [])}
    for rel in sorted(set(found)):
        if rel in have:
            continue
        path = root / rel
        read = _hf_state if rel.rpartition("/")[2] == "state.json" else _index_json
        lst = _read_list(read, path, root, broken) if path.is_file() else None
        if lst is not None:
            out.append(lst)
    return out


def _read_list(read: Callable[[Path, Path], DataIndex | None], path: Path, root: Path,
               broken: list[tuple[str, str]] | None) -> DataIndex | None:
    """``read(path, root)``; with ``broken``, a list that cannot be used is recorded there, not raised."""
    try:
        return read(path, root)
    except UsageError as exc:
        if broken is None:
            raise
        broken.append((path.relative_to(root).as_posix(), str(exc)))
        return None


def _index_json(path: Path, root: Path) -> DataIndex | None:
    """An ``index.json``: MosaicML MDS, else litdata, else None (not a shipped shard list)."""
    return _mosaic(path, root) or _litdata(path, root)


def shipped_files(root: Path, lists: list[DataIndex]) -> set[str]:
    """The files (relative to ``root``) the comparison with ``lists`` must know of: every file in
    the folders holding the lists, and every listed file that exists (not a walk of ``root``)."""
    out: set[str] = set()
    for lst in lists:
        folder = lst.source.rpartition("/")[0]
        here = root / folder if folder else root
        try:
            names = [e.name for e in os.scandir(here) if e.is_file()]
        except OSError:
            names = []
        out.update(f"{folder}/{n}" if folder else n for n in names)
        out.update(p for p in lst.entries if is_listed_file(root / p))
    return out
