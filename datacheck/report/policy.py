"""The gate's policy: ``[policy]`` severity overrides and thresholds applied to findings."""
from __future__ import annotations

from typing import Iterable

from datacheck.model.config import Config
from datacheck.model.findings import Finding, Severity

__all__ = ["apply_policy", "status_of"]


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


def status_of(findings: Iterable[Finding]) -> str:
    findings = list(findings)
    if any(f.fails_policy for f in findings):
        return "fail"
    if any(f.severity in ("error", "warn") for f in findings):
        return "warn"
    return "pass"
