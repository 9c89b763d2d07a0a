"""index: the shard set as a whole: ``index.numbering_gap``, ``index.temp_file`` (``dup.shard`` is
:mod:`datacheck.checks.dup.shard`'s);
the shard set against a committed or shipped index (``index.missing_shard``, ``extra_shard``,
``changed_shard``, ``row_count_mismatch``: one comparison, :func:`compare_index` /
:func:`compare_shipped`, shared by the four checks and by ``datacheck index verify``); and
``index.empty_shard`` (per shard, decided after the fused query from the row count).

The index files themselves (the committed index, HF ``state.json``, MosaicML and litdata
``index.json``) are read, validated and written by :mod:`datacheck.io.dataindex`, which hands over
what a shipped list's own records say about its files (recorded hashes, chunk sizes, repeats, an
empty list) as values; the findings are made here."""
from __future__ import annotations

import fnmatch
import os
import re
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Iterable

from datacheck.checks.registry import AfterQuery, ShardContext, ShardItem, check, finding
from datacheck.io.cardsplits import CARD, dataset_loader_splits
from datacheck.io.dataindex import (
    DataIndex,
    IndexEntry,
    is_listed_file,
    read_index,
    resolve_index_path,
    shipped_files,
    shipped_lists,
)
from datacheck.io.discover import declared_splits
from datacheck.io.hfmeta import DATASET_DICT_NAME, STATE_NAME
from datacheck.model import layouts as lay
from datacheck.model.findings import Finding, Skipped

__all__ = ["numbering_gap", "temp_files", "committed_index", "shipped_index", "empty_shard",
           "index_items", "dataset_dict_items", "hub_unloaded", "SHARD_NAME", "compare_index", "compare_shipped"]

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


@check("index.numbering_gap", layouts=lay.ANY, level="dataset")
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
            yield finding(
                "index.numbering_gap", count=len(by_n),
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
            yield finding(
                "index.numbering_gap", count=len(missing) + len(beyond),
                message=f"{name}: " + "; ".join(parts) + " (an incomplete download or upload?)",
                details={"pattern": name, "expected": n, "missing": missing[:1000], "beyond_count": beyond[:1000]},
            )


@check("index.temp_file", layouts=lay.ANY, level="dataset")
def temp_files(dctx: Any) -> Iterable[Finding]:
    """Partial or temporary files (``*.tmp``, ``*.partial``, ``.~*``, ``*.incomplete``) among the shards."""
    tmp = dctx.temp_files
    if tmp:
        yield finding(
            "index.temp_file", count=len(tmp), shards=tuple(tmp),
            message=(f"{len(tmp)} partial or temporary file(s) among the shards (not audited): "
                     f"{', '.join(tmp[:10])}{' ...' if len(tmp) > 10 else ''}; a write or download did not finish"),
        )


def compare_index(idx: DataIndex, actual: list[tuple[str, str, int, int | None]], temp_files: list[str] = (),
                  rows_of: Callable[[str], int | None] | None = None) -> list[Finding]:
    """Compare the shards on disk with a committed index.

    Args:
        idx: the committed index.
        actual: ``(path, content_hash, bytes, rows)`` of every shard on disk (rows None: unreadable
            or not counted).
        temp_files: partial/temporary files (never count as present).
        rows_of: called for a listed shard whose rows are None (and whose entry records rows),
            to count them.

    Returns:
        ``index.missing_shard`` (error, count = absent shards), ``index.extra_shard`` (warn, count =
        unlisted shards; datacheck indexes only), ``index.changed_shard`` (error, count = shards whose
        content hash or size differs) and one ``index.row_count_mismatch`` (error, count = |rows - listed
        rows|) per shard whose rows differ from the rows its entry records. Rows are compared for every
        listed shard whose rows are known (or counted by ``rows_of``), changed or not: equal bytes hold
        equal rows, but the rows an index records are not covered by its hashes, and consumers read
        them from the index.
    """
    on_disk = {p: (h, b, r) for p, h, b, r in actual}
    out: list[Finding] = []
    missing = sorted(p for p in idx.entries if p not in on_disk)
    if missing:
        partial = [t for t in temp_files if any(t.startswith(m) for m in missing)]
        hint = f"; partial files present: {', '.join(partial[:5])}" if partial else ""
        out.append(finding(
            "index.missing_shard", count=len(missing), shards=tuple(missing),
            message=(f"{len(missing)} shard(s) listed in {idx.source} are absent: {', '.join(missing[:10])}"
                     f"{' ...' if len(missing) > 10 else ''}{hint} (an incomplete download or sync?)"),
            details={"index": idx.source, "missing": missing[:1000]},
        ))
    extra = sorted(p for p in on_disk if p not in idx.entries)
    if extra and idx.kind == "datacheck":
        out.append(finding(
            "index.extra_shard", count=len(extra), shards=tuple(extra),
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
        if e.rows is not None:
            if r is None and rows_of is not None:
                r = rows_of(p)
            if r is not None and r != e.rows:
                rowmis.append((p, e.rows, r))
    if changed:
        out.append(finding(
            "index.changed_shard", count=len(changed), shards=tuple(p for p, *_ in changed),
            message=(f"{len(changed)} shard(s) differ from {idx.source}: "
                     + "; ".join(f"{p} ({_what_changed(e, h, b)})" for p, e, h, b in changed[:5])
                     + (" ..." if len(changed) > 5 else "") + "; the data changed after the index was committed"),
            details={"index": idx.source, "changed": [
                {"path": p, "expected_hash": e.content_hash, "actual_hash": h, "expected_bytes": e.bytes, "actual_bytes": b}
                for p, e, h, b in changed[:1000]]},
        ))
    for p, exp, got in rowmis:
        out.append(finding(
            "index.row_count_mismatch", count=abs(got - exp), shards=(p,),
            message=f"{p} holds {got} rows but {idx.source} lists {exp}",
            details={"index": idx.source, "expected": exp, "actual": got},
        ))
    return out


def _what_changed(e: IndexEntry, h: str, b: int) -> str:
    if e.bytes is not None and e.bytes != b:
        return f"{e.bytes} -> {b} bytes"
    return f"content hash {e.content_hash} -> {h}, same size"


def _list_findings(lst: DataIndex) -> list[Finding]:
    """The findings of what a shipped list's own records say about its files
    (:class:`~datacheck.io.dataindex.DataIndex`: MosaicML recorded hashes the bytes do not match,
    shards whose own column config differs from the index's, an index listing zero shards; litdata chunks of a size the index does not allow, chunks listed twice)."""
    src, out = lst.source, []
    bad_hash = list(lst.hash_mismatches)
    if bad_hash:
        out.append(finding(
            "index.changed_shard", count=len({b["path"] for b in bad_hash}),
            shards=tuple(sorted({b["path"] for b in bad_hash})),
            message=(f"{len(bad_hash)} shard hash(es) recorded in {src} do not match the bytes: "
                     + "; ".join(f"{b['path']} ({b['algorithm']} {b['expected'][:16]}... != {b['actual'][:16]}...)"
                                 for b in bad_hash[:5]) + "; the shard changed or was corrupted after writing"),
            details={"index": src, "mismatches": bad_hash[:1000]},
        ))
    bad_cfg = list(lst.config_mismatches)
    if bad_cfg:
        paths = sorted({b["path"] for b in bad_cfg})
        first = bad_cfg[0]
        out.append(finding(
            "index.changed_shard", count=len(paths), shards=tuple(paths),
            message=(f"{len(paths)} shard(s) carry another column config than {src} gives them (first: "
                     f"{first['path']} {first['field']} {str(first['shard'])[:120]} in the shard, "
                     f"{str(first['index'])[:120]} in the index): StreamingDataset decodes every sample by the "
                     "index's, so the trainer reads other values than the ones audited; the shard was rewritten "
                     "after the index, or the index belongs to another shard set: rebuild it with MDSWriter"),
            details={"index": src, "config_mismatches": bad_cfg[:1000]},
        ))
    if lst.lists_no_shard:
        out.append(finding(
            "index.empty_shard", count=1, shards=(src,),
            message=(f"{src} lists zero shards: a StreamingDataset over {lst.folder or '.'} yields no sample "
                     "(an interrupted write, or a merge that found nothing?)"),
            details={"index": src},
        ))
    resized = list(lst.resized)
    if resized:
        out.append(finding(
            "index.changed_shard", count=len(resized), shards=tuple(r["path"] for r in resized),
            message=(f"{len(resized)} chunk(s) differ in size from {src}: "
                     + "; ".join(f"{r['path']} holds {r['actual_bytes']} bytes, the index allows {r['accepted']}"
                                 for r in resized[:5]) + "; the chunk was cut or rewritten after the index"),
            details={"index": src, "resized": resized[:1000]},
        ))
    twice = list(lst.listed_twice)
    if twice:
        out.append(finding(
            "index.row_count_mismatch", count=len(twice), shards=tuple(sorted(set(twice))),
            message=f"{src} lists {len(twice)} chunk(s) more than once ({', '.join(sorted(set(twice))[:5])}): their items are read twice",
            details={"index": src, "listed_twice": sorted(set(twice))[:1000]},
        ))
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
    out = compare_index(lst, in_scope) + _list_findings(lst)
    orphans = sorted(a[0] for a in actual if unlisted_here(a[0]))
    if orphans:
        out.append(finding(
            "index.extra_shard", count=len(orphans), shards=tuple(orphans),
            message=(f"{len(orphans)} file(s) in {lst.folder or '.'} are not listed in {lst.source}: "
                     f"{', '.join(orphans[:10])}{' ...' if len(orphans) > 10 else ''}; a reader of the index never "
                     "sees them (an orphan from another run, or a copy?)"),
            details={"index": lst.source, "extra": orphans[:1000]},
        ))
    if lst.kind == "hf-state":
        extra = sorted(a[0] for a in in_scope if a[0] not in lst.entries)
        if extra:
            out.append(finding(
                "index.extra_shard", count=len(extra), shards=tuple(extra),
                message=(f"{len(extra)} Arrow file(s) in {lst.folder or '.'} are not in {lst.source} _data_files: "
                         f"{', '.join(extra[:10])}; the dataset loader will ignore them"),
                details={"index": lst.source, "extra": extra[:1000]},
            ))
        listed = [by_path[p] for p in lst.entries if p in by_path]
        if lst.split_rows is not None and len(listed) == len(lst.entries) and all(s.rows is not None for s in listed):
            got = sum(s.rows for s in listed)
            if got != lst.split_rows:
                out.append(finding(
                    "index.row_count_mismatch", count=abs(got - lst.split_rows),
                    shards=tuple(sorted(s.path for s in listed)),
                    message=(f"the shards of {lst.folder or '.'} hold {got} rows but dataset_info.json lists "
                             f"{lst.split_rows} examples for this split"),
                    details={"index": lst.source, "expected": lst.split_rows, "actual": got},
                ))
    return out


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
        yield finding(
            "index.missing_shard", count=1, shards=(rel,),
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
        yield finding(
            "index.missing_shard", count=1, shards=(rel,),
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
        yield finding(
            "index.missing_shard", count=1, shards=(where,),
            message=(f"{where} declares the split {name!r}, but {split_rel}/{STATE_NAME} is not on disk: "
                     "datasets.load_from_disk fails and that split's shards are missing. Restore the split "
                     f"folder or remove {name!r} from the file"),
            details={"index": where, "split": name, "missing": f"{split_rel}/{STATE_NAME}"},
        )


def _card_advice(hub: Any) -> str:
    """What to do about shards no pattern of the card's default config matches."""
    if hub.other_configs:
        names = ", ".join(repr(c) for c in hub.other_configs[:5]) + (" ..." if len(hub.other_configs) > 5 else "")
        return (f"load_dataset of the folder reads the default config {hub.config!r} only; if they are the files of "
                f"another config of the card ({names}), audit them with that config's splits ([splits]) or that "
                "config's folder, else add them to a split's data_files or remove them")
    return "Add them to a split's data_files in the card's configs, or remove them"


def hub_unloaded(dctx: Any) -> Iterable[Finding]:
    """``index.extra_shard`` (warn) for the shards ``datasets.load_dataset`` of the folder puts in no
    split while its splits are the ones the audit uses (:func:`datacheck.io.cardsplits.loader_splits`):
    the dataset card's ``configs`` name no pattern that matches them (:func:`datacheck.io.cardsplits.card_splits`),
    or, without ``configs`` in a card, the Hub's file-name rule matches them to no split
    (:func:`datacheck.io.hubsplits.hub_splits`: ``data/extra-00000.parquet`` beside ``data/train-*``
    and ``data/test-*``); ``load_dataset`` reads only the files its patterns match and silently
    leaves these out. count = such shards; ``shards`` and ``details.extra`` name them (sorted),
    ``details.splits`` the splits they are in none of. Nothing when the audit's ``[splits]`` are not
    the ones ``load_dataset`` gives (a config's own, a ``DatasetDict``'s, none; a card whose configs
    give none, :attr:`~datacheck.io.hubsplits.HubSplits.note`)."""
    splits = dict(dctx.cfg.splits or {})
    if not splits or any(p.rpartition("/")[2] == DATASET_DICT_NAME for p in getattr(dctx, "shard_lists", ())):
        return
    hub = dataset_loader_splits(dctx)
    if not hub.unloaded or hub.splits != splits:
        return
    extra = list(hub.unloaded)
    names = ", ".join(f"{k} = {v!r}" for k, v in hub.splits.items())
    card = hub.source == CARD
    given = "the dataset card's configs" if card else "the Hub's file names"
    yield finding(
        "index.extra_shard", count=len(extra), shards=tuple(extra),
        message=(f"{len(extra)} shard(s) in no split: {', '.join(extra[:10])}{' ...' if len(extra) > 10 else ''}; "
                 f"datasets.load_dataset of this folder would not read them (its split patterns, from {given}, give "
                 f"only {names}). "
                 + (_card_advice(hub) if card else
                    f"The dataset card's configs were not used ({hub.card_note}): fix the card, or rename them so "
                    "their names name a split as the other shards' names do" if hub.card_note else
                    "Rename them so their names name a split as the other shards' names do, or declare the splits' "
                    "data_files in the dataset card's configs and the same globs under [splits]")
                 + "; their rows are still compared with every split for dup.exact_across_shards"),
        details={"splits": hub.splits, "extra": extra[:1000]},
    )


def index_items(dctx: Any) -> list[Finding | Skipped]:
    """Every finding of the shard set against the committed index, the shipped shard lists and the
    Hub's split file names (:func:`hub_unloaded`),
    computed once per audit (memo on the DatasetContext) and shared by the four index checks."""
    memo = getattr(dctx, "_index_memo", None)
    if memo is None:
        memo = [*committed_index(dctx), *shipped_index(dctx), *hub_unloaded(dctx)]
        try:
            setattr(dctx, "_index_memo", memo)
        except AttributeError:
            pass
    return memo


@check("index.missing_shard", layouts=lay.ANY, level="dataset")
def missing_shard(dctx: Any) -> Iterable[Finding | Skipped]:
    """``index.missing_shard``: a shard listed in the committed index (or a shipped list) is absent."""
    return [i for i in index_items(dctx) if i.check == "index.missing_shard"]


@check("index.extra_shard", layouts=lay.ANY, level="dataset")
def extra_shard(dctx: Any) -> Iterable[Finding | Skipped]:
    """``index.extra_shard``: a shard on disk is not in the committed index (or a shipped list)."""
    return [i for i in index_items(dctx) if i.check == "index.extra_shard"]


@check("index.changed_shard", layouts=lay.ANY, level="dataset")
def changed_shard(dctx: Any) -> Iterable[Finding | Skipped]:
    """``index.changed_shard``: a shard's content hash differs from the committed index."""
    return [i for i in index_items(dctx) if i.check == "index.changed_shard"]


@check("index.row_count_mismatch", layouts=lay.ANY, level="dataset")
def row_count_mismatch(dctx: Any) -> Iterable[Finding | Skipped]:
    """``index.row_count_mismatch``: a shard's row count differs from the index or its own metadata."""
    return [i for i in index_items(dctx) if i.check == "index.row_count_mismatch"]


@check("index.empty_shard", layouts=lay.ANY, level="dataset")
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
        return [finding("index.empty_shard", message=f"{shard} is readable but holds 0 rows")]

    yield AfterQuery("index.empty_shard", decide)
