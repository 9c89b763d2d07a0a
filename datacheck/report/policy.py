"""The gate's policy: ``[policy]`` severity overrides and thresholds applied to findings."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from datacheck.model.config import Config
from datacheck.model.findings import Finding, Severity

__all__ = ["CheckTotal", "apply_policy", "check_totals", "status_of"]


@dataclass(frozen=True)
class CheckTotal:
    """What a check's ``[policy]`` thresholds are held to over a whole dataset: ``count``, the sum of
    the counts of the check's findings (every shard and column, and its dataset-level findings), and
    ``ratio``, that count over the dataset's rows (None when the dataset has no rows). A check with
    dataset-level findings only (``dup.exact_across_shards``, ``dup.split_overlap``...) keeps each
    finding's own ratio (``ratio`` None here)."""

    count: int
    ratio: float | None


def check_totals(shard_findings: Iterable[Finding], dataset_findings: Iterable[Finding],
                 rows: int) -> dict[str, CheckTotal]:
    """Per check ID, the dataset-wide :class:`CheckTotal` of its findings: ``shard_findings`` (every
    shard's) and ``dataset_findings``, over ``rows`` rows (the readable shards' sum). The thresholds
    of ``[policy]`` are judged on these, so a gate's verdict does not depend on how the rows were cut
    into shards: with ``max_count = 10``, 100 shards of 9 empty texts each (900 in all) fail it,
    where a threshold held to each shard's count passed them."""
    counts: dict[str, int] = {}
    in_shards: set[str] = set()
    for f in shard_findings:
        counts[f.check] = counts.get(f.check, 0) + f.count
        in_shards.add(f.check)
    for f in dataset_findings:
        counts[f.check] = counts.get(f.check, 0) + f.count
    return {c: CheckTotal(n, (n / rows if rows else None) if c in in_shards else None) for c, n in counts.items()}


def apply_policy(f: Finding, cfg: Config, fail_on: str, rows: int | None,
                 total: CheckTotal | None = None) -> Finding | None:
    """Severity override and thresholds from ``[policy]``; None when the policy ignores the check.

    A finding fails the policy when its severity is at or above ``fail_on`` and its count exceeds
    ``max_count`` (if set) and its ratio exceeds ``max_ratio`` (if set). ``count == max_count`` passes.
    With ``total`` (:func:`check_totals`: the audit's report) the count and ratio held to the
    thresholds are the check's over the whole dataset, not this finding's; a ``total`` whose ratio
    is None keeps the finding's own ratio (or ``count / rows`` when it has none).
    """
    entry = cfg.policy.get(f.check)
    if entry is not None and entry.ignore:
        return None
    sev = f.severity
    if entry is not None and entry.severity is not None and not (f.severity == "info" and f.check.startswith("decode.")):
        sev = entry.severity
    fails = fail_on != "never" and Severity(sev).rank >= Severity(fail_on).rank
    if fails and entry is not None:
        count = f.count if total is None else total.count
        if entry.max_count is not None and count <= entry.max_count:
            fails = False
        ratio = f.ratio if f.ratio is not None else (f.count / rows if rows else None)
        if total is not None and total.ratio is not None:
            ratio = total.ratio
        if entry.max_ratio is not None and ratio is not None and ratio <= entry.max_ratio:
            fails = False
    return f.with_(severity=sev, fails_policy=fails)


def status_of(findings: Iterable[Finding]) -> str:
    findings = list(findings)
    if any(f.fails_policy for f in findings):
        return "fail"
    if any(f.severity in ("error", "warn") for f in findings):
        return "warn"
    return "pass"
