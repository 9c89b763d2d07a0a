"""``datacheck trace`` output: text (the four answers, the timeline, the verdict) and one offline HTML
file with the curves (inline SVG: the anomalies' bands and classes marked, the eval loss beside the train loss)."""
from __future__ import annotations

import html
import math
from typing import Any

from datacheck.trace.rules import scale_text
from datacheck.trace.run import Curve, TraceResult
from datacheck.trace.steps import RECORD
from datacheck.trace.verdict import build_verdict, verdict_text

__all__ = ["render_text", "render_html"]

#: Megatron samples listed per (step, rank) in the text output
_SAMPLES_SHOWN = 8



def _consumed_text(at: list[dict[str, Any]]) -> str:
    """``" (loaded at log step 7 by rank 1, micro-batch 1)"``: where a failing row was loaded in the
    audited steps (the first 3 places, then how many more); "" when none is known."""
    def one(a: dict[str, Any]) -> str:
        mb = f", micro-batch {a['micro_batch']}" if a.get("micro_batch") is not None else ""
        return f"log step {a['step']} by rank {a['rank']}{mb}"
    if not at:
        return ""
    more = f" and {len(at) - 3} more" if len(at) > 3 else ""
    return " (loaded at " + "; ".join(one(a) for a in at[:3]) + more + ")"

def render_text(res: TraceResult, data: dict[str, Any] | None, verdict: dict[str, Any] | None = None) -> str:
    """The text output: the four answers first (:func:`datacheck.trace.verdict.verdict_text`), the logs
    read, the first anomaly, the findings, the timeline, the rows, then the verdict per anomaly and what
    could not be judged."""
    v = verdict if verdict is not None else build_verdict(res, data)
    vt = verdict_text(v)
    answers = [ln for ln in vt if ln[:3] in ("1. ", "2. ", "3. ", "4. ")]
    out = list(answers)
    for st in res.logs:
        line = f"log {st.source}: {st.format}, {st.records} record(s) from {st.lines} line(s)"
        if st.line_formats and st.format == "text":
            line += " (" + ", ".join(f"{k} {v}" for k, v in sorted(st.line_formats.items())) + ")"
        if st.bad_lines:
            line += f", {st.bad_lines} line(s) not parsed, e.g. line {st.bad_examples[0][0]}: {st.bad_examples[0][1]!r}"
        out.append(line)
        if st.stopped:
            out.append(f"  warning: {st.source}: {st.stopped}")
        if (crashed := st.crash_text()) is not None:
            out.append(f"  crashed: {crashed}")
    unjudged = len(v["not_judged"])
    loud = sorted({f.check for f in res.findings if f.severity in ("error", "warn")})
    out.append("first anomaly: " + _first(res.first_bad, unjudged, loud))
    conv = res.convention or {}
    if res.first_bad is not None and res.first_bad.get("unplaced"):  # no join: record numbers are no steps
        out.append("  note: no rows are named from record numbers: " + "; ".join(conv.get("unplaced") or []))
    elif conv.get("assumed") and res.first_bad is not None:
        out.append(f"  note: step join {conv['source']}")
    for f in res.findings:
        out.append(f"  [{f.severity}] {f.check}: {f.message}")
    for note in res.notes:
        out.append(f"  note: {note}")
    resumes = [e for e in res.events if e["kind"] == "resume"]
    backoffs = [e for e in res.events if e["kind"] == "scale_backoff"]
    if resumes:
        out.append("resumes: " + ", ".join(f"{e['from_step']}->{e['step']}" for e in resumes[:20]))
    restarts = [e for e in res.events if e["kind"] == "restart"]
    if restarts:  # a run restarted from scratch into the same log: each run judged on its own
        out.append("restarted from scratch (each run judged on its own): " + ", ".join(
            f"{e['from_step']}->{e['step']} at {e['where']} ({e['rank']})" for e in restarts[:20]))
    if backoffs:
        out.append(_backoffs_text(backoffs))
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
                    mb = (audited.get("micro_batches") or {}).get(str(step))
                    out.append(f"  log step {step} = optimizer step {opt.get(str(step))}"
                               + (f" (micro-batch {mb})" if mb is not None else "") + f", rank {rank}: global rows "
                               f"{rows}" + (f", {toks} supervised token(s)" if toks is not None else ""))
                    samples = audited.get("samples", {}).get(str(step), {}).get(rank, [])
                    for smp in samples[:_SAMPLES_SHOWN]:  # a Megatron sample: the documents' tokens it reads
                        reads = ", ".join(f"global {g} tokens {a}..{b - 1}" for g, a, b in smp["reads"])
                        out.append(f"    sample {smp['sample']} (micro-batch {smp['micro_batch']}): {reads}")
                    if len(samples) > _SAMPLES_SHOWN:
                        out.append(f"    ... {len(samples) - _SAMPLES_SHOWN} more sample(s) (--format json)")
            for r in audited.get("failing_rows", []):  # errors first
                out.append(f"  [{r['severity']}] {r['shard']} row {r['shard_row']} (global {r['row']}): "
                           f"{', '.join(r['checks'])}" + _consumed_text(r.get("at") or []))
            for f in audited["findings"]:
                locs = f["details"].get("locations") or []
                where = ", ".join(f"{x['shard']} row {x['shard_row']}" for x in locs) or f"rows {f['rows']}"
                out.append(f"  [{f['severity']}] {f['check']}: {f['message']} ({where})")
    out.extend(ln for ln in vt if ln not in answers)
    return "\n".join(out) + "\n"


def _backoffs_text(backoffs: list[dict[str, Any]]) -> str:
    """The timeline's loss-scale back-offs in one line: how many, those of the fp16 initial scale
    search apart (as ``log.loss_scale_collapse`` counts them: never part of a collapse)."""
    def one(e: dict[str, Any]) -> str:
        return f"at {e.get('step_unit', 'step')} {e['step']}: {scale_text(e['from'])} -> {scale_text(e['to'])}"
    search = [e for e in backoffs if e.get("search")]
    rest = [e for e in backoffs if not e.get("search")]
    text = f"loss-scale back-offs: {len(backoffs)}"
    if not search:
        return text + f" (first {one(backoffs[0])})"
    text += f" ({len(search)} of the fp16 initial scale search, from the scaler's initial scale: first {one(search[0])}"
    if rest:
        text += f"; then {len(rest)}: first {one(rest[0])}, last {one(rest[-1])}"
    return text + ")"


def _first(fb: dict[str, Any] | None, unjudged: int = 0, loud: list[str] | None = None) -> str:
    """The first anomaly, its step join, and the window the data section audits (the anomaly's own
    window widened by ``--window``); with none, the checks whose findings at warn or above (``loud``,
    listed below the line) mark no first bad step (``log.no_loss``: no step at all; ``log.skipped_steps``:
    fp16 overflows without a non-finite loss), and how many checks could not judge the log."""
    if fb is None:
        head = (f"none placed at a step: the finding(s) at warn or above below ({', '.join(loud)}) mark no first "
                "bad step" if loud else "none at warn or above")
        return head + (f"; {unjudged} check(s) could not judge (see 'not judged')" if unjudged else "")
    w = fb.get("audited_window") or fb["window"]
    text = f"{fb['check']} at {fb.get('step_map') or 'step ' + str(fb['step'])} ({fb.get('rank')}), window {w[0]}..{w[1]}"
    if list(w) != list(fb["window"]):
        text += f" audited ({_relation(w[0], w[1], fb['window'][0], fb['window'][1])})"
    aw = fb.get("after_warning")
    if aw:  # a dynamics warning before the non-finite value: how the run came there, not the failure
        text += f"; after {aw['check']} from step {aw['step']} ({aw.get('rank')}): a warning, the non-finite value is the failure"
    return text


def _relation(lo: int, hi: int, a: int, b: int) -> str:
    """How the audited log steps ``lo..hi`` (``--step``, widened by ``--window``) stand to the anomaly's
    window ``a..b``: said from where they lie, never assumed to hold it."""
    anomaly = f"the anomaly's window {a}..{b}"
    if hi < a:
        return f"before {anomaly}, ending {a - hi} step(s) before it starts"
    if lo > b:
        return f"after {anomaly}, starting {lo - b} step(s) after it ends"
    if lo <= a and hi >= b:
        before, after = a - lo, hi - b
        return anomaly + (f", {before} step(s) before it" if before else "") + (
            f", {after} step(s) after it" if after else "")
    if lo > a and hi < b:
        return f"inside {anomaly}"
    return f"overlapping {anomaly}: steps {max(lo, a)}..{min(hi, b)} of it"


_W, _H, _PAD = 720, 160, 40


_CLASS_COLOR = {"numeric": "#d62728", "dynamics": "#ff7f0e", "metric": "#9467bd", "data": "#8c564b",
                "resume": "#17becf", "rank": "#e377c2"}


def _svg(curve: Curve, mark: int | None, title: str, log: bool, bands: list[dict[str, Any]] | None = None,
         evals: list[tuple[int, float]] | None = None, unit: str = "step") -> str:
    """One chart: the curve's points against its x numbers (``unit``: "step", or "record" for a log
    whose records carry no step number), the bands, the non-finite points and the first anomaly
    (``mark``, None: not on this chart). The title gives the finite y range, or says there is none."""
    pts = [(s, v) for s, v in curve.points if not log or v > 0]
    evals = [(s, v) for s, v in (evals or []) if not log or v > 0]
    if not pts and not curve.bad and not evals:
        return ""
    bands = bands or []
    steps = [s for s, _ in pts] + [s for s, _ in evals] + curve.bad + ([mark] if mark is not None else []) + \
        [b["from"] for b in bands] + [b["to"] for b in bands]
    x0, x1 = min(steps), max(steps)
    ys = [math.log10(v) if log else v for _, v in pts]
    eys = [math.log10(v) if log else v for _, v in evals]
    finite = bool(ys or eys)  # a curve of only non-finite values has no y range to give
    y0, y1 = (min(ys + eys), max(ys + eys)) if finite else (0.0, 0.0)
    where = f"{unit}s {x0}..{x1}" if x1 != x0 else f"{unit} {x0}"
    # the values themselves, also on a log axis (its exponents would read as the values: a grad norm of -0.13)
    span = (f"{10 ** y0:.4g} .. {10 ** y1:.4g}" if log else f"{y0:.4g} .. {y1:.4g}") if finite else (
        "no finite positive value" if log else "no finite value") + f" ({len(curve.bad)} non-finite)"
    def sx(s):
        return (_PAD + (s - x0) / ((x1 - x0) or 1) * (_W - 2 * _PAD))
    def sy(y):
        return (_H - _PAD / 2 - (y - y0) / ((y1 - y0) or 1) * (_H - _PAD))
    path = " ".join(f"{sx(s):.1f},{sy(y):.1f}" for (s, _), y in zip(pts, ys))
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" role="img" aria-label="{html.escape(title)}">',
             f'<text x="4" y="14" font-size="12">{html.escape(title)}{" (log axis)" if log else ""}: '
             f'{span}, {where}</text>',
             ]
    for b in bands:
        x_a, x_b = sx(b["from"]), sx(b["to"])
        color = _CLASS_COLOR.get(b["class"], "#7f7f7f")
        parts.append(f'<rect x="{x_a:.1f}" y="{_PAD / 2}" width="{max(2.0, x_b - x_a):.1f}" height="{_H - _PAD}" '
                     f'fill="{color}" fill-opacity="0.15"><title>{html.escape(b["label"])}</title></rect>'
                     f'<text x="{x_a + 2:.1f}" y="{_PAD / 2 + 10}" font-size="10" fill="{color}">'
                     f'{html.escape(b["class"])}</text>')
    parts.append(f'<polyline fill="none" stroke="#1f77b4" stroke-width="1.2" points="{path}"/>')
    if evals:
        epath = " ".join(f"{sx(s):.1f},{sy(y):.1f}" for (s, _), y in zip(evals, eys))
        parts.append(f'<polyline fill="none" stroke="#2ca02c" stroke-width="1.5" stroke-dasharray="5 3" '
                     f'points="{epath}"><title>eval loss</title></polyline>')
        parts.append(f'<text x="{_W - 160}" y="14" font-size="11" fill="#2ca02c">eval loss (dashed)</text>')
    for b in curve.bad[:200]:
        parts.append(f'<line x1="{sx(b):.1f}" x2="{sx(b):.1f}" y1="{_PAD / 2}" y2="{_H - _PAD / 2}" stroke="#d62728" '
                     f'stroke-opacity="0.3"><title>non-finite at {unit} {b}</title></line>')
    if mark is not None:
        parts.append(f'<line x1="{sx(mark):.1f}" x2="{sx(mark):.1f}" y1="{_PAD / 2}" y2="{_H - _PAD / 2}" stroke="#d62728" '
                     f'stroke-width="2" stroke-dasharray="4 2"><title>first anomaly, {unit} {mark}</title></line>')
    parts.append("</svg>")
    return "".join(parts)


def _bands(v: dict[str, Any], stream: str, last_step: int | None) -> list[dict[str, Any]]:
    """Per anomaly of ``stream`` (or of the run): its steps as a band (from its onset, or its last good
    step, to its end: a divergence to the log's end, a plateau to its end) and its class."""
    out = []
    for a in v["anomalies"]:
        if a["rank"] is not None and a["rank"] != stream:
            continue
        ev = [e.get("step") for e in a["evidence"] if isinstance(e.get("step"), int)]
        lo = a["step"] if a["step"] is not None else min(ev, default=None)  # a run-level finding: its evidence
        if lo is None:
            continue
        hi = max([lo] + ev)
        if a["check"] in ("log.divergence", "log.zero_lr", "log.stagnation", "log.vanishing_grad") and last_step:
            hi = max(hi, last_step)
        unit = a.get("step_unit", "step")
        out.append({"from": lo, "to": hi, "class": a["class"], "label": f"{a['class']}: {a['check']} from {unit} {lo}"})
    return out[:20]


def render_html(res: TraceResult, data: dict[str, Any] | None, verdict: dict[str, Any] | None = None) -> str:
    """One self-contained HTML page (no script, no external resource): the text output, and per rank
    the loss (with the eval loss beside it, dashed), grad-norm, lr and loss-scale curves with the first
    anomaly marked and each anomaly's steps shaded in its class's colour, the class written on it. A
    log whose records carry no step number (:attr:`TraceResult.step_less`) is charted against its
    record numbers, said "record N" as in the text; the first anomaly is marked only on the charts
    whose x numbers are of its kind (a record number is no step)."""
    v = verdict if verdict is not None else build_verdict(res, data)
    fb = res.first_bad
    mark_unit = (fb.get("step_unit") or "step") if fb else None
    body = [f"<h1>datacheck trace</h1><pre>{html.escape(render_text(res, data, v))}</pre>"]
    for name, curves in res.curves.items():
        body.append(f"<h2>{html.escape(name)}</h2>")
        last = max((s for c in curves.values() for s, _ in c.points[-1:]), default=None)
        unit = RECORD if name in res.step_less else "step"
        mark = fb["step"] if fb is not None and mark_unit == unit else None
        bands = _bands(v, name, last)
        evals = [(e["step"], e["loss"]) for e in res.events if e["kind"] == "eval" and e["rank"] == name
                 and isinstance(e.get("loss"), float) and math.isfinite(e["loss"])]
        for metric, log in (("loss", False), ("grad_norm", True), ("lr", False), ("loss_scale", True)):
            svg = _svg(curves[metric], mark, metric, log, bands, evals if metric == "loss" else None, unit)
            if svg:
                body.append(f"<div>{svg}</div>")
    return ("<!doctype html><html><head><meta charset=\"utf-8\"><title>datacheck trace</title>"
            "<style>body{font-family:sans-serif;margin:1em}pre{white-space:pre-wrap}</style></head><body>"
            + "".join(body) + "</body></html>\n")
