"""``datacheck.audit``: discover shards, hash them, audit each (one fused query per shard), run the
dataset-level checks in the merge, apply the policy, and build the report."""
from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from datacheck import catalog
from datacheck._version import __version__
from datacheck.checks import DATASET_CHECKS, load_families
from datacheck.checks.length import histogram_summary
from datacheck.config import Config, config_from_dict, load_config
from datacheck.findings import Finding, Severity, Skipped
from datacheck.hashing import hash_file, index_hash
from datacheck.io.discover import DiscoveredShard, Discovery, discover
from datacheck.report import Report, ShardReport, skipped_dicts
from datacheck.runner import ShardResult, audit_shard

__all__ = ["audit", "resolve_config_path", "describe_config", "audit_one", "audit_one_cached", "audit_shards",
           "finish_report", "DatasetContext", "apply_policy", "build_report"]

FAIL_ON = ("error", "warn", "never")


@dataclass
class DatasetContext:
    """What dataset-level checks see: the config, every shard result, and the discovery."""

    cfg: Config
    shards: list[ShardResult]
    temp_files: list[str] = field(default_factory=list)
    root: Path | None = None
    #: shard path -> split name from ``[splits]`` (shards matching no glob are absent)
    splits: dict[str, str] = field(default_factory=dict)
    #: the committed ``[dataset] index`` (:class:`~datacheck.dataindex.DataIndex`), read before any shard
    index: Any = None
    #: shard results of the ``--against`` dataset (hash payloads only), or None
    against: list[ShardResult] | None = None

    def readable_shards(self) -> list[ShardResult]:
        return [s for s in self.shards if s.readable]


def resolve_config_path(given: str | Path | None, paths: Iterable[str | Path]) -> str | None:
    """The config file every entry point uses (CLI commands and :func:`audit` with ``config=None``).

    Order: ``given`` (``--config``); else ``./datacheck.toml`` in the working folder; else, when all
    ``paths`` lie in one folder (one folder PATH, or files of one folder), ``datacheck.toml`` in that
    folder, then in its parent (a case folder with ``data/`` inside: the config travels with the
    data); else None (the defaults). Globs count by the folder before their first wildcard.

    Args:
        given: the ``--config`` value, or None.
        paths: the PATH arguments as given (files, folders or globs).

    Returns:
        The path as given or joined from the PATH (relative stays relative), or None for defaults.
    """
    from datacheck.config import DEFAULT_CONFIG_NAME

    if given is not None:
        return str(given)
    if Path(DEFAULT_CONFIG_NAME).is_file():
        return DEFAULT_CONFIG_NAME
    folders = set()
    for arg in (str(p) for p in paths):
        if any(ch in arg for ch in "*?["):
            cut = min(arg.index(ch) for ch in "*?[" if ch in arg)
            base = arg[:cut]
            folders.add(Path(base) if base.endswith(("/", "\\")) or not base else Path(base).parent)
        else:
            p = Path(arg)
            folders.add(p if p.is_dir() else p.parent)
    if len(folders) != 1:
        return None
    (folder,) = folders
    for cand in (folder, folder.parent):
        f = cand / DEFAULT_CONFIG_NAME
        if f.is_file():
            return str(f)
        if cand == cand.parent:
            break
    return None


def describe_config(source: str | None, config_hash: str | None = None) -> str:
    """The line each command prints at the top of its output: ``"config: <file>"``; without a file
    ``"config: none (defaults)"``, or ``"config: none (given in memory)"`` when ``config_hash`` (a report's) is not
    that of the defaults (a :class:`Config` or dict passed to :func:`audit`)."""
    if source:
        return f"config: {source}"
    if config_hash is not None and config_hash != Config().hash():
        return "config: none (given in memory)"
    return "config: none (defaults)"


def _coerce_config(config: Config | str | Path | dict | None) -> Config:
    return _config_and_source(config)[0]


def _config_and_source(config: Config | str | Path | dict | None, paths: Iterable[str | Path] = ()
                       ) -> tuple[Config, str | None]:
    """(validated config, the file it came from or None). A :class:`Config` or a dict given in memory
    has no file (None); ``config=None`` resolves like the CLI (:func:`resolve_config_path` over
    ``paths``), None again when no file is found (the defaults).

    Raises:
        ConfigError: the file is missing, not TOML, or has a bad key.
    """
    if isinstance(config, Config):
        return config, None
    if isinstance(config, dict):
        return config_from_dict(config, source="config"), None
    source = resolve_config_path(config, paths)
    return (load_config(source) if source is not None else Config()), source


def apply_policy(f: Finding, cfg: Config, fail_on: str, rows: int | None) -> Finding | None:
    """Severity override and thresholds from ``[policy]``; None when the policy ignores the check.

    A finding fails the policy when its severity is at or above ``fail_on`` and its count exceeds
    ``max_count`` (if set) and its ratio exceeds ``max_ratio`` (if set). ``count == max_count`` passes.
    """
    entry = cfg.policy.get(f.check)
    if entry is not None and entry.ignore:
        return None
    sev = f.severity
    if entry is not None and entry.severity is not None and not (f.severity == "info" and f.check.startswith("decode.")):
        sev = entry.severity
    fails = fail_on != "never" and Severity(sev).rank >= Severity(fail_on).rank
    if fails and entry is not None:
        if entry.max_count is not None and f.count <= entry.max_count:
            fails = False
        ratio = f.ratio if f.ratio is not None else (f.count / rows if rows else None)
        if entry.max_ratio is not None and ratio is not None and ratio <= entry.max_ratio:
            fails = False
    return f.with_(severity=sev, fails_policy=fails)


def _status(findings: Iterable[Finding]) -> str:
    findings = list(findings)
    if any(f.fails_policy for f in findings):
        return "fail"
    if any(f.severity in ("error", "warn") for f in findings):
        return "warn"
    return "pass"


def _merged_stats(shards: list[ShardResult]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    hist: dict[Any, int] = {}
    unit = col = None
    labels: dict[Any, int] = {}
    lcol = None
    for s in shards:
        L = s.stats.get("lengths")
        if L:
            unit, col = L["unit"], L["column"]
            for v, c in L["histogram"]:
                hist[v] = hist.get(v, 0) + c
        lab = s.stats.get("labels")
        if lab:
            lcol = lab["column"]
            for v, c in lab["counts"]:
                key = v if v is not None else None
                labels[key] = labels.get(key, 0) + c
    if hist:
        h = sorted([[k, v] for k, v in hist.items()])
        out["lengths"] = {"column": col, "unit": unit, "histogram": h, **histogram_summary(h)}
    if labels:
        out["labels"] = {"column": lcol, "counts": sorted([[k, v] for k, v in labels.items()],
                                                          key=lambda p: (p[0] is None, str(type(p[0])), p[0] if p[0] is not None else 0))}
    out["rows"] = sum(s.rows or 0 for s in shards)
    return out


def build_report(cfg: Config, results: list[ShardResult], dataset_findings: list[Finding],
                 skipped: list[tuple[str, Skipped]], fail_on: str, *, config_path: str | None = None,
                 ignored: Iterable[dict[str, str]] = ()) -> Report:
    """Apply the policy and assemble the :class:`Report` (``config_path`` and ``ignored`` are copied
    into the report's keys of the same names)."""
    total_rows = sum(r.rows or 0 for r in results)
    shard_reports = []
    roles: dict[str, Any] = {}
    for r in sorted(results, key=lambda r: r.path):
        fs = [p for p in (apply_policy(f, cfg, fail_on, r.rows) for f in r.findings) if p is not None]
        for k, v in r.roles.items():
            roles.setdefault(k, v)
        shard_reports.append(ShardReport(
            path=r.path, content_hash=r.content_hash, bytes=r.bytes, rows=r.rows, status=_status(fs),
            format=r.format, findings=tuple(fs), stats=r.stats, columns=r.columns))
    ds = [p for p in (apply_policy(f, cfg, fail_on, total_rows) for f in dataset_findings) if p is not None]
    ds.sort(key=lambda f: (f.check, f.column or "", f.shards))
    every = [f for s in shard_reports for f in s.findings] + ds
    summary = {
        "status": _status(every),
        "shards": len(shard_reports),
        "rows": total_rows,
        "errors": sum(1 for f in every if f.severity == "error"),
        "warnings": sum(1 for f in every if f.severity == "warn"),
        "policy_failures": sum(1 for f in every if f.fails_policy),
    }
    content_cols = next((list(r.roles and _content(r) or []) for r in results if r.readable), [])
    return Report(
        datacheck_version=__version__,
        created_at=_dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
        index_hash=index_hash([(r.path, r.content_hash) for r in results]),
        config_hash=cfg.hash(),
        fail_on=fail_on,
        roles=roles,
        summary=summary,
        shards=tuple(shard_reports),
        dataset_findings=tuple(ds),
        skipped=tuple(skipped_dicts(skipped)),
        stats=_merged_stats(results),
        row_content={"columns": content_cols, "normalization": "none: exact values, null equals null"},
        config_path=config_path,
        ignored=tuple(sorted((dict(i) for i in ignored), key=lambda i: i["path"])),
    )


def _content(r: ShardResult) -> list[str]:
    cols: list[str] = []
    for name, v in r.roles.items():
        c = v["columns"]
        for x in ([y for g in c for y in g] if name == "aligned" else (c if isinstance(c, list) else [c])):
            if x not in cols:
                cols.append(x)
    return cols or list(r.columns)


def audit_one(ds: DiscoveredShard, cfg: Config, cross_shard: bool = True) -> ShardResult:
    """Hash and audit one shard (the unit of work an executor maps over shards)."""
    try:
        chash, size = hash_file(ds.path)
    except OSError as exc:
        return ShardResult(path=ds.rel, format=ds.format, content_hash="", bytes=0, rows=None,
                           findings=[Finding(check="decode.unreadable", severity="error",
                                             message=f"{ds.rel}: cannot read file: {exc.strerror or exc}",
                                             details={"reason": str(exc)})])
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
                  config_path: str | None = None, ignored: Iterable[dict[str, str]] = ()) -> Report:
    """Run the dataset-level checks over ``results`` (in discovery order) and build the report.

    The single-job audit and ``datacheck merge`` of part reports both end here, so a merged
    report is the same as a single-job one.
    """
    load_families()
    skipped: list[tuple[str, Skipped]] = [(r.path, s) for r in results for s in r.skipped]
    from datacheck.checks.crossdup import assign_splits

    dctx = DatasetContext(cfg=cfg, shards=results, temp_files=list(temp_files), root=root,
                          splits=assign_splits([r.path for r in results], dict(cfg.splits)), index=index,
                          against=against)
    dataset_findings: list[Finding] = []
    for _family, fn in DATASET_CHECKS:
        for item in fn(dctx):
            if isinstance(item, Finding):
                dataset_findings.append(item)
            else:
                skipped.append(("", item))
    for f in dataset_findings:
        catalog.info(f.check)  # an unknown ID is a bug: fail loudly in tests
    return build_report(cfg, results, dataset_findings, skipped, fail_on, config_path=config_path, ignored=ignored)


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
        cache_dir: per-shard result cache folder (:mod:`datacheck.cache`); None (default): no cache.
        prune_cache: after the audit, delete the cache entries it did not use (:meth:`ShardCache.prune`).
        against: another dataset (shard files, folders or globs) to compare with: rows of the audited
            data whose content also occurs there are ``dup.split_overlap`` (e.g. eval against train).
            Only its row content hashes are computed; its own defects are not reported.

    Returns:
        The :class:`Report`. It is not written anywhere; the CLI stores it.

    Raises:
        ConfigError: the config is invalid (before any shard is read).
        UsageError: a path does not exist, no shard was found, ``fail_on`` is unknown,
            ``cache_dir`` is read-only, or the ``[dataset] index`` file is missing, not JSON, of a
            newer format version or lists a path outside the audited root (all before any shard is read).
    """
    from datacheck.errors import UsageError

    if fail_on not in FAIL_ON:
        raise UsageError(f"fail_on must be one of {FAIL_ON}, got {fail_on!r}")
    if isinstance(paths, (str, Path)):
        paths = [paths]
    cfg, source = _config_and_source(config, paths)
    if config_path != "derive":
        source = config_path
    if cfg.dataset.schema_ is not None:  # a bad schema is a usage error (exit 2) before any shard is read
        from datacheck.contracts import load_contract

        load_contract(cfg.dataset.schema_)
    cache = None
    if cache_dir is not None:
        from datacheck.cache import ShardCache

        cache = ShardCache(cache_dir, cfg)
    disc: Discovery = discover([str(p) for p in paths], cfg.dataset.format)
    index = None
    if cfg.dataset.index is not None:  # a bad index is a usage error before any shard is read
        from datacheck.dataindex import read_index, resolve_index_path

        index = read_index(resolve_index_path(cfg.dataset.index, disc.root), disc.root)
    against_results = None
    if against is not None:
        from datacheck.checks.crossdup import hash_shards

        against_results = hash_shards(discover([str(p) for p in ([against] if isinstance(against, (str, Path))
                                                                 else against)], cfg.dataset.format), cfg)
    cross_shard = len(disc.shards) > 1 or bool(cfg.splits) or against is not None
    results = audit_shards(disc, cfg, progress, cache=cache, cross_shard=cross_shard)
    if cache is not None and prune_cache:
        cache.prune()
    return finish_report(cfg, results, root=disc.root, temp_files=disc.temp_files, fail_on=fail_on,
                         index=index, against=against_results, config_path=source, ignored=disc.ignored_data)
