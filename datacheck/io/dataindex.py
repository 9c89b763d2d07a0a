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

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Callable

from datacheck._version import __version__
from datacheck.io.discover import DiscoveredShard
from datacheck.io.hashing import index_hash
from datacheck.io.hfmeta import hf_data_files, parse_state
from datacheck.io.outputs import write_json_atomic
from datacheck.io.read import open_for_checks
from datacheck.io.readers import Unreadable
from datacheck.io.safejson import JsonInputError, read_json_file
from datacheck.model.constants import HASH_ALGORITHM
from datacheck.model.errors import ENGINE_ERRORS, UsageError
from datacheck.model.findings import Finding

__all__ = [
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
    "compare_shipped",
    "hf_data_files",
    "resolve_index_path",
    "count_rows",
]

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
    """``[dataset] index``: an absolute path as given; a relative one is looked up in the audited
    root first (the index travels with the data), then in the working folder."""
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


def count_rows(path: Path, fmt: str, cfg: Any) -> int | None:
    """Rows of one shard (parquet: from the footer; others: parsed). None when unreadable."""
    import polars as pl


    try:
        data = open_for_checks(DiscoveredShard(path=Path(path), rel=Path(path).name, format=fmt), cfg)
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


def _mosaic(index: Path, root: Path) -> DataIndex | None:
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
    for k, s in enumerate(shards):
        raw = s.get("raw_data") if isinstance(s, dict) else None
        name = raw.get("basename") if isinstance(raw, dict) else None
        rel = safe_relpath(prefix + name if isinstance(name, str) else name, root, f"{src} shards[{k}].raw_data.basename")
        entries[rel] = IndexEntry(path=rel, bytes=_int_or_none(raw.get("bytes"), f"shards[{k}].raw_data.bytes", src),
                                  rows=_int_or_none(s.get("samples"), f"shards[{k}].samples", src), content_hash=None)
    return DataIndex(source=src, kind="mosaicml", entries=entries)


def shipped_lists(root: Path, broken: list[tuple[str, str]] | None = None) -> list[DataIndex]:
    """Every shipped shard list under ``root``: HF ``state.json`` and MosaicML ``index.json``.

    Args:
        broken: when given, a list that cannot be used (not JSON, nested too deep, a path outside
            ``root``, a wrong type) is appended to it as (path relative to ``root``, reason) and
            skipped, so that a hostile file inside the data is a finding, not the end of the audit.

    Raises:
        UsageError: (only when ``broken`` is None) a list is not JSON or names a path outside ``root``.
    """
    out: list[DataIndex] = []
    if root is None or not Path(root).is_dir():
        return out
    root = Path(root)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        here = Path(dirpath)
        for name, parse in (("state.json", _hf_state), ("index.json", _mosaic)):
            if name not in filenames:
                continue
            try:
                d = parse(here / name, root)
            except UsageError as exc:
                if broken is None:
                    raise
                broken.append(((here / name).relative_to(root).as_posix(), str(exc)))
                continue
            if d is not None:
                out.append(d)
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
    in_scope = [a for a in actual if a[0] in lst.entries
                or (lst.kind == "hf-state" and a[0].rpartition("/")[0] == lst.folder and a[0].endswith(".arrow"))]
    out = compare_index(lst, in_scope)
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
