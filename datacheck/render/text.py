"""Human-readable views of a report: a text summary for terminals and markdown for CI job summaries."""
from __future__ import annotations

import re

from datacheck.model.config import describe_config, describe_label_facts, describe_tokenizer_facts
from datacheck.model.findings import clip_message
from datacheck.model.shown import md_code, md_text, one_line, terminal_safe
from datacheck.report.model import Report

__all__ = ["render_text", "render_markdown", "terminal_safe", "terminal_lines", "clip_message", "one_line"]

#: lines of the "Skipped" section of the text view (each line: the checks skipped for one reason)
MAX_SKIP_LINES = 20

_MARK = {"pass": "PASS", "warn": "WARN", "fail": "FAIL"}


def terminal_lines(lines: list[str]) -> str:
    """``lines`` as the text a terminal shows, one line each: every line break inside a line escaped
    (:func:`~datacheck.model.shown.one_line`: a shard named ``a\\nb.jsonl`` cannot split its finding
    over two lines), every other control character escaped (:func:`terminal_safe`), then joined with
    newlines and ended with one."""
    return terminal_safe("\n".join(one_line(line) for line in lines) + "\n")


def _rows_txt(f, k: int = 5) -> str:
    if f.lines:
        return "lines " + ",".join(map(str, f.lines[:k])) + ("…" if len(f.lines) > k or f.count > k else "")
    if f.rows:
        return "rows " + ",".join(map(str, f.rows[:k])) + ("…" if f.count > k else "")
    return ""


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    out = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()]
    out.append("  ".join("-" * w for w in widths))
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    return out


#: widest column name shown in a table cell (longer names end with "…"; the JSON has them whole)
MAX_COLUMN_CELL = 40


def _cell(text: str) -> str:
    """``text`` (a shard path, a name from the data) for a table cell, as the terminal will show it:
    line breaks and tabs escaped (one table line per row), every other control character escaped
    (:func:`terminal_safe`) before the column's width is measured, so the table stays aligned."""
    return terminal_safe(text.replace("\r", "\\r").replace("\n", "\\n").replace("\t", "\\t"))


def _column_txt(f) -> str:
    """The finding's column for a table cell (``""`` when it concerns no one column): line breaks and
    tabs shown escaped so a column name from the data cannot break the table, cut at
    :data:`MAX_COLUMN_CELL` characters."""
    if f.column is None:
        return ""
    c = str(f.column).replace("\r", "\\r").replace("\n", "\\n").replace("\t", "\\t")
    return c if len(c) <= MAX_COLUMN_CELL else c[: MAX_COLUMN_CELL - 1] + "…"


def _config_line(report: Report) -> str:
    """``config: <path>`` or ``config: none (defaults)`` (the report's ``config_path``), followed by the
    ``[tokens]`` facts taken from the tokenizer (the report's ``tokenizer_facts``) and the class count
    taken from the data's ``ClassLabel`` or its note (the report's ``label_facts``) when there are some."""
    line = describe_config(getattr(report, "config_path", None), report.config_hash,
                           getattr(report, "config_changes", None))
    facts = [f for f in (describe_tokenizer_facts(getattr(report, "tokenizer_facts", None)),
                         describe_label_facts(getattr(report, "label_facts", None))) if f]
    return "; ".join([line, *facts])


def _ignored_lines(report: Report, k: int = 10) -> list[str]:
    ign = list(getattr(report, "ignored", ()) or ())
    if not ign:
        return []
    out = ["", f"Ignored ({len(ign)} file(s) that look like data were not audited):"]
    out += [f"  {i['path']}: {i['reason']}" for i in ign[:k]]
    if len(ign) > k:
        out.append(f"  … {len(ign) - k} more (see 'ignored' in the JSON report)")
    return out


def _shards_txt(paths: list[str] | tuple[str, ...], k: int = 3) -> str:
    """``"(1 shard: a.parquet)"`` or ``"(5 shards: a, b, c, … 2 more)"``; ``""`` for none."""
    paths = list(paths or ())
    if not paths:
        return ""
    head = ", ".join(paths[:k]) + (f", … {len(paths) - k} more" if len(paths) > k else "")
    return f"({len(paths)} shard{'s' if len(paths) > 1 else ''}: {head})"


def _finding_shards(f) -> str:
    """`` (N shards: …)`` after a dataset finding's message when the message does not name them all."""
    shards = list(getattr(f, "shards", ()) or ())
    if not shards or all(s in f.message for s in shards):
        return ""
    return " " + _shards_txt(shards)


def _count_txt(sh, f) -> str:
    """The table's count: ``-`` for an unreadable shard and for shard-level findings that count no rows."""
    if sh.rows is None or (f.count == 0 and not f.rows and not f.lines):
        return "-"
    return str(f.count)


def _why_shape(why: str) -> tuple[str, ...]:
    """A layout's evidence clauses (``"; "``-separated) with every number as ``#``: shards recognized
    by the same evidence on other row counts ("500 of 500 sample rows ..." and "100 of 100 ...")
    share one shape."""
    return tuple(re.sub(r"\d[\d,.]*", "#", c) for c in why.split("; "))


def _layout_groups(report: Report) -> dict[tuple[str | None, str, tuple[str, ...]], list]:
    """The readable shards grouped by (layout, source, the shape of why: :func:`_why_shape`), in shard order."""
    groups: dict[tuple[str | None, str, tuple[str, ...]], list] = {}
    for sh in report.shards:
        if sh.rows is not None and getattr(sh, "layout_source", ""):
            groups.setdefault((sh.layout, sh.layout_source, _why_shape(sh.layout_why)), []).append(sh)
    return groups


def _group_why(shards: list) -> str:
    """The evidence of a group of shards: their ``layout_why`` when all say the same, else the clauses
    they share and a pointer to each shard's own (its counts differ)."""
    whys = [sh.layout_why for sh in shards]
    if len(set(whys)) == 1:
        return whys[0]
    clauses = [w.split("; ") for w in whys]
    common = [c for i, c in enumerate(clauses[0]) if all(cl[i] == c for cl in clauses)]
    return "; ".join(common + ["the counts differ per shard: each shard's 'layout_why' in the JSON report"])


def _layout_lines(report: Report, names: bool = True) -> list[str]:
    """``layout: NAME (source: why)``, one line per (layout, source, shape of why) of the readable
    shards (with their shards when they are not all, and ``names``; a count of shards otherwise);
    shards whose evidence differs only in its counts share a line (:func:`_group_why`); nothing for
    a report without layouts (an older report)."""
    groups = _layout_groups(report)
    readable = sum(1 for sh in report.shards if sh.rows is not None)
    out = []
    for (name, source, _shape), shards in list(groups.items())[:5]:
        why = _group_why(shards)
        where = ("" if len(shards) == readable else " " + _shards_txt([sh.path for sh in shards]) if names
                 else f" ({len(shards)} shard{'s' if len(shards) > 1 else ''})")
        what = f"{name} ({source}: {why})" if name is not None else f"unknown ({why})"
        out.append(f"layout: {what}{where}")
    if len(groups) > 5:
        out.append(f"layout: … {len(groups) - 5} more (see each shard's 'layout' in the JSON report)")
    return out


def _not_applicable_lines(report: Report) -> list[str]:
    """One line per known layout: how many shard-level checks do not apply to it."""
    counts: dict[str, int] = {}
    for sh in report.shards:
        if sh.layout is not None and getattr(sh, "not_applicable", 0):
            counts[sh.layout] = max(counts.get(sh.layout, 0), sh.not_applicable)
    return [f"{n} checks do not apply to {name}; `datacheck checks --layout {name}` lists them"
            for name, n in counts.items()]


def _passing_line(n: int, named: int = 0) -> str:
    """The one line that stands for ``n`` shards with no finding of their own (listed with
    ``show_passing``); ``named`` of them are named by a dataset-level finding (a train/eval leak, a
    duplicate shard), so they did not pass: the line says so instead."""
    if not named:
        return f"{n:,} shard{'s' if n != 1 else ''} passed with no findings (--show-passing lists them)"
    return (f"{n:,} shard{'s' if n != 1 else ''} without shard-level findings (--show-passing lists them); "
            + ("it is named by a dataset-level finding below" if n == 1 else
               f"{'all' if named == n else f'{named:,}'} of them named by the dataset-level findings below"))


def _quiet_named(report: Report, quiet: list[str]) -> int:
    """How many of the shards ``quiet`` (no finding of their own) a dataset-level finding names."""
    named = {p for f in report.dataset_findings for p in (f.shards or ())}
    return sum(p in named for p in quiet)


def render_text(report: Report, max_message: int = 110, show_passing: bool = False) -> str:
    """A table of shards x findings with counts and first rows, then dataset findings and skips.

    Args:
        report: the report to show.
        max_message: characters of a finding's message shown in "Dataset" and "Findings" (x3; a longer
            one is cut by :func:`clip_message`, keeping its last sentence: the advice).
        show_passing: list every shard, also those without any finding (``--show-passing``). By
            default those are one line under the table ("2,998 shards passed with no findings"), as
            a test runner reports passes: a gate over thousands of shards prints what needs a look.
            A shard with only ``info`` findings still has a finding and is listed.
    """
    s = report.summary
    lines = [
        f"datacheck {report.datacheck_version}: {_MARK[s['status']]}  "
        f"{s['shards']} shard(s), {s['rows']} row(s), {s['errors']} error(s), {s['warnings']} warning(s), "
        f"{s.get('policy_failures', 0)} failing the policy (--fail-on {report.fail_on})"
        + (f", {report.check_errors} CHECK ERROR(S): datacheck failed to run some checks" if report.check_errors else ""),
        _config_line(report),
        f"index_hash {report.index_hash}",
        *_layout_lines(report),
        "",
    ]
    rows = []
    quiet = 0
    for sh in report.shards:
        rows_n = "unreadable" if sh.rows is None else str(sh.rows)
        if not sh.findings:
            if not show_passing:
                quiet += 1
                continue
            rows.append([sh.status.upper(), _cell(sh.path), rows_n, "-", "", "", "", ""])
        for i, f in enumerate(sh.findings):
            rows.append([sh.status.upper() if i == 0 else "", _cell(sh.path) if i == 0 else "", rows_n if i == 0 else "",
                         f.check, _column_txt(f), f.severity + ("!" if f.fails_policy else ""), _count_txt(sh, f),
                         _rows_txt(f)])
    if rows:
        lines += _table(["status", "shard", "rows", "check", "column", "severity", "count", "first"], rows)
    if quiet:
        lines.append(_passing_line(quiet, _quiet_named(report, [sh.path for sh in report.shards if not sh.findings])))
    if report.dataset_findings:
        lines += ["", "Dataset:"]
        for f in report.dataset_findings:
            lines.append(f"  {f.check} [{f.severity}{'!' if f.fails_policy else ''}] "
                         f"{clip_message(f.message, max_message * 3)}{_finding_shards(f)}")
            # the rows themselves (each value names its shard and row: "b.parquet row 6 = a.parquet row 2")
            lines += [f"      {e.value}" for e in f.examples[:3] if e.value]
    details = [(sh.path, f) for sh in report.shards for f in sh.findings if f.severity != "info"]
    if details:
        lines += ["", "Findings:"]
        for path, f in details:
            msg = clip_message(f.message, max_message * 3)
            lines.append(f"  {path}: {f.check} [{f.severity}{'!' if f.fails_policy else ''}] {msg}")
            for e in f.examples[:3]:
                where = f"line {e.line}" if e.line is not None and e.row is None else (
                    f"row {e.row}" + (f" (line {e.line})" if e.line is not None else ""))
                if e.value:
                    lines.append(f"      {where}: {e.value}")
    if report.skipped:
        lines += ["", f"Skipped ({len(report.skipped)} check(s) could not run; see 'skipped' in the JSON report):"]
        # checks skipped for one reason on the same shards share a line (e.g. every check of a role the
        # data does not have); check errors always stand alone
        groups: dict[tuple[str, tuple[str, ...], bool], list[str]] = {}
        for sk in report.skipped:
            key = (sk["reason"], tuple(sk.get("shards") or ()), bool(sk.get("error")))
            if key[2]:
                key = (key[0] + "\0" + sk["check"], key[1], True)
            groups.setdefault(key, []).append(sk["check"])
        shown = sorted(groups.items(), key=lambda kv: (not kv[0][2], kv[1][0]))  # check errors first
        for (reason, shards, error), checks in shown[:MAX_SKIP_LINES]:
            where = _shards_txt(shards)
            mark = " [CHECK ERROR]" if error else ""
            lines.append(f"  {', '.join(checks)}{mark}: {reason.split(chr(0))[0]}" + (f" {where}" if where else ""))
        if len(shown) > MAX_SKIP_LINES:
            lines.append(f"  … {sum(len(c) for _, c in shown[MAX_SKIP_LINES:])} more")
    na = _not_applicable_lines(report)
    if na:
        lines += [""] + na
    lines += _ignored_lines(report)
    lines.append("")
    lines.append("'!' marks findings that fail the policy.")
    return terminal_lines(lines)


def render_markdown(report: Report, show_passing: bool = False) -> str:
    """Markdown for a CI job summary (e.g. ``$GITHUB_STEP_SUMMARY``, which GitHub cuts at 1 MiB).

    ``show_passing``: a table row for every shard; by default shards without any finding are one
    line under the table, as in :func:`render_text`.
    """
    s = report.summary
    icon = {"pass": "✅", "warn": "⚠️", "fail": "❌"}[s["status"]]
    out = [
        f"## {icon} datacheck: {s['status']}",
        "",
        f"{s['shards']} shard(s), {s['rows']} row(s), {s['errors']} error(s), {s['warnings']} warning(s); "
        f"index `{report.index_hash}`; {_config_line(report)}",
        *[f"- {md_text(line)}" for line in _layout_lines(report, names=False)],
        "",
    ]
    table = ["| shard | rows | status | check | column | severity | count | first rows |",
             "|---|---:|---|---|---|---|---:|---|"]
    quiet = 0
    for sh in report.shards:
        rows_n = "unreadable" if sh.rows is None else str(sh.rows)
        if not sh.findings:
            if not show_passing:
                quiet += 1
                continue
            table.append(f"| {md_code(sh.path)} | {rows_n} | {sh.status} | | | | | |")
        for f in sh.findings:
            fail = " **(fails)**" if f.fails_policy else ""
            col = md_code(_column_txt(f)) if f.column is not None else ""
            table.append(f"| {md_code(sh.path)} | {rows_n} | {sh.status} | {md_code(f.check)} | {col} | "
                         f"{f.severity}{fail} | {_count_txt(sh, f)} | {_rows_txt(f)} |")
    if len(table) > 2:
        out += table
    if quiet:
        out += ([""] if len(table) > 2 else []) + [_passing_line(quiet, _quiet_named(report, [sh.path for sh in report.shards if not sh.findings]))
                                                       .replace("--show-passing", "`--show-passing`")]
    if report.dataset_findings:
        out += ["", "### Dataset", ""]
        for f in report.dataset_findings:
            out.append(f"- {md_code(f.check)} ({f.severity}{', fails' if f.fails_policy else ''}): "
                       f"{md_text(f.message + _finding_shards(f))}")
    if report.skipped:
        out += ["", "<details><summary>Skipped checks</summary>", ""]
        out += [f"- {md_code(sk['check'])}: "
                + md_text(sk["reason"] + (f" {_shards_txt(sk['shards'])}" if sk.get("shards") else ""))
                for sk in report.skipped]
        out += ["", "</details>"]
    na = _not_applicable_lines(report)
    if na:
        out += [""] + [md_text(line) for line in na]
    return "\n".join(out) + "\n"
