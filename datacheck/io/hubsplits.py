"""Splits named by the Hugging Face Hub's file-naming convention, as ``[splits]`` entries.

A dataset repository on the Hub with no ``configs`` in its card gets its splits from the names of
its data files (https://huggingface.co/docs/hub/datasets-file-names-and-splits). The rule is
``datasets``' own, encoded here from its source (``huggingface/datasets``,
``src/datasets/data_files.py``: ``SPLIT_PATTERN_SHARDED``, ``SPLIT_KEYWORDS``, ``NON_WORDS_CHARS``,
and the ``KEYWORDS_IN_DIR_NAME_BASE_PATTERNS`` / ``KEYWORDS_IN_FILENAME_BASE_PATTERNS`` of
fsspec >= 2023.12.0, tried in the order of ``_get_data_files_patterns``); ``datasets`` itself is not
imported. Paths are POSIX paths relative to the audited root; matching is case-sensitive, as the
Hub's and fsspec's globs are. The first stage that names any split for some shard decides:

1. ``data/{split}-NNNNN-of-NNNNN*.*`` (five digits each; what ``push_to_hub`` writes): the split is
   the name before the shard number, any ``\\w+(\\.\\w+)*`` (``validation_matched`` too).
2. A split keyword as a folder name: a path folder equal to the keyword, or holding it delimited
   by a character of ``-._ 0-9`` on each side (or the folder name's start/end): ``train/``,
   ``data/train-v2/``, ``sst2_dev/``.
3. A split keyword in the file name, delimited by the name's start or one of ``-._ 0-9`` on the
   left and one of ``-._ 0-9`` on the right: ``train.jsonl``, ``data/test-00000-of-00001.parquet``,
   ``sst2_validation.csv``. A keyword inside a word never matches (``contest``, ``attestation``,
   ``interval``, ``pretraining``, ``trainer_state``).

Keywords (``SPLIT_KEYWORDS``): train: ``train``, ``training``; validation: ``validation``, ``valid``,
``dev``, ``val``; test: ``test``, ``testing``, ``eval``, ``evaluation``.

``datasets`` loads only the files the deciding stage matched and silently drops the others (a file
no split pattern of that stage matches is not read by ``load_dataset``). The splits are inferred
when the deciding stage gives at least two splits, one of them ``train`` (the split
``dup.split_overlap`` compares the others with). Each split's entry is the glob a user would write
under ``[splits]`` when one holds exactly the split's shards (the common path up to the keyword and
the character after it, then ``*``, e.g. ``data/train-*``, ``train/*``, ``train.*``), else a list of
the shards' literal paths. ``load_dataset`` concatenates a split's files pattern by pattern (its
default patterns keyword by keyword, :data:`_DIR_PATTERNS` / :data:`_FILE_PATTERNS`), each
pattern's files sorted: :attr:`HubSplits.order` keeps that order (the split's global row order for
``plan`` and ``trace``), and the entry is the literal list in that order when the glob would order the
shards otherwise under ``[splits]``' rule (:func:`split_order`: glob by glob, each glob's shards sorted). A shard whose name names several splits (``train_test.parquet``,
``sst2_train_dev/x.csv``) is in each of them, as ``datasets`` loads it into each: its literal path is
added to each of those splits' entries (:attr:`HubSplits.shared` names it; ``dup.split_overlap``
counts every row of it as a row of the compared split that occurs in ``train`` when ``train`` is one
of them, and compares the compared split's other shards with all of ``train``'s, it included).
Shards the deciding stage matches no split for (``data/extra-00000.parquet`` beside ``data/train-00000-of-00001.parquet``) do not undo the splits:
they are :attr:`HubSplits.unloaded` (in no split, as ``datasets`` leaves them; the audit still reads
them, reports them as ``index.extra_shard`` and compares their rows with every split for
``dup.exact_across_shards``), so adding such a file never turns a ``dup.split_overlap`` between the
named splits into a warning. Otherwise (one split, no ``train``, a push_to_hub split name that is no
word, a list over :data:`MAX_GLOBS` globs) no split is inferred and :attr:`HubSplits.note` says why
(the audit reads the files as one dataset; ``dup.split_overlap``'s skipped entry carries the note).
A dataset card that declares ``configs`` replaces this rule, as in ``datasets``: :mod:`datacheck.io.cardsplits`.
"""
from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass, field
from typing import Sequence

__all__ = ["SPLIT_KEYWORDS", "NON_WORDS_CHARS", "MAX_GLOBS", "SplitGlobs", "HubSplits", "hub_splits", "glob_literal",
           "glob_matches", "pattern_matches", "split_order", "ordered_entry"]

#: a ``[splits]`` entry's value: one glob, or a list of globs (a shard matching any is in the split)
SplitGlobs = str | list[str]

#: split name -> its keywords (``datasets.data_files.SPLIT_KEYWORDS``; the split names are
#: ``datasets.Split.TRAIN``, ``VALIDATION`` and ``TEST``), in ``DEFAULT_SPLITS`` order
SPLIT_KEYWORDS: dict[str, tuple[str, ...]] = {
    "train": ("train", "training"),
    "validation": ("validation", "valid", "dev", "val"),
    "test": ("test", "testing", "eval", "evaluation"),
}
#: the characters that delimit a keyword (``datasets.data_files.NON_WORDS_CHARS``, a glob class)
NON_WORDS_CHARS = "-._ 0-9"
#: the split of the training data: the other splits are compared with it
TRAIN = "train"

_SEP = f"[{NON_WORDS_CHARS}]"
#: ``SPLIT_PATTERN_SHARDED`` (``data/{split}-[0-9]{5}-of-[0-9]{5}*.*``; ``*`` never crosses ``/``)
_SHARDED = re.compile(r"data/(?P<split>[^/]+)-[0-9]{5}-of-[0-9]{5}[^/]*\.[^/]*")
#: a split name ``datasets`` accepts from that pattern (``datasets.naming._split_re``)
_SPLIT_NAME = re.compile(r"\w+(\.\w+)*")
_KW = "|".join(sorted((re.escape(k) for ks in SPLIT_KEYWORDS.values() for k in ks), key=len, reverse=True))
#: a keyword in a folder name (``**/{kw}/**``, ``**/{kw}[sep]*/**``, ``**/*[sep]{kw}/**``,
#: ``**/*[sep]{kw}[sep]*/**``) and in a file name (``**/{kw}[sep]*``, ``**/*[sep]{kw}[sep]*``)
_IN_DIR = re.compile(rf"(?:^|(?<={_SEP}))(?P<kw>{_KW})(?=$|{_SEP})")
_IN_FILE = re.compile(rf"(?:^|(?<={_SEP}))(?P<kw>{_KW})(?={_SEP})")
_SPLIT_OF = {k: name for name, ks in SPLIT_KEYWORDS.items() for k in ks}
#: the longest list of globs an inferred split gets (``[splits]``' list limit,
#: ``datacheck.model.config.MAX_ID_LIST``; a longer one is a note, no split inferred)
MAX_GLOBS = 1024
#: the most shard paths a note names
_SHOWN = 3


def glob_literal(name: str) -> str:
    """``name`` as a literal ``fnmatch`` pattern (``*``, ``?`` and ``[`` wrapped in brackets)."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in name)


def glob_matches(path: str, pattern: str | Sequence[str]) -> bool:
    """Whether a ``[splits]`` glob, or any glob of a list of them, matches a shard's relative path:
    ``fnmatch`` over the POSIX path (``*`` also crosses ``/``), each glob also tried without its
    leading ``./`` (:func:`_without_dot_slash`; the rule of :func:`datacheck.checks.dup.cross.assign_splits`)."""
    pats = [pattern] if isinstance(pattern, str) else pattern
    return any(fnmatch.fnmatchcase(path, p) or fnmatch.fnmatchcase(path, _without_dot_slash(p)) for p in pats)


def _without_dot_slash(pattern: str) -> str:
    """``pattern`` without its leading ``./`` (repeated: ``././a``), nothing else: a glob of a hidden
    folder (``.cache/*``) or of a parent (``../x``) keeps its dots (``str.lstrip("./")`` took them)."""
    while pattern.startswith("./"):
        pattern = pattern[2:]
    return pattern


def split_order(paths: Sequence[str], entry: SplitGlobs) -> list[str]:
    """The order of a ``[splits]`` entry's shards in the split's rows (the plan's and ``trace``'s global
    row order), as ``datasets.data_files.DataFilesList.from_patterns`` orders a split's ``data_files``:
    glob by glob in the entry's order, the shards each glob matches (:func:`glob_matches`) sorted by
    their relative paths (fsspec's glob returns its matches sorted), each shard once, at the first glob
    that matches it (``datasets`` would read a file two of a split's patterns match twice; a
    ``[splits]`` entry names each shard once). ``paths``: the relative paths of the shards to order
    (those of the split); one matching none of the entry's globs is left out."""
    pats = [entry] if isinstance(entry, str) else list(entry)
    out: list[str] = []
    seen: set[str] = set()
    for pat in pats:
        got = sorted(p for p in paths if p not in seen and glob_matches(p, pat))
        seen.update(got)
        out += got
    return out


def ordered_entry(entry: SplitGlobs, order: Sequence[str], paths: Sequence[str]) -> SplitGlobs | None:
    """``entry`` when :func:`split_order` of it gives ``order`` (the shards in ``load_dataset``'s order,
    each once) over the shards ``paths``, else the literal paths of ``order`` in that order (None: over
    :data:`MAX_GLOBS` of them), so that the entry, copied under ``[splits]``, plans the same rows."""
    if split_order(paths, entry) == list(order):
        return entry
    if len(order) > MAX_GLOBS:
        return None
    return [glob_literal(p) for p in order]


def _once(paths: Sequence[str]) -> list[str]:
    """``paths`` without repeats, each at its first place."""
    return list(dict.fromkeys(paths))


def _parts_match(path: list[str], pat: list[str]) -> bool:
    """fsspec's glob over path components: ``**`` any number of them (at least one when it is the
    last), another component by ``fnmatch`` within the component. One pass of dynamic programming
    over (pattern component, path component): ``len(pat) * len(path)`` steps whatever the ``**``s."""
    n = len(path)
    ok = [True] + [False] * n  # ok[j]: the pattern's components so far match path[:j]
    for k, head in enumerate(pat):
        nxt = [False] * (n + 1)
        if head == "**":
            last = k == len(pat) - 1
            seen = False  # ok[i] for some i <= j (zero or more components), i < j when last (one or more)
            for j in range(n + 1):
                if not last:
                    seen = seen or ok[j]
                nxt[j] = seen
                if last:
                    seen = seen or ok[j]
        else:
            for j in range(1, n + 1):
                nxt[j] = ok[j - 1] and fnmatch.fnmatchcase(path[j - 1], head)
        ok = nxt
    return ok[n]


def _special(parts: Sequence[str], hidden: bool) -> int:
    if hidden:
        return sum(1 for p in parts if p.startswith(".") and set(p) != {"."})
    return sum(1 for p in parts if p.startswith("__"))


def pattern_matches(path: str, pattern: str) -> bool:
    """Whether a ``data_files`` pattern (relative to the card's folder, ``./`` parts dropped) matches
    a file's POSIX path relative to that folder, as ``datasets.data_files.resolve_pattern`` does.

    Raises:
        ValueError: ``**`` inside a path component (fsspec refuses the pattern).
    """
    pat = [c for c in pattern.split("/") if c not in ("", ".")]
    if any("**" in c and c != "**" for c in pat):
        raise ValueError(f"{pattern!r}: '**' can only be an entire path component")
    parts = path.split("/")
    if not _parts_match(parts, pat):
        return False
    if _special(parts, True) != _special(pat, True):
        return False
    return _special(parts[:-1], False) == _special(pat[:-1], False)


@dataclass(frozen=True)
class HubSplits:
    """What the file names give.

    Attributes:
        splits: ``{split name: glob or list of globs}`` (``train`` first, then ``validation``, ``test``,
            then other names in sorted order, as ``datasets`` orders them): one glob when it holds
            exactly the split's shards, else a list (that glob or the literal paths of the split's
            own shards, then the literal path of each shard that names this split among others);
            empty when none was inferred.
        note: why no split was inferred although a shard's name names one (one split only, no
            ``train`` split, a split name that is no word, a list of globs over :data:`MAX_GLOBS`);
            None when splits were inferred or no shard's name names a split.
        unloaded: with :attr:`splits`, the shards (relative paths, sorted) the deciding stage puts in
            no split: ``load_dataset`` of the folder would not read them. Empty otherwise.
        shared: with :attr:`splits`, ``{shard path: the splits its name names}`` for each shard whose
            name names two or more (``train_test.parquet``: ``("train", "test")``): ``datasets``
            loads it into each of them, so every row of it is in each (a leak when one is ``train``).
            Empty otherwise.
    """

    splits: dict[str, SplitGlobs] = field(default_factory=dict)
    note: str | None = None
    unloaded: tuple[str, ...] = ()
    shared: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: what gave them: ``"hub_names"`` (the file names, here) or ``"card_configs"`` (a dataset
    #: card's ``configs``, :func:`datacheck.io.cardsplits.card_splits`)
    source: str = "hub_names"
    #: with ``"card_configs"``: the config read (the one ``load_dataset`` reads without a name) and the
    #: card's other configs, in its order
    config: str | None = None
    other_configs: tuple[str, ...] = ()
    #: with ``"hub_names"``: why a dataset card that declares ``configs`` was not used (its YAML does
    #: not parse, no config is the default, ...; :func:`datacheck.io.cardsplits.loader_splits`), else None
    card_note: str | None = None
    #: with :attr:`splits`: ``{split name: its shards' relative paths in the order load_dataset
    #: concatenates them}`` (the split's global row order: ``datacheck plan`` and ``trace``): pattern by
    #: pattern of the split (the card's ``data_files`` in its order; the file names' rule: datasets'
    #: default patterns, :data:`_DIR_PATTERNS` / :data:`_FILE_PATTERNS`, keyword by keyword), each
    #: pattern's files sorted by path; a shard two of the split's patterns match is there twice, as
    #: ``load_dataset`` reads it twice. Empty otherwise.
    order: dict[str, tuple[str, ...]] = field(default_factory=dict)


def _names(paths: Sequence[str]) -> str:
    return ", ".join(paths[:_SHOWN]) + (f" and {len(paths) - _SHOWN} more" if len(paths) > _SHOWN else "")


def _sharded(path: str) -> tuple[set[str], int] | None:
    m = _SHARDED.fullmatch(path)
    return ({m["split"]}, len("data/") + len(m["split"]) + 1) if m else None


def _in_dirs(path: str) -> tuple[set[str], int] | None:
    """Splits whose keyword names a folder of ``path`` and the end of the last such folder's match
    (the index just past the character after the keyword, within ``path``)."""
    found: set[str] = set()
    end = 0
    start = 0
    for part in path.split("/")[:-1]:
        for m in _IN_DIR.finditer(part):
            found.add(_SPLIT_OF[m["kw"]])
            end = start + m.end() + 1
        start += len(part) + 1
    return (found, end) if found else None


def _in_file(path: str) -> tuple[set[str], int] | None:
    base_at = path.rfind("/") + 1
    found: set[str] = set()
    end = 0
    for m in _IN_FILE.finditer(path[base_at:]):
        found.add(_SPLIT_OF[m["kw"]])
        end = base_at + m.end() + 1
    return (found, end) if found else None


#: the stages of ``datasets``' default resolution, first first: (what a note calls it, matcher)
_STAGES = (("the push_to_hub shard name data/{split}-NNNNN-of-NNNNN", _sharded),
           ("a split keyword as a folder name", _in_dirs),
           ("a split keyword in the file name", _in_file))
#: ``datasets``' ``KEYWORDS_IN_DIR_NAME_BASE_PATTERNS`` and ``KEYWORDS_IN_FILENAME_BASE_PATTERNS``
#: (fsspec >= 2023.12), in their order: a split's patterns at stages 2 and 3 are these for its first
#: keyword, then for its next (``DEFAULT_PATTERNS_SPLIT_IN_DIR_NAME`` / ``..._IN_FILENAME``)
_DIR_PATTERNS = ("**/{kw}/**", "**/{kw}[{sep}]*/**", "**/*[{sep}]{kw}/**", "**/*[{sep}]{kw}[{sep}]*/**")
_FILE_PATTERNS = ("**/{kw}[{sep}]*", "**/*[{sep}]{kw}[{sep}]*")


def _glob_regex(pattern: str) -> re.Pattern[str]:
    """A regex for an fsspec glob of plain components and ``**`` components (``*`` and ``?`` within a
    component, ``[...]`` a class; a leading ``**/`` any number of folders, a trailing ``/**`` one or more
    components, as :func:`pattern_matches`), without its hidden-part rule."""
    parts = pattern.split("/")
    rx = ""
    for i, c in enumerate(parts):
        if c == "**":
            rx += "(?:[^/]+/)*" if i < len(parts) - 1 else "[^/]+(?:/[^/]+)*"
            continue
        k = 0
        while k < len(c):
            ch = c[k]
            end = c.find("]", k + 1) if ch == "[" else -1
            if ch == "[" and end > k + 1:  # a class (datasets' [-._ 0-9]: as fnmatch and re read it)
                rx, k = rx + c[k:end + 1], end + 1
                continue
            rx += "[^/]*" if ch == "*" else "[^/]" if ch == "?" else re.escape(ch)
            k += 1
        rx += "/" if i < len(parts) - 1 else ""
    return re.compile(rx)


def _load_order(name: str, stage: int, shards: Sequence[str]) -> list[str]:
    """The shards of split ``name`` (decided at stage ``stage``, 0-based in :data:`_STAGES`) in the
    order ``load_dataset`` reads them: pattern by pattern of the split (stage 1: the one push_to_hub
    pattern; stages 2 and 3: :data:`_DIR_PATTERNS` / :data:`_FILE_PATTERNS` of each keyword), each
    pattern's matches sorted by path (fsspec's glob sorts them), a shard two patterns match twice
    (``DataFilesList.from_patterns`` concatenates the patterns' files)."""
    if stage == 0:
        return sorted(shards)
    hidden = {p for p in shards if _special(p.split("/"), True) or _special(p.split("/")[:-1], False)}
    out: list[str] = []
    for kw in SPLIT_KEYWORDS[name]:
        for base in (_DIR_PATTERNS if stage == 1 else _FILE_PATTERNS):
            pat = base.format(kw=kw, sep=NON_WORDS_CHARS)
            rx = _glob_regex(pat)  # pattern_matches(p, pat), faster: the pattern names no hidden or __ part
            out += sorted(p for p in shards if rx.fullmatch(p) and p not in hidden)
    return out + sorted(set(shards) - set(out))  # none left: the stage's matcher is these patterns' union


def _glob_for(paths: list[str], ends: list[int], every: Sequence[str]) -> str | None:
    """One ``[splits]`` glob that matches exactly ``paths`` among ``every``: the common path up to
    the keyword and the character after it (``ends``) followed by ``*``; where the paths differ
    before it, ``*`` and the common end of those prefixes from a ``/`` on (``*/train/*``); else the
    common prefix and suffix of the paths around ``*`` (one path: the path itself). None when no
    candidate holds exactly these shards."""
    want = set(paths)
    cands = []
    cut = min(ends)
    if all(p[:cut] == paths[0][:cut] for p in paths):
        cands.append(glob_literal(paths[0][:cut]) + "*")
    else:  # the keyword's folder or name under different parents: v1/train/ and v2/train/ -> */train/*
        tail = os.path.commonprefix([p[:e][::-1] for p, e in zip(paths, ends)])[::-1]
        if "/" in tail:
            cands.append("*" + glob_literal(tail[tail.index("/"):]) + "*")
    if len(paths) == 1:
        cands.append(glob_literal(paths[0]))
    else:
        pre = os.path.commonprefix(paths)
        suf = os.path.commonprefix([p[len(pre):][::-1] for p in paths])[::-1]
        cands.append(glob_literal(pre) + "*" + glob_literal(suf))
    for pat in cands:
        if {p for p in every if glob_matches(p, pat)} == want:
            return pat
    return None


def _order(names: set[str]) -> list[str]:
    return [n for n in SPLIT_KEYWORDS if n in names] + sorted(names - set(SPLIT_KEYWORDS))


def hub_splits(paths: Sequence[str]) -> HubSplits:
    """The ``[splits]`` the Hub's naming convention gives the shards at ``paths`` (relative POSIX
    paths; see the module docstring for the rule and when no split is inferred)."""
    every = list(paths)
    for k, (stage, match) in enumerate(_STAGES):
        got = {p: m for p in every if (m := match(p)) is not None}
        if not got:
            continue
        if stage == _STAGES[0][0]:
            bad = sorted(n for m in got.values() for n in m[0] if not _SPLIT_NAME.fullmatch(n))
            if bad:
                return HubSplits(note=(f"split names from {stage} must be words (\\w+(\\.\\w+)*), "
                                       f"got {bad[0]!r}; no split was inferred from the file names"))
        by_split: dict[str, list[str]] = {}
        shared: dict[str, tuple[str, ...]] = {}
        for p, m in got.items():
            if len(m[0]) > 1:  # datasets loads it into each split it names
                shared[p] = tuple(_order(m[0]))
            else:
                by_split.setdefault(next(iter(m[0])), []).append(p)
        names = _order(set(by_split) | {n for ns in shared.values() for n in ns})
        none = sorted(p for p in every if p not in got)  # datasets leaves them out of every split
        left = (f"; {len(none)} shard(s) name no split by {stage} ({_names(none)}): the Hub's loader would not "
                "read them" if none else "")
        if len(names) < 2:
            return HubSplits(note=(f"the file names name one split only ({names[0]!r}, by {stage}): nothing to "
                                   "compare it with" + left))
        if TRAIN not in names:
            return HubSplits(note=(f"the file names name the splits {', '.join(names)} (by {stage}) but no "
                                   f"training split ({', '.join(SPLIT_KEYWORDS[TRAIN])}), so no split was inferred: "
                                   "name the split to compare with first under [splits]" + left))
        out: dict[str, SplitGlobs] = {}
        order: dict[str, tuple[str, ...]] = {}
        for name in names:
            mine = sorted(by_split.get(name, []))
            also = sorted(p for p, ns in shared.items() if name in ns)
            globs: list[str] = []
            if mine:  # a shard of several splits is named by its own literal glob, so a glob may match it too
                pat = _glob_for(mine, [got[p][1] for p in mine], [p for p in every if p not in also])
                globs = [pat] if pat is not None else [glob_literal(p) for p in mine]
            globs += [glob_literal(p) for p in also]
            if len(globs) > MAX_GLOBS:
                return HubSplits(note=(f"no one glob holds exactly the shards of split {name!r} ({_names(mine)}) and "
                                       f"a list of their {len(globs)} paths is longer than a [splits] list may be "
                                       f"({MAX_GLOBS}), so no split was inferred from the file names; name the splits "
                                       "under [splits]"))
            entry: SplitGlobs = globs[0] if len(globs) == 1 else globs
            order[name] = tuple(_load_order(name, k, mine + also))
            out[name] = ordered_entry(entry, _once(order[name]), mine + also) or entry
        return HubSplits(splits=out, unloaded=tuple(none), shared=shared, order=order)
    return HubSplits()
