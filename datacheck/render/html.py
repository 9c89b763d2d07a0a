"""A self-contained HTML view of an audit report (``datacheck report R.json --html``, ``audit --format html``).

One file, readable offline: inline CSS and inline SVG charts; no script, font, image or other
external resource. Every value that comes from the data or the report (shard paths, example
values, messages, label values) is escaped with :func:`html.escape`, since data may contain markup.

Contents: the summary and status of the dataset, with the shards' layout (``layout``,
``layout_source``, ``layout_why`` of each shard in the JSON report: one line when every readable
shard has the same, else one line per layout naming its shards, a layout column in the table of
shards and the layout in each shard's heading) and how many checks do not apply to it; a table of
shards with status; drift findings
(``dist.*``) highlighted in their own section and in the tables; dataset-level findings; per
shard, its findings with the first rows/lines and example values, its token length histogram and
its label distribution (from the shard's ``stats``: ``lengths.histogram`` ``[[length, count], ...]``
with p50/p90/p99 and ``labels.counts`` ``[[value, count], ...]``); the same charts for the whole
dataset (the report's merged top-level ``stats``); and the checks that were skipped.
"""
from __future__ import annotations

import html
from typing import Any, Iterable

from datacheck.model.findings import Finding
from datacheck.report.model import Report, ShardReport

__all__ = ["render_html", "MAX_BARS", "MAX_LABELS", "MAX_FINDING_EXAMPLES"]

#: Histogram bars drawn at most; more distinct lengths are grouped into this many equal-width bins.
MAX_BARS = 48
#: Label values drawn at most (the rest are summed into one "other values" bar).
MAX_LABELS = 24
#: Example rows shown per finding (the JSON report keeps up to ``[report] max_examples``).
MAX_FINDING_EXAMPLES = 5

_CSS = """
:root{--fail:#c62828;--warn:#b26a00;--pass:#2e7d32;--info:#546e7a;--drift:#fff3cd;--line:#d7dce1}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:0;color:#1d232a;background:#f6f8fa}
header{background:#1d232a;color:#fff;padding:18px 28px}
header h1{margin:0 0 4px;font-size:22px}
header .meta{color:#b8c2cc;font-size:12px;word-break:break-all}
main{padding:18px 28px;max-width:1400px}
section{background:#fff;border:1px solid var(--line);border-radius:8px;padding:14px 18px;margin:0 0 18px}
h2{font-size:17px;margin:0 0 10px}
h3{font-size:15px;margin:14px 0 8px}
.badge{display:inline-block;border-radius:4px;padding:1px 8px;font-weight:600;font-size:12px;color:#fff}
.badge.fail,.sev-error{background:var(--fail)}.badge.warn,.sev-warn{background:var(--warn)}
.badge.pass{background:var(--pass)}.sev-info{background:var(--info)}
.badge.drift{background:#8d6e00}
.cards{display:flex;gap:12px;flex-wrap:wrap}
.card{border:1px solid var(--line);border-radius:6px;padding:8px 14px;min-width:120px;background:#fbfcfd}
.card .n{font-size:22px;font-weight:700}.card .l{color:#5f6b76;font-size:12px}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{border-bottom:1px solid var(--line);padding:5px 8px;text-align:left;vertical-align:top}
th{background:#eef1f4;font-weight:600}
td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.drift td{background:var(--drift)}
code,.mono{font-family:ui-monospace,"DejaVu Sans Mono",Menlo,monospace;font-size:12px}
.ex{max-width:520px;word-break:break-all}
.charts{display:flex;gap:18px;flex-wrap:wrap}
.chart{border:1px solid var(--line);border-radius:6px;padding:8px;background:#fbfcfd}
.chart .cap{font-size:12px;color:#5f6b76;margin-bottom:4px}
.muted{color:#5f6b76}
.callout{border-left:5px solid #8d6e00;background:var(--drift);padding:8px 12px;border-radius:4px}
"""


def _e(v: Any) -> str:
    return html.escape("" if v is None else str(v), quote=True)


def _badge(status: str) -> str:
    return f'<span class="badge {_e(status)}">{_e(status.upper())}</span>'


def _sev(f: Finding) -> str:
    mark = " (fails the policy)" if f.fails_policy else ""
    return f'<span class="badge sev-{_e(f.severity)}">{_e(f.severity)}</span>{_e(mark)}'


def _is_drift(f: Finding) -> bool:
    return f.check.startswith("dist.")


def _fmt_int(n: Any) -> str:
    return f"{n:,}" if isinstance(n, int) else _e(n)


# ------------------------------------------------------------------------------------------ charts
def _bins(hist: list[list[Any]]) -> list[tuple[str, int]]:
    """(label, count) bars: one per length, or MAX_BARS equal-width bins when there are more lengths."""
    pts = [(int(v), int(c)) for v, c in hist if isinstance(v, (int, float)) and c]
    if not pts:
        return []
    if len(pts) <= MAX_BARS:
        return [(str(v), c) for v, c in pts]
    lo, hi = pts[0][0], pts[-1][0]
    width = max(1, -(-(hi - lo + 1) // MAX_BARS))
    counts: dict[int, int] = {}
    for v, c in pts:
        b = (v - lo) // width
        counts[b] = counts.get(b, 0) + c
    return [(f"{lo + b * width}–{lo + (b + 1) * width - 1}", counts.get(b, 0)) for b in range(max(counts) + 1)]


def _bar_svg(bars: list[tuple[str, int]], caption: str, vertical: bool = True) -> str:
    """An inline SVG bar chart; each bar has a <title> tooltip with its exact label and count."""
    if not bars:
        return ""
    top = max(c for _, c in bars) or 1
    if vertical:
        w, h, pad = 520, 180, 34
        bw = (w - pad - 8) / len(bars)
        parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h + 20}" role="img" '
                 f'aria-label="{_e(caption)}">',
                 f'<line x1="{pad}" y1="{h}" x2="{w - 4}" y2="{h}" stroke="#889"/>',
                 f'<text x="{pad - 4}" y="12" font-size="10" text-anchor="end">{top:,}</text>',
                 f'<text x="{pad - 4}" y="{h}" font-size="10" text-anchor="end">0</text>']
        for k, (label, c) in enumerate(bars):
            bh = (h - 14) * c / top
            x = pad + k * bw
            parts.append(f'<rect x="{x:.1f}" y="{h - bh:.1f}" width="{max(bw - 1, 1):.1f}" height="{bh:.1f}" '
                         f'fill="#3f7fbf"><title>{_e(label)}: {c:,}</title></rect>')
        parts.append(f'<text x="{pad}" y="{h + 14}" font-size="10">{_e(bars[0][0])}</text>')
        parts.append(f'<text x="{w - 4}" y="{h + 14}" font-size="10" text-anchor="end">{_e(bars[-1][0])}</text>')
        parts.append("</svg>")
        return f'<div class="chart"><div class="cap">{_e(caption)}</div>{"".join(parts)}</div>'
    row_h, label_w, w = 18, 150, 520
    h = row_h * len(bars) + 6
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img" aria-label="{_e(caption)}">']
    for k, (label, c) in enumerate(bars):
        y = 3 + k * row_h
        bw = (w - label_w - 70) * c / top
        short = label if len(label) <= 22 else label[:21] + "…"
        parts.append(f'<text x="{label_w - 6}" y="{y + 12}" font-size="11" text-anchor="end">{_e(short)}</text>')
        parts.append(f'<rect x="{label_w}" y="{y}" width="{max(bw, 1):.1f}" height="{row_h - 4}" fill="#6a9f58">'
                     f'<title>{_e(label)}: {c:,}</title></rect>')
        parts.append(f'<text x="{label_w + bw + 4:.1f}" y="{y + 12}" font-size="11">{c:,}</text>')
    parts.append("</svg>")
    return f'<div class="chart"><div class="cap">{_e(caption)}</div>{"".join(parts)}</div>'


def _length_chart(stats: dict[str, Any], scope: str) -> str:
    L = stats.get("lengths") or {}
    hist = L.get("histogram") or []
    if not hist:
        return ""
    summ = ", ".join(f"{k} {L[k]:,}" if isinstance(L.get(k), int) else f"{k} {L[k]}"
                     for k in ("min", "p50", "p90", "p99", "max") if L.get(k) is not None)
    cap = f"{scope}: length of {L.get('column')} ({L.get('unit', '')}); {summ}"
    return _bar_svg(_bins(hist), cap)


def _label_chart(stats: dict[str, Any], scope: str) -> str:
    lab = stats.get("labels") or {}
    counts = [(("null" if v is None else str(v)), int(c)) for v, c in (lab.get("counts") or [])]
    if not counts:
        return ""
    counts.sort(key=lambda p: -p[1])
    bars = counts[:MAX_LABELS]
    rest = sum(c for _, c in counts[MAX_LABELS:])
    if rest:
        bars.append((f"{len(counts) - MAX_LABELS} other values", rest))
    total = sum(c for _, c in counts)
    return _bar_svg(bars, f"{scope}: labels in {lab.get('column')} ({len(counts)} values, {total:,} rows)",
                    vertical=False)


def _charts(stats: dict[str, Any], scope: str) -> str:
    inner = _length_chart(stats, scope) + _label_chart(stats, scope)
    return f'<div class="charts">{inner}</div>' if inner else '<p class="muted">no length or label statistics</p>'


# ------------------------------------------------------------------------------------------ tables
def _where(f: Finding) -> str:
    if f.lines:
        more = "…" if f.count > len(f.lines) else ""
        return "lines " + ", ".join(map(str, f.lines[:10])) + more
    if f.rows:
        more = "…" if f.count > len(f.rows) else ""
        return "rows " + ", ".join(map(str, f.rows[:10])) + more
    return ""


def _examples(f: Finding) -> str:
    out = []
    for e in f.examples[:MAX_FINDING_EXAMPLES]:
        where = (f"row {e.row}" if e.row is not None else "") + (
            f" line {e.line}" if e.line is not None else "")
        out.append(f"<div><span class=\"muted\">{_e(where.strip())}</span> <code>{_e(e.value)}</code></div>")
    return "".join(out)


def _findings_table(findings: Iterable[Finding], with_shards: bool = False) -> str:
    rows = []
    for f in findings:
        cls = ' class="drift"' if _is_drift(f) else ""
        drift = ' <span class="badge drift">DRIFT</span>' if _is_drift(f) else ""
        ratio = f"{f.ratio:.2%}" if isinstance(f.ratio, (int, float)) else ""
        shards = f"<td class=\"mono\">{_e(', '.join(f.shards))}</td>" if with_shards else ""
        rows.append(
            f"<tr{cls}><td><code>{_e(f.check)}</code>{drift}</td><td>{_sev(f)}</td>{shards}"
            f"<td>{_e(f.column or '')}</td><td class=\"num\">{_fmt_int(f.count)}</td><td class=\"num\">{_e(ratio)}</td>"
            f"<td class=\"mono\">{_e(_where(f))}</td><td class=\"ex\">{_examples(f)}</td><td>{_e(f.message)}</td></tr>")
    if not rows:
        return '<p class="muted">no findings</p>'
    head = ("<tr><th>check</th><th>severity</th>" + ("<th>shards</th>" if with_shards else "")
            + "<th>column</th><th>count</th><th>ratio</th><th>first rows</th><th>examples</th><th>message</th></tr>")
    return f"<table>{head}{''.join(rows)}</table>"


def _layout_text(s: ShardReport) -> str:
    """``NAME (source: why)`` or ``unknown (why)`` of a readable shard; "" for an unreadable one or a
    report without layouts (an older report)."""
    if s.rows is None or not s.layout_source:
        return ""
    return f"{s.layout} ({s.layout_source}: {s.layout_why})" if s.layout is not None else f"unknown ({s.layout_why})"


def _layout_groups(shards: tuple[ShardReport, ...]) -> dict[str, list[ShardReport]]:
    """The readable shards grouped by their layout text, in shard order."""
    groups: dict[str, list[ShardReport]] = {}
    for s in shards:
        if (text := _layout_text(s)):
            groups.setdefault(text, []).append(s)
    return groups


def _layout_block(report: Report) -> str:
    """The layout of the shards (one line, or one per layout with its shards when they differ) and,
    per layout, how many shard-level checks do not apply to it; "" for a report without layouts."""
    groups = _layout_groups(report.shards)
    if not groups:
        return ""
    items = []
    for text, shards in groups.items():
        names = "" if len(groups) == 1 else (
            f' <span class="muted">({len(shards)} shard{"s" if len(shards) != 1 else ""}: </span><span class="mono">'
            f'{_e(", ".join(s.path for s in shards[:10]))}{_e(" …") if len(shards) > 10 else ""}</span>'
            '<span class="muted">)</span>')
        items.append(f"<li>{_e(text)}{names}</li>")
    apart: dict[str, int] = {}
    for s in report.shards:
        if s.rows is not None and s.layout is not None and s.not_applicable:
            apart[s.layout] = max(apart.get(s.layout, 0), s.not_applicable)
    notes = "".join(f'<li class="muted">{n:,} checks do not apply to {_e(name)}; <code>datacheck checks --layout '
                    f"{_e(name)}</code> lists them</li>" for name, n in apart.items())
    head = "Layout" if len(groups) == 1 else f"Layouts ({len(groups)})"
    return f'<h3>{head}</h3><ul id="layout">{"".join(items)}{notes}</ul>'


def _shards_table(shards: tuple[ShardReport, ...]) -> str:
    rows = []
    per_shard = len(_layout_groups(shards)) > 1  # the shards differ: each row says its layout
    anchors = _anchors(shards)
    for s in shards:
        drift = any(_is_drift(f) for f in s.findings)
        cls = ' class="drift"' if drift else ""
        checks = sorted({f.check for f in s.findings if f.severity != "info"})
        rows_n = "unreadable" if s.rows is None else _fmt_int(s.rows)
        tag = ' <span class="badge drift">DRIFT</span>' if drift else ""
        rows.append(
            f"<tr{cls}><td>{_badge(s.status)}{tag}</td><td class=\"mono\"><a href=\"#{_e(anchors[s.path])}\">"
            f"{_e(s.path)}</a></td><td>{_e(s.format)}</td>"
            + (f"<td>{_e(s.layout or ('unknown' if _layout_text(s) else ''))}</td>" if per_shard else "")
            + f"<td class=\"num\">{rows_n}</td>"
            f"<td class=\"num\">{_fmt_int(s.bytes)}</td><td>{_e(', '.join(checks))}</td>"
            f"<td class=\"mono\">{_e(s.content_hash)}</td></tr>")
    head = ("<tr><th>status</th><th>shard</th><th>format</th>" + ("<th>layout</th>" if per_shard else "")
            + "<th>rows</th><th>bytes</th><th>checks with findings</th><th>content hash</th></tr>")
    return f"<table>{head}{''.join(rows)}</table>"


def _anchors(shards: tuple[ShardReport, ...]) -> dict[str, str]:
    """Each shard's HTML id: ``shard-`` and its path with every character but a letter or digit as
    ``-``; paths that give the same id (``a<b`` and ``a>b``) get ``-2``, ``-3``, ... in report order,
    so every id is unique and each link of the shards table leads to its own shard."""
    out: dict[str, str] = {}
    used: set[str] = set()
    for s in shards:
        base = "shard-" + "".join(ch if ch.isalnum() else "-" for ch in s.path)
        anchor, n = base, 1
        while anchor in used:
            n += 1
            anchor = f"{base}-{n}"
        used.add(anchor)
        out[s.path] = anchor
    return out


# ------------------------------------------------------------------------------------------ page
def render_html(report: Report, title: str | None = None) -> str:
    """The report as one self-contained HTML page (UTF-8 text).

    Args:
        report: the audit report (as :func:`datacheck.read_report` or :func:`datacheck.audit` return it).
        title: page title; default ``"datacheck report <index_hash>"``.

    Returns:
        The HTML document. It references nothing outside itself (no scripts, fonts or images);
        every data value is escaped.
    """
    s = report.summary
    title = title or f"datacheck report {report.index_hash}"
    drift = [(sh.path, f) for sh in report.shards for f in sh.findings if _is_drift(f)]
    drift += [(", ".join(f.shards) or "dataset", f) for f in report.dataset_findings if _is_drift(f)]
    cards = "".join(
        f'<div class="card"><div class="n">{_fmt_int(v)}</div><div class="l">{_e(k)}</div></div>'
        for k, v in (("shards", s.get("shards")), ("rows", s.get("rows")), ("errors", s.get("errors")),
                     ("warnings", s.get("warnings")), ("failing the policy", s.get("policy_failures", 0))))
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        # no external resource of any kind may load (CSP blocks scripts, fonts, images, connections)
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
        "img-src data:\">",
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>",
        f"<header><h1>{_e(title)} {_badge(s['status'])}</h1>",
        f'<div class="meta">datacheck {_e(report.datacheck_version)} · created {_e(report.created_at)} · '
        f"index_hash {_e(report.index_hash)} · config_hash {_e(report.config_hash)} · "
        f"--fail-on {_e(report.fail_on)}</div></header><main>",
        f'<section id="summary"><h2>Summary</h2><div class="cards">{cards}</div>{_layout_block(report)}</section>',
    ]
    per_shard = len(_layout_groups(report.shards)) > 1
    if drift:
        items = "".join(f"<li><code>{_e(f.check)}</code> in <span class=\"mono\">{_e(where)}</span>: "
                        f"{_e(f.message)}</li>" for where, f in drift)
        parts.append(f'<section id="drift"><h2>Drift <span class="badge drift">DRIFT</span></h2>'
                     f'<div class="callout"><ul>{items}</ul></div></section>')
    parts.append(f'<section id="shards"><h2>Shards</h2>{_shards_table(report.shards)}</section>')
    parts.append(f'<section id="dataset"><h2>Dataset</h2><h3>Dataset-level findings</h3>'
                 f"{_findings_table(report.dataset_findings, with_shards=True)}"
                 f"<h3>Distributions over all shards</h3>{_charts(report.stats, 'dataset')}</section>")
    anchors = _anchors(report.shards)
    for sh in report.shards:
        rows_n = "unreadable" if sh.rows is None else f"{sh.rows:,} rows"
        lay = f'<div class="muted">layout: {_e(_layout_text(sh))}</div>' if per_shard and _layout_text(sh) else ""
        parts.append(
            f'<section id="{_e(anchors[sh.path])}" class="shard"><h2>{_badge(sh.status)} '
            f'<span class="mono">{_e(sh.path)}</span> <span class="muted">({_e(sh.format)}, {_e(rows_n)}, '
            f"{_fmt_int(sh.bytes)} bytes)</span></h2>{lay}{_findings_table(sh.findings)}"
            f"{_charts(sh.stats, sh.path) if sh.rows is not None else ''}</section>")
    if report.skipped:
        items = "".join(f"<tr><td><code>{_e(k.get('check'))}</code></td><td>{_e(k.get('reason'))}</td>"
                        f"<td class=\"mono\">{_e(', '.join(k.get('shards') or []))}</td></tr>"
                        for k in report.skipped)
        parts.append(f'<section id="skipped"><h2>Skipped checks ({len(report.skipped)})</h2><table>'
                     f"<tr><th>check</th><th>reason</th><th>shards</th></tr>{items}</table></section>")
    parts.append("</main></body></html>\n")
    return "\n".join(parts)
