"""index: the shard set as a whole: ``index.numbering_gap``, ``index.temp_file``, ``dup.shard``;
the shard set against a committed or shipped index (``index.missing_shard``, ``extra_shard``,
``changed_shard``, ``row_count_mismatch``: one comparison shared by the four checks); and
``index.empty_shard`` (per shard, decided after the fused query from the row count)."""
from __future__ import annotations

import os
import re
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable

from datacheck.checks.registry import AfterQuery, ShardContext, ShardItem, check
from datacheck.io.dataindex import (
    compare_index,
    compare_shipped,
    is_listed_file,
    read_index,
    resolve_index_path,
    shipped_files,
    shipped_lists,
)
from datacheck.io.discover import declared_splits
from datacheck.io.hfmeta import DATASET_DICT_NAME, STATE_NAME
from datacheck.model.findings import Finding, Skipped

__all__ = ["numbering_gap", "temp_files", "duplicate_shards", "committed_index", "shipped_index", "empty_shard",
           "index_items", "dataset_dict_items", "SHARD_NAME"]

#: ``NAME-00002-of-00005.ext`` (Hugging Face / Megatron style shard names)
SHARD_NAME = re.compile(r"^(?P<prefix>.*?)-?(?P<i>\d+)-of-(?P<n>\d+)(?P<suffix>(\.[^/]*)?)$")


def _parse(rel: str) -> tuple[tuple[str, str, str], int, int, tuple[int, int]] | None:
    """(group key, shard number, shard count, (digits of the number, digits of the count)) or None."""
    folder, _, name = rel.rpartition("/")
    m = SHARD_NAME.match(name)
    if not m:
        return None
    return (folder, m["prefix"], m["suffix"]), int(m["i"]), int(m["n"]), (len(m["i"]), len(m["n"]))


def _on_disk(root: Any, key: tuple[str, str, str]) -> list[tuple[int, int]]:
    """(number, count) of the files in the folder ``key[0]`` (under ``root``) named like the group
    ``key`` (same prefix and extension). Empty without a root or when the folder cannot be listed."""
    if root is None:
        return []
    folder = Path(root) / key[0] if key[0] else Path(root)
    try:
        names = [e.name for e in os.scandir(folder) if not e.name.startswith(".") and e.is_file()]
    except OSError:
        return []
    out = []
    for name in names:
        p = _parse(f"{key[0]}/{name}" if key[0] else name)
        if p and p[0] == key:
            out.append((p[1], p[2]))
    return out


@check("index.numbering_gap", level="dataset")
def numbering_gap(dctx: Any) -> Iterable[Finding | Skipped]:
    """Shards named ``NAME-0000k-of-0000N``: every k in [0, N) must be present exactly once, and all
    audited shards of one NAME must agree on N. Temporary files do not count as present.

    The shard set is the one on disk, not the selection: a shard of the same NAME, extension and
    count lying in the folder of an audited shard counts as present although it was not named on
    the command line (auditing one shard of a complete set reports no gap; a shard missing from
    the folder is a gap whichever shards were named)."""
    groups: dict[tuple[str, str, str], dict[int, set[int]]] = defaultdict(lambda: defaultdict(set))
    widths: dict[tuple[str, str, str], tuple[int, int]] = {}
    for s in dctx.shards:
        p = _parse(s.path)
        if p:
            key, i, n, w = p
            groups[key][n].add(i)
            widths.setdefault(key, w)
    for key, by_n in groups.items():  # siblings on disk of the audited shards
        for i, n in _on_disk(dctx.root, key):
            if n in by_n:
                by_n[n].add(i)
    for (folder, prefix, suffix), by_n in sorted(groups.items()):
        name = f"{folder + '/' if folder else ''}{prefix}-*-of-*{suffix}"
        if len(by_n) > 1:
            yield Finding(
                check="index.numbering_gap", severity="error", count=len(by_n),
                message=f"shards {name} disagree on the shard count: -of-{sorted(by_n)}",
                details={"pattern": name, "counts": sorted(by_n)},
            )
        for n, present in sorted(by_n.items()):
            missing = sorted(set(range(n)) - present)
            beyond = sorted(i for i in present if i >= n)
            if not missing and not beyond:
                continue
            wi, wn = widths[(folder, prefix, suffix)]  # name the missing shards as the present ones are named
            miss_names = [f"{prefix}-{i:0{wi}d}-of-{n:0{wn}d}{suffix}" for i in missing[:20]]
            parts = []
            if missing:
                parts.append(f"{len(missing)} of {n} shard(s) missing: {', '.join(miss_names)}"
                             + (" ..." if len(missing) > 20 else ""))
            if beyond:
                parts.append(f"shard numbers {beyond[:20]} are >= the count {n}")
            yield Finding(
                check="index.numbering_gap", severity="error", count=len(missing) + len(beyond),
                message=f"{name}: " + "; ".join(parts) + " (an incomplete download or upload?)",
                details={"pattern": name, "expected": n, "missing": missing[:1000], "beyond_count": beyond[:1000]},
            )


@check("index.temp_file", level="dataset")
def temp_files(dctx: Any) -> Iterable[Finding]:
    """Partial or temporary files (``*.tmp``, ``*.partial``, ``.~*``, ``*.incomplete``) among the shards."""
    tmp = dctx.temp_files
    if tmp:
        yield Finding(
            check="index.temp_file", severity="warn", count=len(tmp), shards=tuple(tmp),
            message=(f"{len(tmp)} partial or temporary file(s) among the shards (not audited): "
                     f"{', '.join(tmp[:10])}{' ...' if len(tmp) > 10 else ''}; a write or download did not finish"),
        )


@check("dup.shard", level="dataset")
def duplicate_shards(dctx: Any) -> Iterable[Finding]:
    """``dup.shard``: two or more shards with identical content hashes (bytes), e.g. a shard uploaded twice.

    Unreadable shards (``rows`` None: ``decode.unreadable``) do not count: they feed no row to training,
    so two identical broken files are two ``decode.unreadable`` findings, not rows seen twice."""
    by_hash: dict[str, list[str]] = defaultdict(list)
    for s in dctx.shards:
        if s.bytes and s.rows is not None:
            by_hash[s.content_hash].append(s.path)
    for h, paths in sorted(by_hash.items()):
        if len(paths) > 1:
            yield Finding(
                check="dup.shard", severity="error", count=len(paths) - 1, shards=tuple(sorted(paths)),
                message=f"{len(paths)} shards have identical bytes ({h}): {', '.join(sorted(paths))}; every row is seen twice",
                details={"content_hash": h},
            )


def committed_index(dctx: Any) -> Iterable[Finding | Skipped]:
    """``index.missing_shard``/``extra_shard``/``changed_shard``/``row_count_mismatch`` against the
    committed ``[dataset] index`` (read and validated before any shard; see :mod:`datacheck.io.dataindex`)."""

    idx = getattr(dctx, "index", None)
    index_file = dctx.cfg.index_file()
    if idx is None and index_file is not None and dctx.root is not None:
        idx = read_index(resolve_index_path(index_file, dctx.root), dctx.root)
    if idx is None:
        return
    actual = [(s.path, s.content_hash, s.bytes, s.rows) for s in dctx.shards]
    yield from compare_index(idx, actual, dctx.temp_files)


def shipped_index(dctx: Any) -> Iterable[Finding | Skipped]:
    """The same checks against the shard lists real datasets ship next to the audited shards:
    Hugging Face ``state.json`` ``_data_files`` (+ ``dataset_info.json`` split sizes) and MosaicML
    ``index.json`` (see :func:`~datacheck.io.dataindex.shipped_lists` for which lists are in scope)."""
    if dctx.root is None or not Path(dctx.root).is_dir():
        return
    root = Path(dctx.root)
    broken: list[tuple[str, str]] = []
    found = [p for p in dctx.shard_lists if p.rpartition("/")[2] != DATASET_DICT_NAME]
    lists = shipped_lists(root, [s.path for s in dctx.shards], found=found, broken=broken)
    yield from dataset_dict_items(dctx)
    for rel, reason in broken:
        yield Finding(
            check="index.missing_shard", severity="error", count=1, shards=(rel,),
            message=(f"the shard list {rel} shipped with the data cannot be used ({reason}); the dataset loader "
                     "cannot list its shards from it, so which shards belong to the dataset is unknown. "
                     "Fix or regenerate that file"),
            details={"index": rel, "broken": reason},
        )
    if not lists:
        return
    files = shipped_files(root, lists)
    for lst in lists:
        yield from compare_shipped(lst, dctx.shards, files)


def dataset_dict_items(dctx: Any) -> Iterable[Finding]:
    """``index.missing_shard`` about a Hugging Face ``dataset_dict.json`` met by discovery: a split it
    declares whose folder (with its ``state.json``) is absent, so ``load_from_disk`` fails and that
    split's shards are missing; or a file that gives no splits (why: see
    :func:`~datacheck.io.discover.declared_splits`). One finding per split or file, naming it."""
    root = Path(dctx.root)
    declared = {rel.rpartition("/")[0] for rel in dctx.shard_lists if rel.rpartition("/")[2] == DATASET_DICT_NAME}
    if len(declared) != 1:  # none, or several DatasetDicts: dup.split_overlap's skipped entry says why
        return
    splits, problems = declared_splits(root, list(dctx.shard_lists))
    for rel, reason in problems:
        yield Finding(
            check="index.missing_shard", severity="error", count=1, shards=(rel,),
            message=(f"{rel} (a DatasetDict split list) cannot be used: {reason}; the splits it declares were not "
                     "assigned, so leakage between them is not measured"),
            details={"index": rel, "broken": reason},
        )
    (folder,) = declared
    for name in splits:
        split_rel = f"{folder}/{name}" if folder else name
        if is_listed_file(root / split_rel / STATE_NAME):
            continue
        where = f"{folder}/{DATASET_DICT_NAME}" if folder else DATASET_DICT_NAME
        yield Finding(
            check="index.missing_shard", severity="error", count=1, shards=(where,),
            message=(f"{where} declares the split {name!r}, but {split_rel}/{STATE_NAME} is not on disk: "
                     "datasets.load_from_disk fails and that split's shards are missing. Restore the split "
                     f"folder or remove {name!r} from the file"),
            details={"index": where, "split": name, "missing": f"{split_rel}/{STATE_NAME}"},
        )


def index_items(dctx: Any) -> list[Finding | Skipped]:
    """Every finding of the shard set against the committed index and the shipped shard lists,
    computed once per audit (memo on the DatasetContext) and shared by the four index checks."""
    memo = getattr(dctx, "_index_memo", None)
    if memo is None:
        memo = [*committed_index(dctx), *shipped_index(dctx)]
        try:
            setattr(dctx, "_index_memo", memo)
        except AttributeError:
            pass
    return memo


@check("index.missing_shard", level="dataset")
def missing_shard(dctx: Any) -> Iterable[Finding | Skipped]:
    """``index.missing_shard``: a shard listed in the committed index (or a shipped list) is absent."""
    return [i for i in index_items(dctx) if i.check == "index.missing_shard"]


@check("index.extra_shard", level="dataset")
def extra_shard(dctx: Any) -> Iterable[Finding | Skipped]:
    """``index.extra_shard``: a shard on disk is not in the committed index (or a shipped list)."""
    return [i for i in index_items(dctx) if i.check == "index.extra_shard"]


@check("index.changed_shard", level="dataset")
def changed_shard(dctx: Any) -> Iterable[Finding | Skipped]:
    """``index.changed_shard``: a shard's content hash differs from the committed index."""
    return [i for i in index_items(dctx) if i.check == "index.changed_shard"]


@check("index.row_count_mismatch", level="dataset")
def row_count_mismatch(dctx: Any) -> Iterable[Finding | Skipped]:
    """``index.row_count_mismatch``: a shard's row count differs from the index or its own metadata."""
    return [i for i in index_items(dctx) if i.check == "index.row_count_mismatch"]


@check("index.empty_shard", level="dataset")
def empty_index(dctx: Any) -> Iterable[Finding | Skipped]:
    """``index.empty_shard`` at the dataset stage: a shipped index that lists zero shards (a MosaicML
    ``index.json`` with ``"shards": []``): the dataset it describes yields no sample."""
    return [i for i in index_items(dctx) if i.check == "index.empty_shard"]


@check("index.empty_shard")
def empty_shard(ctx: ShardContext) -> Iterable[ShardItem]:
    """``index.empty_shard`` (warn): a readable shard with 0 rows (decided after the fused query)."""
    shard = ctx.shard

    def decide(rows: int) -> list[Finding]:
        if rows:
            return []
        return [Finding(check="index.empty_shard", severity="warn", message=f"{shard} is readable but holds 0 rows")]

    yield AfterQuery("index.empty_shard", decide)
