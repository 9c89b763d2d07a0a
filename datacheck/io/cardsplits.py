"""Splits a dataset card's ``configs`` declare, as ``[splits]`` entries.

A Hugging Face Hub dataset repository whose card (``README.md``, :mod:`datacheck.io.cardpath`)
declares ``configs`` in its YAML front matter is loaded by ``datasets.load_dataset`` from each
config's ``data_files``, not by the file-naming rule (:mod:`datacheck.io.hubsplits`). The rule
here is ``datasets``' own, encoded from its source (``huggingface/datasets`` 2.19-5.x,
``src/datasets/utils/metadata.py`` ``MetadataConfigs.get_default_config_name``,
``src/datasets/data_files.py`` ``sanitize_patterns`` and ``resolve_pattern``, ``src/datasets/load.py``
``create_builder_configs_from_metadata_configs``, and fsspec >= 2023.12's ``glob_translate``);
``datasets`` itself is not imported:

- the config read is the one ``load_dataset(path)`` reads without a config name: the only config,
  else the one named ``default``, else the one whose ``default`` is true; none when several are
  candidates or none is (``load_dataset`` then asks for a name);
- its ``data_files`` is a pattern (split ``train``), a list of patterns (split ``train``) or a list
  of ``{split, path}`` (``path`` a pattern or a list of them; split names as ``train_sft``, no
  ``-``; a split named twice, a mapping or patterns mixed with ``{split, path}`` entries: none, as
  ``load_dataset`` raises on them); a config with a ``data_dir`` and no ``data_files`` takes the
  file names' rule (:func:`datacheck.io.hubsplits.hub_splits`) under ``data_dir``;
- a pattern is relative to the card's folder (joined with the config's ``data_dir`` when it has
  one); ``*`` and ``?`` match within one path component, a component ``**`` any number of
  components (a ``**`` inside a component is an error), ``[...]`` a character class; a file in a
  folder or with a name that starts with ``.`` or ``__`` is matched only when the pattern names as
  many such parts (``_is_unrequested_hidden_file_or_is_inside_unrequested_hidden_dir``,
  ``_is_inside_unrequested_special_dir``);
- the front matter is found as ``huggingface_hub``'s ``DatasetCard.load`` finds it
  (:func:`datacheck.io.hfmeta.front_of`), and parsed only when a line of it starts with ``configs:``.

In an object store the card read is the one at the audited prefix (:func:`store_card_splits`).
The audited shards' paths (relative to the audited folder, which may lie below the card's) are
matched against every split's patterns: a shard is in each split one of whose patterns matches it
(``datasets`` reads a file two splits name into both). Each split's entry is its pattern moved to
the audited folder (the card's path to that folder taken off its front) when that glob holds
exactly the split's shards under ``[splits]``' rule (:func:`datacheck.io.hubsplits.glob_matches`,
whose ``*`` also crosses ``/``) and orders them as ``load_dataset`` does
(:func:`datacheck.io.hubsplits.split_order`), else the literal paths of its shards in that order.
``load_dataset`` concatenates a split's files pattern by pattern in the card's order, each pattern's
files sorted by path (fsspec's glob), a file two of the split's patterns match twice
(``DataFilesList.from_patterns``): :attr:`~datacheck.io.hubsplits.HubSplits.order` keeps that order,
the split's global row order for ``plan`` and ``trace``. Splits none of whose
patterns matches an audited shard are left out (an audit of ``data/train/`` below a card that also
names ``data/test/``). Shards in no split are :attr:`~datacheck.io.hubsplits.HubSplits.unloaded`
(``load_dataset`` would not read them).

No splits are given (:attr:`~datacheck.io.hubsplits.HubSplits.note` says why; :func:`loader_splits`
then takes the file names' rule and keeps the reason in ``card_note``) when the card is not UTF-8
(``DatasetCard.load`` reads the whole file as ``utf-8-sig`` and raises, and ``load_dataset`` with it:
:func:`datacheck.io.hfmeta.card_text_problem`), the card's YAML does not
parse or uses aliases, its ``configs`` cannot be read as ``datasets`` reads them (not a list, a
config without ``config_name``, ``data_files`` it refuses), no config is the default, the default
config names neither ``data_files`` nor ``data_dir`` (``datasets`` then infers its files from their
names: the file names' rule), a pattern is no relative path (a URL, an absolute path) or is invalid,
the config names over :data:`datacheck.io.hubsplits.MAX_GLOBS` patterns (each is matched against
every shard) or a split's list of literal paths would exceed it, or no audited shard is in any split
(the card is not about these shards).
"""
from __future__ import annotations

import dataclasses
import os
import posixpath
import re
from pathlib import Path
from typing import Any, Sequence

from datacheck.io.cardpath import CARD_NAME, card_path
from datacheck.io.hfmeta import MAX_README_BYTES, card_of, declares_configs, parse_front, read_card
from datacheck.io.hubsplits import (
    MAX_GLOBS,
    HubSplits,
    SplitGlobs,
    glob_literal,
    glob_matches,
    hub_splits,
    ordered_entry,
    pattern_matches,
)
from datacheck.io.stores import filesystem

__all__ = ["CARD", "card_splits", "store_card_splits", "store_card_front", "store_card", "unreadable_card", "front_splits",
           "card_config", "loader_splits", "dataset_loader_splits",
           "pattern_matches"]  # pattern_matches: datacheck.io.hubsplits', kept here

#: ``datasets.Split.TRAIN``: the split of a ``data_files`` given as a pattern or a list of them
TRAIN = "train"
#: :attr:`HubSplits.source` of the splits a card's configs give
CARD = "card_configs"


def card_config(configs: Any) -> tuple[dict[str, Any] | None, str | None]:
    """(the config ``load_dataset`` reads without a config name, None) from a card's ``configs``
    value, or (None, why not)."""
    if not isinstance(configs, list) or not configs:
        return None, "its configs are not a list of configs"
    if not all(isinstance(c, dict) and isinstance(c.get("config_name"), str) for c in configs):
        return None, "a config has no config_name"
    names = [c["config_name"] for c in configs]
    if len(set(names)) != len(names):
        return None, "two configs have the same config_name"
    chosen = [c for c in configs if len(configs) == 1 or c["config_name"] == "default" or bool(c.get("default"))]
    if len(chosen) != 1:
        why = "several configs are the default" if chosen else "none of its configs is the default"
        return None, f"{why} ({', '.join(names[:5])}{' ...' if len(names) > 5 else ''}): load_dataset needs a config name"
    return chosen[0], None


#: ``datasets.naming._split_re``: a split name ``load_dataset`` accepts (``train_sft``, not ``train-sft``)
_SPLIT_NAME = re.compile(r"^\w+(\.\w+)*$")


def _sanitize(data_files: Any) -> dict[str, list[str]] | None:
    """A card config's ``data_files`` as ``{split: [pattern, ...]}``, by ``datasets``' own rules
    (``MetadataConfigs._raise_if_data_files_field_not_valid``, then ``sanitize_patterns``): a pattern
    (split ``train``), a list of patterns (split ``train``) or a list of ``{split, path}`` (``split``
    a name :data:`_SPLIT_NAME` accepts, ``path`` a pattern or a list of them, no other key, no split
    twice); None for anything else (``load_dataset`` raises: a mapping, a split name with a ``-``,
    patterns mixed with ``{split, path}`` entries)."""
    def patterns(v: Any) -> list[str] | None:
        vs = v if isinstance(v, list) else [v]
        return vs if vs and all(isinstance(x, str) for x in vs) else None

    if isinstance(data_files, str):
        return {TRAIN: [data_files]}
    if not isinstance(data_files, list) or not data_files:
        return None
    if not any(isinstance(e, dict) for e in data_files):
        return {TRAIN: data_files} if all(isinstance(e, str) for e in data_files) else None
    res: dict[str, list[str]] = {}
    for e in data_files:
        if not (isinstance(e, dict) and len(e) == 2 and isinstance(e.get("split"), str)
                and _SPLIT_NAME.match(e["split"]) and isinstance(e.get("path"), (str, list))):
            return None
        pats = patterns(e["path"])
        if pats is None or e["split"] in res:
            return None
        res[e["split"]] = pats
    return res


def _relative(pattern: str) -> bool:
    return "://" not in pattern and not posixpath.isabs(pattern) and not os.path.isabs(pattern)


def card_splits(card: str | os.PathLike[str], root: str | os.PathLike[str], paths: Sequence[str]) -> HubSplits | None:
    """The splits the dataset card ``card`` declares for the shards ``paths`` (POSIX paths relative
    to the audited folder ``root``), by the module docstring's rule; None when the card declares
    no ``configs`` or cannot be read (no splits, and the reason, when ``DatasetCard.load`` would raise
    on it: :func:`unreadable_card`)."""
    front, problem = read_card(Path(card))
    if problem is not None:
        return unreadable_card(problem)
    if front is None:
        return None
    here = os.path.relpath(os.path.abspath(os.fspath(root)), os.path.dirname(os.path.abspath(os.fspath(card))))
    return front_splits(front, here.replace(os.sep, "/"), paths)


def unreadable_card(problem: str) -> HubSplits:
    """No splits, and why, for a dataset card ``DatasetCard.load`` raises on (``problem``:
    :func:`datacheck.io.hfmeta.card_text_problem`): ``load_dataset`` of the folder fails on it, its
    ``configs`` are read by nobody (the file names' rule then stands in, the reason kept)."""
    return HubSplits(source=CARD, note=problem)


def store_card_splits(url_root: str, paths: Sequence[str]) -> HubSplits | None:
    """:func:`card_splits` of the dataset card at an object-store prefix (``url_root/README.md``, at
    most :data:`datacheck.io.hfmeta.MAX_README_BYTES` read; the Hub keeps its card at the
    repository's root, the prefix an ``hf://datasets/...`` audit names), for the shards ``paths``
    (relative to the prefix). None when there is none, it cannot be fetched (any store error: the card
    is one more declaration, never a reason for the audit to stop) or declares no ``configs``.
    A card above the prefix is not looked for (one listing per folder up, on every audit)."""
    front, problem = store_card(url_root)
    if problem is not None:
        return unreadable_card(problem)
    return front_splits(front, ".", paths) if front is not None else None


def store_card_front(url_root: str) -> str | None:
    """The front matter (:func:`datacheck.io.hfmeta.front_of`) of the dataset card at an object-store
    prefix: :func:`store_card`'s front matter."""
    return store_card(url_root)[0]


def store_card(url_root: str) -> tuple[str | None, str | None]:
    """(front matter, problem) (:func:`datacheck.io.hfmeta.card_of`) of the dataset card at an
    object-store prefix (``url_root/README.md``, at most :data:`datacheck.io.hfmeta.MAX_README_BYTES`
    + 1 bytes read); (None, None) when there is none or it cannot be fetched (any store error: a card
    is one more declaration, never a reason for the audit to stop)."""
    try:
        fs, key = filesystem(url_root.rstrip("/") + "/" + CARD_NAME)
        raw = fs.cat_file(key, start=0, end=MAX_README_BYTES + 1)
    except Exception:  # noqa: BLE001 - a missing or unreadable card declares nothing
        return None, None
    return card_of(raw)


def front_splits(front: str, here: str, paths: Sequence[str]) -> HubSplits | None:
    """The splits a card's front matter (:func:`datacheck.io.hfmeta.card_front_text`) declares for the
    shards ``paths`` under the audited folder ``here`` (its POSIX path relative to the card's folder),
    by the module docstring's rule; None when it declares no ``configs`` or does not parse."""
    if not declares_configs(front):
        return None  # no configs at its top level: the YAML (features of many configs, ...) is not parsed
    meta = parse_front(front)
    if meta is None:
        return HubSplits(source=CARD, note="the dataset card's YAML front matter does not parse (or uses YAML "
                                           "aliases, which datacheck does not expand)")
    if "configs" not in meta:
        return None
    chosen, why = card_config(meta["configs"])
    if chosen is None:
        return HubSplits(source=CARD, note=f"the dataset card: {why}")
    name = chosen["config_name"]
    data_dir = chosen.get("data_dir")
    if data_dir is not None and not (isinstance(data_dir, str) and _relative(data_dir)):
        return HubSplits(source=CARD, note=f"the dataset card's config {name!r} has a data_dir that is no relative path")
    if "data_files" not in chosen and not data_dir:  # datasets infers the files from their names: hubsplits' rule
        return HubSplits(source=CARD, note=f"the dataset card's config {name!r} names no data_files")
    patterns = _sanitize(chosen["data_files"]) if "data_files" in chosen else {}
    if patterns is None:
        return HubSplits(source=CARD, note=f"the dataset card's config {name!r} has data_files datasets does not read "
                                           "(load_dataset raises)")
    if sum(len(v) for v in patterns.values()) > MAX_GLOBS:  # each pattern is matched against every shard
        return HubSplits(source=CARD, note=f"the dataset card's config {name!r} names over {MAX_GLOBS} data_files "
                                           "patterns: not resolved")
    base = posixpath.normpath(data_dir) if data_dir else "."
    if here == ".." or here.startswith("../"):
        return HubSplits(source=CARD, note="the audited folder is not under the dataset card's folder")
    # each shard's path relative to the config's base folder (None: outside it)
    def under_base(rel: str) -> str | None:
        full = posixpath.normpath(posixpath.join(here, rel))
        if base == ".":
            return full
        return full[len(base) + 1:] if full.startswith(base + "/") else None
    where = {p: w for p in paths if (w := under_base(p)) is not None}
    # each split's shards in load_dataset's order: pattern by pattern, each pattern's files sorted by
    # path (fsspec's glob; the paths under one folder sort as their parts below it), a file two
    # patterns match twice (DataFilesList.from_patterns)
    members: dict[str, list[str]] = {}
    if "data_files" not in chosen:  # data_dir alone: the file names' rule under it (get_data_patterns(base))
        named = hub_splits(list(where.values()))
        if not named.splits:
            return HubSplits(source=CARD, note=f"the dataset card's config {name!r} reads data_dir {data_dir!r}, "
                                               f"whose file names give no splits ({named.note or 'none names a split'})")
        patterns = {k: [v] if isinstance(v, str) else list(v) for k, v in named.splits.items()}
        back = {w: p for p, w in where.items()}
        for split, ws in named.order.items():
            members[split] = [back[w] for w in ws]
    by_path = sorted(where, key=where.__getitem__)
    for split, pats in (patterns.items() if "data_files" in chosen else ()):
        if not all(_relative(x) for x in pats):
            return HubSplits(source=CARD, note=f"the dataset card's split {split!r} names a path that is no relative "
                                               "path (a URL or an absolute path): not resolved")
        try:
            members[split] = [p for x in pats for p in by_path if pattern_matches(where[p], x)]
        except ValueError as exc:
            return HubSplits(source=CARD, note=f"the dataset card's split {split!r}: {exc}")
    members = {k: v for k, v in members.items() if v}
    if not members:
        return HubSplits(source=CARD, note=f"no audited shard is in a split of the dataset card's config {name!r}")
    splits: dict[str, SplitGlobs] = {}
    for split, got in members.items():
        entry = _entry(patterns[split], here, base, paths, list(dict.fromkeys(got)))
        if entry is None:
            return HubSplits(source=CARD, note=f"the dataset card's split {split!r} holds over {MAX_GLOBS} shards "
                                                "no glob under the audited folder names in load_dataset's order")
        splits[split] = entry
    counts: dict[str, list[str]] = {}
    for split, got in members.items():
        for p in dict.fromkeys(got):
            counts.setdefault(p, []).append(split)
    unloaded = tuple(sorted(p for p in paths if p not in counts))
    shared = {p: tuple(s) for p, s in sorted(counts.items()) if len(s) > 1}
    others = tuple(c["config_name"] for c in meta["configs"] if c is not chosen)
    return HubSplits(source=CARD, splits=splits, unloaded=unloaded, shared=shared, config=name, other_configs=others,
                     order={k: tuple(v) for k, v in members.items()})


def loader_splits(root: str | os.PathLike[str] | None, paths: Sequence[str], url_root: str | None = None) -> HubSplits:
    """The splits ``datasets.load_dataset`` of the audited folder ``root`` gives its shards ``paths``
    (POSIX paths relative to ``root``): those of its dataset card's ``configs``
    (:func:`card_splits`; the card: :func:`datacheck.io.cardpath.card_path`) when the card declares
    them, else those of the Hub's file names (:func:`datacheck.io.hubsplits.hub_splits`), also when the
    card's configs give none (:attr:`~datacheck.io.hubsplits.HubSplits.note`: no default config, no
    ``data_files``, ...; each config of a multi-config repository usually follows the file names'
    rule): then the note joins the card's reason and the file names' own. Shards in an
    object store (``url_root``, the audited prefix; ``root`` None): the card at the prefix
    (:func:`store_card_splits`). Neither (a report read back): the file names'."""
    got = None
    if url_root is not None:
        got = store_card_splits(url_root, paths)
    elif root is not None:
        card = card_path(root)
        got = card_splits(card, root, paths) if card is not None else None
    if got is not None and got.splits:
        return got
    hub = hub_splits(paths)
    if got is None:
        return hub
    if hub.splits:  # a card whose configs give none: the file names' rule, as before (the card's reason kept)
        return dataclasses.replace(hub, card_note=got.note)
    return HubSplits(source=CARD, note="; ".join(n for n in (got.note, hub.note) if n))


def dataset_loader_splits(dctx: Any) -> HubSplits:
    """The splits ``load_dataset`` gives the shards of a dataset stage (a
    :class:`datacheck.model.results.DatasetContext`): those discovery found
    (``dctx.loader_splits``), else worked out from ``dctx.root`` (:func:`loader_splits`)."""
    got = getattr(dctx, "loader_splits", None)
    if got is not None:
        return got  # type: ignore[no-any-return]
    return loader_splits(getattr(dctx, "root", None), [s.path for s in dctx.shards])


def _entry(pats: list[str], here: str, base: str, paths: Sequence[str], got: list[str]) -> SplitGlobs | None:
    """A split's ``[splits]`` entry: its patterns moved to the audited folder (:func:`_moved`) when
    they name exactly its shards ``got`` there (``[splits]``' ``*`` crosses ``/``) and order them as
    ``got`` lists them (``load_dataset``'s order, each shard once;
    :func:`datacheck.io.hubsplits.split_order`), else its shards' literal paths in that order (None:
    over :data:`MAX_GLOBS`)."""
    moved: list[str] = []
    for x in pats:
        m = _moved(x, here, base)
        if m is None:
            moved = []
            break
        if m:
            moved.append(m)
    if moved and {p for p in paths if glob_matches(p, moved)} == set(got):
        return ordered_entry(moved[0] if len(moved) == 1 else moved, got, got)
    if len(got) > MAX_GLOBS:
        return None
    return [glob_literal(p) for p in got]


def _moved(pattern: str, here: str, base: str) -> str | None:
    """``pattern`` (relative to the config's ``base`` folder under the card's) relative to the
    audited folder ``here`` (relative to the card's): the pattern without ``here``'s components;
    ``""`` when a literal component differs from ``here``'s (it matches no audited shard); None when
    a wildcard stands where ``here``'s components are (it cannot be moved)."""
    parts = [c for c in f"{base}/{pattern}".split("/") if c not in ("", ".")]
    lead = [c for c in here.split("/") if c not in ("", ".")]
    for i, c in enumerate(lead):
        if i >= len(parts) - 1:
            return None if any(ch in parts[-1] for ch in "*?[") else ""
        if any(ch in parts[i] for ch in "*?["):
            return None
        if parts[i] != c:
            return ""
    return "/".join(parts[len(lead):])
