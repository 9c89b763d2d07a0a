"""``datacheck.audit``: discover shards, hash them, audit each (one fused query per shard), run the
dataset-level checks in the merge, apply the policy, and build the report."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterable

import polars as pl

from datacheck.checks.all import load_families
from datacheck.checks.crossdup import assign_splits, crossdup_payload
from datacheck.checks.registry import Payload, ShardContext, dataset_items, unreadable_findings
from datacheck.contracts import load_contract
from datacheck.engine.shard import audit_shard
from datacheck.execute.cache import ShardCache
from datacheck.execute.setup import config_and_source
from datacheck.io.dataindex import read_index, resolve_index_path
from datacheck.io.discover import DiscoveredShard, Discovery, discover
from datacheck.io.hashing import hash_file
from datacheck.io.read import open_for_checks
from datacheck.io.readers import Unreadable
from datacheck.model import catalog
from datacheck.model.config import Config
from datacheck.model.constants import FAIL_ON
from datacheck.model.errors import ENGINE_ERRORS, UsageError
from datacheck.model.findings import Finding, Skipped
from datacheck.model.results import DatasetContext, ShardResult
from datacheck.report.build import build_report
from datacheck.report.model import Report

__all__ = ["audit", "audit_one", "audit_one_cached", "audit_shards", "finish_report", "hash_shards"]


def audit_one(ds: DiscoveredShard, cfg: Config, cross_shard: bool = True) -> ShardResult:
    """Hash and audit one shard (the unit of work an executor maps over shards)."""
    try:
        chash, size = hash_file(ds.path)
    except OSError as exc:
        return ShardResult(path=ds.rel, format=ds.format, content_hash="", bytes=0, rows=None,
                           findings=unreadable_findings(ds.rel, ds.format, f"cannot read file: {exc.strerror or exc}"))
    return audit_shard(ds, cfg, chash, size, cross_shard=cross_shard)


def audit_one_cached(ds: DiscoveredShard, cfg: Config, cache: Any, cross_shard: bool = True) -> ShardResult:
    """Hash one shard; answer from ``cache`` (a :class:`~datacheck.cache.ShardCache`) when it holds
    the result for these bytes, path, format and config (no shard data is read then), else audit
    it and store the result."""
    try:
        chash, size = hash_file(ds.path)
    except OSError:
        return audit_one(ds, cfg, cross_shard)  # not cacheable: audit_one reports the unreadable file
    key = cache.key(ds.rel, ds.format, chash, cross_shard=cross_shard)
    hit = cache.get(key, ds.rel)
    if hit is not None:
        return hit
    result = audit_shard(ds, cfg, chash, size, cross_shard=cross_shard)
    if not result.check_errors:  # a check that failed internally is retried next time, never replayed
        cache.put(key, result)
    return result


def audit_shards(disc: Discovery, cfg: Config,
                 progress: Callable[[str, int, int], None] | None = None,
                 cache: Any = None, cross_shard: bool = True) -> list[ShardResult]:
    """Map :func:`audit_one` over the discovered shards, in discovery order; with ``cache`` (a
    :class:`~datacheck.cache.ShardCache`), unchanged shards are answered from the cache.
    ``cross_shard=False`` (one shard, no splits, no --against) skips the row-hash payload that
    only the cross-shard checks need."""
    load_families()
    results: list[ShardResult] = []
    total = len(disc.shards)
    for k, ds in enumerate(disc.shards):
        results.append(audit_one(ds, cfg, cross_shard) if cache is None
                       else audit_one_cached(ds, cfg, cache, cross_shard))
        if progress is not None:
            progress(ds.rel, k + 1, total)
    return results


def finish_report(cfg: Config, results: list[ShardResult], *, root: Path | None, temp_files: list[str],
                  fail_on: str, index: Any = None, against: list[ShardResult] | None = None,
                  config_path: str | None = None, ignored: Iterable[dict[str, str]] = (),
                  allow_check_errors: bool = False) -> Report:
    """Run the dataset-level checks over ``results`` (in discovery order) and build the report.

    The single-job audit and ``datacheck merge`` of part reports both end here, so a merged
    report is the same as a single-job one. A dataset check function that raises is a check error
    (a ``skipped`` entry with ``error: true``; see :func:`~datacheck.report.build.build_report`);
    the findings it yielded before raising are dropped.
    """
    load_families()
    skipped: list[tuple[str, Skipped]] = [(r.path, s) for r in results for s in r.skipped]
    dctx = DatasetContext(cfg=cfg, shards=results, temp_files=list(temp_files), root=root,
                          splits=assign_splits([r.path for r in results], dict(cfg.splits)), index=index,
                          against=against)
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
    config_path: str | None = "derive",
    allow_check_errors: bool = False,
    follow_symlinks: bool = False,
) -> Report:
    """Audit the shards under ``paths`` and return the report.

    Args:
        paths: shard files, folders (searched recursively) or globs.
        config: a :class:`Config`, a path to ``datacheck.toml``, a dict of the same keys, or None:
            found as the CLI finds it (:func:`resolve_config_path`: ``./datacheck.toml``, else
            ``datacheck.toml`` in the one folder of ``paths`` or its parent, else the defaults).
        config_path: what the report's ``config_path`` says the config file was (a caller that
            loaded the file itself, like the CLI; None: no file); default ``"derive"``: the path
            given or found as ``config``, None for a :class:`Config` or dict.
        fail_on: ``"error"`` (default), ``"warn"`` or ``"never"``: the lowest severity that fails the gate.
        progress: called as ``progress(shard_path, done, total)`` after each shard.
        cache_dir: per-shard result cache folder (:mod:`datacheck.execute.cache`); None (default): no cache.
        prune_cache: after the audit, delete the cache entries it did not use (:meth:`ShardCache.prune`).
        against: another dataset (shard files, folders or globs) to compare with: rows of the audited
            data whose content also occurs there are ``dup.split_overlap`` (e.g. eval against train).
            Only its row content hashes are computed; its own defects are not reported.
        allow_check_errors: False (default): a check that fails internally (its polars query or its
            Python function raises) makes the report ``fail`` (``summary.check_errors``; the CLI exits 3).
            True: the status follows the findings only; the check errors are still listed in ``skipped``.
        follow_symlinks: False (default): a shard found through a symlink that leads outside the
            audited root is not read (listed under ``ignored``); True: it is read (a Hugging Face hub
            cache snapshot). See :func:`datacheck.io.discover.discover`.

    Returns:
        The :class:`Report`. It is not written anywhere; the CLI stores it.

    Raises:
        ConfigError: the config is invalid (before any shard is read).
        UsageError: a path does not exist, no shard was found, ``fail_on`` is unknown,
            ``cache_dir`` is read-only, or the ``[dataset] index`` file is missing, not JSON, of a
            newer format version or lists a path outside the audited root (all before any shard is read).
    """
    if fail_on not in FAIL_ON:
        raise UsageError(f"fail_on must be one of {FAIL_ON}, got {fail_on!r}")
    if isinstance(paths, (str, Path)):
        paths = [paths]
    cfg, source = config_and_source(config, paths)
    if config_path != "derive":
        source = config_path
    if cfg.dataset.schema_ is not None:  # a bad schema is a usage error (exit 2) before any shard is read

        load_contract(cfg.dataset.schema_)
    cache = None
    if cache_dir is not None:

        cache = ShardCache(cache_dir, cfg)
    disc: Discovery = discover([str(p) for p in paths], cfg.dataset.format, follow_symlinks=follow_symlinks)
    index = None
    if cfg.dataset.index is not None:  # a bad index is a usage error before any shard is read

        index = read_index(resolve_index_path(cfg.dataset.index, disc.root), disc.root)
    against_results = None
    if against is not None:

        against_results = hash_shards(discover([str(p) for p in ([against] if isinstance(against, (str, Path))
                                                                 else against)], cfg.dataset.format), cfg)
    cross_shard = len(disc.shards) > 1 or bool(cfg.splits) or against is not None
    results = audit_shards(disc, cfg, progress, cache=cache, cross_shard=cross_shard)
    if cache is not None and prune_cache:
        cache.prune()
    return finish_report(cfg, results, root=disc.root, temp_files=disc.temp_files, fail_on=fail_on,
                         index=index, against=against_results, config_path=source, ignored=disc.ignored_data,
                         allow_check_errors=allow_check_errors)


def hash_shards(disc: Any, cfg: Any) -> list[Any]:
    """Row content hashes of every shard of a discovery (the ``--against`` dataset): one query per
    shard computing only :func:`crossdup_payload`; no other check runs and nothing is reported for
    these shards. An unreadable shard gives a result with ``rows=None`` (it then matches nothing).

    Returns:
        ``ShardResult`` objects (``content_hash`` empty) carrying :data:`ROWS_KEY`/:data:`CONTENT_KEY` payloads.
    """
    out = []
    for ds in disc.shards:
        try:
            data = open_for_checks(ds, cfg)  # as the audited side reads its shards: same dtypes, same hashes
            ctx = ShardContext(cfg=cfg, roles=data.roles, schema=data.schema, shard=ds.rel)
            items = [i for i in crossdup_payload(ctx) if isinstance(i, Payload)]
            df = data.lf.select([pl.len().alias("__n")] + [i.expr.alias(i.key) for i in items]).collect()
        except (Unreadable, *ENGINE_ERRORS):  # unreadable, or the engine failed on it: it matches nothing
            out.append(ShardResult(path=ds.rel, format=ds.format, content_hash="", bytes=0, rows=None))
            continue
        payload = {i.key: i.post(df.get_column(i.key)[0]) for i in items}
        out.append(ShardResult(path=ds.rel, format=ds.format, content_hash="", bytes=0,
                               rows=int(df["__n"][0]), payload=payload))
    return out
