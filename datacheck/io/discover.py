"""Finding shards: PATH may be a shard file, a folder (searched recursively) or a glob."""
from __future__ import annotations

import glob as _glob
import os
from dataclasses import dataclass, field
from pathlib import Path

from datacheck.errors import UsageError

__all__ = ["discover", "Discovery", "DiscoveredShard", "format_of", "TEMP_PATTERNS"]

# extension -> format; compound extensions first
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
]
#: Partial or temporary files (``index.temp_file``): never audited, reported.
TEMP_PATTERNS = ("*.tmp", "*.partial", ".~*", "*.incomplete", "*.crdownload")
# Metadata that sits beside shards and is never a shard itself.
_METADATA_NAMES = {
    "dataset_info.json", "state.json", "dataset_dict.json", "index.json", "datacheck.toml",
    "readme.md", "license", "license.txt", ".gitattributes", ".gitignore",
}


def format_of(path: Path, forced: str = "auto") -> str | None:
    """The shard format of ``path`` by extension, or ``forced`` when the config names one."""
    name = path.name.lower()
    for ext, fmt in _EXT_FORMATS:
        if name.endswith(ext):
            if forced != "auto" and fmt != forced and {fmt, forced} != {"csv", "tsv"}:
                return forced
            return fmt if forced == "auto" else forced
    return None if forced == "auto" else forced


def _is_temp(path: Path) -> bool:
    import fnmatch

    return any(fnmatch.fnmatch(path.name, pat) for pat in TEMP_PATTERNS)


@dataclass(frozen=True)
class DiscoveredShard:
    path: Path  # absolute
    rel: str  # POSIX path relative to the root
    format: str


@dataclass
class Discovery:
    root: Path
    shards: list[DiscoveredShard] = field(default_factory=list)
    temp_files: list[str] = field(default_factory=list)  # relative paths
    ignored: list[str] = field(default_factory=list)  # files that are not shards (metadata, unknown ext)


def _abs(p: Path) -> Path:
    """``p`` made absolute WITHOUT resolving symlinks: a shard that is a link (a Hugging Face cache
    snapshot links every file into ``blobs/``) keeps its own name and place in the report."""
    return Path(os.path.abspath(p))


def _candidates(arg: str) -> tuple[Path, list[Path]]:
    """(root, files) for one PATH argument."""
    p = Path(arg)
    if any(ch in arg for ch in "*?["):
        files = sorted(Path(x) for x in _glob.glob(arg, recursive=True) if Path(x).is_file())
        base = arg
        for i, ch in enumerate(arg):
            if ch in "*?[":
                base = arg[:i]
                break
        root = Path(base) if base.endswith(os.sep) or base == "" else Path(base).parent
        return _abs(root if str(root) else Path(".")), [_abs(f) for f in files]
    if p.is_dir():
        files = []
        for dirpath, dirnames, filenames in os.walk(p):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") or d.startswith(".~"))
            files.extend(Path(dirpath) / f for f in sorted(filenames))
        return _abs(p), [_abs(f) for f in files]
    if p.is_file():
        return _abs(p).parent, [_abs(p)]
    if p.exists():
        raise UsageError(f"{arg}: not a regular file or folder")
    raise UsageError(f"{arg}: no such file or folder; give a shard file, a folder of shards or a glob")


def discover(paths: list[str], forced_format: str = "auto") -> Discovery:
    """Resolve PATH arguments into shards under one root.

    The root is the common folder of all arguments; shard paths in the report are relative to it.

    Raises:
        UsageError: a PATH does not exist, or no shard was found (the message lists what was seen).
    """
    if not paths:
        raise UsageError("no PATH given: name a shard file, a folder or a glob")
    roots, files = [], []
    for arg in paths:
        r, fs = _candidates(arg)
        roots.append(r)
        if not fs and not any(ch in arg for ch in "*?["):
            pass
        files.extend(fs)
    root = Path(os.path.commonpath([str(r) for r in roots]))
    disc = Discovery(root=root)
    seen = set()
    for f in files:
        if f in seen:
            continue
        seen.add(f)
        rel = f.relative_to(root).as_posix() if f.is_relative_to(root) else f.as_posix()
        if _is_temp(f):
            disc.temp_files.append(rel)
            continue
        if f.name.lower() in _METADATA_NAMES or f.name.startswith(".") or f.suffix.lower() in (".md", ".lock"):
            disc.ignored.append(rel)
            continue
        if forced_format != "auto" and f.suffix.lower() in (".json", ".py", ".txt") and f.name.lower().endswith(".json"):
            disc.ignored.append(rel)
            continue
        fmt = format_of(f, forced_format)
        if fmt is None:
            disc.ignored.append(rel)
            continue
        disc.shards.append(DiscoveredShard(path=f, rel=rel, format=fmt))
    disc.shards.sort(key=lambda s: s.rel)
    disc.temp_files.sort()
    if not disc.shards and not disc.temp_files:
        seen_txt = f" (found only: {', '.join(disc.ignored[:5])})" if disc.ignored else ""
        raise UsageError(
            f"no shard files under {', '.join(paths)}{seen_txt}; datacheck reads .parquet, .arrow, "
            ".jsonl(.gz/.zst), .csv and .tsv files; set [dataset] format to read other extensions"
        )
    return disc
