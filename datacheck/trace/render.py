"""``datacheck trace`` output: text (the timeline) and one offline HTML file with the curves (inline SVG)."""
from __future__ import annotations

import html
import math
from typing import Any

from datacheck.trace.run import Curve, TraceResult

__all__ = ["render_text", "render_html"]


def render_text(res: TraceResult, data: dict[str, Any] | None) -> str:
    out = []
    for st in res.logs:
        line = f"log {st.source}: {st.format}, {st.records} record(s) from {st.lines} line(s)"
        if st.line_formats and st.format == "text":
            line += " (" + ", ".join(f"{k} {v}" for k, v in sorted(st.line_formats.items())) + ")"
        if st.bad_lines:
            line += f", {st.bad_lines} line(s) not parsed, e.g. line {st.bad_examples[0][0]}: {st.bad_examples[0][1]!r}"
        out.append(line)
        if st.stopped:
            out.append(f"  warning: {st.source}: {st.stopped}")
    out.append("first anomaly: " + _first(res.first_bad))
    conv = res.convention or {}
    if conv.get("assumed") and res.first_bad is not None:
        out.append(f"  note: step join {conv['source']}")
    for f in res.findings:
        out.append(f"  [{f.severity}] {f.check}: {f.message}")
    for note in res.notes:
        out.append(f"  note: {note}")
    resumes = [e for e in res.events if e["kind"] == "resume"]
    backoffs = [e for e in res.events if e["kind"] == "scale_backoff"]
    if resumes:
        out.append("resumes: " + ", ".join(f"{e['from_step']}->{e['step']}" for e in resumes[:20]))
    if backoffs:
        out.append(f"loss-scale back-offs: {len(backoffs)} (first at step {backoffs[0]['step']}: "
                   f"{backoffs[0]['from']} -> {backoffs[0]['to']})")
    if data is not None:
        out.append(f"data: {data['message']}")
        if data.get("source"):
            out.append(f"  rows from {data['source']['description']}")
        if data.get("warning"):
            out.append(f"  warning: {data['warning']}")
        audited = data.get("rows")  # None: no anomaly and no --step, no rows audited
        if audited:
            opt = audited.get("optimizer_steps", {})
            for step, ranks in sorted(((int(k), v) for k, v in audited["steps"].items())):
                for rank, rows in ranks.items():
                    toks = (audited["supervised_tokens"] or {}).get(str(step), {}).get(rank)
                    out.append(f"  log step {step} = optimizer step {opt.get(str(step))}, rank {rank}: global rows "
                               f"{rows}" + (f", {toks} supervised token(s)" if toks is not None else ""))
            for r in audited.get("failing_rows", []):  # errors first
                out.append(f"  [{r['severity']}] {r['shard']} row {r['shard_row']} (global {r['row']}): "
                           f"{', '.join(r['checks'])}")
            for f in audited["findings"]:
                locs = f["details"].get("locations") or []
                where = ", ".join(f"{x['shard']} row {x['shard_row']}" for x in locs) or f"rows {f['rows']}"
                out.append(f"  [{f['severity']}] {f['check']}: {f['message']} ({where})")
    return "\n".join(out) + "\n"


def _first(fb: dict[str, Any] | None) -> str:
    """The first anomaly, its step join, and the window the data section audits (the anomaly's own
    window widened by ``--window``)."""
    if fb is None:
        return "none"
    w = fb.get("audited_window") or fb["window"]
    text = f"{fb['check']} at {fb.get('step_map') or 'step ' + str(fb['step'])} ({fb.get('rank')}), window {w[0]}..{w[1]}"
    if list(w) != list(fb["window"]):
        text += f" audited (the anomaly's window {fb['window'][0]}..{fb['window'][1]} and the steps before it)"
    return text


_W, _H, _PAD = 720, 160, 40


def _svg(curve: Curve, mark: int | None, title: str, log: bool) -> str:
    pts = [(s, v) for s, v in curve.points if not log or v > 0]
    if not pts and not curve.bad:
        return ""
    steps = [s for s, _ in pts] + curve.bad + ([mark] if mark is not None else [])
    x0, x1 = min(steps), max(steps)
    ys = [math.log10(v) if log else v for _, v in pts] or [0.0]
    y0, y1 = min(ys), max(ys)
    def sx(s):
        return (_PAD + (s - x0) / ((x1 - x0) or 1) * (_W - 2 * _PAD))
    def sy(y):
        return (_H - _PAD / 2 - (y - y0) / ((y1 - y0) or 1) * (_H - _PAD))
    path = " ".join(f"{sx(s):.1f},{sy(y):.1f}" for (s, _), y in zip(pts, ys))
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" role="img" aria-label="{html.escape(title)}">',
             f'<text x="4" y="14" font-size="12">{html.escape(title)}{" (log10)" if log else ""}: '
             f'{y0:.4g} .. {y1:.4g}, steps {x0}..{x1}</text>',
             f'<polyline fill="none" stroke="#1f77b4" stroke-width="1.2" points="{path}"/>']
    for b in curve.bad[:200]:
        parts.append(f'<line x1="{sx(b):.1f}" x2="{sx(b):.1f}" y1="{_PAD / 2}" y2="{_H - _PAD / 2}" stroke="#d62728" '
                     f'stroke-opacity="0.3"><title>non-finite at step {b}</title></line>')
    if mark is not None:
        parts.append(f'<line x1="{sx(mark):.1f}" x2="{sx(mark):.1f}" y1="{_PAD / 2}" y2="{_H - _PAD / 2}" stroke="#d62728" '
                     f'stroke-width="2" stroke-dasharray="4 2"><title>first anomaly, step {mark}</title></line>')
    parts.append("</svg>")
    return "".join(parts)


def render_html(res: TraceResult, data: dict[str, Any] | None) -> str:
    """One self-contained HTML page (no script, no external resource): the timeline text, the findings,
    and per rank the loss, grad-norm, lr and loss-scale curves with the first anomaly marked."""
    mark = res.first_bad["step"] if res.first_bad else None
    body = [f"<h1>datacheck trace</h1><pre>{html.escape(render_text(res, data))}</pre>"]
    for name, curves in res.curves.items():
        body.append(f"<h2>{html.escape(name)}</h2>")
        for metric, log in (("loss", False), ("grad_norm", True), ("lr", False), ("loss_scale", True)):
            svg = _svg(curves[metric], mark, metric, log)
            if svg:
                body.append(f"<div>{svg}</div>")
    return ("<!doctype html><html><head><meta charset=\"utf-8\"><title>datacheck trace</title>"
            "<style>body{font-family:sans-serif;margin:1em}pre{white-space:pre-wrap}</style></head><body>"
            + "".join(body) + "</body></html>\n")
