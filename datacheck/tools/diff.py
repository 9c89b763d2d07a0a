"""Comparing two reports of a dataset (``datacheck diff OLD NEW``): what changed between data versions.

- Shards: added (path only in NEW), removed (only in OLD), changed (same path, other content hash),
  renamed (a path only in OLD and a path only in NEW with the same content hash: the same bytes
  moved, neither added nor removed; several such paths are paired in sorted order).
- Findings, keyed by (shard path or ``dataset``, check ID, column), a renamed shard's OLD findings
  under its NEW path (a rename alone never makes a finding new nor resolves one); counts of findings
  sharing a key are summed: *new* (key only in NEW), *resolved* (only in OLD), *grown* (count went up),
  *reduced* (count went down). A shard that NEW could not read (``rows`` None: ``decode.unreadable``)
  resolves none of its OLD findings, nor a dataset-level finding that named it: they are *unchecked*
  (not known in NEW), and its stats are not
  compared (no stats were measured). A finding that counts no rows (``decode.unreadable``: count 0) is
  shown without counts (``-`` in markdown), never as ``0 -> 0``.
- New policy failures: findings of NEW that fail the policy where OLD had no failing finding with
  that key, or whose count grew. ``datacheck diff`` exits 1 when there is any.
- Stats that moved: for the dataset and every shard present in both: the length quantiles
  (``min p50 p90 p99 max mean``: integer values on any change; float values, such as the mean,
  when they differ by more than :data:`STATS_REL_TOL` relative, so floating-point noise such as
  80.5992 -> 80.59951905059337 from another summation order is no move) and each label's share of
  the labelled rows (an absolute change of at least ``share_threshold``, default 0.01 = one
  percentage point).
- The config: changed when the two config hashes differ. Where neither audit had a config file
  (``config_path`` None: the defaults and what the data gives), the splits the Hugging Face Hub's
  file names give (:func:`datacheck.io.hubsplits.hub_splits` over each report's shard paths) are
  compared, and a change of them is named (``train = 'data/train-*', test = 'data/test-*' -> none``)
  in place of the bare "the config changed".

Both reports must have the same ``report_version`` (a layout change makes a comparison
meaningless): otherwise :class:`~datacheck.model.errors.ReportVersionError` (exit 2).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from datacheck.io.hubsplits import hub_splits
from datacheck.model.errors import ReportVersionError
from datacheck.model.findings import Finding, clip_message
from datacheck.model.shown import md_code, md_text, one_line, terminal_safe
from datacheck.report.model import Report, find_report, read_report

__all__ = ["ReportDiff", "FindingDelta", "diff_reports", "resolve_report", "render_diff_text",
           "render_diff_markdown", "QUANTILE_KEYS", "DEFAULT_SHARE_THRESHOLD", "STATS_REL_TOL"]

#: Length statistics compared (keys of the report's ``stats.lengths``).
QUANTILE_KEYS = ("min", "p50", "p90", "p99", "max", "mean")
#: Smallest absolute change of a label's share that counts as moved (one percentage point).
DEFAULT_SHARE_THRESHOLD = 0.01
#: Relative tolerance under which two float length statistics are equal (0.01 %): far above float64
#: rounding (1e-16) and summation-order noise, far below any change of a dataset worth reporting.
STATS_REL_TOL = 1e-4
DATASET = "dataset"


@dataclass(frozen=True)
class FindingDelta:
    """One finding key on both sides: ``where`` (shard path or ``dataset``), check, column, severity
    (an error and a warning of one check and column are two keys: the per-row severity of
    ``finite.fp16_overflow`` and the like), the summed counts (0 when absent), and whether any finding
    of the key fails the policy on each side."""

    where: str
    check: str
    column: str | None
    old_count: int
    new_count: int
    old_fails: bool
    new_fails: bool
    message: str
    severity: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"where": self.where, "check": self.check, "column": self.column, "severity": self.severity,
                "old_count": self.old_count,
                "new_count": self.new_count, "old_fails_policy": self.old_fails, "new_fails_policy": self.new_fails,
                "message": self.message}


@dataclass
class ReportDiff:
    """The differences between two reports (see the module docstring for the definitions)."""

    old_index: str
    new_index: str
    config_changed: bool
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    changed: list[tuple[str, str, str]] = field(default_factory=list)
    renamed: list[tuple[str, str, str]] = field(default_factory=list)
    new: list[FindingDelta] = field(default_factory=list)
    resolved: list[FindingDelta] = field(default_factory=list)
    #: OLD findings of a shard NEW could not read: not resolved, not known (module docstring)
    unchecked: list[FindingDelta] = field(default_factory=list)
    #: shards (NEW paths) that NEW could not read
    unreadable: list[str] = field(default_factory=list)
    grown: list[FindingDelta] = field(default_factory=list)
    reduced: list[FindingDelta] = field(default_factory=list)
    new_policy_failures: list[FindingDelta] = field(default_factory=list)
    stats_moved: list[dict[str, Any]] = field(default_factory=list)
    #: what changed in the config, where it is known (the splits the Hub's file names give); None:
    #: not known, or the config did not change (text and markdown only)
    config_change: str | None = None

    @property
    def has_new_failures(self) -> bool:
        return bool(self.new_policy_failures)

    def to_dict(self) -> dict[str, Any]:
        return {
            "old_index_hash": self.old_index, "new_index_hash": self.new_index, "config_changed": self.config_changed,
            "shards": {"added": self.added, "removed": self.removed,
                       "changed": [{"path": p, "old": a, "new": b} for p, a, b in self.changed],
                       "renamed": [{"old_path": a, "new_path": b, "content_hash": h} for a, b, h in self.renamed],
                       "unreadable": self.unreadable},
            "findings": {k: [d.to_dict() for d in getattr(self, k)]
                         for k in ("new", "resolved", "unchecked", "grown", "reduced")},
            "new_policy_failures": [d.to_dict() for d in self.new_policy_failures],
            "stats_moved": self.stats_moved,
        }


def resolve_report(ref: str, report_dir: str | Path) -> Report:
    """A report from a file path, or from an index hash (or a unique prefix of at least 6 hex digits)
    looked up as ``<report_dir>/<index_hash>/report.json``, or
    ``INDEX/CONFIG[.fail-on-X][.against-K][.allow-check-errors][.part-K-of-N]`` hash prefixes for a config's copy
    (:func:`~datacheck.report.model.find_report`).

    Raises:
        UsageError: no such file or hash, an ambiguous prefix, or no or several config copies matching.
        ReportVersionError: the report is newer than this datacheck reads.
    """
    return read_report(find_report(ref, report_dir))


def _aggregate(report: Report, paths: dict[str, str] | None = None) -> dict[tuple[str, str, str | None, str],
                                                                            dict[str, Any]]:
    """Findings summed by (shard path or ``dataset``, check, column, severity); ``paths`` maps a shard
    path to the path its findings are keyed under (a renamed shard's OLD path to its NEW one)."""
    out: dict[tuple[str, str, str | None, str], dict[str, Any]] = {}
    paths = paths or {}

    def add(where: str, f: Finding) -> None:
        e = out.setdefault((where, f.check, f.column, f.severity),
                           {"count": 0, "fails": False, "message": f.message, "shards": set()})
        e["count"] += f.count
        e["fails"] = e["fails"] or f.fails_policy
        e["shards"] |= {paths.get(s, s) for s in f.shards}

    for sh in report.shards:
        for f in sh.findings:
            add(paths.get(sh.path, sh.path), f)
    for f in report.dataset_findings:
        add(DATASET, f)
    return out


def _label_shares(lab: dict[str, Any] | None) -> dict[str, float]:
    if not lab:
        return {}
    counts = [(str(v), c) for v, c in lab.get("counts", [])]
    total = sum(c for _, c in counts)
    return {v: c / total for v, c in counts} if total else {}


def _same_stat(a: Any, b: Any) -> bool:
    """Equal statistics: integers exactly, floats within :data:`STATS_REL_TOL` relative."""
    if isinstance(a, float) or isinstance(b, float):
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) and not isinstance(b, bool):
            return math.isclose(a, b, rel_tol=STATS_REL_TOL, abs_tol=0.0)
    return a == b


def _stats_moved(scope: str, old: dict[str, Any], new: dict[str, Any], share_threshold: float) -> list[dict[str, Any]]:
    moved = []
    lo, ln = old.get("lengths") or {}, new.get("lengths") or {}
    for k in QUANTILE_KEYS:
        a, b = lo.get(k), ln.get(k)
        if (a is not None or b is not None) and not _same_stat(a, b):
            moved.append({"scope": scope, "stat": f"lengths.{k}", "old": a, "new": b})
    so, sn = _label_shares(old.get("labels")), _label_shares(new.get("labels"))
    for v in sorted(set(so) | set(sn)):
        a, b = so.get(v, 0.0), sn.get(v, 0.0)
        if abs(b - a) >= share_threshold:
            moved.append({"scope": scope, "stat": f"labels.share[{v}]", "old": round(a, 6), "new": round(b, 6)})
    return moved


def diff_reports(old: Report, new: Report, share_threshold: float = DEFAULT_SHARE_THRESHOLD) -> ReportDiff:
    """Compare ``old`` with ``new`` (module docstring).

    Raises:
        ReportVersionError: the two reports have different ``report_version``.
    """
    if old.report_version != new.report_version:
        raise ReportVersionError(
            f"cannot diff reports of different report_version (OLD {old.report_version}, NEW {new.report_version}): "
            "re-run the audit of the older data with this datacheck, then diff the two new reports")
    d = ReportDiff(old_index=old.index_hash, new_index=new.index_hash, config_changed=old.config_hash != new.config_hash)
    if d.config_changed:
        d.config_change = _inferred_splits_change(old, new)
    os_, ns = {s.path: s for s in old.shards}, {s.path: s for s in new.shards}
    d.added = sorted(set(ns) - set(os_))
    d.removed = sorted(set(os_) - set(ns))
    d.renamed = _renames(os_, ns, d.removed, d.added)
    moved = {a: b for a, b, _ in d.renamed}
    d.removed = [p for p in d.removed if p not in moved]
    d.added = [p for p in d.added if p not in set(moved.values())]
    d.changed = sorted((p, os_[p].content_hash, ns[p].content_hash) for p in set(os_) & set(ns)
                       if os_[p].content_hash != ns[p].content_hash)
    ao, an = _aggregate(old, moved), _aggregate(new)
    d.unreadable = sorted(p for p, s in ns.items() if s.rows is None)
    unread_new = set(d.unreadable)
    unread = unread_new | {moved.get(p, p) for p, s in os_.items() if s.rows is None}
    for key in sorted(set(ao) | set(an), key=lambda k: (k[0], k[1], k[2] or "", k[3])):
        eo, en = ao.get(key), an.get(key)
        delta = FindingDelta(where=key[0], check=key[1], column=key[2], severity=key[3],
                             old_count=eo["count"] if eo else 0, new_count=en["count"] if en else 0,
                             old_fails=bool(eo and eo["fails"]), new_fails=bool(en and en["fails"]),
                             message=(en or eo)["message"])
        if eo is None:
            d.new.append(delta)
        elif en is None:
            gone_unread = key[0] in unread_new or bool(eo["shards"] & unread_new)  # not read: not known
            (d.unchecked if gone_unread else d.resolved).append(delta)
        elif delta.new_count > delta.old_count:
            d.grown.append(delta)
        elif delta.new_count < delta.old_count:
            d.reduced.append(delta)
        if delta.new_fails and (not delta.old_fails or delta.new_count > delta.old_count):
            d.new_policy_failures.append(delta)
    d.stats_moved = _stats_moved(DATASET, old.stats, new.stats, share_threshold)
    for p in sorted(set(os_) & set(ns)):
        if p not in unread:  # an unreadable shard has no stats to compare: its labels did not move to 0
            d.stats_moved += _stats_moved(p, os_[p].stats, ns[p].stats, share_threshold)
    for a, b, _ in d.renamed:
        if b not in unread:
            d.stats_moved += _stats_moved(b, os_[a].stats, ns[b].stats, share_threshold)
    return d


def _splits_text(splits: dict[str, str | list[str]]) -> str:
    return ", ".join(f"{k} = {v!r}" for k, v in splits.items()) or "none"


def _inferred_splits_change(old: Report, new: Report) -> str | None:
    """What changed the config between two audits with no config file: the splits the Hub's file
    names give each report's shard paths, when they differ (a shard added that names a new split, a
    file renamed); None otherwise (a config file, or these splits are the same)."""
    if old.config_path is not None or new.config_path is not None:
        return None
    a, b = (hub_splits([s.path for s in r.shards]) for r in (old, new))
    if a.splits == b.splits:
        return None
    return f"the splits inferred from the Hub's file names changed: {_splits_text(a.splits)} -> {_splits_text(b.splits)}"


def _renames(old: dict[str, Any], new: dict[str, Any], removed: list[str], added: list[str]) -> list[tuple[str, str, str]]:
    """(OLD path, NEW path, content hash) for each removed path whose content hash an added path has:
    paths of one hash paired in sorted order, the rest stay removed or added. A shard without a content
    hash (none recorded) is never paired."""
    by_hash: dict[str, list[str]] = {}
    for p in added:
        h = new[p].content_hash
        if h:
            by_hash.setdefault(h, []).append(p)
    out = []
    for p in removed:
        h = old[p].content_hash
        if h and by_hash.get(h):
            out.append((p, by_hash[h].pop(0), h))
    return out


def _counts(x: FindingDelta, unchecked: bool = False) -> tuple[str, str]:
    """The OLD and NEW count cells: ``-`` on a side where the finding counts no rows
    (``decode.unreadable``) or, for an unchecked delta, on NEW (not known)."""
    if unchecked:
        return str(x.old_count), "-"
    if x.old_count == 0 and x.new_count == 0:
        return "-", "-"
    return str(x.old_count), str(x.new_count)


def _fmt_delta(x: FindingDelta, unchecked: bool = False) -> str:
    col = f" ({x.column})" if x.column else ""
    sev = f" [{x.severity}]" if x.severity else ""
    fail = " FAILS POLICY" if x.new_fails else ""
    a, b = _counts(x, unchecked)
    counts = "" if (a, b) == ("-", "-") else (f" {a} -> ? (shard unreadable)" if unchecked else f" {a} -> {b}")
    return f"{x.where}: {x.check}{col}{sev}{counts}{fail}"


def render_diff_text(d: ReportDiff) -> str:
    """Plain-text rendering for terminals and CI logs: one line per shard and finding (line breaks in
    names and messages escaped: :func:`~datacheck.model.shown.one_line`)."""
    out = [f"datacheck diff {d.old_index} -> {d.new_index}"
           + (f"  ({d.config_change})" if d.config_change else
              "  (the config changed between the two audits)" if d.config_changed else "")]
    out.append(f"shards: {len(d.added)} added, {len(d.removed)} removed, {len(d.changed)} changed"
               + (f", {len(d.renamed)} renamed (same content)" if d.renamed else ""))
    out += [f"  + {p}" for p in d.added] + [f"  - {p}" for p in d.removed] + [f"  ~ {p}" for p, _, _ in d.changed]
    out += [f"  > {a} -> {b}" for a, b, _ in d.renamed]
    if d.unreadable:
        out.append(f"unreadable in NEW: {len(d.unreadable)} (their findings and stats are not known; "
                   "dataset-level counts leave their rows out)")
        out += [f"  ! {p}" for p in d.unreadable]
    out.append(f"findings: {len(d.new)} new, {len(d.resolved)} resolved, {len(d.grown)} grown, {len(d.reduced)} reduced"
               + (f", {len(d.unchecked)} unchecked (shard unreadable)" if d.unchecked else ""))
    for name, items in (("new", d.new), ("resolved", d.resolved), ("unchecked", d.unchecked), ("grown", d.grown),
                        ("reduced", d.reduced)):
        out += [f"  {name:8s} {_fmt_delta(x, name == 'unchecked')}" for x in items]
    if d.stats_moved:
        out.append(f"stats moved: {len(d.stats_moved)}")
        out += [f"  {m['scope']}: {m['stat']} {m['old']} -> {m['new']}" for m in d.stats_moved]
    out.append(f"new policy failures: {len(d.new_policy_failures)}")
    out += [f"  ! {_fmt_delta(x)}: {clip_message(x.message, 200)}" for x in d.new_policy_failures]
    # names from the data: a line break stays on its line, a control character is shown, never run
    return terminal_safe("\n".join(one_line(line) for line in out) + "\n")


def render_diff_markdown(d: ReportDiff) -> str:
    """Markdown for a CI job summary."""
    icon = "❌" if d.has_new_failures else "✅"
    out = [f"## {icon} datacheck diff", "",
           f"`{d.old_index}` → `{d.new_index}`" + (f" ({md_text(d.config_change).replace(' -&gt; ', ' → ')})" if d.config_change else " (config changed)" if d.config_changed else ""), "",
           f"**Shards:** {len(d.added)} added, {len(d.removed)} removed, {len(d.changed)} changed"
           + (f", {len(d.renamed)} renamed (same content)" if d.renamed else ""), ""]
    for sym, items in (("added", d.added), ("removed", d.removed), ("changed", [p for p, _, _ in d.changed])):
        out += [f"- {sym}: {md_code(p)}" for p in items]
    out += [f"- renamed: {md_code(a)} → {md_code(b)}" for a, b, _ in d.renamed]
    out += [f"- **unreadable** in NEW: {md_code(p)} (its findings and stats are not known)" for p in d.unreadable]
    out += ["", f"**Findings:** {len(d.new)} new, {len(d.resolved)} resolved, {len(d.grown)} grown, "
                f"{len(d.reduced)} reduced" + (f", {len(d.unchecked)} unchecked (shard unreadable)" if d.unchecked
                                               else ""), ""]
    rows = [(n, x) for n, items in (("new", d.new), ("resolved", d.resolved), ("unchecked", d.unchecked),
                                    ("grown", d.grown), ("reduced", d.reduced)) for x in items]
    if rows:
        out += ["| change | where | check | column | old | new | fails policy |", "|---|---|---|---|---:|---:|---|"]
        out += [f"| {n} | {md_code(x.where)} | {md_code(x.check)} | {md_code(x.column) if x.column else ''} | "
                f"{' | '.join(_counts(x, n == 'unchecked'))} | "
                f"{'yes' if x.new_fails else ''} |" for n, x in rows]
    if d.stats_moved:
        out += ["", "**Stats moved:**", "", "| scope | stat | old | new |", "|---|---|---:|---:|"]
        out += [f"| {md_code(m['scope'])} | {m['stat']} | {m['old']} | {m['new']} |" for m in d.stats_moved]
    out += ["", f"**New policy failures:** {len(d.new_policy_failures)}"]
    out += [f"- {md_code(x.where)} {md_code(x.check)}: {md_text(clip_message(x.message, 300))}"
            for x in d.new_policy_failures]
    return terminal_safe("\n".join(out) + "\n")
