"""``datacheck.audit``: discover shards, hash them, audit each (one fused query per shard), run the
dataset-level checks in the merge, apply the policy, and build the report."""
from __future__ import annotations

import contextlib
import dataclasses
import os
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import numpy as np
import polars as pl

from datacheck.checks import all as _families  # noqa: F401 - every family registers its checks
from datacheck.checks.dup.cross import ROWS_KEY, assign_splits, crossdup_payload
from datacheck.checks.dup.near import NEAR_KEY
from datacheck.checks.registry import Payload, ShardContext, dataset_items, needed_derivations, unreadable_findings
from datacheck.derive.read import open_for_checks
from datacheck.engine.shard import audit_file
from datacheck.execute.cache import CacheStats, ShardCache
from datacheck.execute.executors import LocalExecutor, ProcessExecutor, WorkerDied, make_executor
from datacheck.execute.rerun import observe
from datacheck.execute.setup import (
    FROM_CONFIG,
    AuditOptions,
    AuditSetup,
    ConfigPathFrom,
    config_and_source,
    prepare_audit,
)
from datacheck.formats.discovery import discover
from datacheck.formats.parquetdecode import prefetch, release
from datacheck.formats.registry import companions, hash_shard, read_context
from datacheck.io.discover import DiscoveredShard, Discovery
from datacheck.io.hashing import file_state
from datacheck.io.hashspill import SpillFolder, spill_rows
from datacheck.io.outputs import check_output_folders
from datacheck.io.shardbytes import Unreadable
from datacheck.model import catalog
from datacheck.model.config import Config
from datacheck.model.environment import check_batch_rows, check_polars_threads, check_spill_rows
from datacheck.model.errors import ENGINE_ERRORS, InternalError, UsageError
from datacheck.model.findings import Finding, Skipped
from datacheck.model.results import DatasetContext, ShardResult
from datacheck.report.build import build_report
from datacheck.report.model import Report

__all__ = ["Probe", "ShardJob", "ShardOutcome", "audit", "run_audit", "audit_one", "audit_one_cached", "audit_shards",
           "audit_prepared", "finish_report", "hash_shards", "probe_cache", "run_job", "run_jobs", "tasks_of",
           "SpillingResults", "config_changes"]


def audit_one(ds: DiscoveredShard, cfg: Config, cross_shard: bool = True) -> ShardResult:
    """Hash and audit one shard (the unit of work an executor maps over shards); a shard that
    changes while it is read is ``decode.unreadable`` (:func:`~datacheck.engine.shard.audit_file`)."""
    return audit_file(ds, cfg, cross_shard=cross_shard)[0]


def audit_one_cached(ds: DiscoveredShard, cfg: Config, cache: Any, cross_shard: bool = True,
                     probe: "Probe | None" = None) -> ShardResult:
    """Hash one shard; answer from ``cache`` (a :class:`~datacheck.execute.cache.ShardCache`) when it holds
    the result for these bytes, path, format and config (no shard data is read then), else audit
    it and store the result. A shard that changed while it was read, or whose checks failed
    internally, is never stored.

    ``probe``: what :func:`probe_cache` found for this shard a moment ago (a miss): the cache is not
    asked again, and the bytes are not hashed again while the file's state is the probed one."""
    context = read_context(ds.source, ds.format)  # a litdata folder's index.json config

    def key(chash: str) -> str:
        return str(cache.key(ds.rel, ds.format, chash, cross_shard=cross_shard, context=context))

    if probe is not None:
        known = None if probe.content_hash is None else (probe.state, probe.content_hash, probe.size)
        result, how = audit_file(ds, cfg, cross_shard=cross_shard, known=known)
    else:
        result, how = audit_file(ds, cfg, cross_shard=cross_shard,
                                 lookup=lambda chash: cache.get(key(chash), ds.rel)
                                 or cache.get_moved(ds.rel, ds.format, chash, cross_shard=cross_shard,
                                                    context=context))
    if (how == "audited" and not result.check_errors  # a check error is retried next time, never replayed
            and read_context(ds.source, ds.format) == context):  # read under the context of its key
        cache.put(key(result.content_hash), result, cross_shard=cross_shard, context=context)
    return result


@dataclass(frozen=True)
class Probe:
    """What :func:`probe_cache` learned of one shard: its file state
    (:func:`~datacheck.io.hashing.file_state`), content hash and size (None, 0: not hashed, e.g. the
    file could not be read), and the cached result (None: a miss)."""

    state: tuple[Any, ...] | None
    content_hash: str | None
    size: int
    result: ShardResult | None


def probe_cache(ds: DiscoveredShard, cache: ShardCache, cross_shard: bool) -> Probe:
    """Look one shard up in ``cache`` in this process, before any worker starts: its file state,
    then its content hash (the recorded one when the cache may trust file states and they are
    unchanged: :meth:`~datacheck.execute.cache.ShardCache.known_hash`; else the bytes hashed), then
    the entry. A hit counts only when the file's state did not change meanwhile. The identity of a
    hashed local file is recorded for later audits
    (:meth:`~datacheck.execute.cache.ShardCache.remember`).

    Never raises for the shard: a file that cannot be stat-ed or read is a miss (its audit reports it)."""
    files = None if ds.url is not None else [*companions(str(ds.path), ds.format), str(ds.path)]
    try:
        before = file_state(ds.source)
        states = None if files is None else [before if f == files[-1] else file_state(f) for f in files]
        known = None if files is None or states is None else cache.known_hash(files, states)
        chash, size = known if known is not None else hash_shard(ds.source, ds.format)
        if files is not None and states is not None and file_state(ds.source) == before:
            if known is None:  # the bytes hashed are those of this state
                cache.remember(files, states, chash, size)
            if len(files) == 1:  # no companion: the shard's content hash is its file's (whole-audit memo)
                observe(files[0], before, chash)
    except OSError:
        return Probe(state=None, content_hash=None, size=0, result=None)
    try:
        context = read_context(ds.source, ds.format)
    except OSError:
        return Probe(state=None, content_hash=None, size=0, result=None)
    got = (cache.get(cache.key(ds.rel, ds.format, chash, cross_shard=cross_shard, context=context), ds.rel)
           or cache.get_moved(ds.rel, ds.format, chash, cross_shard=cross_shard, context=context))  # renamed
    if got is not None:
        try:
            unchanged = file_state(ds.source) == before
        except OSError:
            unchanged = False
        if not unchanged:
            got = None
    return Probe(state=before, content_hash=chash, size=size, result=got)


@dataclass(frozen=True)
class ShardJob:
    """One shard's work for an executor (picklable: it travels to a worker process).

    ``cache`` is a :meth:`~datacheck.execute.cache.ShardCache.worker_view` of the audit's cache
    (None: no cache); ``probe`` what :func:`probe_cache` found for the shard (a miss), or None."""

    shard: DiscoveredShard
    cfg: Config
    cache: ShardCache | None
    cross_shard: bool
    probe: Probe | None = None


@dataclass
class ShardOutcome:
    """What a job gives back: the result, the job's cache counters and used keys, and the
    warnings it raised as (category, message) pairs (re-raised in the parent, in shard order)."""

    result: ShardResult
    cache_stats: CacheStats | None = None
    cache_used: set[str] = field(default_factory=set)
    warnings: list[tuple[type[Warning], str]] = field(default_factory=list)


#: the configs of the jobs this process ran last (a pool worker's), at most :data:`_CONFIGS_KEPT`
_configs_seen: list[Config] = []
_CONFIGS_KEPT = 4


def seen_config(cfg: Config) -> Config:
    """``cfg``, or a config equal to it that a job of this process had (pydantic's ``==``: every
    field, private attribute and extra equal). Each task a pool worker receives carries the audit's
    config unpickled anew, and the engine memoizes a shard's check plan per config object
    (:func:`datacheck.engine.shard._plan_for`): with the config seen before, a plan is built once a
    worker, not once a task (8-10 ms CPU a task on a 5,000 x 256-token shard, measured on the 2-core
    development machine; comparing costs 0.04 ms)."""
    for seen in _configs_seen:
        if seen is cfg or (type(seen) is type(cfg) and seen == cfg):
            return seen
    _configs_seen.insert(0, cfg)
    del _configs_seen[_CONFIGS_KEPT:]
    return cfg


def run_job(job: ShardJob) -> ShardOutcome:
    """Audit one shard (answered from the job's cache when it holds the result; a miss is audited
    and its entry written atomically by this process), collecting the warnings it raises. The
    function the ``process`` executor runs in its workers (the job's config replaced by an equal
    one it had before: :func:`seen_config`)."""
    cfg = seen_config(job.cfg)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = (audit_one(job.shard, cfg, job.cross_shard) if job.cache is None
                  else audit_one_cached(job.shard, cfg, job.cache, job.cross_shard, job.probe))
    return ShardOutcome(result=result, cache_stats=None if job.cache is None else job.cache.stats,
                        cache_used=set() if job.cache is None else job.cache.used,
                        warnings=[(w.category, str(w.message)) for w in caught])


def run_jobs(jobs: list[ShardJob]) -> list[ShardOutcome]:
    """:func:`run_job` over a task of several small shards, in order (one worker task)."""
    out = []
    for job in jobs:
        if job.cache is not None:  # each outcome carries its own counters
            job = dataclasses.replace(job, cache=job.cache.worker_view())
        out.append(run_job(job))
    return out


#: the modules a pool worker's first shard imports lazily, imported once by the audit's process before
#: its workers are forked (:meth:`~datacheck.execute.executors.ProcessExecutor.map`), not once by each:
#: polars' import of ``numpy.ma`` (its first Series from a numpy array) and of its UDF inspection
#: (``polars._utils.udfs``, its first ``map_batches``), 14 and 4.5 ms; with :data:`FORMAT_PRELOAD`
#: 36 ms a worker on a folder of parquet shards (measured on the 2-core development machine)
WORKER_PRELOAD = ("numpy.ma", "polars._utils.udfs")
#: the modules a format's reader imports on its first shard (format name -> modules), preloaded as
#: :data:`WORKER_PRELOAD` when a shard of that format is audited by the pool: pyarrow's parquet
#: reader (``pyarrow.parquet`` with ``pyarrow.fs`` and ``pyarrow.compute``: 17 ms)
FORMAT_PRELOAD = {"parquet": ("pyarrow.parquet",)}

#: Small shards go to a worker together, in one task of about this many bytes of files (a task's
#: pickling, queueing and result transfer cost about a millisecond; a shard of a few MiB about 0.1 s).
TASK_BYTES = 16 << 20


def tasks_of(todo: list[int], sizes: list[int], workers: int) -> list[list[int]]:
    """Consecutive positions of ``todo`` grouped into tasks of at least :data:`TASK_BYTES` bytes
    (``sizes``), at most ``len(todo) // (4 * workers)`` shards a task (at least 1), so each worker
    still gets several tasks to balance the load; and towards the end at most ``left // (2 *
    workers)`` shards (at least 1; ``left``: the shards from the task's first one on), so the last
    tasks are single shards: a worker that runs out of tasks waits for the others at most about
    one shard, not one task of several (a folder of 100 shards of 3 MiB: the last tasks held 4-6
    shards, 0.2-0.4 s on one core while the other core idled)."""
    w = max(1, workers)
    most = max(1, len(todo) // (4 * w))
    tasks: list[list[int]] = []
    cur: list[int] = []
    held = cap = 0
    for at, k in enumerate(todo):
        if not cur:
            cap = min(most, max(1, (len(todo) - at) // (2 * w)))
        cur.append(k)
        held += sizes[k]
        if held >= TASK_BYTES or len(cur) >= cap:
            tasks.append(cur)
            cur, held = [], 0
    if cur:
        tasks.append(cur)
    return tasks


def shard_sizes(shards: list[DiscoveredShard]) -> list[int]:
    """The size in bytes of each shard (``os.stat``, links followed); 0 for one that cannot be
    stat-ed (it will be ``decode.unreadable``). The measure of :func:`audit_shards`' byte progress."""
    sizes = []
    for ds in shards:
        try:
            sizes.append(os.stat(ds.path).st_size)
        except OSError:
            sizes.append(0)
    return sizes


class _Spilling(list[ShardResult]):
    """The results list of :func:`audit_shards`: appending a result past the spill threshold
    spills its row-hash payload (see there)."""

    def __init__(self, spill: SpillFolder | None):
        super().__init__()
        self.spill, self.held, self.held_sig = spill, 0, 0
        self.limit = spill_rows() if spill is not None else 0

    def append(self, r: ShardResult) -> None:
        if self.spill is not None:
            rows = r.payload.get(ROWS_KEY)
            if isinstance(rows, pl.DataFrame):
                self.held += rows.height
                if self.held > self.limit:
                    for old in [*self, r]:
                        got = old.payload.get(ROWS_KEY)
                        if isinstance(got, pl.DataFrame):
                            old.payload[ROWS_KEY] = self.spill.spill(got)
            near = r.payload.get(NEAR_KEY)
            if isinstance(near, dict) and isinstance(near.get("sig"), np.ndarray):
                self.held_sig += near["sig"].shape[0]
                if self.held_sig * 32 > self.limit:  # a signature is 512 B, a row hash 16 B
                    for old in [*self, r]:
                        got = old.payload.get(NEAR_KEY)
                        if isinstance(got, dict) and type(got.get("sig")) is np.ndarray:
                            got["sig"] = self.spill.spill_array(got["sig"])
        super().append(r)


#: the results list that spills row-hash and signature payloads to a :class:`SpillFolder` past
#: :func:`~datacheck.io.hashspill.spill_rows` rows (``clean`` keeps every shard's result too)
SpillingResults = _Spilling


def audit_shards(disc: Discovery, cfg: Config,
                 progress: Callable[[str, int, int], None] | None = None,
                 cache: Any = None, cross_shard: bool = True, *, workers: int | None = 1,
                 executor: str | None = None, ray_address: str | None = None,
                 byte_progress: Callable[[str, int, int], None] | None = None,
                 spill: SpillFolder | None = None) -> list[ShardResult]:
    """Map :func:`audit_one` over the discovered shards; the results (and ``progress`` calls)
    come in discovery order whatever the executor. With ``cache`` (a
    :class:`~datacheck.execute.cache.ShardCache`), unchanged shards are answered from the cache.
    ``cross_shard=False`` (one shard, no splits, no --against) skips the row-hash payload that
    only the cross-shard checks need.

    ``workers`` and ``executor`` pick the executor (:func:`~datacheck.execute.executors.make_executor`):
    ``workers=1`` (default here) audits in this process; ``workers=None`` means one worker per core.
    ``ray_address``: the Ray cluster ``executor="ray"`` joins (None: Ray started in this process).

    ``byte_progress(shard_path, bytes_done, bytes_total)`` (sizes in bytes from the file system,
    :func:`shard_sizes`): in this process it is called before each shard is audited (``bytes_done``:
    the shards finished before it) and after it; with worker processes after each shard finishes,
    and neither callback before the workers started and the first of them gave an outcome (shards
    the cache answers ahead of it are reported then): a callback may start a thread, and the
    workers are forked only from a process with none of its own. The total is known from the first call, so a set of one big shard shows its size and which
    shard is being read, not an unknown count.

    ``spill`` (a :class:`~datacheck.io.hashspill.SpillFolder`): once the results hold more than
    :func:`~datacheck.io.hashspill.spill_rows` rows of row hashes, each arriving result's
    ``crossdup.rows`` payload is written there and replaced by its
    :class:`~datacheck.io.hashspill.SpilledRows` reference (after the cache stored it), so the
    results' memory does not grow with the dataset; past ``spill_rows() / 32`` rows of MinHash
    signatures (512 B a row) the ``neardup.minhash`` signatures are spilled too (column-major files).

    Raises:
        UsageError: a bad ``workers``/``executor`` combination.
        InternalError: a worker process died (the message names the shard it was auditing).
    """
    total = len(disc.shards)
    sizes = shard_sizes(disc.shards)
    probes: list[Probe | None] = ([probe_cache(ds, cache, cross_shard) for ds in disc.shards] if cache is not None
                                  else [None] * total)
    todo = [k for k, p in enumerate(probes) if p is None or p.result is None]
    for ds, p in zip(disc.shards, probes):
        if p is not None and p.result is not None and ds.url is None:
            release(ds.path)  # a prefetch of its batches (the CLI's, of one parquet shard) is not needed
    ex = make_executor(executor, workers, len(todo), ray_address=ray_address,
                       work_bytes=sum(sizes[k] for k in todo))
    results = _Spilling(spill)
    bytes_total, bytes_done = sum(sizes), 0

    def job(k: int) -> ShardJob:
        return ShardJob(shard=disc.shards[k], cfg=cfg, cache=None if cache is None else cache.worker_view(),
                        cross_shard=cross_shard, probe=probes[k])

    def outcomes() -> Iterator[ShardOutcome]:
        if isinstance(ex, LocalExecutor):  # the audit's own cache (its counters), warnings raised as they come
            for k in todo:
                ds = disc.shards[k]
                # one parquet shard: its first batches decoded while it is hashed, opened and planned
                with prefetch(ds.path) if len(todo) == 1 and ds.url is None and ds.format == "parquet" \
                        else contextlib.nullcontext():
                    out = ShardOutcome(result=audit_one(ds, cfg, cross_shard) if cache is None
                                       else audit_one_cached(ds, cfg, cache, cross_shard, probes[k]))
                yield out
        elif isinstance(ex, ProcessExecutor):
            tasks = tasks_of(list(range(len(todo))), [sizes[k] for k in todo], ex.workers)
            try:
                formats = sorted({disc.shards[k].format for k in todo})
                preload = [*WORKER_PRELOAD, *(m for f in formats for m in FORMAT_PRELOAD.get(f, ()))]
                for batch in ex.map(run_jobs, [[job(todo[j]) for j in t] for t in tasks], preload=preload):
                    yield from batch
            except WorkerDied as exc:  # positions of tasks -> positions in todo
                raise WorkerDied([j for t in exc.pending for j in tasks[t]], str(exc)) from None
        else:
            yield from ex.map(run_job, [job(k) for k in todo])

    done = outcomes()
    first: list[ShardOutcome] = []
    try:
        if todo and not isinstance(ex, LocalExecutor) and (progress is not None or byte_progress is not None):
            # the pool starts before any progress call: a call may start a thread (the CLI's bar starts its
            # display), and workers are forked only from a process with no thread of its own (fork_is_safe);
            # the shards the cache answers ahead of the first miss are reported with its outcome
            first.append(next(done))
        for k, ds in enumerate(disc.shards):
            if byte_progress is not None and isinstance(ex, LocalExecutor):
                byte_progress(ds.rel, bytes_done, bytes_total)
            p = probes[k]
            if p is not None and p.result is not None:
                results.append(p.result)
                cache.stats.answered += 1
            else:
                out = first.pop() if first else next(done)
                if cache is not None and out.cache_stats is not None:
                    cache.absorb(out.cache_stats, out.cache_used)
                for category, message in out.warnings:
                    warnings.warn(message, category, stacklevel=2)
                results.append(out.result)
            bytes_done += sizes[k]
            if byte_progress is not None:
                byte_progress(ds.rel, bytes_done, bytes_total)
            if progress is not None:
                progress(ds.rel, k + 1, total)
    except WorkerDied as exc:
        names = [disc.shards[todo[j]].rel for j in exc.pending if j < len(todo)]
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        raise InternalError(f"{exc} while auditing one of: {shown}; rerun with fewer --workers (each holds one "
                            "shard in memory) or --workers 1 to audit in this process") from None
    finally:
        done.close()
    return results


def finish_report(cfg: Config, results: list[ShardResult], *, root: Path | None, temp_files: list[str],
                  fail_on: str, index: Any = None, against: list[ShardResult] | None = None,
                  config_path: str | None = None, ignored: Iterable[dict[str, str]] = (),
                  allow_check_errors: bool = False, shard_lists: Iterable[str] = (), loader: Any = None) -> Report:
    """Run the dataset-level checks over ``results`` (in discovery order) and build the report.

    The single-job audit and ``datacheck merge`` of part reports both end here, so a merged
    report is the same as a single-job one. ``loader``: the splits ``load_dataset`` gives the shards
    (:meth:`datacheck.io.discover.Discovery.hub_splits`; None: worked out from ``root``). A dataset
    check function that raises is a check error
    (a ``skipped`` entry with ``error: true``; see :func:`~datacheck.report.build.build_report`);
    the findings it yielded before raising are dropped.
    """
    skipped: list[tuple[str, Skipped]] = [(r.path, s) for r in results for s in r.skipped]
    dctx = DatasetContext(cfg=cfg, shards=results, temp_files=list(temp_files), root=root,
                          splits=assign_splits([r.path for r in results], dict(cfg.splits)), index=index,
                          against=against, shard_lists=list(shard_lists), loader_splits=loader)
    dataset_findings: list[Finding] = []
    for item in dataset_items(dctx):
        if isinstance(item, Finding):
            dataset_findings.append(item)
        else:
            skipped.append(("", item))
    for f in dataset_findings:
        catalog.info(f.check)  # an unknown ID is a bug: fail loudly in tests
    return build_report(cfg, results, dataset_findings, skipped, fail_on, config_path=config_path, ignored=ignored,
                        allow_check_errors=allow_check_errors)


def audit(
    paths: str | Path | list[str | Path],
    config: Config | str | Path | dict | None = None,
    *,
    fail_on: str = "error",
    progress: Callable[[str, int, int], None] | None = None,
    cache_dir: str | Path | None = None,
    against: str | Path | list[str | Path] | None = None,
    prune_cache: bool = False,
    config_path: str | None | ConfigPathFrom = FROM_CONFIG,
    allow_check_errors: bool = False,
    workers: int | None = None,
    executor: str | None = None,
    follow_symlinks: bool = False,
    ray_address: str | None = None,
    byte_progress: Callable[[str, int, int], None] | None = None,
    trust_mtime: bool = False,
) -> Report:
    """Audit the shards under ``paths`` and return the report.

    Args:
        paths: shard files, folders (searched recursively) or globs.
        config: a :class:`Config`, a path to ``datacheck.toml``, a dict of the same keys, or None:
            found as the CLI finds it (:func:`~datacheck.execute.setup.resolve_config_path`: ``./datacheck.toml``, else
            ``datacheck.toml`` in the one folder of ``paths`` or its parent, else the defaults). With
            ``[tokens] tokenizer``, the ``[tokens]`` facts it leaves unset are taken from the tokenizer
            (:func:`~datacheck.derive.tokenizer.with_tokenizer_facts`; the report's ``tokenizer_facts``).
        config_path: what the report's ``config_path`` says the config file was (a caller that
            loaded the file itself, like the CLI; None: no file); default :data:`FROM_CONFIG`: the
            path given or found as ``config``, None for a :class:`Config` or dict.
        fail_on: ``"error"`` (default), ``"warn"`` or ``"never"``: the lowest severity that fails the gate.
        progress: called as ``progress(shard_path, done, total)`` after each shard.
        byte_progress: called as ``byte_progress(shard_path, bytes_done, bytes_total)`` before and
            after each shard (sizes from the file system; see :func:`audit_shards`): the measure of a
            progress bar over a few big shards.
        cache_dir: per-shard result cache folder (:mod:`datacheck.execute.cache`); None (default): no cache.
        prune_cache: after the audit, delete the cache entries it did not use (:meth:`ShardCache.prune`).
        trust_mtime: with ``cache_dir``, take the content hash recorded for a local shard file whose
            size, modification and status-change times and inode are unchanged instead of reading its
            bytes (:mod:`datacheck.execute.cache`, "File identities"); False (default): every shard is
            hashed.
        against: another dataset (shard files, folders or globs) to compare with: rows of the audited
            data whose content also occurs there are ``dup.split_overlap`` (e.g. eval against train).
            Only its row content hashes are computed; its own defects are not reported.
        allow_check_errors: False (default): a check that fails internally (its polars query or its
            Python function raises) makes the report ``fail`` (``summary.check_errors``; the CLI exits 3).
            True: the status follows the findings only; the check errors are still listed in ``skipped``.
        workers: worker processes auditing shards in parallel; None (default): ``$DATACHECK_WORKERS``,
            else one per core (:func:`~datacheck.execute.executors.default_workers`); 1: in this process.
            Never more than the number of shards. The report is the same for any number.
        executor: ``"local"`` (this process), ``"process"`` (a spawned process pool), ``"ray"`` (one Ray
            task per shard, retried when its worker dies; the ``datacheck[ray]`` extra) or None
            (default: ``process`` when more than one worker has a shard, else ``local``).
        ray_address: with ``executor="ray"``, the Ray cluster to join (``ray.init(address=...)``); None:
            Ray is started in this process with ``workers`` CPUs and stopped after the shards.
        follow_symlinks: False (default): a shard found through a symlink that leads outside the
            audited root is not read (listed under ``ignored``); True: it is read (a Hugging Face hub
            cache snapshot). See :func:`datacheck.formats.discovery.discover`.

    The keyword arguments become one :class:`~datacheck.execute.setup.AuditOptions` (see
    :func:`run_audit`), the value a part audit takes too.

    Returns:
        The :class:`Report`. It is not written anywhere; the CLI stores it.

    Raises:
        ConfigError: the config is invalid (before any shard is read), or its ``[tokens] vocab_size``
            is below the count of its ``[tokens] tokenizer``; ``POLARS_MAX_THREADS`` is set to
            a value polars cannot use (before any polars query), or ``DATACHECK_BATCH_ROWS`` to one that
            is not a whole number >= 1, or ``DATACHECK_SPILL_ROWS`` to one that is not a whole number
            >= 0 (:mod:`datacheck.model.environment`).
        UsageError: ``paths`` or ``config`` is of another type (e.g. ``audit(123)``), a path does not
            exist, no shard was found, ``fail_on`` is unknown, ``workers``/``executor``/``ray_address`` are bad
            (``OptionalDependencyError`` for ``executor="ray"`` without ray),
            ``cache_dir`` is read-only, the ``[dataset] index`` file is missing, not JSON, of a
            newer format version or lists a path outside the audited root, or ``[tokens] tokenizer``
            does not load (all before any shard is read).
        OutOfMemory: memory ran out while a shard was decoded or checked (the message names it and says
            what to do: fewer ``workers``, smaller batches); never reported as an unreadable shard.
    """
    check_polars_threads()  # before any polars query: polars panics on POLARS_MAX_THREADS=0
    check_batch_rows()  # before any shard is read: a shard failing on it would be cached as unreadable
    check_spill_rows()
    if isinstance(paths, (str, Path)):
        paths = [paths]
    if not isinstance(paths, (list, tuple)) or not all(isinstance(p, (str, Path)) for p in paths):
        raise UsageError(f"paths must be a path (str or pathlib.Path) or a list of them, got {paths!r} "
                         f"({type(paths).__name__}): e.g. datacheck.audit('data/') or datacheck.audit(['a.parquet'])")
    if config is not None and not isinstance(config, (Config, str, Path, dict)):
        raise UsageError(f"config must be a path to datacheck.toml, a dict of its keys, a Config or None, got "
                         f"{type(config).__name__}")
    cfg, source = config_and_source(config, paths)
    others = [] if against is None else [against] if isinstance(against, (str, Path)) else list(against)
    opts = AuditOptions(fail_on=fail_on, config_path=source if config_path is FROM_CONFIG else config_path,
                        cache_dir=cache_dir, prune_cache=prune_cache, trust_mtime=trust_mtime,
                        allow_check_errors=allow_check_errors,
                        workers=workers, executor=executor, ray_address=ray_address, follow_symlinks=follow_symlinks,
                        against=tuple(str(p) for p in others))
    return run_audit(list(paths), cfg, opts, progress=progress, byte_progress=byte_progress)


def run_audit(paths: list[str | Path], cfg: Config, opts: AuditOptions, *,
              progress: Callable[[str, int, int], None] | None = None,
              byte_progress: Callable[[str, int, int], None] | None = None) -> Report:
    """The single-job audit of the shards under ``paths`` with the validated ``cfg`` and ``opts``
    (what :func:`audit` and ``datacheck audit`` run; a part audit takes the same ``opts``).

    Raises:
        UsageError, ConfigError: as :func:`audit` (all before any shard is read).
    """
    given = cfg
    setup = prepare_audit(paths, cfg, opts)
    disc, index, cfg = setup.disc, setup.index, setup.cfg
    # the --against dataset is found now (a bad path fails before any shard is read) and hashed after
    # the audited shards: its polars queries start polars' thread pool in this process, and a process
    # pool's workers are forked only from a process without one (executors.fork_is_safe)
    others = (discover(list(opts.against), cfg.dataset.format, follow_symlinks=opts.follow_symlinks)
              if opts.against else None)
    if others is not None:
        refuse_shared_files(disc, others, opts.against)
    cross_shard = len(disc.shards) > 1 or bool(cfg.splits) or bool(opts.against)
    spill = _spill_folder([str(p) for p in paths]) if cross_shard else None
    try:
        results = audit_prepared(setup, disc, opts, progress=progress, byte_progress=byte_progress,
                                 cross_shard=cross_shard, spill=spill)
        against_results = hash_shards(others, cfg, same_size_as=disc) if others is not None else None
        # shards in an object store: the dataset checks get no root (they read no local file there)
        report = finish_report(cfg, results, root=None if disc.url_root is not None else disc.root,
                             temp_files=disc.temp_files, fail_on=opts.fail_on, index=index, against=against_results,
                             config_path=opts.config_path, ignored=disc.ignored_data, shard_lists=disc.shard_lists(),
                             allow_check_errors=opts.allow_check_errors, loader=disc.hub_splits())
        return dataclasses.replace(report, reading=reading_of(len(disc.shards), setup.cache),
                                   config_changes=config_changes(given, cfg, opts.config_path))
    finally:
        if spill is not None:
            spill.close()


def config_changes(given: Config, used: Config, config_path: str | None) -> tuple[str, ...] | None:
    """What changed the defaults of the config an audit ran with, for the report's in-memory
    ``config_changes`` (:meth:`Config.default_changes`): ``given`` is the config as the caller gave it,
    ``used`` after the splits and classes the data gave; None with a config file (the line names it)."""
    if config_path is not None:
        return None
    return used.default_changes(in_memory=given.set_beyond_defaults())


def reading_of(shards: int, cache: ShardCache | None) -> dict[str, int | None]:
    """How an audit got its ``shards`` results (:attr:`datacheck.report.model.Report.reading`):
    ``{"shards", "read", "from_cache"}`` (counts of shards); ``from_cache`` is None without a cache.
    A shard not answered from the cache was read (hashed and audited; an unreadable one too)."""
    answered = None if cache is None else cache.stats.answered
    return {"shards": shards, "read": shards - (answered or 0), "from_cache": answered}


def audit_prepared(setup: AuditSetup, shards: Discovery, opts: AuditOptions, *,
                   progress: Callable[[str, int, int], None] | None = None,
                   byte_progress: Callable[[str, int, int], None] | None = None,
                   cross_shard: bool = True, spill: SpillFolder | None = None) -> list[ShardResult]:
    """Audit ``shards`` (``setup.disc``, or a part's selection of it) with ``setup``'s config and
    cache and ``opts``' executor (:func:`audit_shards`), then prune the cache when
    ``opts.prune_cache``: the one shard loop of the single-job audit and of a part audit."""
    results = audit_shards(shards, setup.cfg, progress, cache=setup.cache, cross_shard=cross_shard,
                           workers=opts.workers, executor=opts.executor, ray_address=opts.ray_address,
                           byte_progress=byte_progress, spill=spill)
    if setup.cache is not None and opts.prune_cache:
        setup.cache.prune()
    return results


def _spill_folder(paths: list[str]) -> SpillFolder | None:
    """A fresh spill folder for row-hash payloads in the system temp folder (``$TMPDIR``), or None
    (payloads stay in memory) when that folder lies inside the audited data or cannot be written:
    datacheck never writes among the data it audits."""
    tmp = tempfile.gettempdir()
    try:
        check_output_folders({"spill": tmp}, paths)
        return SpillFolder(tmp)
    except (UsageError, OSError):
        return None


def _file_id(ds: DiscoveredShard) -> tuple[Any, ...] | None:
    """What makes two discovered shards one path given twice: a store object's URL; a local file's
    device and inode together with the device and inode of its folder and its name (case folded, for
    case-insensitive file systems): one file reached through the same folder under the same name,
    however the folder is spelled (relative, absolute, through a symlinked folder). A hard link, or a
    file symlink followed by ``--follow-symlinks``, under another name or in another folder is another
    path: its rows are compared as data. None when it cannot be stat'ed."""
    if ds.url is not None:
        return ("url", ds.url)
    try:
        st, parent = os.stat(ds.path), os.stat(ds.path.parent)
    except OSError:
        return None
    return ("file", st.st_dev, st.st_ino, parent.st_dev, parent.st_ino, ds.path.name.casefold())


def refuse_shared_files(disc: Discovery, others: Discovery, against: Iterable[str] = ()) -> None:
    """Refuse an ``--against`` dataset that holds the paths the audit itself reads (``audit DATA --against
    DATA``, or a folder holding the audited shards; :func:`_file_id`): each such shard would be
    compared with itself and every one of its rows counted as a ``dup.split_overlap`` leak. A
    config mistake, said before any shard is read. Byte-identical files under other paths (a copy,
    a hard link, a file symlink followed: content-addressed caches such as DVC's or the Hugging Face
    hub's give one file to identical splits) are a real leak, named in that finding.

    Raises:
        UsageError: naming up to 5 shared shards (audited path, ``--against`` path, content hash) and
            how many there are.
    """
    mine = {fid: ds for ds in disc.shards if (fid := _file_id(ds)) is not None}
    shared = [(mine[fid], ds) for ds in others.shards if (fid := _file_id(ds)) is not None and fid in mine]
    if not shared:
        return
    named = []
    for a, b in shared[:5]:
        try:
            chash = hash_shard(a.source, a.format)[0]
        except OSError:
            chash = "content hash not read"
        named.append(f"{a.rel} = against:{b.rel} ({chash})")
    more = f" and {len(shared) - 5} more" if len(shared) > 5 else ""
    raise UsageError(
        f"--against {' '.join(against)}".rstrip()
        + f": {len(shared)} of its {len(others.shards)} shard(s) are shards this audit reads: {'; '.join(named)}{more}. "
        "Each would be compared with itself and every row of it reported as a train/eval leak "
        "(dup.split_overlap). Give --against the training shards only, or compare the splits of one folder "
        "with [splits] in datacheck.toml (e.g. train = \"train/*\", eval = \"eval/*\")")


def hash_shards(disc: Any, cfg: Any, same_size_as: Discovery | None = None) -> list[Any]:
    """Row content hashes of every shard of a discovery (the ``--against`` dataset): one query per
    shard computing only :func:`crossdup_payload`; no other check runs and nothing is reported for
    these shards. An unreadable shard gives a result with ``rows=None`` (it then matches nothing).
    With ``same_size_as`` (the audited shards), a local shard whose file has the size of an audited
    local shard's also gets its content hash (``dup.split_overlap`` names the shards whose bytes are
    the same on both sides); the others keep an empty one (their bytes are not read twice).

    Returns:
        ``ShardResult`` objects (``content_hash`` empty unless computed as above) carrying
        :data:`ROWS_KEY`/:data:`~datacheck.checks.dup.cross.CONTENT_KEY` payloads.
    """
    sizes = set()
    for a in (same_size_as.shards if same_size_as is not None else ()):
        if a.url is None:
            with contextlib.suppress(OSError):
                sizes.add(os.stat(a.path).st_size)
    out = []
    for ds in disc.shards:
        chash, size = "", 0
        if sizes and ds.url is None:
            with contextlib.suppress(OSError):
                if os.stat(ds.path).st_size in sizes:
                    chash, size = hash_shard(ds.path, ds.format)
        try:
            # as the audited side reads its shards: same dtypes, same hashes
            data = open_for_checks(ds, cfg, derive=needed_derivations())
            ctx = ShardContext(cfg=cfg, roles=data.roles, schema=data.schema, shard=ds.rel)
            items = [i for i in crossdup_payload(ctx) if isinstance(i, Payload)]
            df = data.lf.select([pl.len().alias("__n")] + [i.expr.alias(i.key) for i in items]).collect()
        except (Unreadable, *ENGINE_ERRORS) as exc:  # unreadable, or the engine failed on it: it matches nothing
            why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__  # said in dup.split_overlap's skip
            out.append(ShardResult(path=ds.rel, format=ds.format, content_hash=chash, bytes=size, rows=None,
                                   findings=unreadable_findings(ds.rel, ds.format, why)))
            continue
        payload = {i.key: i.post(df.get_column(i.key)[0]) for i in items}
        salt = f"against\0{ds.rel}\0{chash}"  # never an audited shard's salt (its content hash)
        for i in items:  # rows with a cell read as null for a reported value, or of blank content: match none
            if i.unmatched is not None:
                unread = [data.retyped[c] for c in i.not_retyped if c in data.retyped]
                rows = np.unique(np.concatenate(unread)) if unread else np.empty(0, dtype=np.int64)
                payload[i.key] = i.unmatched(payload[i.key], rows, salt)
        out.append(ShardResult(path=ds.rel, format=ds.format, content_hash=chash, bytes=size,
                               rows=int(df["__n"][0]), payload=payload))
    return out
