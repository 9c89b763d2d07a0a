"""Finding shards: PATH may be a shard file, a folder (searched recursively) or a glob.

Which files are shards:

- ``[dataset] format = "auto"`` (default): by extension (:data:`_EXT_FORMATS`). A ``.json`` file is
  sniffed: when it is JSON Lines (its first non-blank byte is ``{`` and its second non-blank line
  also starts with ``{``) it is audited as ``jsonl``; when it holds one JSON array of records (its
  first non-blank byte is ``[`` and the next one ``{``, as LLaMA-Factory's and FastChat's data files)
  it is audited as ``json``; otherwise it is listed as ignored.
- a forced format applies only to plausible data files of that format (:data:`FORCED_EXTENSIONS`,
  also compressed where the reader decompresses, and files without an extension); never to code,
  docs, config or metadata (:data:`NEVER_SHARD_SUFFIXES`, :data:`_METADATA_NAMES`, hidden files).
- the shard formats of :mod:`datacheck.io.formats`: ``.mds`` (also ``.mds.zstd/.gz/.bz2``) is MosaicML
  MDS; ``.tar``/``.tar.gz``/``.tgz`` is WebDataset; a ``<prefix>.bin`` with a ``<prefix>.idx`` beside it
  is one Megatron shard (the shard is the ``.bin``; its ``.idx`` is read and hashed with it, and is not
  listed on its own); a ``.bin`` in a folder whose ``index.json`` is a litdata index is a litdata chunk.
  Any other ``.bin``, or an ``.idx`` without its ``.bin``, is listed as ignored data with the reason.
- in a Hugging Face ``save_to_disk`` folder (a ``state.json`` with ``_data_files``), an ``.arrow``
  file that the list does not name (``cache-*.arrow`` from ``Dataset.map``) is not a shard: the
  loader ignores it. It is not audited; the ``index`` checks report it as ``index.extra_shard``.

Files left out that look like data (a data extension, or an unlisted Arrow file) are kept in
:attr:`Discovery.ignored_data` with the reason, and the report lists them under ``ignored``.
"""
from __future__ import annotations

import functools
import glob as _glob
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from datacheck.formats.litdata import is_litdata_index
from datacheck.formats.mds import MDS_SUFFIXES
from datacheck.formats.webdataset import WDS_SUFFIXES
from datacheck.io.hfmeta import DATASET_DICT_NAME, hf_data_files, read_dataset_dict
from datacheck.io.stores import filesystem, is_url, join_url, scheme_of
from datacheck.model.errors import UsageError

__all__ = ["discover", "Discovery", "declared_splits", "DiscoveredShard", "format_of", "sniff_json_lines", "sniff_json_array", "megatron_companion",
           "TEMP_PATTERNS",
           "FORCED_EXTENSIONS", "NEVER_SHARD_SUFFIXES"]

# extension -> format in auto mode; compound extensions first
_EXT_FORMATS: list[tuple[str, str]] = [
    (".jsonl.gz", "jsonl"),
    (".jsonl.zst", "jsonl"),
    (".ndjson.gz", "jsonl"),
    (".ndjson.zst", "jsonl"),
    (".csv.gz", "csv"),
    (".tsv.gz", "tsv"),
    (".parquet", "parquet"),
    (".pq", "parquet"),
    (".arrow", "arrow"),
    (".ipc", "arrow"),
    (".feather", "arrow"),
    (".jsonl", "jsonl"),
    (".ndjson", "jsonl"),
    (".csv", "csv"),
    (".tsv", "tsv"),
    *((e, "mds") for e in MDS_SUFFIXES),
    *((e, "webdataset") for e in WDS_SUFFIXES),
]
#: The extensions a forced ``[dataset] format`` accepts (plus files without an extension): the
#: readers of :mod:`datacheck.io.readers` decompress ``.gz``/``.zst`` JSON Lines and ``.gz`` CSV/TSV.
FORCED_EXTENSIONS: dict[str, tuple[str, ...]] = {
    "jsonl": tuple(b + c for b in (".jsonl", ".ndjson", ".json", ".txt") for c in ("", ".gz", ".zst")),
    "json": tuple(".json" + c for c in ("", ".gz", ".zst")),
    "csv": tuple(b + c for b in (".csv", ".tsv", ".txt", ".data") for c in ("", ".gz")),
    "tsv": tuple(b + c for b in (".csv", ".tsv", ".txt", ".data") for c in ("", ".gz")),
    "parquet": (".parquet", ".pq"),
    "arrow": (".arrow", ".ipc", ".feather"),
}
#: Code, docs and config: never a shard, whatever the format says.
NEVER_SHARD_SUFFIXES = (".py", ".md", ".toml", ".yaml", ".yml", ".cfg", ".ini", ".sh", ".lock", ".rst", ".ipynb")
#: Extensions that look like data (a file with one that is not audited is listed in ``ignored``).
_DATA_LIKE = tuple(sorted({e for exts in FORCED_EXTENSIONS.values() for e in exts}, key=len, reverse=True))
#: Partial or temporary files (``index.temp_file``): never audited, reported.
TEMP_PATTERNS = ("*.tmp", "*.partial", ".~*", "*.incomplete", "*.crdownload")
# Metadata that sits beside shards and is never a shard itself.
_METADATA_NAMES = {
    "dataset_info.json", "state.json", "dataset_dict.json", "index.json", "datacheck.toml",
    "readme.md", "license", "license.txt", ".gitattributes", ".gitignore",
    # model and tokenizer files that travel with datasets (Hugging Face hub layouts)
    "config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json",
    "generation_config.json", "added_tokens.json", "merges.txt", "vocab.txt", "requirements.txt",
}
_SNIFF_BYTES = 1 << 16


def format_of(path: Path, forced: str = "auto") -> str | None:
    """The shard format of ``path``, or None when it is not a shard in this mode.

    ``forced == "auto"``: by extension (a ``.json`` file is JSON Lines only after
    :func:`sniff_json_lines`). A forced format: that format, for a file whose extension is in
    :data:`FORCED_EXTENSIONS` for it or that has no extension; None otherwise.
    """
    name = path.name.lower()
    if forced != "auto":
        if name.endswith(FORCED_EXTENSIONS.get(forced, ())) or "." not in name.lstrip("."):
            return forced
        return None
    for ext, fmt in _EXT_FORMATS:
        if name.endswith(ext):
            return fmt
    if name.endswith(".bin"):
        if path.with_suffix(".idx").is_file():
            return "megatron"
        if _litdata_folder(str(path.parent)):
            return "litdata"
        return None
    if name.endswith(".json") and sniff_json_lines(path):
        return "jsonl"
    if name.endswith(".json") and sniff_json_array(path):
        return "json"
    return None


def _litdata_folder(folder: str) -> bool:
    """True when ``folder/index.json`` is a litdata index (cached per file version)."""
    index = Path(folder) / "index.json"
    try:
        st = index.stat()
    except OSError:
        return False
    return _litdata_index_file(str(index), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=256)
def _litdata_index_file(index: str, _mtime_ns: int, _size: int) -> bool:
    try:
        with open(index, "rb") as f:
            return is_litdata_index(json.load(f))
    except (OSError, ValueError):
        return False


def megatron_companion(path: Path) -> bool:
    """True when ``path`` is the ``.idx`` of a Megatron pair (its ``.bin`` is the shard)."""
    return path.name.lower().endswith(".idx") and path.with_suffix(".bin").is_file()


def _sniff_head(path: Path) -> bytes | None:
    """The first 64 KiB of ``path`` without a UTF-8 byte order mark, or None when it cannot be read."""
    try:
        with open(path, "rb") as f:
            head = f.read(_SNIFF_BYTES)
    except OSError:
        return None
    return head[3:] if head.startswith(b"\xef\xbb\xbf") else head


def sniff_json_lines(path: Path) -> bool:
    """True when ``path`` looks like JSON Lines: its first non-blank byte is ``{`` and its second
    non-blank line also starts with ``{`` (a one-object file or a pretty-printed document is not).
    Reads at most 64 KiB; an unreadable file is not JSON Lines (False)."""
    head = _sniff_head(path)
    if head is None:
        return False
    lines = [ln.strip() for ln in head.splitlines()]
    lines = [ln for ln in lines if ln]
    return len(lines) >= 2 and lines[0].startswith(b"{") and lines[1].startswith(b"{")


def sniff_json_array(path: Path) -> bool:
    """True when ``path`` looks like a JSON array of records: its first non-blank byte (after a
    UTF-8 byte order mark) is ``[`` and the next non-blank byte is ``{``. Reads at most 64 KiB; an
    unreadable file is not one (False)."""
    head = _sniff_head(path)
    if head is None:
        return False
    head = head.lstrip()
    return head.startswith(b"[") and head[1:].lstrip().startswith(b"{")


def _is_temp(path: Path) -> bool:
    import fnmatch

    return any(fnmatch.fnmatch(path.name, pat) for pat in TEMP_PATTERNS)


@dataclass(frozen=True)
class DiscoveredShard:
    """One shard: ``path`` (absolute; for a shard in an object store, the URL as a path, never opened),
    ``rel`` (POSIX path relative to the root: the report's name), ``format``, and ``url`` (the
    ``scheme://...`` of a shard in an object store, :mod:`datacheck.io.stores`; None for a local file)."""

    path: Path  # absolute
    rel: str  # POSIX path relative to the root
    format: str
    url: str | None = None

    @property
    def source(self) -> str | Path:
        """Where the bytes come from: the URL of a shard in a store, else the local path."""
        return self.url if self.url is not None else self.path


#: file names of the shard lists datasets ship (Hugging Face; MosaicML and litdata)
SHARD_LIST_NAMES = ("state.json", "index.json")


def _fnmatch_escape(name: str) -> str:
    """``name`` as a literal ``fnmatch`` pattern (``*``, ``?`` and ``[`` wrapped in brackets)."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in name)


def declared_splits(root: Path, found: list[str]) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """The splits a Hugging Face ``DatasetDict`` folder declares, as ``[splits]`` entries.

    ``found``: paths (relative to ``root``) of the files discovery met while searching the PATHs; each
    ``dataset_dict.json`` among them (``{"splits": ["train", "test"]}``, written by
    ``DatasetDict.save_to_disk``; read with the bounded loader of :mod:`datacheck.io.hfmeta`) gives,
    per declared split, the entry ``name -> "<its folder>/<name>/*"``: exactly what a user would write
    under ``[splits]`` (the same glob rule, :func:`datacheck.checks.crossdup.assign_splits`).

    Returns:
        (``{split name: glob}`` in the file's order, ``[(dataset_dict.json path, reason)]`` for a file
        that gives no splits: unreadable, no ``splits`` list, or one of several ``DatasetDict``
        folders (their split names would collide: name them under ``[splits]``)). Empty when discovery
        met no ``dataset_dict.json``. A declared split whose folder is absent is still returned (its
        glob matches no shard; the ``index`` checks report it).
    """
    dicts = sorted(p for p in found if p.rpartition("/")[2] == DATASET_DICT_NAME)
    if len(dicts) > 1:
        return {}, [(d, (f"{len(dicts)} DatasetDict folders ({', '.join(dicts[:3])}{' ...' if len(dicts) > 3 else ''}) "
                         "are audited together: their split names would mix, so no split was assigned from them; "
                         "audit each folder alone or name the splits under [splits]")) for d in dicts]
    out: dict[str, str] = {}
    problems: list[tuple[str, str]] = []
    for rel in dicts:
        dd = read_dataset_dict(Path(root) / rel)
        if dd is None:
            continue
        if dd.problem is not None:
            problems.append((rel, dd.problem))
        folder = rel.rpartition("/")[0]
        prefix = _fnmatch_escape(folder) + "/" if folder else ""
        for name in dd.splits:
            out[name] = f"{prefix}{_fnmatch_escape(name)}/*"
    return out, problems


@dataclass
class Discovery:
    root: Path
    #: the common ``scheme://prefix`` of URL PATHs (shards in an object store), else None; ``root`` is
    #: then that prefix as a path, never opened (the dataset checks get no root: they read no file)
    url_root: str | None = None
    shards: list[DiscoveredShard] = field(default_factory=list)
    temp_files: list[str] = field(default_factory=list)  # relative paths
    ignored: list[str] = field(default_factory=list)  # files that are not shards (metadata, unknown ext)
    #: the ignored files that look like data: ``{"path": rel, "reason": ...}`` (the report's ``ignored``)
    ignored_data: list[dict[str, str]] = field(default_factory=list)

    def shard_lists(self) -> list[str]:
        """The shard lists (``state.json``, ``index.json``, and a ``DatasetDict``'s
        ``dataset_dict.json``) found while searching the PATHs (relative paths): in scope for the
        shipped-list checks even in a folder that holds no shard (a MosaicML index listing zero shards)."""
        return [p for p in self.ignored if p.rpartition("/")[2] in (*SHARD_LIST_NAMES, DATASET_DICT_NAME)]

    def declared_splits(self) -> dict[str, str]:
        """The ``[splits]`` entries the ``DatasetDict`` folder among the PATHs declares (see
        :func:`declared_splits`; empty when there is none)."""
        return declared_splits(self.root, self.ignored)[0]


def _abs(p: Path) -> Path:
    """``p`` made absolute WITHOUT resolving symlinks: a shard that is a link (a Hugging Face cache
    snapshot links every file into ``blobs/``) keeps its own name and place in the report."""
    return Path(os.path.abspath(p))


def _candidates(arg: str) -> tuple[Path, list[Path], bool]:
    """(root, files, named) for one PATH argument; ``named``: the argument is one file."""
    p = Path(arg)
    if any(ch in arg for ch in "*?["):
        files = sorted(Path(x) for x in _glob.glob(arg, recursive=True) if Path(x).is_file())
        base = arg
        for i, ch in enumerate(arg):
            if ch in "*?[":
                base = arg[:i]
                break
        root = Path(base) if base.endswith(os.sep) or base == "" else Path(base).parent
        return _abs(root if str(root) else Path(".")), [_abs(f) for f in files], False
    if p.is_dir():
        files = []
        for dirpath, dirnames, filenames in os.walk(p):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") or d.startswith(".~"))
            files.extend(Path(dirpath) / f for f in sorted(filenames))
        return _abs(p), [_abs(f) for f in files], False
    if p.is_file():
        return _abs(p).parent, [_abs(p)], True
    if p.exists():
        raise UsageError(f"{arg}: not a regular file or folder")
    raise UsageError(f"{arg}: no such file or folder; give a shard file, a folder of shards or a glob")


def _data_like(name: str) -> bool:
    return name.lower().endswith(_DATA_LIKE)


def _why_not(f: Path, forced: str) -> str | None:
    """Why a data-looking file is not a shard in this mode (None: not data-looking)."""
    name = f.name.lower()
    if forced != "auto":
        if _data_like(name) or any(name.endswith(e) for e, _ in _EXT_FORMATS):
            return f"its extension does not fit [dataset] format = {forced!r}"
        return None
    if name.endswith(".bin"):
        return ("a .bin file with neither a Megatron .idx of the same name beside it nor a litdata index.json in "
                "its folder: no format to read it with")
    if name.endswith(".idx"):
        return "a Megatron .idx without its .bin (a missing or partial download?)"
    if name.endswith(".json"):
        return ("a .json file that is not JSON Lines (one object per line) nor a JSON array of records; "
                "a single JSON document is not a shard")
    if _data_like(name):
        return "no format for this extension; set [dataset] format (csv, tsv or jsonl) to audit it"
    return None


def _link_outside(f: Path, root_real: Path) -> str | None:
    """The real path of ``f`` when ``f`` is reached through a symlink and resolves outside
    ``root_real`` (the audited root, resolved); else None."""
    real = Path(os.path.realpath(f))
    if real == f or real.is_relative_to(root_real):
        return None
    return str(real)


def discover(paths: list[str], forced_format: str = "auto", follow_symlinks: bool = False) -> Discovery:
    """Resolve PATH arguments into shards under one root.

    Symlinks (issue 15 item 12): a file found in a folder or by a glob that is, or lies under, a
    symlink resolving outside the audited root is not read (its content could be any file of the
    machine, shown in the report); it is listed in ``ignored_data`` with the reason. A file named as a
    PATH itself is always read. ``follow_symlinks=True`` (``--follow-symlinks``) reads such links too,
    e.g. a Hugging Face hub cache snapshot, whose files link into the ``blobs/`` folder next to it.

    The root is the common folder of all arguments; shard paths in the report are relative to it.
    Which files are shards: see the module docstring. A file named as a PATH itself is still
    subject to the format rules, but never left out as a Hugging Face cache file.

    Raises:
        UsageError: a PATH does not exist, or no shard was found (the message lists what was seen
            and what would make datacheck read it).
    """
    if not paths:
        raise UsageError("no PATH given: name a shard file, a folder or a glob")
    urls = [p for p in paths if is_url(p)]
    if urls:
        if len(urls) != len(paths):
            raise UsageError(f"{urls[0]} is a URL but {next(p for p in paths if not is_url(p))} is a local path: audit "
                             "local files and object-store URLs in separate runs")
        return _discover_urls([str(u) for u in urls], forced_format)
    roots, files, named = [], [], set()
    for arg in paths:
        r, fs, is_named = _candidates(arg)
        roots.append(r)
        files.extend(fs)
        if is_named:
            named.update(fs)
    root = Path(os.path.commonpath([str(r) for r in roots]))
    root_real = Path(os.path.realpath(root))
    disc = Discovery(root=root)
    hf_lists: dict[Path, set[str] | None] = {}
    seen = set()
    for f in files:
        if f in seen:
            continue
        seen.add(f)
        rel = f.relative_to(root).as_posix() if f.is_relative_to(root) else f.as_posix()
        lname = f.name.lower()
        if _is_temp(f):
            disc.temp_files.append(rel)
            continue
        if not follow_symlinks and f not in named:
            target = _link_outside(f, root_real)
            if target is not None:
                disc.ignored.append(rel)
                if format_of(f, forced_format) is not None:
                    disc.ignored_data.append({"path": rel, "reason": (
                        f"a symlink to {target}, outside the audited root: not followed (pass --follow-symlinks "
                        "to read it, e.g. for a Hugging Face hub cache snapshot)")})
                continue
        if lname in _METADATA_NAMES or f.name.startswith(".") or lname.endswith(NEVER_SHARD_SUFFIXES):
            disc.ignored.append(rel)
            continue
        if forced_format == "auto" and megatron_companion(f):
            disc.ignored.append(rel)  # read and hashed with its .bin
            continue
        fmt = format_of(f, forced_format)
        if fmt == "arrow" and f not in named:
            if f.parent not in hf_lists:
                hf_lists[f.parent] = hf_data_files(f.parent)
            listed = hf_lists[f.parent]
            if listed is not None and f.name not in listed:
                disc.ignored.append(rel)
                disc.ignored_data.append({"path": rel, "reason": (
                    "not listed in state.json _data_files (a Dataset.map cache file?): the dataset loader "
                    "ignores it; reported as index.extra_shard")})
                continue
        if fmt is None:
            disc.ignored.append(rel)
            why = _why_not(f, forced_format)
            if why is not None:
                disc.ignored_data.append({"path": rel, "reason": why})
            continue
        disc.shards.append(DiscoveredShard(path=f, rel=rel, format=fmt))
    disc.shards.sort(key=lambda s: s.rel)
    disc.temp_files.sort()
    disc.ignored.sort()
    disc.ignored_data.sort(key=lambda i: i["path"])
    if not disc.shards and not disc.temp_files:
        raise UsageError(_no_shards_message(paths, disc, forced_format))
    return disc


def _list_url(arg: str) -> tuple[Any, str, str, dict[str, dict[str, Any]], bool]:
    """(fs, scheme, root path, {path: info} of the files, named) for one URL PATH: an object, every
    object under a prefix (recursively), or the objects matching a glob.

    Raises:
        UsageError: nothing exists at the URL, or the store cannot be listed (the message names it).
    """
    fs, path = filesystem(arg)
    scheme = scheme_of(arg)
    path = path.rstrip("/")
    try:
        if any(ch in path for ch in "*?["):
            found = fs.glob(path, detail=True)
            files = {k.rstrip("/"): v for k, v in found.items() if v.get("type") == "file"}
            base = path
            for i, ch in enumerate(path):
                if ch in "*?[":
                    base = path[:i]
                    break
            root = base.rstrip("/") if base.endswith("/") else base.rpartition("/")[0]
            return fs, scheme, root, files, False
        if fs.isfile(path):
            return fs, scheme, path.rpartition("/")[0], {path: fs.info(path)}, True
        found = fs.find(path, detail=True)
    except (OSError, ValueError) as exc:
        raise UsageError(f"{arg}: cannot list it ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__}); "
                         "check the URL and the store's credentials") from None
    except Exception as exc:  # noqa: BLE001 - a store client's own error (credentials, endpoint) is a usage error
        raise UsageError(f"{arg}: cannot list it ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); "
                         "check the URL, the endpoint (AWS_ENDPOINT_URL) and the store's credentials") from None
    files = {k.rstrip("/"): v for k, v in found.items() if v.get("type", "file") == "file"}
    if not files:
        raise UsageError(f"{arg}: no such object or prefix (nothing listed under it); give a shard URL, a prefix "
                         "holding shards or a glob")
    return fs, scheme, path, files, False


def _sniff_json_lines_url(fs: Any, path: str) -> bool:
    """:func:`sniff_json_lines` for an object in a store (reads at most 64 KiB of it)."""
    try:
        with fs.open(path, "rb") as f:
            head = f.read(_SNIFF_BYTES)
    except Exception:  # noqa: BLE001 - an unreadable object is not JSON Lines
        return False
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:]
    lines = [ln.strip() for ln in head.splitlines() if ln.strip()]
    return len(lines) >= 2 and lines[0].startswith(b"{") and lines[1].startswith(b"{")


def _discover_urls(urls: list[str], forced_format: str) -> Discovery:
    """:func:`discover` for URL PATHs (objects in a store; see :mod:`datacheck.io.stores`).

    The same rules as for local files (temporary files, metadata, code, Megatron pairs, JSON Lines
    sniffing, forced formats), with these differences: there are no symlinks; a ``.bin`` is a Megatron
    shard when the ``.idx`` of the same name was listed; litdata folders and Hugging Face
    ``state.json`` lists are read from local folders only (their ``.bin``/unlisted ``.arrow`` files are
    audited as listed or reported under ``ignored``).
    """
    listed: list[tuple[Any, str, str, dict[str, dict[str, Any]], bool]] = [_list_url(u) for u in urls]
    schemes = {x[1] for x in listed}
    if len(schemes) > 1:
        raise UsageError(f"URLs of different stores ({', '.join(sorted(schemes))}): audit each store in its own run")
    scheme = listed[0][1]
    roots = [x[2] for x in listed]
    root = os.path.commonpath(roots) if all(roots) else ""
    if root and not all(r == root or r.startswith(root + "/") for r in roots):
        root = root.rpartition("/")[0]
    disc = Discovery(root=Path(join_url(scheme, root)), url_root=join_url(scheme, root))
    seen: set[str] = set()
    for fs, _scheme, _root, files, _named in listed:
        names = set(files)
        for key in sorted(files):
            if key in seen:
                continue
            seen.add(key)
            rel = key[len(root) + 1:] if root and key.startswith(root + "/") else key
            name = key.rpartition("/")[2]
            lname = name.lower()
            pure = Path(name)
            if _is_temp(pure):
                disc.temp_files.append(rel)
                continue
            if lname in _METADATA_NAMES or name.startswith(".") or lname.endswith(NEVER_SHARD_SUFFIXES):
                disc.ignored.append(rel)
                continue
            stem = key.rpartition(".")[0]
            if forced_format == "auto" and lname.endswith(".idx") and stem + ".bin" in names:
                disc.ignored.append(rel)  # read and hashed with its .bin
                continue
            fmt: str | None
            if forced_format == "auto" and lname.endswith(".bin"):
                fmt = "megatron" if stem + ".idx" in names else None
            elif forced_format == "auto" and lname.endswith(".json") and not any(lname.endswith(e) for e, _ in _EXT_FORMATS):
                fmt = "jsonl" if _sniff_json_lines_url(fs, key) else None
            else:
                fmt = format_of(pure, forced_format)
            if fmt is None:
                disc.ignored.append(rel)
                why = _why_not(pure, forced_format)
                if why is not None and lname.endswith(".bin"):
                    why = ("a .bin object without a Megatron .idx of the same name beside it (litdata folders are "
                           "read from local disk only: download the folder first)")
                if why is not None:
                    disc.ignored_data.append({"path": rel, "reason": why})
                continue
            url = join_url(scheme, key)
            disc.shards.append(DiscoveredShard(path=Path(url), rel=rel, format=fmt, url=url))
    disc.shards.sort(key=lambda s: s.rel)
    disc.temp_files.sort()
    disc.ignored.sort()
    disc.ignored_data.sort(key=lambda i: i["path"])
    if not disc.shards and not disc.temp_files:
        raise UsageError(_no_shards_message(urls, disc, forced_format))
    return disc


def _no_shards_message(paths: list[str], disc: Discovery, forced: str) -> str:
    seen = f" (found only: {', '.join(disc.ignored[:5])}{' ...' if len(disc.ignored) > 5 else ''})" \
        if disc.ignored else " (the paths hold no files)"
    head = f"no shard files under {', '.join(paths)}{seen}"
    if forced != "auto":
        return (f"{head}; with [dataset] format = {forced!r} datacheck reads files ending in "
                f"{', '.join(FORCED_EXTENSIONS[forced])} or without an extension (never code, docs, config or "
                "dataset metadata such as state.json)")
    hints = [f"{i['path']}: {i['reason']}" for i in disc.ignored_data[:3]]
    return (f"{head}; datacheck reads .parquet/.pq, .arrow/.ipc/.feather, .jsonl/.ndjson (also .gz/.zst), "
            ".csv/.tsv (also .gz), .json files that are JSON Lines, Megatron .bin/.idx pairs, MosaicML .mds, "
            "WebDataset .tar and litdata chunk-*.bin folders; for .txt or .data files set [dataset] "
            "format to csv, tsv or jsonl" + (". " + "; ".join(hints) if hints else ""))
