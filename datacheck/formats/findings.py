"""The ``decode.*`` findings of the line formats (JSONL, JSON arrays, CSV/TSV): invalid UTF-8 lines,
records that do not parse, blank lines; the rows of a binary layout (WebDataset, MDS, litdata) whose
fields do not decode, or whose text fields are not UTF-8 (read with replacement characters, as the
line formats read theirs: :func:`decode_utf8`, :func:`utf8_rows_finding`); and the CSV header rule
shared by its passes."""
from __future__ import annotations

from datacheck.model.findings import Example, Finding, show_value

__all__ = ["long_line_message", "bad_record_finding", "bad_rows_finding", "blank_finding", "unique_names", "utf8_finding", "decode_utf8",
           "utf8_rows_finding"]


def _suggest_encoding(b: bytes) -> str:
    for enc in ("cp1252", "latin-1"):
        try:
            b.decode(enc)
            return enc
        except UnicodeDecodeError:
            continue
    return "latin-1"


def utf8_finding(bad: list[tuple[int, int, int, bytes]], max_examples: int, total: int | None = None) -> Finding:
    """decode.invalid_utf8 from its bad lines: (0-based line index, byte offset of the first bad
    byte in the file, that byte, the line's bytes), in file order. ``total``: the number of bad
    lines when ``bad`` holds only the first ones (a streaming reader keeps at most 50)."""
    total = len(bad) if total is None else total
    enc = _suggest_encoding(b"".join(ln for _, _, _, ln in bad[:50]))
    ex = tuple(
        Example(row=None, value=f"byte 0x{b:02x} at offset {o}", line=i + 1, byte_offset=o)
        for i, o, b, _ in bad[:max_examples]
    )
    first = bad[0]
    msg = (
        f"{total} line(s) are not valid UTF-8 (first: line {first[0] + 1}, byte offset {first[1]}, "
        f"byte 0x{first[2]:02x}); the file looks {enc}-encoded: re-encode it as UTF-8 "
        f"(e.g. iconv -f {enc} -t utf-8). The lines were audited with replacement characters."
    )
    return Finding(
        check="decode.invalid_utf8", severity="error", message=msg, count=total,
        lines=tuple(i + 1 for i, _, _, _ in bad[:max_examples]), examples=ex,
        details={"likely_encoding": enc, "byte_offsets": [o for _, o, _, _ in bad[:max_examples]]},
        rows_truncated=total > max_examples,
    )


def decode_utf8(b: bytes) -> tuple[str, int | None]:
    """The text of a binary layout's text field ``b``: UTF-8, each invalid sequence replaced by U+FFFD
    (as the line formats audit an invalid line), and the 0-based offset in ``b`` of its first invalid
    byte (None when ``b`` is valid UTF-8). Never raises."""
    try:
        return b.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        return b.decode("utf-8", errors="replace"), exc.start


def utf8_rows_finding(bad: list[tuple[int, str, int, bytes]], rows: int, max_examples: int, what: str) -> Finding:
    """decode.invalid_utf8 (error) over the rows of a binary layout whose text fields are not UTF-8.

    Args:
        bad: (0-based row, the field as the layout names it (a tar member, an MDS column), offset of
            the first invalid byte in the field's value, the value's bytes), in row order.
        rows: the shard's rows (the ratio's denominator).
        max_examples: examples kept.
        what: the layout's rows in words (``WebDataset sample(s)``, ``MDS sample(s)``).
    """
    enc = _suggest_encoding(b"".join(v for _, _, _, v in bad[:50]))
    ex = tuple(Example(row=r, value=f"{where}: byte 0x{v[o]:02x} at offset {o} of the value")
               for r, where, o, v in bad[:max_examples])
    r0, w0, o0, v0 = bad[0]
    msg = (f"{len(bad)} {what} hold text that is not valid UTF-8 (first: row {r0}, {w0}, byte 0x{v0[o0]:02x} at "
           f"offset {o0} of the value); the text looks {enc}-encoded: re-encode it as UTF-8 (e.g. iconv -f {enc} "
           "-t utf-8). The values were audited with replacement characters.")
    return Finding(
        check="decode.invalid_utf8", severity="error", message=msg, count=len(bad),
        ratio=len(bad) / rows if rows else None, rows=tuple(r for r, _, _, _ in bad[:max_examples]), examples=ex,
        details={"likely_encoding": enc, "value_offsets": [o for _, _, o, _ in bad[:max_examples]]},
        rows_truncated=len(bad) > max_examples,
    )


def unique_names(cols: list[str]) -> list[str]:
    """Duplicate header names made unique (``a``, ``a_1``, ``a_2``), first occurrence kept: the CSV
    reader's rule."""
    seen: dict[str, int] = {}
    out = []
    for c in cols:
        n = seen.get(c, 0)
        out.append(c if n == 0 else f"{c}_{n}")
        seen[c] = n + 1
    return out


def long_line_message(length: int, limit: int) -> str:
    """Why a line of ``length`` bytes was not parsed: over ``limit`` (``[dataset] max_row_bytes``); the
    text of its ``decode.bad_record`` (JSONL, CSV/TSV)."""
    bound = f"{limit >> 20:,} MiB" if limit >= 1 << 20 and limit % (1 << 20) == 0 else f"{limit:,} bytes"
    return (f"a line of {length:,} bytes, more than the {bound} a row datacheck decodes ([dataset] max_row_bytes): "
            "not parsed")


def bad_record_finding(bad: list[tuple[int, int, str, str]], total_lines: int, max_examples: int,
                        total: int | None = None) -> Finding:
    """bad: (1-based line, byte offset, parser message, line text); ``total``: the number of bad
    records when ``bad`` holds only the first ones."""
    total = len(bad) if total is None else total
    ex = tuple(
        Example(row=None, value=f"{msg}: {show_value(text, 80)}", line=ln, byte_offset=off)
        for ln, off, msg, text in bad[:max_examples]
    )
    ln, off, msg, _ = bad[0]
    return Finding(
        check="decode.bad_record", severity="error", count=total,
        ratio=total / total_lines if total_lines else None,
        message=(f"{total} record(s) do not parse (first: line {ln}, byte offset {off}: {msg}); "
                 "the good records were audited. Fix or drop these lines."),
        lines=tuple(b[0] for b in bad[:max_examples]), examples=ex,
        details={"byte_offsets": [b[1] for b in bad[:max_examples]]},
        rows_truncated=total > max_examples,
    )


def bad_rows_finding(bad: list[tuple[int, str]], rows: int, max_examples: int, message: str) -> Finding:
    """decode.bad_record (error) over the rows of a binary layout whose fields do not decode: ``bad``
    holds (0-based row, what is wrong) in row order, ``rows`` the shard's rows (the ratio's
    denominator), ``message`` the finding's text (it names the layout and the first row)."""
    return Finding(
        check="decode.bad_record", severity="error", count=len(bad), ratio=len(bad) / rows if rows else None,
        rows=tuple(r for r, _ in bad[:max_examples]),
        examples=tuple(Example(row=r, value=msg) for r, msg in bad[:max_examples]),
        message=message, rows_truncated=len(bad) > max_examples,
    )


def blank_finding(blank: list[tuple[int, int]], max_examples: int, total: int | None = None) -> Finding:
    total = len(blank) if total is None else total
    return Finding(
        check="decode.bad_record", severity="info", count=total,
        message=f"{total} blank line(s) skipped (first: line {blank[0][0]})",
        lines=tuple(b[0] for b in blank[:max_examples]),
        examples=tuple(Example(row=None, value="''", line=ln, byte_offset=o) for ln, o in blank[:max_examples]),
        details={"blank_lines": total},
        rows_truncated=total > max_examples,
    )
