"""JUnit XML for CI test-report views (``datacheck audit --junit FILE``).

Layout (the common Ant/Jenkins JUnit dialect that GitHub, GitLab and Jenkins read)::

    <testsuites name="datacheck" tests= failures= errors= skipped=>
      <testsuite name="datacheck audit <index_hash>" tests= failures= errors= skipped= timestamp=>
        <properties> index_hash, config_hash, datacheck_version, status </properties>
        <testcase classname="<shard path>" name="<check ID>">        one per shard and check
          <failure message="..." type="<check ID>">first rows and values</failure>   fails the policy
          <error message="..." type="datacheck.check_error">          datacheck failed to run the check
          <skipped message="..."/>                                    could not run on this shard
          <system-out>...</system-out>                                a finding that does not fail
        </testcase>
        <testcase classname="dataset" name="<check ID>">...</testcase>   dataset-level checks
      </testsuite>
    </testsuites>

The checks listed per shard are every row- and shard-level check ID of the catalog
(:mod:`datacheck.model.catalog`), so a passing check is a passing test case and a skipped one a
skipped test case; dataset-level IDs get one test case each with classname ``dataset``. A check
error (a ``skipped`` entry with ``error: true``) is an ``<error>`` test case, under its own name
when that name is no catalog ID (a check family whose function raised, a statistic).
Written atomically (:func:`datacheck.io.outputs.write_json_atomic` writes any text).
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from datacheck.io.outputs import write_json_atomic
from datacheck.model import catalog
from datacheck.model.findings import Finding
from datacheck.report.model import Report

__all__ = ["junit_xml", "write_junit", "FIRST_ROWS"]

#: Example rows listed in a failure's text.
FIRST_ROWS = 10


def _failure_text(f: Finding) -> str:
    counted = f.count or f.rows or f.lines  # decode.unreadable counts no rows: no "count 0"
    lines = [f.message, f"severity {f.severity}" + (f", count {f.count}" if counted else "")
             + (f", ratio {f.ratio:.6g}" if f.ratio is not None else "")
             + (f", column {f.column}" if f.column else "")]
    if f.shards:
        lines.append("shards: " + ", ".join(f.shards))
    for e in f.examples[:FIRST_ROWS]:
        where = []
        if e.row is not None:
            where.append(f"row {e.row}")
        if e.line is not None:
            where.append(f"line {e.line}")
        lines.append(f"  {' '.join(where) or '-'}: {e.value}")
    if not f.examples and f.rows:
        lines.append("  rows: " + ", ".join(map(str, f.rows[:FIRST_ROWS])))
    return "\n".join(lines)


def _case(parent: ET.Element, classname: str, check: str, findings: list[Finding], skipped: list[str],
          counts: dict[str, int], errors: list[str] | None = None) -> None:
    tc = ET.SubElement(parent, "testcase", {"classname": classname, "name": check, "time": "0"})
    counts["tests"] += 1
    failing = [f for f in findings if f.fails_policy]
    if errors:  # datacheck failed to run the check: a JUnit error, never a pass or a skip
        counts["errors"] += 1
        ee = ET.SubElement(tc, "error", {"message": f"{check}: check error: {'; '.join(errors)}"[:1000],
                                         "type": "datacheck.check_error"})
        ee.text = "\n".join(errors)
    elif failing:
        counts["failures"] += 1
        head = failing[0]
        msg = f"{check}: {head.message}" if len(failing) == 1 else f"{check}: {len(failing)} findings fail the policy"
        fe = ET.SubElement(tc, "failure", {"message": msg[:1000], "type": check})
        fe.text = "\n\n".join(_failure_text(f) for f in failing)
    elif skipped and not findings:
        counts["skipped"] += 1
        ET.SubElement(tc, "skipped", {"message": "; ".join(skipped)[:1000]})
    if findings and not failing:
        so = ET.SubElement(tc, "system-out")
        so.text = "\n\n".join(_failure_text(f) for f in findings)


def junit_xml(report: Report) -> str:
    """The JUnit XML document (UTF-8 text with an XML declaration) for ``report``."""
    shard_ids = [c.id for c in catalog.CATALOG.values() if c.level in ("row", "shard")]
    dataset_ids = [c.id for c in catalog.CATALOG.values() if c.level == "dataset"]
    # checks that are not in the catalog's row/shard list but were reported on a shard still get a case
    for sh in report.shards:
        for f in sh.findings:
            if f.check not in shard_ids and f.check not in dataset_ids:
                shard_ids.append(f.check)
    skipped_by: dict[tuple[str, str], list[str]] = {}
    errors_by: dict[tuple[str, str], list[str]] = {}
    extra: dict[str, list[str]] = {}  # check errors under names with no test case (a family, a stat)
    for sk in report.skipped:
        for shard in sk.get("shards") or [""]:
            (errors_by if sk.get("error") else skipped_by).setdefault((shard, sk["check"]), []).append(sk["reason"])
            if sk.get("error") and sk["check"] not in shard_ids + dataset_ids:
                extra.setdefault(shard, []).append(sk["check"])
    counts = {"tests": 0, "failures": 0, "skipped": 0, "errors": 0}
    root = ET.Element("testsuites", {"name": "datacheck"})
    suite = ET.SubElement(root, "testsuite", {"name": f"datacheck audit {report.index_hash}",
                                              "timestamp": report.created_at.replace("+00:00", "")})
    props = ET.SubElement(suite, "properties")
    for k, v in [("index_hash", report.index_hash), ("config_hash", report.config_hash),
                 ("datacheck_version", report.datacheck_version), ("status", report.status),
                 ("fail_on", report.fail_on)]:
        ET.SubElement(props, "property", {"name": k, "value": str(v)})
    for sh in report.shards:
        by_check: dict[str, list[Finding]] = {}
        for f in sh.findings:
            by_check.setdefault(f.check, []).append(f)
        for check in shard_ids:
            _case(suite, sh.path, check, by_check.get(check, []), skipped_by.get((sh.path, check), []), counts,
                  errors_by.get((sh.path, check)))
        for check in sorted(set(extra.get(sh.path, []))):
            _case(suite, sh.path, check, [], [], counts, errors_by.get((sh.path, check)))
    ds_by: dict[str, list[Finding]] = {}
    for f in report.dataset_findings:
        ds_by.setdefault(f.check, []).append(f)
    for check in dataset_ids + sorted(set(ds_by) - set(dataset_ids)):
        _case(suite, "dataset", check, ds_by.get(check, []), skipped_by.get(("", check), []), counts,
              errors_by.get(("", check)))
    for check in sorted(set(extra.get("", []))):
        _case(suite, "dataset", check, [], [], counts, errors_by.get(("", check)))
    for el in (root, suite):
        el.set("tests", str(counts["tests"]))
        el.set("failures", str(counts["failures"]))
        el.set("errors", str(counts["errors"]))
        el.set("skipped", str(counts["skipped"]))
    suite.set("time", "0")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_junit(report: Report, path: str | Path) -> Path:
    """Write :func:`junit_xml` to ``path`` atomically. Raises UsageError when ``path`` is not writable."""
    return write_json_atomic(path, junit_xml(report))
