"""Finding shards: PATH may be a shard file, a folder (searched recursively) or a glob.

Which files are shards of which format is not decided here: the caller passes the formats' rules
(:class:`ShardRules`; :data:`datacheck.formats.discovery.RULES`, from the format registry, which
also names this function as :func:`datacheck.formats.discovery.discover`). Here:

- temporary files (:data:`TEMP_PATTERNS`) are listed apart; code, docs, config and metadata
  (:data:`NEVER_SHARD_SUFFIXES`, dataset metadata names, hidden files) are never shards; a file that
  belongs to another shard (a Megatron ``.idx``) is not listed on its own;
- in a Hugging Face ``save_to_disk`` folder (a ``state.json`` with ``_data_files``), an ``.arrow``
  file that the list does not name (``cache-*.arrow`` from ``Dataset.map``) is not a shard: the
  loader ignores it. It is not audited; the ``index`` checks report it as an extra shard.

A FIFO, device or socket is never opened (a FIFO blocks the open, a device never ends): it is
listed under ``ignored`` with that reason, whatever its name.

Files left out that look like data (a data extension, or an unlisted Arrow file) are kept in
:attr:`Discovery.ignored_data` with the reason, and the report lists them under ``ignored``.
"""
from __future__ import annotations

import fnmatch
import glob as _glob
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote

from datacheck.io.bounded import dangling_link, special_kind
from datacheck.io.cardpath import CARD_NAME
from datacheck.io.cardsplits import loader_splits
from datacheck.io.hfmeta import DATASET_DICT_NAME, hf_data_files, read_dataset_dict
from datacheck.io.hubsplits import HubSplits, SplitGlobs, glob_literal
from datacheck.io.stores import filesystem, is_url, join_url, scheme_of, unreachable_message
from datacheck.model.errors import UsageError

__all__ = ["discover", "Discovery", "declared_splits", "DiscoveredShard", "ShardRules", "TEMP_PATTERNS",
           "NEVER_SHARD_SUFFIXES", "no_shards_message"]

#: Code, docs and config: never a shard, whatever the format says.
NEVER_SHARD_SUFFIXES = (".py", ".md", ".toml", ".yaml", ".yml", ".cfg", ".ini", ".sh", ".lock", ".rst", ".ipynb")
#: Partial or temporary files: never audited, reported (the ``index`` checks name them).
TEMP_PATTERNS = ("*.tmp", "*.partial", ".~*", "*.incomplete", "*.crdownload")
# Metadata that sits beside shards and is never a shard itself.
_METADATA_NAMES = {
    "dataset_info.json", "state.json", "dataset_dict.json", "index.json", "datacheck.toml",
    "readme.md", "license", "license.txt", ".gitattributes", ".gitignore",
    # model and tokenizer files that travel with datasets (Hugging Face hub layouts)
    "config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json",
    "generation_config.json", "added_tokens.json", "merges.txt", "vocab.txt", "requirements.txt",
}
class ShardRules(Protocol):
    """The formats' rules discovery applies (:class:`datacheck.formats.discovery.ShardRules`)."""

    #: format name -> the extensions a forced ``[dataset] format`` accepts (named in the no-shard message)
    forced_extensions: dict[str, tuple[str, ...]]
    #: why an Arrow file of a Hugging Face folder that its state.json does not list is not audited
    unlisted_arrow_reason: str

    def format_of(self, path: Path, forced: str) -> str | None:
        """The format of the local file ``path`` in this mode, or None (not a shard)."""

    def format_of_object(self, key: str, forced: str, names: set[str], fs: Any) -> str | None:
        """The format of the object ``key`` of a store whose listing is ``names``, or None."""

    def is_companion(self, path: Path, forced: str) -> bool:
        """The local file is read and hashed with another shard (not listed on its own)."""

    def is_companion_object(self, key: str, forced: str, names: set[str]) -> bool:
        """The object is read and hashed with another listed shard."""

    def why_not(self, name: str, forced: str, remote: bool = False, path: Path | None = None) -> str | None:
        """Why a data-looking file is not a shard in this mode (None: it does not look like data);
        ``path``: the local file, when there is one."""


def _is_temp(path: Path) -> bool:
    return any(fnmatch.fnmatch(path.name, pat) for pat in TEMP_PATTERNS)


@dataclass(frozen=True)
class DiscoveredShard:
    """One shard: ``path`` (absolute; for a shard in an object store, the URL as a path, never opened),
    ``rel`` (POSIX path relative to the root: the report's name, a non-UTF-8 byte written ``\\xNN``:
    :func:`shown_rel`), ``format``, and ``url`` (the
    ``scheme://...`` of a shard in an object store, :mod:`datacheck.io.stores`; None for a local file)."""

    path: Path  # absolute
    rel: str  # POSIX path relative to the root
    format: str
    url: str | None = None

    @property
    def source(self) -> str | Path:
        """Where the bytes come from: the URL of a shard in a store, else the local path."""
        return self.url if self.url is not None else self.path


def shown_rel(rel: str) -> str:
    """``rel`` as the report names it: a name whose bytes are not UTF-8 (Python holds them as lone
    surrogates, ``b"\\xe9"`` -> ``"\\udce9"``) with those bytes written ``\\xe9``, so that the
    report, the cache and the index hash, which are UTF-8, can hold it; the file itself is opened by
    its real name (:attr:`DiscoveredShard.path`). Any other name is returned as it is."""
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        return os.fsencode(rel).decode("utf-8", "backslashreplace")
    return rel


#: file names of the shard lists datasets ship (Hugging Face; MosaicML and litdata)
SHARD_LIST_NAMES = ("state.json", "index.json")


def declared_splits(root: Path, found: list[str]) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """The splits a Hugging Face ``DatasetDict`` folder declares, as ``[splits]`` entries.

    ``found``: paths (relative to ``root``) of the files discovery met while searching the PATHs; each
    ``dataset_dict.json`` among them (``{"splits": ["train", "test"]}``, written by
    ``DatasetDict.save_to_disk``; read with the bounded loader of :mod:`datacheck.io.hfmeta`) gives,
    per declared split, the entry ``name -> "<its folder>/<name>/*"``: exactly what a user would write
    under ``[splits]`` (the same glob rule, :func:`datacheck.checks.dup.cross.assign_splits`).

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
        prefix = glob_literal(folder) + "/" if folder else ""
        for name in dd.splits:
            out[name] = f"{prefix}{glob_literal(name)}/*"
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
    #: :meth:`hub_splits` for the shards and ignored files it was worked out from (the card is read,
    #: in an object store fetched, once an audit, not once per caller)
    _loader: tuple[tuple[tuple[str, ...], tuple[str, ...]], HubSplits] | None = field(
        default=None, repr=False, compare=False)

    def shard_lists(self) -> list[str]:
        """The shard lists (``state.json``, ``index.json``, and a ``DatasetDict``'s
        ``dataset_dict.json``) found while searching the PATHs (relative paths): in scope for the
        shipped-list checks even in a folder that holds no shard (a MosaicML index listing zero shards)."""
        return [p for p in self.ignored if p.rpartition("/")[2] in (*SHARD_LIST_NAMES, DATASET_DICT_NAME)]

    def declared_splits(self, infer: bool = True) -> dict[str, SplitGlobs]:
        """The ``[splits]`` entries the data gives when the config names none: those the
        ``DatasetDict`` folder among the PATHs declares (see :func:`declared_splits`); without a
        ``dataset_dict.json`` and with ``infer``, those ``load_dataset`` of the folder gives
        (:meth:`hub_splits`: the dataset card's ``configs``, else the Hugging Face Hub's split naming
        of the shards' names). Empty when there are none."""
        return self.splits_given(infer)[0]

    def splits_given(self, infer: bool = True) -> tuple[dict[str, SplitGlobs], str | None]:
        """(:meth:`declared_splits`, where they come from: ``"dataset_dict"``, ``"card_configs"`` (the
        dataset card's ``configs``) or ``"hub_names"``; None when there are none)."""
        declared = declared_splits(self.root, self.ignored)[0]
        if declared:
            return declared, "dataset_dict"
        hub = self.hub_splits() if infer else HubSplits()
        return hub.splits, hub.source if hub.splits else None

    def card_note(self, infer: bool = True) -> str | None:
        """Why the dataset card's ``configs`` were not used when the file names' rule gave the splits
        (:attr:`~datacheck.io.hubsplits.HubSplits.card_note`: a card not UTF-8, YAML that does not
        parse, ...); None otherwise."""
        if not infer or declared_splits(self.root, self.ignored)[0]:
            return None
        return self.hub_splits().card_note

    def hub_splits(self) -> HubSplits:
        """The splits ``datasets.load_dataset`` of the folder gives the shards
        (:func:`datacheck.io.cardsplits.loader_splits`: those of the dataset card's ``configs`` when
        the card declares them, else those of the Hub's file-naming convention), or none (no note
        either) when a ``DatasetDict``'s ``dataset_dict.json`` is among the PATHs: that file declares
        the splits, or says why not."""
        if any(p.rpartition("/")[2] == DATASET_DICT_NAME for p in self.ignored):
            return HubSplits()
        rels = [s.rel for s in self.shards]
        key = (tuple(rels), tuple(self.ignored))
        if self._loader is not None and self._loader[0] == key:
            return self._loader[1]
        if self.url_root is not None:  # the card at the prefix, when its listing holds one (no request otherwise)
            got = loader_splits(None, rels, url_root=self.url_root if CARD_NAME in self.ignored else None)
        else:
            got = loader_splits(self.root, rels)
        self._loader = (key, got)
        return got


def _abs(p: Path) -> Path:
    """``p`` made absolute WITHOUT resolving symlinks: a shard that is a link (a Hugging Face cache
    snapshot links every file into ``blobs/``) keeps its own name and place in the report."""
    return Path(os.path.abspath(p))


def _has_folder_link(top: str) -> bool:
    for dirpath, dirnames, _ in os.walk(top or "."):
        if any(os.path.islink(os.path.join(dirpath, d)) for d in dirnames):
            return True
    return False


def _glob_safe(pattern: str) -> tuple[list[str], list[Path]]:
    """(``glob.glob(pattern, recursive=True)``, the links to folders it met that lead to a folder
    holding them). ``glob`` follows such a loop at every ``**`` until the path is too long (two loops:
    2**40 paths, a hang); here a ``**`` never enters a link to a folder it is already in (the
    pattern's other parts are matched as ``glob`` matches them). Where the pattern has no ``**`` or
    its fixed folder holds no link to a folder, this is ``glob.glob`` itself."""
    parts = pattern.split(os.sep)
    base_parts = []
    for part in parts:
        if _glob.has_magic(part):
            break
        base_parts.append(part)
    if "**" not in parts or "" in parts[1:] or not _has_folder_link(os.sep.join(base_parts)):
        return _glob.glob(pattern, recursive=True), []
    out: list[str] = []
    loops: list[Path] = []

    def names(folder: str, seg: str) -> list[str]:
        try:
            got = sorted(os.listdir(folder or "."))
        except OSError:
            return []
        return [n for n in got if not n.startswith(".") or seg.startswith(".")]

    def expand(path: str, i: int, chain: frozenset[str]) -> None:
        if i == len(parts):
            out.append(path)
            return
        seg = parts[i]
        if i == 0 and seg == "":  # an absolute pattern
            expand(os.sep, 1, chain)
            return
        if seg == "**":
            expand(path, i + 1, chain)
            for n in names(path, ""):
                full = os.path.join(path, n) if path else n
                if not os.path.isdir(full):
                    if i == len(parts) - 1:
                        out.append(full)
                    continue
                real = os.path.realpath(full)
                if real in chain:  # a link back to a folder the path is in
                    loops.append(Path(full))
                    continue
                expand(full, i, chain | {real})
            return
        if _glob.has_magic(seg):
            cands = [n for n in names(path, seg) if fnmatch.fnmatch(n, seg)]
        else:
            cands = [seg]
        for n in cands:
            full = os.path.join(path, n) if path else n
            if i == len(parts) - 1:
                if os.path.lexists(full):
                    out.append(full)
            elif os.path.isdir(full):
                expand(full, i + 1, chain | {os.path.realpath(full)})

    start = os.sep if parts[0] == "" else ""
    expand(start, 1 if start else 0, frozenset({os.path.realpath(start or ".")}))
    return out, loops


def _candidates(arg: str) -> tuple[Path, list[Path], bool, list[Path]]:
    """(root, files, named, loops) for one PATH argument; ``named``: the argument is one file;
    ``loops``: the links to folders a glob's ``**`` did not follow (:func:`_glob_safe`)."""
    p = Path(arg)
    # a glob, unless the argument names an existing file or folder (train[1].parquet, run[2]/): a name
    if any(ch in arg for ch in "*?[") and not os.path.lexists(arg):
        matched, loops = _glob_safe(arg)
        files = sorted(Path(x) for x in matched if not Path(x).is_dir())
        base = arg
        for i, ch in enumerate(arg):
            if ch in "*?[":
                base = arg[:i]
                break
        root = Path(base) if base.endswith(os.sep) or base == "" else Path(base).parent
        return _abs(root if str(root) else Path(".")), [_abs(f) for f in files], False, [_abs(x) for x in loops]
    if p.is_dir():
        return _abs(p), _folder_files(p), False, []
    if p.is_file():
        return _abs(p).parent, [_abs(p)], True, []
    if p.exists():
        raise UsageError(f"{arg}: not a regular file or folder")
    link = dangling_link(p)  # `ls` lists it: "no such file" would contradict what the user sees
    if link is not None:
        raise UsageError(f"{arg}: {link}" + (" (a shard missing or not downloaded?)" if "broken" in link else "")
                         + "; give the shard file itself")
    if arg.lower().startswith("file://"):  # fsspec's local URLs: the path itself is what datacheck reads
        local = unquote(arg[len("file://"):])
        raise UsageError(f"{arg}: a file:// URL; give the local path itself ({local})")
    raise UsageError(f"{arg}: no such file or folder; give a shard file, a folder of shards or a glob")


def _folder_files(top: Path) -> list[Path]:
    """Every file under folder ``top`` (absolute, ``os.walk`` order), hidden folders left out but
    ``.~*`` ones; a link to a folder is listed as a file (:func:`_folder_link` decides on it)."""
    files: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(top):
        keep = []
        for d in sorted(dirnames):
            if d.startswith(".") and not d.startswith(".~"):
                continue
            if os.path.islink(os.path.join(dirpath, d)):
                filenames.append(d)
            else:
                keep.append(d)
        dirnames[:] = keep
        files.extend(Path(dirpath) / f for f in sorted(filenames))
    return [_abs(f) for f in files]


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _link_component(f: Path, root: Path) -> Path | None:
    """The first folder between ``root`` and ``f`` (not ``root`` itself) that is a symlink, or None."""
    if not f.is_relative_to(root):
        return None
    here = root
    for part in f.relative_to(root).parts[:-1]:
        here = here / part
        if os.path.islink(here):
            return here
    return None


def _link_outside(f: Path, root_real: Path) -> str | None:
    """The real path of ``f`` when ``f`` is reached through a symlink and resolves outside
    ``root_real`` (the audited root, resolved); else None."""
    real = Path(os.path.realpath(f))
    if real == f or real.is_relative_to(root_real):
        return None
    return str(real)


def _twice_reason(link: Path) -> str:
    target = os.path.realpath(link)
    loop = _under(os.path.realpath(link.parent), target)
    return (f"a symlink to the folder {target}, " + ("which holds it (a loop)" if loop else "whose files are audited "
            "already under their own path") + ": not read through the link, so no shard is audited twice")


def _folder_link(link: Path, trees: list[str], descended: list[str], root_real: Path,
                 follow_symlinks: bool) -> str | None:
    """Why the files under ``link`` (a symlink to a folder, found in a folder PATH) are not read;
    None: they are (a folder inside the root that no PATH walk reaches, or, with
    ``follow_symlinks``, any folder not read already)."""
    target = os.path.realpath(link)
    for t in trees:
        if _under(target, t) and not any(part.startswith(".") and not part.startswith(".~")
                                         for part in Path(target).relative_to(t).parts):
            return _twice_reason(link)
    if any(_under(target, d) for d in descended):
        return _twice_reason(link)
    if not follow_symlinks and not _under(target, str(root_real)):
        return (f"a symlink to the folder {target}, outside the audited root: not followed, no file under it was read "
                "(`datacheck audit --follow-symlinks` reads them, e.g. for shards on another mount; other verbs: give "
                "the link's target)")
    return None


def discover(paths: list[str], forced_format: str = "auto", follow_symlinks: bool = False, *,
             rules: ShardRules) -> Discovery:
    """Resolve PATH arguments into shards under one root.

    Symlinks: a file found in a folder or by a glob that is, or lies under, a
    symlink resolving outside the audited root is not read (its content could be any file of the
    machine, shown in the report); it is listed in ``ignored_data`` with the reason. A file named as a
    PATH itself is always read. A link to a folder found in a folder is listed in ``ignored_data``
    (never silently skipped) when it leads outside the root (read with ``follow_symlinks``), to a
    folder already searched (inside the root, a loop), or nowhere (broken); a file a glob reaches both
    directly and through a link to a folder is read once, by its own path. ``follow_symlinks=True`` (``--follow-symlinks``) reads such links too,
    e.g. a Hugging Face hub cache snapshot, whose files link into the ``blobs/`` folder next to it.

    The root is the common folder of all arguments; shard paths in the report are relative to it.
    Which files are shards: ``rules`` (see the module docstring). A file named as a PATH itself is still
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
        return _discover_urls([str(u) for u in urls], forced_format, rules)
    roots, files, named, trees, loops = [], [], set(), [], []
    for arg in paths:
        r, fs, is_named, lp = _candidates(arg)
        loops.extend(lp)
        roots.append(r)
        files.extend(fs)
        if not is_named and not (any(ch in arg for ch in "*?[") and not os.path.lexists(arg)):
            trees.append(os.path.realpath(arg))  # a folder: walked without its links to folders
        if is_named:
            named.update(fs)
    root = Path(os.path.commonpath([str(r) for r in roots]))
    root_real = Path(os.path.realpath(root))
    disc = Discovery(root=root)
    hf_lists: dict[Path, set[str] | None] = {}
    seen = set()
    real_parents: dict[Path, str] = {}

    def real_parent(f: Path) -> str:
        if f.parent not in real_parents:
            real_parents[f.parent] = os.path.realpath(f.parent)
        return real_parents[f.parent]

    def via_link(f: Path) -> bool:  # reached through a link to a folder below the root
        if not f.is_relative_to(root):
            return False
        return real_parent(f) != os.path.join(root_real, *f.parent.relative_to(root).parts)

    # a file reached both through a link to a folder and by its own path is read once, by its own path
    files.sort(key=via_link)  # stable: the order of each kind is kept
    descended: list[str] = []  # the real folders walked through links to them (--follow-symlinks, or inside)
    by_real: set[tuple[str, str]] = set()
    told: set[str] = set()
    for link in loops:
        lrel = shown_rel(link.relative_to(root).as_posix() if link.is_relative_to(root) else link.as_posix())
        if lrel not in told:
            told.add(lrel)
            disc.ignored.append(lrel)
            disc.ignored_data.append({"path": lrel, "reason": _twice_reason(link)})
    for f in files:
        if f in seen:
            continue
        seen.add(f)
        rel = shown_rel(f.relative_to(root).as_posix() if f.is_relative_to(root) else f.as_posix())
        lname = f.name.lower()
        if f not in named and os.path.islink(f) and os.path.isdir(f):  # a link to a folder
            why = _folder_link(f, trees, descended, root_real, follow_symlinks)
            if why is not None:
                disc.ignored.append(rel)
                disc.ignored_data.append({"path": rel, "reason": why})
                continue
            descended.append(os.path.realpath(f))
            files.extend(_folder_files(f))  # read below, in this loop
            continue
        key = (real_parent(f), f.name)
        if key in by_real and f not in named:  # the same file again, through a link to a folder
            link = _link_component(f, root)
            if link is not None:
                lrel = shown_rel(link.relative_to(root).as_posix())
                if lrel not in told:
                    told.add(lrel)
                    disc.ignored.append(lrel)
                    disc.ignored_data.append({"path": lrel, "reason": _twice_reason(link)})
            continue
        by_real.add(key)
        if _is_temp(f):
            disc.temp_files.append(rel)
            continue
        broken = f not in named and dangling_link(f)
        if broken and rules.format_of(f, forced_format) is None and not (
                lname in _METADATA_NAMES or f.name.startswith(".") or lname.endswith(NEVER_SHARD_SUFFIXES)):
            # a folder of shards not mounted, as much as a file: named, never silent
            disc.ignored.append(rel)
            disc.ignored_data.append({"path": rel, "reason": (
                f"{broken}; nothing was read through it (a folder of shards not mounted, a shard not downloaded?)")})
            continue
        kind = special_kind(f)
        if kind is not None:  # never opened: a FIFO blocks the open, a device never ends
            disc.ignored.append(rel)
            disc.ignored_data.append({"path": rel, "reason": f"not a regular file ({kind}): never opened"})
            continue
        if not follow_symlinks and f not in named:
            target = _link_outside(f, root_real)
            if target is not None:
                disc.ignored.append(rel)
                if rules.format_of(f, forced_format) is not None:
                    disc.ignored_data.append({"path": rel, "reason": (
                        f"a symlink to {target}, outside the audited root: not followed (`datacheck audit "
                        "--follow-symlinks` reads it, e.g. for a Hugging Face hub cache snapshot; other verbs: give "
                        "the link's target)") if os.path.lexists(target) else (
                        f"a broken symlink: its target {target}, outside the audited root, does not exist (a "
                        "shard missing or not downloaded?); --follow-symlinks reports it as decode.unreadable")})
                continue
        if lname in _METADATA_NAMES or f.name.startswith(".") or lname.endswith(NEVER_SHARD_SUFFIXES):
            disc.ignored.append(rel)
            continue
        if rules.is_companion(f, forced_format):
            disc.ignored.append(rel)  # read and hashed with its .bin
            continue
        fmt = rules.format_of(f, forced_format)
        if fmt == "arrow" and f not in named:
            if f.parent not in hf_lists:
                hf_lists[f.parent] = hf_data_files(f.parent)
            listed = hf_lists[f.parent]
            if listed is not None and f.name not in listed:
                disc.ignored.append(rel)
                disc.ignored_data.append({"path": rel, "reason": rules.unlisted_arrow_reason})
                continue
        if fmt is None:
            disc.ignored.append(rel)
            why = rules.why_not(f.name, forced_format, path=f)
            if why is not None:
                disc.ignored_data.append({"path": rel, "reason": why})
            continue
        disc.shards.append(DiscoveredShard(path=f, rel=rel, format=fmt))
    disc.shards.sort(key=lambda s: s.rel)
    disc.temp_files.sort()
    disc.ignored.sort()
    disc.ignored_data.sort(key=lambda i: i["path"])
    if not disc.shards and not disc.temp_files:
        raise UsageError(no_shards_message(paths, disc, forced_format, rules))
    return disc


def _list_url(arg: str) -> tuple[Any, str, str, dict[str, dict[str, Any]], bool]:
    """(fs, scheme, root path, {path: info} of the files, named) for one URL PATH: an object, every
    object under a prefix (recursively), or the objects matching a glob.

    Raises:
        UsageError: nothing exists at the URL, the store's endpoint cannot be reached (named as such,
            never as a missing object; ``ftp://`` and ``sftp://`` connect when opened) or listed (the
            message names it).
    """
    try:
        fs, path = filesystem(arg)
    except OSError as exc:  # a file system that connects when made (ftp://, sftp://): an unknown host, a refusal
        _refuse_unreachable(arg, exc)
        raise UsageError(f"{arg}: cannot connect ({type(exc).__name__}: "
                         f"{str(exc).splitlines()[0] if str(exc) else ''}); check the URL, the host and the "
                         "store's credentials") from None
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
        _refuse_unreachable(arg, exc)
        raise UsageError(f"{arg}: cannot list it ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__}); "
                         "check the URL and the store's credentials") from None
    except Exception as exc:  # noqa: BLE001 - a store client's own error (credentials, endpoint) is a usage error
        _refuse_unreachable(arg, exc)
        raise UsageError(f"{arg}: cannot list it ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); "
                         "check the URL, the endpoint (AWS_ENDPOINT_URL) and the store's credentials") from None
    files = {k.rstrip("/"): v for k, v in found.items() if v.get("type", "file") == "file"}
    if not files:
        try:  # a client that answers "nothing" when it could not connect (fsspec's http://): ask once more, for why
            fs.info(path)
        except Exception as exc:  # noqa: BLE001 - only a connection error in its chain changes the message
            _refuse_unreachable(arg, exc)
        raise UsageError(f"{arg}: no such object or prefix (nothing listed under it); give a shard URL, a prefix "
                         "holding shards or a glob")
    return fs, scheme, path, files, False


def _refuse_unreachable(arg: str, exc: BaseException) -> None:
    """Raise a :class:`UsageError` naming the endpoint when ``exc`` says the store could not be reached
    (:func:`datacheck.io.stores.unreachable_message`), so that it never reads as a missing object."""
    down = unreachable_message(arg, exc)
    if down is not None:
        raise UsageError(f"{arg}: {down}") from None


def _discover_urls(urls: list[str], forced_format: str, rules: ShardRules) -> Discovery:
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
            if _is_temp(Path(name)):
                disc.temp_files.append(rel)
                continue
            if lname in _METADATA_NAMES or name.startswith(".") or lname.endswith(NEVER_SHARD_SUFFIXES):
                disc.ignored.append(rel)
                continue
            if rules.is_companion_object(key, forced_format, names):
                disc.ignored.append(rel)  # read and hashed with its shard
                continue
            fmt = rules.format_of_object(key, forced_format, names, fs)
            if fmt is None:
                disc.ignored.append(rel)
                why = rules.why_not(name, forced_format, remote=True)
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
        raise UsageError(no_shards_message(urls, disc, forced_format, rules))
    return disc


def no_shards_message(paths: list[str], disc: Discovery, forced: str, rules: ShardRules) -> str:
    """The usage error's text when ``paths`` hold no shard: what was seen, and what datacheck reads."""
    globs = any(ch in p for p in paths for ch in "*?")
    seen = f" (found only: {', '.join(disc.ignored[:5])}{' ...' if len(disc.ignored) > 5 else ''})" \
        if disc.ignored else (" (the pattern matches no file)" if globs else " (the paths hold no files)")
    head = f"no shard files under {', '.join(paths)}{seen}"
    if forced != "auto":
        return (f"{head}; with [dataset] format = {forced!r} datacheck reads files ending in "
                f"{', '.join(rules.forced_extensions[forced])} or without an extension (never code, docs, config or "
                "dataset metadata such as state.json)")
    hints = [f"{i['path']}: {i['reason']}" for i in disc.ignored_data[:3]]
    return (f"{head}; datacheck reads .parquet/.pq, .arrow/.ipc/.feather, .jsonl/.ndjson (also .gz/.zst), "
            ".csv/.tsv (also .gz), .json files that are JSON Lines, Megatron .bin/.idx pairs, MosaicML .mds, "
            "WebDataset .tar, litdata chunk-*.bin folders and .txt plain text (also .gz/.zst); for other "
            "files (.data, .raw, ...) set [dataset] format to csv, tsv, jsonl or text" + (". " + "; ".join(hints) if hints else ""))
