"""Splitting an audit across CI jobs: ``datacheck audit --num-parts N --part k``.

A shard belongs to part ``xxh3_64(relative path) mod N``: the assignment depends on the shard's own
path only, so it is deterministic on every machine and stable when shards are added (an existing
shard never moves to another part; a new shard lands in one part). Parts are numbered
``0 .. N-1``.

A part audit writes

- the *part report*: an ordinary report (``report_version`` 1) of the part's shards, with a
  ``part`` object ``{"num_parts", "part", "results_file", "results_digest"}``; the dataset-level
  checks are not run in a part (they need every shard) and the report's ``skipped`` says so;
- beside it, the *results sidecar* ``<report name without .json>.results.dcr``
  (``part.results_file`` names it): the part's shard results in the ``.dcr`` layout of
  :mod:`datacheck.execute.cache` (findings, stats, payloads such as row hashes), plus what the merge needs:
  the ordered list of every discovered shard (relative paths and sizes), the audited root
  (informational: parts from different checkouts of the same data merge), the temporary files
  seen, the files ignored as data, the config and where it came from, the content of the
  ``[dataset] index`` file (when set) and the code fingerprint. ``part.results_digest`` (xxh3-128
  of the sidecar's bytes) ties the two files together. Under ``cache`` the sidecar also records the
  key salt of the part's cache entries and, for each shard whose result a cache may hold, what the
  shard's key takes from other files (``context``; :func:`cache_record`, the same with or without
  ``--cache-dir``):
  ``datacheck merge --cache-dir`` stores every part's results under the keys a later audit looks
  up, so one cache serves every part, whichever part a renamed or renumbered shard lands in.

``datacheck merge`` (:mod:`datacheck.execute.merge`) reads the parts back and runs the dataset-level
checks over all shard results in discovery order, which gives the single-job report.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import polars as pl
import xxhash

from datacheck._version import __version__
from datacheck.execute.audit import audit_prepared, config_changes, reading_of
from datacheck.execute.cache import EncodeError, cache_salt, code_fingerprint, encode_results
from datacheck.execute.setup import AuditOptions, AuditSetup, prepare_audit
from datacheck.formats.registry import read_context
from datacheck.io.discover import Discovery
from datacheck.io.outputs import write_bytes_atomic, write_json_atomic
from datacheck.io.safejson import read_json_file
from datacheck.model.config import Config
from datacheck.model.errors import InternalError, UsageError
from datacheck.model.findings import Skipped
from datacheck.model.results import ShardResult
from datacheck.report.build import build_report
from datacheck.report.model import Report

__all__ = [
    "RESULTS_SUFFIX",
    "PART_KIND",
    "PartRun",
    "part_of",
    "check_part_args",
    "select_part",
    "sidecar_path",
    "audit_part",
    "write_part",
]

#: Suffix of the results sidecar that travels with a part report.
RESULTS_SUFFIX = ".results.dcr"
#: ``meta.kind`` of a part sidecar.
PART_KIND = "datacheck-part"


def part_of(rel: str, num_parts: int) -> int:
    """The part (``0 .. num_parts-1``) of the shard at relative POSIX path ``rel``: xxh3-64 of the
    UTF-8 path, modulo ``num_parts``."""
    return xxhash.xxh3_64_intdigest(rel.encode("utf-8")) % num_parts


def check_part_args(num_parts: int | None, part: int | None) -> tuple[int, int] | None:
    """Validate ``--num-parts``/``--part``; None when neither is given.

    Raises:
        UsageError: only one of them is given, ``num_parts < 1``, or ``part`` is outside ``0 .. num_parts-1``.
    """
    if num_parts is None and part is None:
        return None
    if num_parts is None or part is None:
        raise UsageError("--num-parts and --part go together: e.g. --num-parts 4 --part 0 (parts are numbered 0..N-1)")
    if num_parts < 1:
        raise UsageError(f"--num-parts must be at least 1, got {num_parts}")
    if not 0 <= part < num_parts:
        raise UsageError(f"--part {part} is out of range for --num-parts {num_parts}: parts are numbered "
                         f"0..{num_parts - 1}")
    return num_parts, part


def select_part(disc: Discovery, num_parts: int, part: int) -> Discovery:
    """The part's shards of ``disc`` (same root, temporary files and ignored files; order kept)."""
    return dataclasses.replace(disc, shards=[s for s in disc.shards if part_of(s.rel, num_parts) == part])


def sidecar_path(report_file: str | Path) -> Path:
    """``part-0.json`` -> ``part-0.results.dcr`` (same folder)."""
    p = Path(report_file)
    stem = p.name[:-5] if p.name.endswith(".json") else p.name
    return p.with_name(stem + RESULTS_SUFFIX)


@dataclass
class PartRun:
    """A part audit: the part report (without its ``part`` object yet) and the sidecar bytes."""

    report: Report
    sidecar: bytes
    meta: dict[str, Any]

    def report_for(self, report_file: str | Path) -> Report:
        """The part report as written at ``report_file`` (its ``part`` object names the sidecar)."""
        part = {
            "num_parts": self.meta["num_parts"],
            "part": self.meta["part"],
            "results_file": sidecar_path(report_file).name,
            "results_digest": "xxh3-128:" + xxhash.xxh3_128_hexdigest(self.sidecar),
        }
        return dataclasses.replace(self.report, part=part)


def audit_part(paths: list[str], cfg: Config, opts: AuditOptions, num_parts: int, part: int, *,
               progress: Callable[[str, int, int], None] | None = None,
               byte_progress: Callable[[str, int, int], None] | None = None) -> PartRun:
    """Audit part ``part`` of ``num_parts`` of the shards under ``paths``, with the same
    :class:`~datacheck.execute.setup.AuditOptions` the single-job audit takes
    (:func:`datacheck.execute.audit.run_audit`): discovery (``follow_symlinks``), cache, executor.

    Every shard is discovered (the merge needs the full ordered list, with each shard's size from
    the file system) but only the part's shards are hashed and read. Nothing in the sidecar that the
    merge compares depends on where the data is checked out: shard paths are relative to the
    audited root, and the ``[dataset] index`` file is named relative to it when it lies inside.
    ``opts.allow_check_errors`` decides the part report's status only (the merge takes its own).

    Raises:
        UsageError: bad part numbers, ``opts.against`` set (the whole dataset is compared in one
            job), a path that does not exist, no shard found, read-only cache.
    """
    check_part_args(num_parts, part)
    if opts.against:
        raise UsageError("--against cannot be combined with --num-parts/--part; audit the whole dataset with --against")
    given = cfg
    setup = prepare_audit(paths, cfg, opts)
    disc, cfg = setup.disc, setup.cfg
    index_doc = None
    if setup.index_path is not None:  # the merge gets the index file's content
        source = setup.index_path.absolute()
        source = (source.relative_to(disc.root).as_posix() if source.is_relative_to(disc.root)
                  else str(source))
        index_doc = {"source": source, "data": read_json_file(setup.index_path)}
    mine = select_part(disc, num_parts, part)
    contexts = _contexts(mine)  # what each shard's cache key takes from other files, before it is read
    results = audit_prepared(setup, mine, opts, progress=progress, byte_progress=byte_progress)
    skipped: list[tuple[str, Skipped]] = [(r.path, s) for r in results for s in r.skipped]
    skipped.append(("", Skipped("dataset", f"part {part} of {num_parts} (0-based): the dataset-level checks run "
                                           "in 'datacheck merge' over all parts")))
    report = build_report(cfg, results, [], skipped, opts.fail_on, config_path=opts.config_path,
                          ignored=disc.ignored_data, allow_check_errors=opts.allow_check_errors)
    # how this part got its shards' results (never in the JSON): the CLI's text summary says it as a
    # single-job audit does
    report = dataclasses.replace(report, reading=reading_of(len(mine.shards), setup.cache),
                                 config_changes=config_changes(given, cfg, opts.config_path))
    meta = {
        "kind": PART_KIND,
        "num_parts": num_parts,
        "part": part,
        "all_shards": [s.rel for s in disc.shards],
        "all_bytes": [_size(s.path) for s in disc.shards],
        "root": str(disc.root),  # where this part ran (informational: the merge never compares it)
        "config_path": opts.config_path,
        "ignored": list(disc.ignored_data),
        "temp_files": list(disc.temp_files),
        "shard_lists": disc.shard_lists(),
        "index": index_doc,
        "config": cfg.to_dict(),
        "tokenizer_facts": cfg.tokenizer_facts,
        "label_facts": cfg.label_facts,
        "config_hash": cfg.hash(),
        "fail_on": opts.fail_on,
        "datacheck_version": __version__,
        "code": code_fingerprint(),
        "polars": pl.__version__,
        "cache": cache_record(setup, mine, results, contexts),
    }
    try:
        sidecar = encode_results(results, meta=meta)
    except EncodeError as exc:
        raise InternalError(f"cannot store the part's shard results for the merge: {exc}") from None
    return PartRun(report=report, sidecar=sidecar, meta=meta)


def _contexts(shards: Discovery) -> list[str | None | OSError]:
    """Each shard's :func:`~datacheck.formats.registry.read_context` (the error when it cannot be read)."""
    out: list[str | None | OSError] = []
    for ds in shards.shards:
        try:
            out.append(read_context(ds.source, ds.format))
        except OSError as exc:
            out.append(exc)
    return out


def cache_record(setup: AuditSetup, mine: Discovery, results: list[ShardResult],
                 before: list[str | None | OSError]) -> dict[str, Any]:
    """What ``datacheck merge --cache-dir`` needs to store this part's results as cache entries
    (module docstring): ``{"salt", "cross_shard", "shards": {relative path: context}}``. ``salt`` is
    :func:`~datacheck.execute.cache.cache_salt` of the part's config (its cache's, when it has one);
    the shards are those a cache may hold: hashed and audited or answered (a shard that could not
    be read or changed while it was read has no content hash), without check errors, whose context
    (``before``: read before the audit) is the same after it. The same whether the part ran with a
    cache or not, so a part report does not depend on it."""
    salt = setup.cache.salt if setup.cache is not None else cache_salt(setup.cfg)
    after = _contexts(mine)
    shards: dict[str, str | None] = {}
    for ds, r, ctx, now in zip(mine.shards, results, before, after):
        if (r.path == ds.rel and r.content_hash and not r.check_errors and not isinstance(ctx, OSError)
                and not isinstance(now, OSError) and ctx == now):
            shards[ds.rel] = ctx
    return {"salt": salt, "cross_shard": True, "shards": shards}


def _size(path: Path) -> int | None:
    """The file's size in bytes from the file system (None: it cannot be stat'ed)."""
    try:
        return path.stat().st_size
    except OSError:
        return None


def write_part(run: PartRun, report_file: str | Path) -> Report:
    """Write the sidecar, then the part report at ``report_file`` (both atomically); returns the report."""
    report_file = Path(report_file)
    try:
        write_bytes_atomic(sidecar_path(report_file), run.sidecar)
    except OSError as exc:
        raise UsageError(f"cannot write {sidecar_path(report_file)}: {exc.strerror or exc}; choose a writable "
                         "location") from None
    rep = run.report_for(report_file)
    write_json_atomic(report_file, rep.to_json())
    return rep
