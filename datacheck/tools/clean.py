"""``datacheck clean``: a cleaned copy of shards without the rows that fail chosen checks.

Guarantees:

- The originals are never modified: shards are only read.
- Everything is written into a temporary folder beside ``out`` and renamed to ``out`` at the end,
  so ``out`` either does not exist or is complete. ``out`` must not exist yet (or be an empty
  folder) and must not be an input folder or file (a PATH or a shard read), inside one, or contain one;
  beside a file PATH is allowed.
- Kept rows + quarantined rows == input rows, exactly: before the rename, both are read back from
  the written files and their per-row content hashes are compared with the input's, row by row
  (an :class:`~datacheck.model.errors.InternalError` otherwise, and nothing is renamed into place).

Layout of ``out``::

    OUT/<shard path relative to the input root>   cleaned shard, same format as the input
    OUT/.quarantine/<same relative path>           the dropped rows, same format, plus
                                                  _datacheck_row, _datacheck_line, _datacheck_shard,
                                                  _datacheck_checks (reasons), _datacheck_row_hash;
                                                  only for shards that lost rows (a plain-text
                                                  shard's: JSON Lines, ``<path>.jsonl``)
    OUT/index.json                                 data index of the cleaned shards
                                                  (:mod:`datacheck.io.dataindex` layout, as
                                                  ``datacheck index build`` writes it)
    OUT/<split>/state.json, dataset_info.json      Hugging Face ``save_to_disk`` metadata, updated
    OUT/dataset_dict.json                          to the cleaned files and row counts, so that
                                                  ``load_from_disk(OUT)`` loads the cleaned copy

What is dropped: the rows failing the chosen row-level checks, and for the dataset-level
duplicate checks the rows they name (:data:`DATASET_DROPS`): ``dup.split_overlap`` the rows of an
eval/test split whose content occurs in the training split (the training row stays),
``dup.exact_across_shards`` every copy of a row after its first (path order, within a split),
``dup.shard`` every shard whose bytes equal an earlier shard's (sorted path order: the first stays;
the duplicate's rows all go to the quarantine and the shard is not written; the kept shards of a
complete numbered set ``NAME-0000k-of-0000N`` are then renumbered 0..M-1 of M, so the copy has no
``index.numbering_gap``: ``ShardClean.written_as``, :func:`_renumbering`; in a ``save_to_disk`` folder
its ``state.json`` lists them under their new names). The dataset-level
rows are computed after the row-level drops are known: a leak whose training row is dropped anyway
is gone, and an eval row is not dropped for it. Every other dataset-level finding (and a duplicate
check that was not chosen) is reported as left in place (:class:`LeftInPlace`), with the rows it
still has in the copy where that is known; so is each shard-level finding at warn or error that the
drops did not remove (a row-level check not chosen, with its kept rows; a check clean cannot drop).

The quarantine sits in a dot-folder so that ``datacheck audit OUT`` audits the cleaned shards only
(discovery skips dot-folders) and ``index.json`` is metadata discovery ignores.

Each shard is rewritten by its format (:func:`datacheck.formats.registry.rewriter`, the
protocol's ``rewrite``; the row units, the byte copying of JSONL/CSV records, the table writing
of parquet/Arrow and the per-row content hashes that prove kept + quarantined == input are
:mod:`datacheck.formats.rewrite`'s); a format without one is refused before anything is written
(its reason: :func:`datacheck.formats.registry.refusal`). ``clean`` keeps the orchestration: the
drop set, the staging folder and its atomic rename, the quarantine location, the data index,
the Hugging Face metadata (``state.json`` parsed by :mod:`datacheck.io.hfmeta`) and the summary.
"""
from __future__ import annotations

import contextlib
import glob
import json
import os
import re
import shutil
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from datacheck.checks.dup.cross import across_shard_copies, assign_splits, split_overlap_rows
from datacheck.checks.dup.shard import duplicate_shard_groups
from datacheck.checks.index import SHARD_NAME, numbering_gap
from datacheck.derive.classlabel import with_declared_classes
from datacheck.derive.tokenizer import with_tokenizer_facts
from datacheck.engine.shard import audit_file
from datacheck.execute.audit import SpillingResults, finish_report
from datacheck.execute.setup import with_declared_splits
from datacheck.formats.discovery import discover
from datacheck.formats.registry import REWRITABLE, companions, rewriter
from datacheck.formats.rewrite import META_COLUMNS, RewriteJob, Rewritten, row_hashes
from datacheck.io.dataindex import IndexEntry, build_index, write_index
from datacheck.io.discover import DiscoveredShard
from datacheck.io.hashing import hash_file
from datacheck.io.hashspill import SpillFolder
from datacheck.io.hfmeta import read_state
from datacheck.io.outputs import make_temp_folder, os_error_message
from datacheck.io.safejson import JsonInputError, read_json_file
from datacheck.io.stores import is_url
from datacheck.model import catalog
from datacheck.model.config import Config
from datacheck.model.errors import DatacheckError, UsageError
from datacheck.model.findings import Finding
from datacheck.model.results import DatasetContext, ShardResult

__all__ = ["CleanResult", "ShardClean", "LeftInPlace", "clean", "default_drop", "row_hashes", "QUARANTINE_DIR",
           "META_COLUMNS", "INDEX_NAME", "DATASET_DROPS"]

#: Folder (inside ``out``) of the quarantine files; a dot-folder, so discovery skips it.
QUARANTINE_DIR = ".quarantine"
#: Name of the data index written into ``out``.
INDEX_NAME = "index.json"
#: The dataset-level checks whose rows ``--drop`` removes (see the module docstring): what each drops.
DATASET_DROPS = {
    "dup.split_overlap": "the eval/test rows whose content is in the training split (the training row stays)",
    "dup.exact_across_shards": "every copy of a row after its first (path order, within a split)",
    "dup.shard": "every shard whose bytes equal an earlier shard's (the first stays)",
}
#: Dataset-level checks whose finding a clean copy keeps as it is: it copies the shard names and
#: the columns unchanged (``index.numbering_gap``: the file names; ``schema.inconsistent``: the schemas).
_UNCHANGED_BY_CLEAN = ("index.numbering_gap", "schema.inconsistent")


@dataclass
class ShardClean:
    """The outcome for one input shard.

    Rows are counted as the audit reads them: ``input_rows == kept + quarantined`` (``kept`` is the
    cleaned shard's row count in ``OUT/index.json``). A JSONL line or CSV record that does not parse
    (``decode.bad_record``) is not a row: it is counted in ``bad_records``, and is never dropped
    silently: it is quarantined (its raw text in ``_datacheck_raw``) when ``decode.bad_record`` is
    dropped (the default drop) or its shard is a dropped duplicate (``dup.shard``), else copied into
    the cleaned shard as it is (``bad_records - bad_records_quarantined`` of them), where the copy's
    audit reports it again.

    Attributes:
        path: shard path relative to the input root (also its path inside ``out``, but ``written_as``).
        format: ``parquet`` | ``arrow`` | ``jsonl`` | ``csv`` | ``tsv``.
        input_rows: rows read from the input (the audit's row count).
        kept: rows written to the cleaned shard.
        dropped: rows and records that do not parse written to the quarantine, by reason: {check
            ID: count} (a row failing two checks counts under both; ``decode.bad_record`` counts records).
        quarantined: rows quarantined in total.
        bad_records: records of a JSONL/CSV input that do not parse (``decode.bad_record``; JSONL: lines).
        bad_records_quarantined: of those, the ones written to the quarantine (the others are copied
            as they are).
        bad_record_lines: the 1-based first lines of the first records that do not parse (the audit's
            ``decode.bad_record`` examples).
        unreadable: why the shard could not be read (it is then not copied), else None.
        blank_lines: blank lines of a JSONL/CSV input (not copied).
        duplicate_of: with ``--drop dup.shard``, the shard whose bytes this one repeats: every row
            (and record that does not parse) is quarantined and the shard is not written; else None.
        written_as: the kept shard's path inside ``out`` when it was renumbered (:func:`_renumbering`:
            ``train-00003-of-00004.parquet`` written as ``train-00002-of-00003.parquet`` once a
            duplicate shard of the set was not copied); None: written under ``path``.
    """

    path: str
    format: str
    input_rows: int = 0
    kept: int = 0
    quarantined: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    unreadable: str | None = None
    blank_lines: int = 0
    duplicate_of: str | None = None
    bad_records: int = 0
    bad_records_quarantined: int = 0
    bad_record_lines: tuple[int, ...] = ()
    written_as: str | None = None

    @property
    def bad_records_kept(self) -> int:
        """Records that do not parse copied into the cleaned shard as they are."""
        return self.bad_records - self.bad_records_quarantined

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "format": self.format, "input_rows": self.input_rows, "kept": self.kept,
                "quarantined": self.quarantined, "dropped": dict(sorted(self.dropped.items())),
                "unreadable": self.unreadable, "blank_lines": self.blank_lines, "duplicate_of": self.duplicate_of,
                "bad_records": self.bad_records, "bad_records_quarantined": self.bad_records_quarantined,
                "bad_record_lines": list(self.bad_record_lines), "written_as": self.written_as}


@dataclass(frozen=True)
class LeftInPlace:
    """A finding of the input that the cleaned copy may still have: a dataset-level finding, a
    shard-level one clean did not remove (one per check over the shards: a row-level check not dropped,
    ``left`` = its rows kept; a check clean cannot drop, such as ``schema.dtype``, ``left`` None), or one
    the drops make (``index.empty_shard``: a shard left with no row) or leave (``decode.bad_record``:
    records that do not parse copied as they are, ``left`` of them).

    Attributes:
        check: the check ID; ``severity``: after ``[policy]``; ``fails_policy``: it failed the gate
            (``--fail-on error``) on the input.
        count: the finding's count on the input; ``message``: its message.
        left: for ``dup.split_overlap`` and ``dup.exact_across_shards``: the rows of the finding's own
            shards (one finding per eval split or column group) the copy still has (computed on the
            kept rows); for ``dup.shard``, the duplicate shards kept; for
            the checks a copy does not change (:data:`_UNCHANGED_BY_CLEAN`), ``count``; else None
            (not known without auditing the copy).
    """

    check: str
    severity: str
    fails_policy: bool
    count: int
    message: str
    left: int | None

    @property
    def still_fails(self) -> bool | None:
        """True: the cleaned copy still fails the gate on this check; False: it no longer does;
        None: not known without auditing the copy."""
        if not self.fails_policy:
            return False
        return None if self.left is None else self.left > 0

    def to_dict(self) -> dict[str, Any]:
        return {"check": self.check, "severity": self.severity, "fails_policy": self.fails_policy,
                "count": self.count, "left": self.left, "still_fails": self.still_fails, "message": self.message}


@dataclass
class CleanResult:
    """What :func:`clean` wrote. ``index`` is the data index of the cleaned shards; ``metadata`` the
    Hugging Face ``save_to_disk`` files written (``state.json``, ``dataset_info.json``,
    ``dataset_dict.json``; relative POSIX paths inside ``out``)."""

    out: Path
    quarantine: Path
    index_path: Path
    drop: tuple[str, ...]
    shards: list[ShardClean]
    index: dict[str, Any]
    metadata: tuple[str, ...] = ()
    left_in_place: tuple[LeftInPlace, ...] = ()
    #: why a chosen dataset-level drop removed fewer rows than asked: its check's skipped reasons
    #: (``"dup.split_overlap: [splits] eval = 'ev*' matches no shard ..."``)
    notes: tuple[str, ...] = ()

    @property
    def kept(self) -> int:
        return sum(s.kept for s in self.shards)

    @property
    def quarantined(self) -> int:
        return sum(s.quarantined for s in self.shards)

    @property
    def input_rows(self) -> int:
        return sum(s.input_rows for s in self.shards)

    @property
    def bad_records(self) -> int:
        """JSONL/CSV records that do not parse, over every shard (not rows: see :class:`ShardClean`)."""
        return sum(s.bad_records for s in self.shards)

    @property
    def bad_records_quarantined(self) -> int:
        return sum(s.bad_records_quarantined for s in self.shards)

    def to_dict(self) -> dict[str, Any]:
        return {"out": str(self.out), "quarantine": str(self.quarantine), "index": str(self.index_path),
                "index_hash": self.index["index_hash"], "drop": list(self.drop),
                "input_rows": self.input_rows, "kept": self.kept, "quarantined": self.quarantined,
                "bad_records": self.bad_records, "bad_records_quarantined": self.bad_records_quarantined,
                "shards": [s.to_dict() for s in self.shards], "metadata": list(self.metadata),
                "left_in_place": [x.to_dict() for x in self.left_in_place], "notes": list(self.notes)}


# --------------------------------------------------------------------------------------------- drop set
def default_drop(cfg: Config) -> tuple[str, ...]:
    """The row-level checks (CHECKS.md level ``row``) whose severity is ``error`` after ``[policy]``."""
    out = []
    for cid, info in catalog.CATALOG.items():
        if info.level != "row":
            continue
        entry = cfg.policy.get(cid)
        if entry is not None and entry.ignore:
            continue
        sev = entry.severity if entry is not None and entry.severity is not None else info.severity
        if sev == "error":
            out.append(cid)
    return tuple(sorted(out))


def _drop_ids(drop: list[str] | None, cfg: Config) -> tuple[str, ...]:
    if not drop:
        return default_drop(cfg)
    for cid in drop:
        if not catalog.is_known(cid):
            raise UsageError(f"--drop {cid!r}: unknown check ID{catalog.unknown_hint(cid)}")
        if catalog.info(cid).level != "row" and cid not in DATASET_DROPS:
            rows = ", ".join(c for c, i in catalog.CATALOG.items() if i.level == "row")
            raise UsageError(f"--drop {cid!r}: clean cannot drop the rows of this {catalog.info(cid).level}-level "
                             f"check; it drops the rows of the row-level checks ({rows}) and of "
                             f"{', '.join(DATASET_DROPS)}")
    return tuple(sorted(set(drop)))


# --------------------------------------------------------------------------------------------- paths
def _inside(a: Path, b: Path) -> bool:
    return a == b or a.is_relative_to(b)


def _check_out(out: Path, folders: list[Path], files: list[Path]) -> None:
    """Refuse ``out`` when it is an input folder (a folder PATH, whose whole tree is the data), inside
    one or contains one; when it is an input file (a shard read, or a file PATH), inside one or
    contains one; or when it holds files. The folder of a file PATH (or of a glob) is not the input:
    ``clean data/train.jsonl --out data/clean`` writes beside the file, as a user asks."""
    for folder in folders:
        if _inside(out, folder) or _inside(folder, out):
            raise UsageError(f"--out {out}: refusing to write into the input folder {folder} (or a folder "
                             "inside it or containing it); choose a folder outside the input data")
    for f in files:
        if _inside(out, f) or _inside(f, out):
            raise UsageError(f"--out {out}: refusing to write over the input file {f} (or into a folder "
                             "containing it); choose a new folder beside or outside the input data")
    if out.exists():
        if not out.is_dir():
            raise UsageError(f"--out {out}: exists and is not a folder; refusing to overwrite it")
        if any(out.iterdir()):
            raise UsageError(f"--out {out}: the folder is not empty; refusing to write over existing files "
                             "(choose a new folder)")


# --------------------------------------------------------------------------------------------- per shard
def _fsync_write(path: Path, data: bytes) -> None:
    """Write the file ``path`` of the staging folder (its folder made), synced to disk: every file
    ``clean`` makes as bytes (JSONL/CSV shards and quarantines, the Hugging Face metadata); the
    staging folder is renamed to ``out`` only once all are written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())



def _reasons(failing_rows: dict[str, list[int]], drop: tuple[str, ...]) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for key, rows in failing_rows.items():
        if key.split(":", 1)[0] in drop:
            for r in rows:
                out.setdefault(int(r), []).append(key)
    return {r: sorted(v) for r, v in out.items()}


def _count(sc: ShardClean, reasons: list[str]) -> None:
    for cid in sorted({k.split(":", 1)[0] for k in reasons}):
        sc.dropped[cid] = sc.dropped.get(cid, 0) + 1


def _shard_counts(sc: ShardClean, got: Rewritten, res: ShardResult) -> None:
    """``sc``'s counts from the rewrite (``got``: records, rows among them) and the audit (``res``):
    rows as the audit read them, and apart from them the records that do not parse (see
    :class:`ShardClean`)."""
    rows = res.rows or 0
    sc.input_rows, sc.kept, sc.quarantined = rows, got.kept_rows, rows - got.kept_rows
    sc.bad_records = got.input_rows - rows
    sc.bad_records_quarantined = sc.bad_records - (got.kept - got.kept_rows)
    sc.blank_lines = got.blank_lines
    sc.bad_record_lines = tuple(ln for f in res.findings if f.check == "decode.bad_record"
                                and "blank_lines" not in f.details for ln in f.lines)  # not the blank lines' info


def _bad_records_left(cfg: Config, shards: list[ShardClean]) -> tuple[LeftInPlace, ...]:
    """``decode.bad_record`` on the copy: records that do not parse copied as they are (the check was
    not dropped), unless ``[policy]`` ignores the check."""
    left = [s for s in shards if s.bad_records_kept]
    entry = cfg.policy.get("decode.bad_record")
    if not left or (entry is not None and entry.ignore):
        return ()
    sev = entry.severity if entry is not None and entry.severity is not None else catalog.info("decode.bad_record").severity
    n = sum(s.bad_records_kept for s in left)
    where = "; ".join(f"{s.path}" + (f" line {', '.join(map(str, s.bad_record_lines[:5]))}"
                                     + (" ..." if s.bad_records > len(s.bad_record_lines[:5]) else "")
                                     if s.bad_record_lines else "") for s in left[:5])
    return (LeftInPlace(check="decode.bad_record", severity=sev, fails_policy=sev == "error",
                        count=sum(s.bad_records for s in left), left=n,
                        message=f"{n} record(s) that do not parse copied into the cleaned shards as they are "
                                f"({where}{' ...' if len(left) > 5 else ''})"),)


def _shard_findings_left(report_shards: Any, audited: list[ShardResult], drop: tuple[str, ...],
                         removed: dict[str, set[int]], duplicates: dict[str, str]) -> tuple[LeftInPlace, ...]:
    """The shard-level findings of the input (``report_shards``: the report's shards, policy applied) at
    warn or error that the written copy still has, one :class:`LeftInPlace` per check over all shards:
    a row-level check that was not dropped, ``left`` = its failing rows the copy keeps (rows dropped
    for other checks are gone; 0 rows left: not listed); a check clean cannot drop (``schema.dtype``,
    ``length.over_max``'s shard statistics, ...), ``left`` None (not known without auditing the copy).
    A dropped check's rows are all gone; ``decode.bad_record`` is :func:`_bad_records_left`'s; an
    unreadable shard or a duplicate shard not written has no copy."""
    failing = {r.path: r.failing_rows for r in audited if r.readable}
    found: dict[str, list[tuple[str, Finding, int | None]]] = {}
    for s in report_shards:
        if s.rows is None or s.path in duplicates or s.path not in failing:
            continue
        for f in s.findings:
            if f.severity not in ("warn", "error") or f.check in drop or f.check.startswith("decode."):
                continue
            rows = {int(r) for key, rs in failing[s.path].items() if key.split(":", 1)[0] == f.check for r in rs}
            left = len(rows - removed.get(s.path, set())) if rows else None
            if left != 0:
                found.setdefault(f.check, []).append((s.path, f, left))
    out = []
    for cid, items in sorted(found.items()):
        counts = [n for _, _, n in items]
        shards = sorted({p for p, _, _ in items})
        path, first, _ = items[0]
        more = f" (and {len(items) - 1} more finding(s); shards: {', '.join(shards[:5])}{' ...' if len(shards) > 5 else ''})" \
            if len(items) > 1 else ""
        out.append(LeftInPlace(
            check=cid, severity="error" if any(f.severity == "error" for _, f, _ in items) else "warn",
            fails_policy=any(f.fails_policy for _, f, _ in items), count=sum(f.count for _, f, _ in items),
            message=f"{path}: {first.message}{more}",
            left=None if any(n is None for n in counts) else sum(n for n in counts if n is not None)))
    return tuple(out)


# --------------------------------------------------------------------------------------------- HF metadata
def _json_obj(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``, or None when it cannot be read or is not an object."""
    try:
        data = read_json_file(path)
    except (OSError, JsonInputError):
        return None
    return data if isinstance(data, dict) else None


def _json_out(obj: dict[str, Any]) -> bytes:
    """JSON as ``datasets`` writes its metadata: 2-space indent, key order kept, UTF-8."""
    return json.dumps(obj, indent=2, ensure_ascii=False).encode("utf-8")


def _hf_metadata(root: Path, stage: Path, kept_rows: dict[str, int], renamed: dict[str, str]) -> list[str]:
    """Write the Hugging Face ``save_to_disk`` metadata of the cleaned splits into ``stage``.

    For each folder under ``root`` whose ``state.json`` lists ``_data_files`` (a split saved with
    ``Dataset.save_to_disk``) and of which at least one listed file was written:

    - ``state.json``: as in the input, with ``_data_files`` reduced to the listed files that were
      written (an unreadable shard is not copied, so it is not listed; nor is a duplicate shard of
      ``--drop dup.shard``), each under the name it was written as (``renamed``: a renumbered shard's
      entry keeps its place in the list and its other keys, its ``filename`` is the new name), so that
      ``datasets.load_from_disk`` opens exactly the files of the copy, in the input's order;
    - ``dataset_info.json``: as in the input, with ``splits.<split>.num_examples`` set to the kept
      rows of that split, for every split of the same ``DatasetDict`` that was cleaned here (the
      split is ``state.json`` ``_split``, else the folder name); copied unchanged when it is not a
      JSON object;
    - ``dataset_dict.json`` of the folder holding such splits: copied, its ``splits`` reduced to
      the split folders written.

    Args:
        root: the audited input root (relative shard paths are relative to it).
        stage: the output folder being written.
        kept_rows: {relative shard path: rows written to the cleaned shard}, for every shard written.
        renamed: {relative input path: relative path in the copy} of the renumbered shards
            (:func:`_renumbering`).

    Returns:
        The metadata files written, as POSIX paths relative to ``stage`` (sorted).
    """
    splits: list[tuple[str, Path, dict[str, Any], str]] = []  # (folder rel, input folder, new state, split)
    counts: dict[tuple[str, str], int] = {}  # (parent folder rel, split name) -> kept rows
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        if "state.json" not in filenames:
            continue
        here = Path(dirpath)
        st = read_state(here)
        if st is None:
            continue
        rel = here.relative_to(root).as_posix()
        prefix = "" if rel == "." else rel + "/"
        listed = [(f, name) for f, name in zip(st.files, st.names) if name is not None and prefix + name in kept_rows]
        if not listed:
            continue
        split = st.split or here.name
        parent = Path(rel).parent.as_posix() if rel != "." else ".."
        counts[(parent, split)] = sum(kept_rows[prefix + name] for _f, name in listed)
        files = [f if prefix + name not in renamed else {**f, "filename": renamed[prefix + name].rpartition("/")[2]}
                 for f, name in listed]
        splits.append((rel, here, {**st.state, "_data_files": files}, split))
    written: list[str] = []

    def put(rel_path: str, data: bytes) -> None:
        _fsync_write(stage / rel_path, data)
        written.append(rel_path)

    for rel, here, state, _split in splits:
        prefix = "" if rel == "." else rel + "/"
        put(prefix + "state.json", _json_out(state))
        info_path = here / "dataset_info.json"
        if not info_path.is_file():
            continue
        info = _json_obj(info_path)
        parent = Path(rel).parent.as_posix() if rel != "." else ".."
        if info is not None and isinstance(info.get("splits"), dict):
            info["splits"] = {name: ({**entry, "num_examples": counts[(parent, name)]}
                                     if isinstance(entry, dict) and (parent, name) in counts else entry)
                              for name, entry in info["splits"].items()}
            put(prefix + "dataset_info.json", _json_out(info))
        else:
            put(prefix + "dataset_info.json", info_path.read_bytes())
    parents = {Path(rel).parent.as_posix(): [] for rel, *_ in splits if rel != "."}
    for rel, *_ in splits:
        if rel != ".":
            parents[Path(rel).parent.as_posix()].append(Path(rel).name)
    for parent, names in sorted(parents.items()):
        src = (root / parent / "dataset_dict.json") if parent != "." else root / "dataset_dict.json"
        if not src.is_file():
            continue
        dd = _json_obj(src)
        target = "dataset_dict.json" if parent == "." else f"{parent}/dataset_dict.json"
        keep = dd.get("splits") if dd is not None else None
        if isinstance(keep, list) and all(isinstance(s, str) for s in keep) and not set(keep) <= set(names):
            put(target, _json_out({**dd, "splits": [s for s in keep if s in names]}))
        else:
            put(target, src.read_bytes())
    return sorted(written)


# --------------------------------------------------------------------------------------------- index
def _output_index(folder: Path, shards: list[tuple[str, int]]) -> dict[str, Any]:
    """The data index (``datacheck.io.dataindex`` layout, the same as ``datacheck index build``) of the
    cleaned shards under ``folder``: (relative POSIX path, rows) of each written shard."""

    entries = []
    for rel, rows in sorted(shards):
        chash, size = hash_file(folder / rel)
        entries.append(IndexEntry(path=rel, bytes=size, rows=rows, content_hash=chash))
    return build_index(entries)


# --------------------------------------------------------------------------------------------- clean
def _remove_stale_stages(out: Path) -> None:
    """Remove ``.OUT.tmp-PID-*`` staging folders next to ``out`` left by a killed ``clean`` (the process
    PID is gone); a folder of a live process (a concurrent clean) is left alone."""
    for d in out.parent.glob(f".{glob.escape(out.name)}.tmp-*"):
        m = re.match(rf"^\.{re.escape(out.name)}\.tmp-(\d+)-", d.name)
        if m is None or not d.is_dir() or d.is_symlink():
            continue
        try:
            os.kill(int(m.group(1)), 0)
            continue  # alive
        except ProcessLookupError:
            shutil.rmtree(d, ignore_errors=True)
        except (PermissionError, OverflowError, ValueError):
            continue


@contextlib.contextmanager
def _sigterm_as_exit() -> Iterator[None]:
    """While active, SIGTERM raises ``SystemExit(143)`` (128 + SIGTERM, the shell's convention) instead
    of killing the process outright, so the ``except BaseException`` cleanup of :func:`clean` removes
    its temporary output folder, as it does on Ctrl-C. The previous handler is restored on exit.
    Only in the main thread (Python delivers signals there) and only over the default action: a
    handler the caller set is kept (the CLI's raises ``Terminated``, a ``KeyboardInterrupt``: the
    same cleanup, then its one "terminated" line and exit 143, as for every verb)."""
    if threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def _exit(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, _exit)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


#: the shard formats ``clean`` rewrites (row units: :mod:`datacheck.formats.rewrite`): the
#: registry's rewritable format names (:data:`datacheck.formats.registry.REWRITABLE`)
CLEANABLE_FORMATS = tuple(REWRITABLE)


def _refuse_unwritable_formats(shards: list[DiscoveredShard]) -> None:
    """Refuse (before anything is written) shards whose format ``clean`` cannot rewrite: the read-only formats (Megatron ``.bin/.idx``, MosaicML MDS, WebDataset tar, litdata
    chunks), whose writers own their layout (offsets, index files, sample keys).

    Raises:
        UsageError: naming up to 5 such shards, their format and the remedy.
    """
    bad = [ds for ds in shards if ds.format not in CLEANABLE_FORMATS]
    if not bad:
        return
    names = ", ".join(f"{ds.rel} ({ds.format})" for ds in bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
    raise UsageError(f"datacheck clean rewrites parquet, Arrow, JSON Lines, JSON array, CSV/TSV and plain-text shards only; {len(bad)} shard(s) "
                     f"are in a format it reads but cannot write: {names}. Audit them with `datacheck audit`, list "
                     "the failing rows with `datacheck inspect --export rows.parquet`, and rebuild the shards with "
                     "the tool that wrote them (Megatron preprocess_data.py, MosaicML MDSWriter, webdataset's "
                     "TarWriter, litdata optimize); or pass only the cleanable shards to clean")


def _dataset_drops(dctx: DatasetContext, drop: tuple[str, ...], row_drops: dict[str, dict[int, list[str]]]
                   ) -> tuple[dict[str, dict[int, list[str]]], dict[str, str]]:
    """The rows the dataset-level checks of ``drop`` remove, given the row-level drops
    (``row_drops``: {shard path: {row: check keys}}): ({shard path: {row: [check ID]}}, {duplicate
    shard path: the shard it repeats}). ``dup.shard`` first (whole shards), then ``dup.split_overlap``
    and ``dup.exact_across_shards``, each on the rows left by the drops before it."""
    out: dict[str, dict[int, list[str]]] = {}
    removed: dict[str, set[int]] = {p: set(r) for p, r in row_drops.items()}
    duplicates: dict[str, str] = {}

    def add(cid: str, rows_of: dict[str, Any]) -> None:
        for path, rows in rows_of.items():
            for r in rows:
                out.setdefault(path, {}).setdefault(int(r), []).append(cid)
                removed.setdefault(path, set()).add(int(r))

    if "dup.shard" in drop:
        rows_of = {s.path: s.rows or 0 for s in dctx.shards}
        for _h, paths in duplicate_shard_groups(dctx.shards):
            for p in paths[1:]:
                duplicates[p] = paths[0]
                add("dup.shard", {p: range(rows_of[p])})
    if "dup.split_overlap" in drop:
        add("dup.split_overlap", split_overlap_rows(dctx, removed=removed))
    if "dup.exact_across_shards" in drop:
        add("dup.exact_across_shards", across_shard_copies(dctx, removed=removed))
    return out, duplicates


def _row_drops_not_run(skipped: Any, drop: tuple[str, ...], named: bool = True,
                       found: frozenset[str] = frozenset()) -> tuple[str, ...]:
    """The row-level checks of ``drop`` that could not run: nothing was dropped for them. ``named``
    (``--drop`` given): one note per check with its skipped reason (e.g. ``[tokens] vocab_size is not
    set``). The default drop (every row-level check of severity error) holds checks for every kind of
    data, most of which a dataset has no column for: one note naming them, without the reasons, whose
    hints ("set [columns] input_ids" for a text dataset) would not fit the data (``datacheck audit``
    lists each reason under ``skipped``). A check of ``found`` (it failed rows of some shard: a part
    of it ran, e.g. ``schema.nullable`` on a tabular shard's features without a schema) is never
    said to have dropped nothing: named, its note says that only a part of it ran."""
    why: dict[str, str] = {}
    for sk in skipped:
        cid = sk["check"]
        if cid in drop and cid not in DATASET_DROPS and cid not in why:
            why[cid] = str(sk["reason"])
    if not named:
        why = {cid: r for cid, r in why.items() if cid not in found}
        if not why:
            return ()
        return (f"{len(why)} of the default checks could not run on this data (no column or fact for them; "
                f"`datacheck audit` says why under 'skipped'), so nothing was dropped for them: "
                f"{', '.join(sorted(why))}",)
    return tuple(f"{cid}: the rows it found are dropped, but part of it could not run: {reason}" if cid in found
                 else f"{cid} could not run: {reason}: nothing dropped for it" for cid, reason in sorted(why.items()))


def _set_of(rel: str) -> tuple[str, str, str] | None:
    """(folder, NAME, extension) of a numbered shard path ``NAME-0000k-of-0000N.ext``, else None."""
    folder, _, name = rel.rpartition("/")
    m = SHARD_NAME.match(name)
    return None if m is None else (folder, m["prefix"], m["suffix"])


def _renumbering(inputs: list[str], duplicates: dict[str, str], kept: list[str], input_gaps: list[Finding]
                 ) -> dict[str, str]:
    """{input path: path in the copy} of the kept shards to rename so that a numbered shard set
    (``NAME-0000k-of-0000N``, :data:`~datacheck.checks.index.SHARD_NAME`) stays complete once its
    duplicate shards (``duplicates``, ``--drop dup.shard``) are not copied: the kept shards of the set,
    in number order, become ``NAME-00000-of-0000M`` ... ``NAME-(M-1)-of-0000M`` (M: the shards kept;
    the digits, separators and extension of the input's names kept), as a trainer that globs
    ``train-*`` or checks ``-of-N`` expects; the copy then has no ``index.numbering_gap``.

    A set is renumbered only when the input held it complete (every k in [0, N) audited, one N, no
    ``index.numbering_gap`` of the input on it: a gap the input already had stays, reported as left
    in place), every shard of it is written or a dropped duplicate (an unreadable shard, not copied,
    leaves its gap: renumbering would hide the missing data). A Hugging Face ``save_to_disk`` folder
    (``data-0000k-of-0000N.arrow``) is renumbered alike: its ``state.json`` is written with the new
    names (:func:`_hf_metadata`). ``inputs``: every audited shard path (relative); ``kept``: the shards
    written; ``input_gaps``: the input's ``index.numbering_gap`` findings."""
    groups: dict[tuple[str, str, str], dict[int, tuple[str, int, re.Match[str]]]] = {}
    counts: dict[tuple[str, str, str], set[int]] = {}
    for rel in inputs:
        folder, _, name = rel.rpartition("/")
        m = SHARD_NAME.match(name)
        if m is None:
            continue
        key = (folder, m["prefix"], m["suffix"])
        groups.setdefault(key, {})[int(m["i"])] = (rel, int(m["n"]), m)
        counts.setdefault(key, set()).add(int(m["n"]))
    gapped = {str(f.details.get("pattern")) for f in input_gaps}
    kept_set = set(kept)
    out: dict[str, str] = {}
    for key, by_i in sorted(groups.items()):
        folder, prefix, suffix = key
        pattern = f"{folder + '/' if folder else ''}{prefix}-*-of-*{suffix}"
        (n,) = counts[key] if len(counts[key]) == 1 else (None,)
        if n is None or sorted(by_i) != list(range(n)) or pattern in gapped:
            continue
        if not any(rel in duplicates for rel, _n, _m in by_i.values()) \
                or not all(rel in duplicates or rel in kept_set for rel, _n, _m in by_i.values()):
            continue  # no duplicate dropped, or a shard not copied (unreadable): its gap must stay seen
        left = [by_i[i] for i in sorted(by_i) if by_i[i][0] in kept_set]
        total = len(left)
        for j, (rel, _n, m) in enumerate(left):
            name = m.string
            wi, wn = len(m["i"]), len(m["n"])
            new = name[:m.start("i")] + f"{j:0{wi}d}" + name[m.end("i"):m.start("n")] + f"{total:0{wn}d}" \
                + name[m.end("n"):]
            out[rel] = f"{folder}/{new}" if folder else new
    return out


def _copy_gaps(copied: list[str]) -> list[Finding]:
    """``index.numbering_gap`` findings of the copy's own shard list (the shards written)."""
    ctx = SimpleNamespace(shards=[SimpleNamespace(path=p) for p in copied], root=None)
    return [f for f in numbering_gap(ctx) if isinstance(f, Finding)]


def _emptied(cfg: Config, shards: list[ShardClean], written: set[str]) -> tuple[LeftInPlace, ...]:
    """``index.empty_shard`` on the copy: shards with rows in the input that the drops left with none,
    written with 0 rows (``written``: the shards written; a ``.txt`` read by document, whose one row is
    the file, is not written: no shard of the copy), unless ``[policy]`` ignores the check."""
    empty = [s.path for s in shards if s.unreadable is None and s.duplicate_of is None and s.input_rows and not s.kept
             and s.path in written]
    entry = cfg.policy.get("index.empty_shard")
    if not empty or (entry is not None and entry.ignore):
        return ()
    sev = entry.severity if entry is not None and entry.severity is not None else catalog.info("index.empty_shard").severity
    return (LeftInPlace(check="index.empty_shard", severity=sev, fails_policy=sev == "error", count=0, left=len(empty),
                        message=f"every row of {len(empty)} shard(s) was dropped: the copy holds them with 0 rows "
                                f"({', '.join(empty[:5])}{' ...' if len(empty) > 5 else ''})"),)


def _left_in_place(findings: list[Finding], dctx: DatasetContext, drop: tuple[str, ...],
                   removed: dict[str, set[int]], duplicates: dict[str, str],
                   copied: list[str] | None = None, renamed: dict[str, str] | None = None
                   ) -> tuple[LeftInPlace, ...]:
    """The dataset-level findings of the input (``findings``, policy applied) at warn or error that
    the cleaned copy may still have (see :class:`LeftInPlace`); ``removed``: every row dropped
    ({shard path: rows}); ``duplicates``: the duplicate shards not written; ``copied``: the shards
    written, under their names in the copy (``index.numbering_gap`` is re-derived on them: its count
    and message are the copy's); ``renamed``: the renumbered shards (:func:`_renumbering`): the
    duplicates of their sets leave no gap."""
    gaps_now = _copy_gaps(copied) if copied is not None else None
    out = []
    for f in findings:
        if f.severity not in ("warn", "error") or f.check == "index.temp_file":  # temp files are never copied
            continue
        left: int | None = None
        mine = set(f.shards)  # one finding per eval split (or column group): only its own shards' rows
        if f.check == "dup.split_overlap":
            # with the rows of a shard in both splits, which no row drop removes
            left = sum(len(v) for p, v in split_overlap_rows(dctx, removed=removed, in_both=True).items() if p in mine)
        elif f.check == "dup.exact_across_shards":
            left = sum(len(v) for p, v in across_shard_copies(dctx, removed=removed).items() if p in mine)
        elif f.check == "dup.shard":  # a later copy left in place, unless its rows were all dropped anyway
            rows_of = {r.path: r.rows or 0 for r in dctx.shards}
            left = sum(1 for p in f.shards[1:] if p not in duplicates and len(removed.get(p, ())) < rows_of.get(p, 0))
        elif f.check in _UNCHANGED_BY_CLEAN:  # a duplicate shard not copied may add a numbering gap
            left = f.count + (sum(1 for p in duplicates if SHARD_NAME.match(Path(p).name))
                              if f.check == "index.numbering_gap" else 0)
        message = f.message
        if f.check == "index.numbering_gap" and gaps_now is not None:
            left = sum(g.count for g in gaps_now)
            message = "; ".join(g.message for g in gaps_now) or message
        if left == 0:  # removed (by its own drop or as a side effect of the others)
            continue
        out.append(LeftInPlace(check=f.check, severity=f.severity, fails_policy=f.fails_policy, count=f.count,
                               message=message, left=left))
    closed = {_set_of(p) for p in (renamed or {})}
    gaps = sorted(p for p in duplicates if _set_of(p) is not None and _set_of(p) not in closed)
    if gaps and not any(x.check == "index.numbering_gap" for x in out):  # a gap the drop itself made
        entry = dctx.cfg.policy.get("index.numbering_gap")
        if entry is None or not entry.ignore:
            sev = entry.severity if entry is not None and entry.severity is not None else \
                catalog.info("index.numbering_gap").severity
            made = "; ".join(g.message for g in gaps_now or [])
            out.append(LeftInPlace(
                check="index.numbering_gap", severity=sev, fails_policy=sev == "error", count=0,
                left=sum(g.count for g in gaps_now) if gaps_now else len(gaps),
                message=(f"the duplicate shard(s) not copied leave gaps in the numbered shard names: "
                         f"{', '.join(gaps[:5])}{' ...' if len(gaps) > 5 else ''}" + (f" ({made})" if made else ""))))
    return tuple(out)


#: ``progress(what, done, total)``: ``what`` names the step and shard (``"auditing a.parquet"``,
#: ``"writing a.parquet"``), ``done``/``total`` count steps (two per shard: audit, then write).
Progress = Callable[[str, int, int], None]


@_sigterm_as_exit()
def clean(paths: list[str] | str, out: str | Path, cfg: Config, *, drop: list[str] | None = None,
          progress: Progress | None = None) -> CleanResult:
    """Write cleaned copies of the shards under ``paths`` into ``out``, quarantining dropped rows.

    Args:
        paths: shard files, folders (recursive) or globs, as ``datacheck audit`` takes them.
        out: the output folder; must not exist yet (or be empty), and must be outside the input
            folder (not inside it, not containing it).
        cfg: the validated config (roles and facts decide which rows fail; ``[splits]`` which split a
            shard is in; without it, the splits a Hugging Face ``DatasetDict`` folder declares or the
            shards' names give by the Hub's split naming, as ``audit`` takes them).
        drop: check IDs whose failing rows are dropped: row-level checks and the dataset-level
            duplicate checks of :data:`DATASET_DROPS`. Default: every row-level check whose
            severity (after ``[policy]``) is ``error`` (:func:`default_drop`).
        progress: called before each shard is audited and before it is written (see :data:`Progress`).

    Returns:
        The :class:`CleanResult` (per shard: input rows, kept, quarantined, counts per reason;
        the Hugging Face ``save_to_disk`` metadata files written, see :func:`_hf_metadata`; the
        dataset-level findings left in place). A shard that cannot be read is listed with
        ``unreadable`` set and not copied.

    Raises:
        UsageError: a shard in a format clean cannot write (:data:`CLEANABLE_FORMATS`; nothing is written);
            an unknown ``drop`` ID, or a non-row-level one clean cannot drop; ``dup.split_overlap`` without
            ``[splits]``, a ``DatasetDict`` folder nor split names in the shards' names; ``out`` is inside/contains
            the input folder, is not empty, or is not writable; no shard found; ``[tokens] tokenizer`` cannot
            be loaded, or its count exceeds ``[tokens] vocab_size`` (ConfigError). The facts the
            config leaves unset are taken from the tokenizer as the audit takes them.
        InternalError: the written rows do not equal the input (nothing is renamed into place).
        SystemExit: SIGTERM arrived during the run (code 143) while it had its default action; as on
            Ctrl-C (KeyboardInterrupt) the temporary output folder is removed and ``out`` is not created.
    """
    if isinstance(paths, (str, Path)):
        paths = [str(paths)]
    cfg = with_tokenizer_facts(cfg)  # [tokens] tokenizer's facts, as the audit takes them
    drop_ids = _drop_ids(drop, cfg)
    disc = discover([str(p) for p in paths], cfg.dataset.format)
    cfg = with_declared_splits(cfg, disc)  # a DatasetDict's or the Hub's file names' splits, as the audit takes them
    cfg = with_declared_classes(cfg, disc)  # a ClassLabel's class count as [labels] num_classes, as the audit takes it
    if "dup.split_overlap" in drop_ids and not cfg.splits:
        raise UsageError("--drop dup.split_overlap drops the eval/test rows whose content is in the training split: "
                         "it needs [splits] in the config (e.g. train = \"train/*\", eval = \"eval/*\": globs of the "
                         "shard paths relative to the data's folder), a Hugging Face DatasetDict folder, whose "
                         "dataset_dict.json declares them, or shard names that name the splits as the Hugging Face Hub's "
                         "do (data/train-*, test/, validation.csv)")
    _refuse_unwritable_formats(disc.shards)
    out = Path(out).resolve()
    given = [Path(p).resolve() for p in paths if "*" not in str(p) and not is_url(str(p))]
    read = [] if disc.url_root is not None else [
        Path(f).resolve() for ds in disc.shards if ds.url is None
        for f in (str(ds.path), *companions(str(ds.path), ds.format))]
    _check_out(out, [p for p in given if p.is_dir()], [*(p for p in given if not p.is_dir()), *read])
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale_stages(out)
        stage = make_temp_folder(out.parent, f".{out.name}.tmp-{os.getpid()}-")  # 0o777 minus the umask
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot create it: {exc.strerror or exc}") from None
    tick = progress or (lambda _what, _done, _total: None)
    steps = 2 * len(disc.shards)
    spill: SpillFolder | None = None
    try:
        cross_shard = len(disc.shards) > 1 or bool(cfg.splits)
        # every shard's row hashes are held for the dataset stage: past spill_rows() rows, on disk
        # (in the staging folder, removed before it is renamed into place)
        spill = SpillFolder(stage) if cross_shard else None
        audited: list[ShardResult] = SpillingResults(spill)
        for k, ds in enumerate(disc.shards):
            tick(f"auditing {ds.rel}", k, steps)
            audited.append(audit_file(ds, cfg, keep_rows=True, cross_shard=cross_shard)[0])
        root = None if disc.url_root is not None else disc.root
        loader = disc.hub_splits()
        report = finish_report(cfg, audited, root=root, temp_files=disc.temp_files, fail_on="error",
                               shard_lists=disc.shard_lists(), loader=loader)
        dataset = list(report.dataset_findings)
        notes = tuple(f"{sk['check']}: {sk['reason']}" for sk in report.skipped
                      if sk["check"] in DATASET_DROPS and sk["check"] in drop_ids)
        dctx = DatasetContext(cfg=cfg, shards=audited, temp_files=list(disc.temp_files), root=root,
                              splits=assign_splits([r.path for r in audited], dict(cfg.splits)),
                              shard_lists=list(disc.shard_lists()), loader_splits=loader)
        row_drops = {r.path: _reasons(r.failing_rows, drop_ids) for r in audited if r.readable}
        found = frozenset(k.split(":", 1)[0] for reasons in row_drops.values() for keys in reasons.values()
                          for k in keys)
        notes += _row_drops_not_run(report.skipped, drop_ids, named=bool(drop), found=found)
        extra, duplicates = _dataset_drops(dctx, drop_ids, row_drops)
        results: list[ShardClean] = []
        written: list[tuple[str, int]] = []
        for k, (ds, res) in enumerate(zip(disc.shards, audited)):
            tick(f"writing {ds.rel}", len(disc.shards) + k, steps)
            sc = ShardClean(path=ds.rel, format=ds.format, duplicate_of=duplicates.get(ds.rel))
            results.append(sc)
            if not res.readable:
                sc.unreadable = next((f.details.get("reason") for f in res.findings
                                      if f.check == "decode.unreadable"), None) or "cannot be read"
                continue
            reasons = dict(row_drops[ds.rel])
            for r, cids in extra.get(ds.rel, {}).items():
                reasons[r] = sorted({*reasons.get(r, []), *cids})
            # a duplicate shard is not written: its records that do not parse go to the quarantine too
            job_drop = drop_ids if sc.duplicate_of is None else tuple(sorted({*drop_ids, "decode.bad_record"}))
            job = RewriteJob(source=ds.source, fmt=ds.format, rel=ds.rel, rows=res.rows or 0,
                             reasons=reasons, drop=job_drop, dataset=cfg.dataset)
            got = rewriter(ds.format)(job, stage / ds.rel, stage / QUARANTINE_DIR / ds.rel, _fsync_write)
            for why in got.reasons:
                _count(sc, why)
            _shard_counts(sc, got, res)
            if sc.duplicate_of is not None:  # every row quarantined (and verified): the shard is not written
                (stage / ds.rel).unlink(missing_ok=True)
                continue
            if not (stage / ds.rel).exists():  # a .txt read by document whose one row was dropped: no file
                continue
            written.append((ds.rel, got.kept_rows))
        tick("writing the data index", steps, steps)
        renamed = _renumbering([ds.rel for ds in disc.shards], duplicates, [rel for rel, _ in written],
                               [f for f in dataset if f.check == "index.numbering_gap"])
        for sc in results:
            if sc.path in renamed:
                os.replace(stage / sc.path, stage / renamed[sc.path])
                sc.written_as = renamed[sc.path]
        if renamed:
            notes += (f"{len(renamed)} kept shard(s) renumbered so that each numbered set is complete without the "
                      f"duplicate shard(s) not copied: "
                      + ", ".join(f"{a} -> {b}" for a, b in list(renamed.items())[:5])
                      + (" ..." if len(renamed) > 5 else ""),)
        removed = {p: set(r) | set(extra.get(p, {})) for p, r in row_drops.items()}
        left = _left_in_place(dataset, dctx, drop_ids, removed, duplicates,
                              [renamed.get(rel, rel) for rel, _ in written], renamed)
        left += _shard_findings_left(report.shards, audited, drop_ids, removed, duplicates)
        left += _emptied(cfg, results, {rel for rel, _ in written}) + _bad_records_left(cfg, results)
        metadata = _hf_metadata(disc.root, stage, dict(written), renamed)
        index = _output_index(stage, [(renamed.get(rel, rel), n) for rel, n in written])
        write_index(index, stage / INDEX_NAME)
        if spill is not None:
            spill.close()
        if out.exists():
            out.rmdir()  # empty (checked above)
        os.replace(stage, out)
    except BaseException as exc:
        if spill is not None:
            spill.close()
        shutil.rmtree(stage, ignore_errors=True)
        msg = os_error_message(f"--out {out}", exc) if isinstance(exc, Exception) else None
        if msg is not None and not isinstance(exc, DatacheckError):  # disk full, quota, permission
            raise UsageError(f"{msg} (the cleaned copy was not made; nothing partial is left)") from None
        raise
    return CleanResult(out=out, quarantine=out / QUARANTINE_DIR, index_path=out / INDEX_NAME, drop=drop_ids,
                       shards=results, index=index, metadata=tuple(metadata), left_in_place=left, notes=notes)
