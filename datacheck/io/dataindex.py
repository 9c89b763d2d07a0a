"""The data index: a versioned, committed record of a shard set (``datacheck index build``), its
verification (``datacheck index verify``, ``[dataset] index`` in ``datacheck audit``), and the
shard lists that real datasets ship beside their shards.

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
is refused with a :class:`~datacheck.errors.UsageError` (exit 2), before any file is opened, so an
index can never make datacheck read outside the dataset. A file that is not JSON, not an index, or
has a ``format_version`` newer than :data:`INDEX_FORMAT_VERSION` is refused the same way.

Shipped shard lists (verified where present, under the audited root):

- Hugging Face ``save_to_disk`` folders: ``state.json`` ``_data_files`` [{"filename": ...}] lists
  the Arrow files of the folder; ``dataset_info.json`` ``splits[<state _split>].num_examples`` is
  the split's row count.
- MosaicML streaming ``index.json``: ``{"version": 2, "shards": [{"raw_data": {"basename",
  "bytes", ...}, "samples": N, ...}]}``; basenames are relative to the index's folder.
"""
from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Iterable

import xxhash

from datacheck._version import __version__
from datacheck.io.discover import DiscoveredShard
from datacheck.io.hashing import index_hash
from datacheck.io.hfmeta import hf_data_files, parse_state
from datacheck.io.litdataindex import expected_chunk_sizes, is_litdata_index
from datacheck.io.outputs import write_json_atomic
from datacheck.io.read import open_for_checks
from datacheck.io.safejson import JsonInputError, read_json_file
from datacheck.io.shardbytes import Unreadable
from datacheck.io.stores import is_url
from datacheck.model.constants import HASH_ALGORITHM
from datacheck.model.errors import ENGINE_ERRORS, UsageError
from datacheck.model.findings import Finding

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
    "compare_index",
    "shipped_lists",
    "shipped_files",
    "compare_shipped",
    "hf_data_files",
    "resolve_index_path",
    "count_rows",
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
    #: files directly in ``folder`` matching this glob but not listed are ``index.extra_shard``
    #: (MosaicML: ``*.mds*``; litdata: ``chunk-*.bin``); None: no such rule
    extra_glob: str | None = None
    #: findings decided while reading the list against the files (hash or size mismatches, an index
    #: listing zero shards); :func:`compare_shipped` reports them with the comparison's
    findings: tuple[Finding, ...] = ()


def safe_relpath(p: Any, root: Path, source: str) -> str:
    """Validate a path read from an index: relative, inside ``root``; returns it as a POSIX string.

    Raises:
        UsageError: the path is not a string, is absolute, holds ``..``/backslashes/NUL/a drive
            letter, or resolves (symlinks included) outside ``root``. Nothing is opened.
    """
    if not isinstance(p, str) or not p:
        raise UsageError(f"{source}: shard path {p!r} is not a non-empty string; fix or rebuild the index")
    bad = (p.startswith(("/", "\\")) or "\\" in p or "\x00" in p or _DRIVE.match(p)
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


def _int_or_none(v: Any, key: str, source: str) -> int | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise UsageError(f"{source}: {key} must be a non-negative integer, got {v!r}")
    return v


def parse_index(data: Any, root: Path, source: str) -> DataIndex:
    """Validate a parsed datacheck index. Raises :class:`UsageError` naming the bad key."""
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
    return DataIndex(source=source, kind="datacheck", entries=entries, index_hash=data.get("index_hash"))


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


def count_rows(path: Path | str, fmt: str, cfg: Any) -> int | None:
    """Rows of one shard (parquet: from the footer; others: parsed). None when unreadable. ``path`` may
    be the URL of an object in a store."""
    import polars as pl


    try:
        url = str(path) if is_url(str(path)) else None
        data = open_for_checks(DiscoveredShard(path=Path(path), rel=Path(path).name, format=fmt, url=url), cfg)
        return int(data.lf.select(pl.len()).collect().item())
    except (Unreadable, *ENGINE_ERRORS):  # an unreadable shard has no row count (the audit reports it)
        return None


# ------------------------------------------------------------------------------------- comparing


def compare_index(idx: DataIndex, actual: list[tuple[str, str, int, int | None]], temp_files: list[str] = (),
                  rows_of: Callable[[str], int | None] | None = None) -> list[Finding]:
    """Compare the shards on disk with a committed index.

    Args:
        idx: the committed index.
        actual: ``(path, content_hash, bytes, rows)`` of every shard on disk (rows None: unreadable
            or not counted).
        temp_files: partial/temporary files (never count as present).
        rows_of: called for a changed shard whose rows are None, to count them.

    Returns:
        ``index.missing_shard`` (error, count = absent shards), ``index.extra_shard`` (warn, count =
        unlisted shards; datacheck indexes only), ``index.changed_shard`` (error, count = shards whose
        content hash or size differs) and one ``index.row_count_mismatch`` (error, count = |rows - listed
        rows|) per shard whose rows differ. Rows are only compared for changed shards (or lists without
        hashes): equal bytes hold equal rows.
    """
    on_disk = {p: (h, b, r) for p, h, b, r in actual}
    out: list[Finding] = []
    missing = sorted(p for p in idx.entries if p not in on_disk)
    if missing:
        partial = [t for t in temp_files if any(t.startswith(m) for m in missing)]
        hint = f"; partial files present: {', '.join(partial[:5])}" if partial else ""
        out.append(Finding(
            check="index.missing_shard", severity="error", count=len(missing), shards=tuple(missing),
            message=(f"{len(missing)} shard(s) listed in {idx.source} are absent: {', '.join(missing[:10])}"
                     f"{' ...' if len(missing) > 10 else ''}{hint} (an incomplete download or sync?)"),
            details={"index": idx.source, "missing": missing[:1000]},
        ))
    extra = sorted(p for p in on_disk if p not in idx.entries)
    if extra and idx.kind == "datacheck":
        out.append(Finding(
            check="index.extra_shard", severity="warn", count=len(extra), shards=tuple(extra),
            message=(f"{len(extra)} shard(s) on disk are not in {idx.source}: {', '.join(extra[:10])}"
                     f"{' ...' if len(extra) > 10 else ''}; rebuild the index if they belong to the dataset"),
            details={"index": idx.source, "extra": extra[:1000]},
        ))
    changed, rowmis = [], []
    for p, e in sorted(idx.entries.items()):
        if p not in on_disk:
            continue
        h, b, r = on_disk[p]
        differs = (e.content_hash is not None and h != e.content_hash) or (e.bytes is not None and b != e.bytes)
        if differs:
            changed.append((p, e, h, b))
        if e.rows is not None and (differs or e.content_hash is None):
            if r is None and rows_of is not None:
                r = rows_of(p)
            if r is not None and r != e.rows:
                rowmis.append((p, e.rows, r))
    if changed:
        out.append(Finding(
            check="index.changed_shard", severity="error", count=len(changed), shards=tuple(p for p, *_ in changed),
            message=(f"{len(changed)} shard(s) differ from {idx.source}: "
                     + "; ".join(f"{p} ({_what_changed(e, h, b)})" for p, e, h, b in changed[:5])
                     + (" ..." if len(changed) > 5 else "") + "; the data changed after the index was committed"),
            details={"index": idx.source, "changed": [
                {"path": p, "expected_hash": e.content_hash, "actual_hash": h, "expected_bytes": e.bytes, "actual_bytes": b}
                for p, e, h, b in changed[:1000]]},
        ))
    for p, exp, got in rowmis:
        out.append(Finding(
            check="index.row_count_mismatch", severity="error", count=abs(got - exp), shards=(p,),
            message=f"{p} holds {got} rows but {idx.source} lists {exp}",
            details={"index": idx.source, "expected": exp, "actual": got},
        ))
    return out


def _what_changed(e: IndexEntry, h: str, b: int) -> str:
    if e.bytes is not None and e.bytes != b:
        return f"{e.bytes} -> {b} bytes"
    return f"content hash {e.content_hash} -> {h}, same size"


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


def _mosaic(index: Path, root: Path) -> DataIndex | None:
    """A MosaicML ``index.json``: its shards (the compressed ``zip_data`` file when there is one, else
    ``raw_data``) with bytes and sample counts; the per-file ``hashes`` it records are verified here
    (a mismatch is ``index.changed_shard``); an index that lists zero shards is ``index.empty_shard``."""
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
    found: list[Finding] = []
    bad_hash: list[dict[str, Any]] = []
    for k, s in enumerate(shards):
        raw = s.get("raw_data") if isinstance(s, dict) else None
        zipd = s.get("zip_data") if isinstance(s, dict) else None
        part, key = (zipd, "zip_data") if isinstance(zipd, dict) and zipd.get("basename") else (raw, "raw_data")
        name = part.get("basename") if isinstance(part, dict) else None
        rel = safe_relpath(prefix + name if isinstance(name, str) else name, root, f"{src} shards[{k}].{key}.basename")
        entries[rel] = IndexEntry(path=rel, bytes=_int_or_none(part.get("bytes"), f"shards[{k}].{key}.bytes", src),
                                  rows=_int_or_none(s.get("samples"), f"shards[{k}].samples", src), content_hash=None)
        hashes = part.get("hashes") if isinstance(part, dict) else None
        if isinstance(hashes, dict) and is_listed_file(root / rel):
            for algo, want in sorted(hashes.items()):
                got = _file_digest(root / rel, str(algo))
                if got is not None and isinstance(want, str) and got != want.lower():
                    bad_hash.append({"path": rel, "algorithm": algo, "expected": want, "actual": got})
    if bad_hash:
        found.append(Finding(
            check="index.changed_shard", severity="error", count=len({b["path"] for b in bad_hash}),
            shards=tuple(sorted({b["path"] for b in bad_hash})),
            message=(f"{len(bad_hash)} shard hash(es) recorded in {src} do not match the bytes: "
                     + "; ".join(f"{b['path']} ({b['algorithm']} {b['expected'][:16]}... != {b['actual'][:16]}...)"
                                 for b in bad_hash[:5]) + "; the shard changed or was corrupted after writing"),
            details={"index": src, "mismatches": bad_hash[:1000]},
        ))
    if not shards:
        found.append(Finding(
            check="index.empty_shard", severity="warn", count=1, shards=(src,),
            message=(f"{src} lists zero shards: a StreamingDataset over {folder or '.'} yields no sample "
                     "(an interrupted write, or a merge that found nothing?)"),
            details={"index": src},
        ))
    return DataIndex(source=src, kind="mosaicml", entries=entries, folder="" if folder == "." else folder,
                     extra_glob="*.mds*", findings=tuple(found))


def _litdata(index: Path, root: Path) -> DataIndex | None:
    """A litdata ``index.json`` (``chunks`` + ``config``): its chunk files with their item counts
    (``chunk_size``); a chunk whose size is neither of :func:`expected_chunk_sizes` is
    ``index.changed_shard``; unlisted ``chunk-*.bin`` files of the folder are ``index.extra_shard``;
    a file listed twice is ``index.row_count_mismatch`` (its items would be read twice)."""
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
    found: list[Finding] = []
    if resized:
        found.append(Finding(
            check="index.changed_shard", severity="error", count=len(resized), shards=tuple(r["path"] for r in resized),
            message=(f"{len(resized)} chunk(s) differ in size from {src}: "
                     + "; ".join(f"{r['path']} holds {r['actual_bytes']} bytes, the index allows {r['accepted']}"
                                 for r in resized[:5]) + "; the chunk was cut or rewritten after the index"),
            details={"index": src, "resized": resized[:1000]},
        ))
    if twice:
        found.append(Finding(
            check="index.row_count_mismatch", severity="error", count=len(twice), shards=tuple(sorted(set(twice))),
            message=f"{src} lists {len(twice)} chunk(s) more than once ({', '.join(sorted(set(twice))[:5])}): their items are read twice",
            details={"index": src, "listed_twice": sorted(set(twice))[:1000]},
        ))
    return DataIndex(source=src, kind="litdata", entries=entries, folder="" if folder == "." else folder,
                     extra_glob="chunk-*.bin", findings=tuple(found))


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


def compare_shipped(lst: DataIndex, shards: list[Any], all_files: set[str]) -> list[Finding]:
    """Compare one shipped list with the audited shards (``ShardResult``-like: path, bytes, rows).

    ``all_files``: every file path (relative) under the root, shards or not, so that a listed
    shard in a format datacheck does not read (``.mds``) still counts as present.
    """
    by_path = {s.path: s for s in shards}
    actual = [(p, "", s.bytes, s.rows) for p, s in by_path.items()]
    for p in sorted(all_files):
        if p in by_path:
            continue
        if p in lst.entries:
            actual.append((p, "", lst.entries[p].bytes or 0, None))
        elif lst.kind == "hf-state" and p.rpartition("/")[0] == lst.folder and p.endswith(".arrow"):
            actual.append((p, "", 0, None))  # an unlisted Arrow file discovery left out (hf_data_files)
    def unlisted_here(p: str) -> bool:
        folder, _, name = p.rpartition("/")
        return (lst.extra_glob is not None and folder == lst.folder and p not in lst.entries
                and fnmatch.fnmatch(name, lst.extra_glob))

    for p in sorted(all_files):
        if p not in by_path and unlisted_here(p):
            actual.append((p, "", 0, None))
    in_scope = [a for a in actual if a[0] in lst.entries
                or (lst.kind == "hf-state" and a[0].rpartition("/")[0] == lst.folder and a[0].endswith(".arrow"))]
    out = compare_index(lst, in_scope) + list(lst.findings)
    orphans = sorted(a[0] for a in actual if unlisted_here(a[0]))
    if orphans:
        out.append(Finding(
            check="index.extra_shard", severity="warn", count=len(orphans), shards=tuple(orphans),
            message=(f"{len(orphans)} file(s) in {lst.folder or '.'} are not listed in {lst.source}: "
                     f"{', '.join(orphans[:10])}{' ...' if len(orphans) > 10 else ''}; a reader of the index never "
                     "sees them (an orphan from another run, or a copy?)"),
            details={"index": lst.source, "extra": orphans[:1000]},
        ))
    if lst.kind == "hf-state":
        extra = sorted(a[0] for a in in_scope if a[0] not in lst.entries)
        if extra:
            out.append(Finding(
                check="index.extra_shard", severity="warn", count=len(extra), shards=tuple(extra),
                message=(f"{len(extra)} Arrow file(s) in {lst.folder or '.'} are not in {lst.source} _data_files: "
                         f"{', '.join(extra[:10])}; the dataset loader will ignore them"),
                details={"index": lst.source, "extra": extra[:1000]},
            ))
        listed = [by_path[p] for p in lst.entries if p in by_path]
        if lst.split_rows is not None and len(listed) == len(lst.entries) and all(s.rows is not None for s in listed):
            got = sum(s.rows for s in listed)
            if got != lst.split_rows:
                out.append(Finding(
                    check="index.row_count_mismatch", severity="error", count=abs(got - lst.split_rows),
                    shards=tuple(sorted(s.path for s in listed)),
                    message=(f"the shards of {lst.folder or '.'} hold {got} rows but dataset_info.json lists "
                             f"{lst.split_rows} examples for this split"),
                    details={"index": lst.source, "expected": lst.split_rows, "actual": got},
                ))
    return out
