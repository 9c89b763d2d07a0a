"""How names and values from the data are shown in text outputs so that none of them can act on
the terminal or break the layout: terminal control characters escaped, line breaks written as
``\\n`` in one-line outputs, markdown code spans and free text nothing can break out of. The audit's
text and markdown reports (:mod:`datacheck.render.text`), ``diff``, ``inspect`` and ``clean`` show
shard names, column names and values through these."""
from __future__ import annotations

import re

__all__ = ["CONTROL", "LINE_BREAKS", "terminal_safe", "one_line", "md_code", "md_text"]

#: characters a terminal acts on instead of showing: the C0 controls but tab and newline, DEL, the
#: C1 controls (Unicode category Cc), and the bidirectional embeddings, overrides and isolates
#: (U+202A-U+202E, U+2066-U+2069), which reorder the text after them
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def terminal_safe(text: str) -> str:
    """``text`` with every terminal control character (:data:`CONTROL`) written as its Python escape
    (``\\x1b``, ``\\u202e``), so names and values from the data (a column or file name holding
    ``ESC [2J``) are shown, never executed by the terminal; tab, newline and every printable
    character are kept as they are."""
    return CONTROL.sub(lambda m: ascii(m.group())[1:-1], text)


#: what ends a line for a terminal or for a reader of lines (``str.splitlines``): LF, CR, VT, FF, the
#: file/group/record separators, NEL, and the Unicode line and paragraph separators
LINE_BREAKS = re.compile("[\n\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")


def one_line(text: str) -> str:
    """``text`` with every line break (:data:`LINE_BREAKS`) written as Python's ``repr`` writes it
    (``\\n``, ``\\r``, ``\\u2028``), so that a name or value from the data (a shard named
    ``a\\nb.jsonl``) cannot split one line of a text output (the audit's text report, ``diff``,
    ``inspect``, ``clean``, an error line) over two. Tabs and every other character are kept; the
    JSON report keeps the exact text."""
    return LINE_BREAKS.sub(lambda m: ascii(m.group())[1:-1], text)


def md_code(text: str) -> str:
    """``text`` (a file name from the data, a check ID) as a markdown code span that nothing in it can
    break out of (HTML inside a code span is shown, never rendered): ``|`` escaped (table cells), line
    breaks shown as ``\\n``, a backtick fence longer than any run inside."""
    t = str(text).replace("|", "\\|").replace("\r", "\\r").replace("\n", "\\n")
    fence = "`" * (max((len(m) for m in re.findall(r"`+", t)), default=0) + 1)
    pad = " " if t.startswith("`") or t.endswith("`") else ""
    return f"{fence}{pad}{t}{pad}{fence}"


def md_text(text: str) -> str:
    """Free text that quotes the data (messages, reasons): HTML escaped, no raw line breaks."""
    # html.escape(text, quote=False), written out: the html package (html.entities) cost every command
    # that prints a line, a cached rerun's too, 1.2 ms to import
    t = str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return t.replace("\r", " ").replace("\n", " ")
