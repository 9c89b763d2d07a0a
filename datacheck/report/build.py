"""Report assembly: shard results + dataset findings -> a :class:`~datacheck.report.model.Report`,
with the policy applied. No orchestration here (that is :mod:`datacheck.execute`)."""
from __future__ import annotations

import datetime as _dt
from typing import Any, Iterable

from datacheck._version import __version__
from datacheck.checks.dup.in_shard import UNREAD_KEY
from datacheck.io.hashing import index_hash
from datacheck.io.rowhash import ROW_ENCODING
from datacheck.model.config import Config
from datacheck.model.findings import Finding, Skipped
from datacheck.model.results import ShardResult
from datacheck.model.roles import KEY_COLUMNS, ROLE_SPECS, row_content
from datacheck.model.stats import LABELS, LENGTHS, LabelCounts, LengthHistogram
from datacheck.report.model import Report, ShardReport, skipped_dicts
from datacheck.report.policy import apply_policy, check_totals, status_of

__all__ = ["build_report", "row_content_columns"]

#: how the row content's values are compared (report ``row_content.normalization``)
_NORMALIZATION = ("values, not storage (integers of any width and booleans as int64, float32 as float64, "
                  "categorical as string, fixed-size and large lists as lists, struct fields in name "
                  "order); numbers by value: a float that is an integer within int64 equals that "
                  "integer (1.0 = 1, -0.0 = 0; a scalar, or a list of numbers all of them integers), "
                  "every NaN equals NaN and no null; otherwise "
                  "exact values, null equals null; a row whose content is blank (reported by the empty "
                  "checks; a tabular row of null/NaN features only: schema.nullable, finite.nan) "
                  "repeats no row")


def _merged_stats(shards: list[ShardResult]) -> dict[str, Any]:
    """The dataset's stats: the exact sums of the shards' length histograms and label counts."""
    out: dict[str, Any] = {}
    lengths = LengthHistogram.merge(h for h in (LengthHistogram.of(s.stats) for s in shards) if h is not None)
    if lengths is not None:
        out[LENGTHS] = lengths.to_stat()
    labels = LabelCounts.merge(c for c in (LabelCounts.of(s.stats) for s in shards) if c is not None)
    if labels is not None and labels.counts:
        out[LABELS] = labels.to_stat()
    out["rows"] = sum(s.rows or 0 for s in shards)
    return out


def build_report(cfg: Config, results: list[ShardResult], dataset_findings: list[Finding],
                 skipped: list[tuple[str, Skipped]], fail_on: str, *, config_path: str | None = None,
                 ignored: Iterable[dict[str, str]] = (), allow_check_errors: bool = False) -> Report:
    """Apply the policy and assemble the :class:`Report` (``config_path`` and ``ignored`` are copied
    into the report's keys of the same names).

    Check errors (``Skipped`` entries with ``error=True``: a check's query or function raised) are
    counted in ``summary.check_errors`` (written only when > 0) and make the status ``fail``, unless
    ``allow_check_errors``: then the status follows the findings and the entries are still listed."""
    total_rows = sum(r.rows or 0 for r in results)
    shard_reports = []
    roles: dict[str, Any] = {}
    # what the report says was read: the readable shards whose row content was compared (a shard the
    # dup checks skipped, e.g. a declared content column it lacks, names no columns here)
    content = {r.path: row_content_columns(r) for r in results if r.readable and UNREAD_KEY not in r.payload}
    agreed = len({tuple(c) for c in content.values()}) <= 1
    # [policy] thresholds are held to each check's dataset-wide count and ratio (not one shard's)
    totals = check_totals((f for r in results for f in r.findings), dataset_findings, total_rows)
    for r in sorted(results, key=lambda r: r.path):
        fs = [p for p in (apply_policy(f, cfg, fail_on, r.rows, totals.get(f.check)) for f in r.findings)
              if p is not None]
        for k, v in r.roles.items():
            roles.setdefault(k, v)
        shard_reports.append(ShardReport(
            path=r.path, content_hash=r.content_hash, bytes=r.bytes, rows=r.rows, status=status_of(fs),
            format=r.format, findings=tuple(fs), stats=r.stats, columns=r.columns,
            row_content=None if agreed or r.path not in content else {"columns": content[r.path]},
            layout=(r.layout or {}).get("name"), layout_source=(r.layout or {}).get("source", ""),
            layout_why=(r.layout or {}).get("why", ""), not_applicable=len(r.not_applicable)))
    ds = [p for p in (apply_policy(f, cfg, fail_on, total_rows, totals.get(f.check)) for f in dataset_findings)
          if p is not None]
    ds.sort(key=lambda f: (f.check, f.column or "", f.shards))
    every = [f for s in shard_reports for f in s.findings] + ds
    summary = {
        "status": status_of(every),
        "shards": len(shard_reports),
        "rows": total_rows,
        "errors": sum(1 for f in every if f.severity == "error"),
        "warnings": sum(1 for f in every if f.severity == "warn"),
        "policy_failures": sum(1 for f in every if f.fails_policy),
    }
    check_errors = sum(1 for _shard, s in skipped if s.error)
    if check_errors:
        summary["check_errors"] = check_errors
        if not allow_check_errors:
            summary["status"] = "fail"
    # one list when every readable shard's rows are hashed over the same columns; else null here and
    # each shard entry says its own (never the first shard's columns stated for all)
    content_cols = next(iter(content.values()), []) if agreed else None
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
        row_content={"columns": content_cols, "encoding": ROW_ENCODING, "normalization": _NORMALIZATION},
        config_path=config_path,
        ignored=tuple(sorted((dict(i) for i in ignored), key=lambda i: i["path"])),
        tokenizer_facts=cfg.tokenizer_facts,
        label_facts=cfg.label_facts,
    )


def row_content_columns(r: ShardResult) -> list[str]:
    """The columns a shard's row content is made of (CHECKS.md "dup"; what ``dup.*`` hash per row,
    :func:`datacheck.checks.dup.in_shard.content_columns`): the columns of the roles marked ``content`` in
    :data:`~datacheck.model.roles.ROLE_TABLE`, in table order, without repeats (the class label
    included: the cross-shard checks hash it apart and compare it with the hash); all columns, in
    the shard's order, when the shard has no such role; every column but the answers (the label and
    the regression targets), then the answers, when they are its only such roles
    (:func:`datacheck.model.roles.row_content`).

    Args:
        r: a readable shard's result (``roles`` as :meth:`~datacheck.model.roles.Roles.to_dict` writes them).

    Returns:
        Column names (empty for a shard without columns).
    """
    cols: list[str] = []
    label = ((r.roles or {}).get("label") or {}).get("columns")
    for spec in ROLE_SPECS.values():
        v = (r.roles or {}).get(spec.name)
        if not spec.content or not v:
            continue
        c = v["columns"]
        for x in ([y for g in c for y in g] if spec.arity == "groups" else (c if isinstance(c, list) else [c])):
            if x not in cols:
                cols.append(x)
    target = ((r.roles or {}).get("target") or {}).get("columns") or []
    return (row_content(cols, label, list(r.columns), tuple(target)) if cols else
            [c for c in r.columns if c not in KEY_COLUMNS] or list(r.columns))
