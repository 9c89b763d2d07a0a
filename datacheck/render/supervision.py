"""A row's tokens shown by supervision (``datacheck inspect --tokenizer``), like axolotl's ``--debug``
view: which tokens the loss trains on (supervised), which it ignores (prompt, system and user turns:
``ignore_index`` or assistant mask 0), which are padding, and padding the loss trains on (a defect).

Three forms of the same ``(token text, class)`` pairs (classes from
:func:`datacheck.model.supervision.classify_supervision`):

- :func:`render_plain`: no colour (a pipe, a file, CI logs): runs of one class as
  ``[S: ...]`` / ``[I: ...]`` / ``[P: ...]`` / ``[X: ...]`` with a legend;
- :func:`render_ansi`: each token coloured with ``rich`` (the library the CLI's progress bar uses):
  green supervised, grey ignored, blue padding, white on red padding trained on;
- :func:`render_html_tokens`: ``<span>`` elements with a class per supervision kind, for the HTML
  row view (:func:`render_rows_html`, ``inspect --html FILE``).

Runs of identical padding tokens are collapsed to ``token×N``; newlines and tabs in token text are
shown as ``\\n`` and ``\\t`` so that a row stays on its lines. Given ``run_text`` (``(class, text)``
runs whose text the tokenizer decoded from the run's joined ids:
:attr:`datacheck.tools.inspect.OffendingRow.supervision_runs`), each form shows those texts: a
character split over byte-level tokens comes out whole and WordPiece pieces are joined into words;
the token counts still come from the pairs.
"""
from __future__ import annotations

import html
import io
from typing import Any, Iterable, Sequence

from datacheck.model.supervision import PADDING, PADDING_SUPERVISED, SUPERVISED, SUPERVISION_CLASSES
from datacheck.render.text import terminal_safe

__all__ = ["LEGEND", "MARK", "STYLE", "runs", "shown_token", "render_plain", "render_ansi", "render_html_tokens",
           "render_rows_html", "supervision_counts"]

#: One-letter mark of each class in the plain form.
MARK = {"supervised": "S", "ignored": "I", "padding": "P", "padding_supervised": "X"}
#: ``rich`` style of each class in the coloured form.
STYLE = {"supervised": "bold green", "ignored": "bright_black", "padding": "blue",
         "padding_supervised": "bold white on red"}
#: What each class means, in words (the legend).
LEGEND = {"supervised": "supervised (a target of the loss)",
          "ignored": "ignored (ignore_index or assistant mask 0: prompt, system, user)",
          "padding": "padding (attention mask 0)",
          "padding_supervised": "padding the loss trains on (padding.label_not_ignored)"}
_CSS_CLASS = {"supervised": "sup", "ignored": "ign", "padding": "pad", "padding_supervised": "padsup"}


def shown_token(token: str) -> str:
    """A token's text as shown: backslash, newline, tab and carriage return as their escapes, every
    other terminal control character too (:func:`~datacheck.render.text.terminal_safe`: a tokenizer's
    vocabulary can hold ``ESC``)."""
    return terminal_safe(token.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t")
                         .replace("\r", "\\r"))


def runs(pairs: Iterable[tuple[str, str]]) -> list[tuple[str, list[str]]]:
    """``(class, [token text, ...])`` runs of consecutive tokens of one class, padding runs of one
    repeated token collapsed to ``["token×N"]``; token text shown with escaped newlines/tabs."""
    out: list[tuple[str, list[str]]] = []
    for tok, cls in pairs:
        if out and out[-1][0] == cls:
            out[-1][1].append(tok)
        else:
            out.append((cls, [tok]))
    done = []
    for cls, toks in out:
        if cls in (PADDING, PADDING_SUPERVISED) and len(toks) > 1 and len(set(toks)) == 1:
            done.append((cls, [f"{shown_token(toks[0])}×{len(toks)}"]))
        else:
            done.append((cls, [shown_token(t) for t in toks]))
    return done


def _body(pairs: Sequence[tuple[str, str]],
          run_text: Sequence[tuple[str, str]] | None) -> list[tuple[str, list[str]]]:
    """The runs shown: ``run_text`` (one text per run, newlines/tabs escaped) when given, else
    :func:`runs` of the per-token pairs."""
    if run_text is None:
        return runs(pairs)
    return [(c, [shown_token(t)]) for c, t in run_text]


def supervision_counts(pairs: Sequence[tuple[str, str]]) -> dict[str, int]:
    """Tokens per class (every class of :data:`SUPERVISION_CLASSES`, zeros included)."""
    counts = dict.fromkeys(SUPERVISION_CLASSES, 0)
    for _, c in pairs:
        counts[c] += 1
    return counts


def _counts_line(pairs: Sequence[tuple[str, str]]) -> str:
    c = supervision_counts(pairs)
    return (f"{len(pairs)} tokens: {c[SUPERVISED]} supervised, {c['ignored']} ignored, {c[PADDING]} padding"
            + (f", {c[PADDING_SUPERVISED]} padding trained on" if c[PADDING_SUPERVISED] else ""))


def render_plain(pairs: Sequence[tuple[str, str]], legend: bool = True,
                 run_text: Sequence[tuple[str, str]] | None = None) -> str:
    """The row without colour: ``[I: <|im_start|>user\\nHi][S: Hello<|im_end|>][P: <pad>×12]``, a
    token count line, and (``legend``) what each mark means. ``run_text``: see the module docstring."""
    body = "".join(f"[{MARK[c]}: {''.join(toks)}]" for c, toks in _body(pairs, run_text))
    out = [body, _counts_line(pairs)]
    if legend:
        out.append("legend: " + "; ".join(f"{MARK[c]} = {LEGEND[c]}" for c in SUPERVISION_CLASSES))
    return "\n".join(out)


def render_ansi(pairs: Sequence[tuple[str, str]], legend: bool = True, width: int = 120,
                run_text: Sequence[tuple[str, str]] | None = None) -> str:
    """The row with ANSI colours (``rich``, standard 16-colour system): each token (or, with
    ``run_text``, each decoded run) in its class's :data:`STYLE`, then the token counts and a
    coloured legend."""
    from rich.console import Console
    from rich.text import Text

    text = Text()
    for c, toks in _body(pairs, run_text):
        for t in toks:
            text.append(t, style=STYLE[c])
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, color_system="standard", width=width, soft_wrap=True,
                      highlight=False, emoji=False, markup=False)
    console.print(text)
    console.print(_counts_line(pairs))
    if legend:
        leg = Text("legend: ")
        for k, c in enumerate(SUPERVISION_CLASSES):
            leg.append(LEGEND[c], style=STYLE[c])
            if k < len(SUPERVISION_CLASSES) - 1:
                leg.append("; ")
        console.print(leg)
    return buf.getvalue().rstrip("\n")


def render_html_tokens(pairs: Sequence[tuple[str, str]], run_text: Sequence[tuple[str, str]] | None = None) -> str:
    """``<div class="toks">`` of one ``<span class="tok CLASS" title="class">`` per token (padding
    runs collapsed; with ``run_text``, per decoded run), every text escaped (data may hold markup)."""
    spans = []
    for c, toks in _body(pairs, run_text):
        for t in toks:
            spans.append(f'<span class="tok {_CSS_CLASS[c]}" title="{html.escape(c)}">{html.escape(t)}</span>')
    return f'<div class="toks">{"".join(spans)}</div>'


_ROW_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:18px 28px;color:#1d232a}
h1{font-size:20px}h2{font-size:16px;margin:18px 0 6px}.muted{color:#5f6b76;font-size:12px}
.toks{font-family:ui-monospace,"DejaVu Sans Mono",Menlo,monospace;font-size:12px;line-height:1.9;word-break:break-all;
border:1px solid #d7dce1;border-radius:6px;padding:8px;background:#fbfcfd}
.tok{border-radius:3px;padding:1px 1px;margin:0 1px 0 0;white-space:pre-wrap}
.tok.sup{background:#c8e6c9;color:#1b5e20}.tok.ign{background:#eceff1;color:#607d8b}
.tok.pad{background:#e3f2fd;color:#1565c0}.tok.padsup{background:#c62828;color:#fff}
.legend .tok{margin-right:10px}
"""


def render_rows_html(rows: Iterable[dict[str, Any]], title: str = "datacheck inspect: tokens by supervision",
                     tokenizer: str | None = None) -> str:
    """A self-contained HTML page (inline CSS, no script) of rows shown by supervision.

    Args:
        rows: dicts with ``shard`` (path), ``row`` (0-based), ``check`` (the check key shown, or
            ``"(none)"``), ``pairs`` (``(token text, class)`` pairs), optionally ``runs``
            (``(class, decoded text)`` runs, shown instead of the tokens).
        title: the page title.
        tokenizer: where the tokenizer came from (shown under the title).

    Returns:
        The HTML text.
    """
    e = html.escape
    legend = "".join(f'<span class="tok {_CSS_CLASS[c]}">{e(LEGEND[c])}</span>' for c in SUPERVISION_CLASSES)
    parts = [f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{e(title)}</title>"
             f"<style>{_ROW_CSS}</style></head><body><h1>{e(title)}</h1>",
             f'<p class="muted">tokenizer: {e(tokenizer or "")}</p><p class="legend">{legend}</p>']
    for r in rows:
        pairs = r["pairs"]
        parts.append(f"<h2>{e(str(r['shard']))} row {e(str(r['row']))} "
                     f"<span class=\"muted\">{e(str(r.get('check') or ''))}</span></h2>"
                     f'<p class="muted">{e(_counts_line(pairs))}</p>{render_html_tokens(pairs, r.get("runs"))}')
    parts.append("</body></html>\n")
    return "".join(parts)
