"""The one JSONL/CSV record reader: a line-format file split into records, with 1-based line numbers
and byte offsets, classified as rows, records that do not parse, and blank lines.

Used by the readers (:mod:`datacheck.formats.jsonl`, :mod:`datacheck.formats.csv`: which records become rows, and the ``decode.*``
findings) and by ``datacheck clean``'s rewrites (:mod:`datacheck.formats.rewrite`: which copy or quarantine each record): both see the same
records with the same line numbers.

- A UTF-8 byte order mark at the start is no part of line 1 (offsets still count its 3 bytes).
- Lines end at ``\\n``; a ``\\r`` before it is dropped; a final newline ends the last line.
- Invalid UTF-8 is decoded with replacement characters (``invalid_utf8`` is set on the record).
- JSONL: a row is a line holding one JSON object; anything else that is not blank does not parse
  (with the parser's message, or "a JSON array, not an object", ...).
- JSON array (a ``.json`` file holding one list of records, as LLaMA-Factory and FastChat ship
  them): each element is a row; its 1-based line is the line where the element starts.
- CSV/TSV: Python's ``csv`` module splits records (a quoted field may span lines); a record with
  a field count other than the header's (or the first record's, or ``names``') does not parse.
"""
from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from datacheck.io.safejson import MAX_JSON_DEPTH, element_spans, max_depths

__all__ = ["BOM", "LineRecord", "RecordSplit", "RecordLayoutError", "strip_bom", "split_lines",
           "jsonl_records", "csv_records", "json_array_records"]

#: Largest CSV field (characters): Python's ``csv`` default of 131,072 would make a valid CSV with one
#: long text field unreadable; raised to 2**31 - 1 (the largest value a C ``long`` holds everywhere).
CSV_FIELD_SIZE_LIMIT = 2**31 - 1
csv.field_size_limit(CSV_FIELD_SIZE_LIMIT)

#: UTF-8 byte order mark (editors and Excel write it at the start of UTF-8 text).
BOM = b"\xef\xbb\xbf"


class RecordLayoutError(ValueError):
    """The file cannot be split into records at all (a CSV parse error, ``names`` that do not fit
    the header); the readers turn it into ``Unreadable``."""


def strip_bom(data: bytes) -> tuple[bytes, int]:
    """(``data`` without a leading UTF-8 byte order mark, its length 0 or 3)."""
    return (data[3:], 3) if data.startswith(BOM) else (data, 0)


def split_lines(data: bytes, base: int = 0) -> list[tuple[int, bytes]]:
    """(byte offset in the file, line bytes without the newline) for every line; a final newline
    ends the last line. ``base``: the file offset of ``data[0]`` (3 after a stripped BOM)."""
    out = []
    pos = 0
    n = len(data)
    while pos < n:
        nl = data.find(b"\n", pos)
        end = n if nl < 0 else nl
        line = data[pos:end]
        if line.endswith(b"\r"):
            line = line[:-1]
        out.append((base + pos, line))
        pos = end + 1
    return out


@dataclass
class LineRecord:
    """One record of a JSONL/CSV file (not blank, not the CSV header).

    Attributes:
        line: 1-based number of its first line.
        offset: 0-based byte offset of that line in the file.
        raw: its bytes (CSV: its lines joined with ``\\n``), line breaks excluded.
        text: ``raw`` decoded as UTF-8, with replacement characters where it is invalid
            (CSV: the fields joined with the separator).
        invalid_utf8: ``raw`` is not valid UTF-8.
        value: JSONL: the parsed object (``dict``); CSV: the fields (``list[str]``); None when the
            record does not parse.
        error: why it does not parse (None for a row).
        row: 0-based row index among the rows, None for a record that does not parse.
    """

    line: int
    offset: int
    raw: bytes
    text: str
    invalid_utf8: bool
    value: Any = None
    error: str | None = None
    row: int | None = None


@dataclass
class RecordSplit:
    """A JSONL/CSV file split into records.

    Attributes:
        lines: every physical line: (byte offset, bytes without the line break).
        records: rows and records that do not parse, in file order.
        blank: blank lines as (1-based line, byte offset).
        header: CSV: the column names (``names``, else the header line, else ``column_1``, ...);
            None for JSONL.
        header_fields: CSV: the header line's fields as written (None without a header line).
        bom: the input's byte order mark (``b""`` or :data:`BOM`).
    """

    lines: list[tuple[int, bytes]]
    records: list[LineRecord] = field(default_factory=list)
    blank: list[tuple[int, int]] = field(default_factory=list)
    header: list[str] | None = None
    header_fields: list[str] | None = None
    bom: bytes = b""

    @property
    def rows(self) -> list[LineRecord]:
        return [r for r in self.records if r.value is not None]

    @property
    def bad(self) -> list[LineRecord]:
        return [r for r in self.records if r.value is None]


def _decode(b: bytes) -> tuple[str, bool]:
    try:
        return b.decode("utf-8"), False
    except UnicodeDecodeError:
        return b.decode("utf-8", errors="replace"), True


_JSON_KIND = {type(None): "null", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}


#: bytes a JSON value of a row is counted at (:func:`json_values`): a number decodes to 8 (Int64, Float64),
#: and parsing any value takes at least a pointer (8 bytes on a 64-bit CPython) in the parsed list
VALUE_BYTES = 8

#: a JSON string (its quotes, escapes and bytes), for :func:`json_values`
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)


def json_values(line: bytes) -> int:
    """The JSON values (array items, object members) one line holds at most: its commas outside
    strings, plus one (a line without quotes is counted by ``bytes.count``; else its strings are cut
    out first by one regex pass). A line of 10**8 ``1,`` holds 10**8."""
    if b'"' in line:
        line = _JSON_STRING.sub(b"", line)
    return line.count(b",") + 1


def many_values_line(data: bytes, most: int) -> bool:
    """Whether a line of the JSONL bytes ``data`` holds more than ``most`` JSON values
    (:func:`json_values`), found without copying the lines: only lines of more than ``2 * most`` bytes are
    counted, and only when ``data`` has more than ``most`` commas."""
    if data.count(b",") <= most:
        return False
    pos, n = 0, len(data)
    while pos < n:
        nl = data.find(b"\n", pos)
        end = n if nl < 0 else nl
        if end - pos > 2 * most:
            many = data.count(b",", pos, end) + 1 if data.find(b'"', pos, end) < 0 else \
                json_values(data[pos:end])
            if many > most:
                return True
        pos = end + 1
    return False


def too_many_values(line: bytes, max_record: int | None) -> str | None:
    """Why the JSON line ``line`` is not parsed: it holds more values than ``max_record`` bytes at
    :data:`VALUE_BYTES` a value (``[dataset] max_row_bytes``: a list of 63 million small ints is a line of
    126 MB, within 128 MiB, that decodes to 504 MB and took polars' parser past 5 GB); None when it does
    not (or ``max_record`` is None). Lines shorter than ``2 * max_record / VALUE_BYTES`` bytes are not
    counted (a value and its comma take 2 bytes at least)."""
    if max_record is None or len(line) < 2 * (max_record // VALUE_BYTES):
        return None
    n = json_values(line)
    if n * VALUE_BYTES <= max_record:
        return None
    lim = max_record
    bound = f"{lim >> 20:,} MiB" if lim >= 1 << 20 and lim % (1 << 20) == 0 else f"{lim:,} bytes"
    return (f"a line of {n:,} JSON values, more than the {max_record // VALUE_BYTES:,} a row datacheck parses "
            f"({bound}, [dataset] max_row_bytes, at {VALUE_BYTES} bytes a value: a number's decoded width): not parsed")


def jsonl_records(raw: bytes, max_record: int | None = None) -> RecordSplit:
    """Split a JSONL file's bytes (decompressed) into records (see the module docstring). A line of
    more JSON values than ``max_record`` bytes hold at :data:`VALUE_BYTES` a value (:func:`too_many_values`)
    is a bad record, never parsed."""
    data, b = strip_bom(raw)
    out = RecordSplit(lines=split_lines(data, b), bom=raw[:b])
    refused = {i: why for i, (_, line) in enumerate(out.lines) if (why := too_many_values(line, max_record))}
    # the depth scan (bytes of arrays a byte) leaves the refused lines out: none is parsed
    depths = max_depths(b"\n".join(b"" if i in refused else ln for i, (_, ln) in enumerate(out.lines))
                        if refused else data)
    row = 0
    for i, (off, line) in enumerate(out.lines):
        many = refused.get(i)
        if many is not None:  # refused before it is decoded or parsed (its first bytes shown)
            head, bad_head = _decode(line[:200])
            out.records.append(LineRecord(line=i + 1, offset=off, raw=line, text=head, invalid_utf8=bad_head,
                                          error=many))
            continue
        text, bad_utf8 = _decode(line)
        if not text.strip():
            out.blank.append((i + 1, off))
            continue
        rec = LineRecord(line=i + 1, offset=off, raw=line, text=text, invalid_utf8=bad_utf8)
        if i < depths.size and depths[i] > MAX_JSON_DEPTH:  # refused before any parser runs
            rec.error = f"nested {int(depths[i])} levels deep (datacheck reads at most {MAX_JSON_DEPTH})"
            out.records.append(rec)
            continue
        try:
            obj = json.loads(text)
        except RecursionError:
            rec.error = f"nested too deep (datacheck reads at most {MAX_JSON_DEPTH} levels)"
        except json.JSONDecodeError as exc:
            what = exc.msg
            if exc.msg == "Extra data":
                try:
                    json.loads(text[exc.pos:])
                    what = "two JSON values on one line"
                except ValueError:
                    what = "extra characters after the JSON value"
            rec.error = f"{what} (column {exc.colno})"
        except ValueError as exc:  # an integer over sys.get_int_max_str_digits() digits
            rec.error = str(exc).splitlines()[0]
        else:
            if isinstance(obj, dict):
                rec.value, rec.row = obj, row
                row += 1
            else:
                rec.error = f"a JSON {_JSON_KIND.get(type(obj), type(obj).__name__)}, not an object"
        out.records.append(rec)
    return out


def csv_records(raw: bytes, sep: str, quote: str | None, header: bool, names: list[str] | None) -> RecordSplit:
    """Split a CSV/TSV file's bytes (decompressed) into records (see the module docstring).

    Args:
        raw: the file's bytes.
        sep: the field separator.
        quote: the quote character; None turns quoting off.
        header: the first record holds the column names.
        names: the column names (with ``header``: they rename the header's columns).

    Raises:
        RecordLayoutError: the ``csv`` module cannot parse the text, or ``names`` has another
            length than the header line.
    """
    data, b = strip_bom(raw)
    out = RecordSplit(lines=split_lines(data, b), bom=raw[:b])
    try:
        text = data.decode("utf-8")
        bad_lines: set[int] = set()
    except UnicodeDecodeError:
        decoded = [_decode(ln) for _, ln in out.lines]
        bad_lines = {i + 1 for i, (_, bad) in enumerate(decoded) if bad}
        text = "\n".join(t for t, _ in decoded)
    if not text.strip():
        out.header = list(names) if names else None
        return out
    offsets = [off for off, _ in out.lines]
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=sep, quotechar=quote or '"',
                        quoting=csv.QUOTE_MINIMAL if quote else csv.QUOTE_NONE, strict=False)
    width = len(names) if names else None
    cols: list[str] | None = None if header else (list(names) if names else None)
    prev = 0
    row = 0
    try:
        for rec in reader:
            start, prev = prev + 1, reader.line_num
            span = range(start, prev + 1)
            off = offsets[start - 1] if start - 1 < len(offsets) else len(data) + b
            if not rec or (len(rec) == 1 and not rec[0].strip() and (width or 0) != 1):
                out.blank.append((start, off))
                continue
            if cols is None and header:
                cols = out.header_fields = rec
                width = len(rec)
                if names and len(names) != width:
                    raise RecordLayoutError(
                        f"[dataset] names lists {len(names)} column(s) but the header line {start} has {width} "
                        f"({sep.join(rec)[:200]!r}); give one name per column")
                continue
            if width is None:
                width = len(rec)
            raw_rec = b"\n".join(out.lines[k - 1][1] for k in span if k - 1 < len(out.lines))
            lr = LineRecord(line=start, offset=off, raw=raw_rec, text=sep.join(rec),
                            invalid_utf8=any(k in bad_lines for k in span))
            if len(rec) != width:
                lr.error = f"{len(rec)} fields, expected {width}"
            else:
                lr.value, lr.row = rec, row
                row += 1
            out.records.append(lr)
    except csv.Error as exc:
        raise RecordLayoutError(f"CSV parse error at line {reader.line_num}: {exc}") from None
    if names:
        cols = list(names)
    out.header = cols if cols is not None else [f"column_{i + 1}" for i in range(width or 0)]
    return out


def _oversized(data: bytes, limit: int, base: int) -> None:
    """Raise :class:`RecordLayoutError` when an element of the JSON array ``data`` (its objects and
    arrays: :func:`~datacheck.io.safejson.element_spans`) holds more than ``limit`` bytes, or a stretch
    between them does (a string or number element that is not a record), naming the first one: its
    0-based index among the objects, its line, byte offset (``base``: the stripped byte order mark's
    bytes) and bytes."""
    starts, ends = element_spans(data)
    sizes = ends - starts
    over = np.flatnonzero(sizes > limit)
    edges = np.concatenate(([0], ends)), np.concatenate((starts, [len(data)]))
    gaps = np.flatnonzero(edges[1] - edges[0] > limit)
    if not over.size and not gaps.size:
        return
    mib = f"{limit >> 20:,} MiB" if limit >= 1 << 20 and limit % (1 << 20) == 0 else f"{limit:,} bytes"
    remedy = (f"more than the {mib} a record datacheck reads ([dataset] max_row_bytes), so nothing of the file was "
              f"parsed: a JSON array is read whole. Split such values over more records (or write the records as "
              f"JSON Lines, one a line), or raise [dataset] max_row_bytes on a machine with several times that "
              f"memory free")
    if over.size and (not gaps.size or starts[over[0]] < edges[0][gaps[0]]):
        k = int(over[0])
        at = int(starts[k])
        line = data.count(b"\n", 0, at) + 1
        raise RecordLayoutError(f"element {k} of the JSON array (line {line}, byte offset {at + base:,}) holds "
                                f"{int(sizes[k]):,} bytes, {remedy}")
    a, b = int(edges[0][gaps[0]]), int(edges[1][gaps[0]])
    line = data.count(b"\n", 0, a) + 1
    raise RecordLayoutError(f"the JSON array holds {b - a:,} bytes outside any object from line {line} (byte "
                            f"offset {a + base:,}): an element that is not a record, {remedy}")


def json_array_records(raw: bytes, max_record: int | None = None) -> tuple[list[dict[str, Any]], list[int]]:
    """The records of a JSON array file (``[{...}, {...}]``): (the objects in order, the 1-based line
    where each starts). A UTF-8 byte order mark is skipped. Nesting is bounded
    (:data:`datacheck.io.safejson.MAX_JSON_DEPTH`) before anything is parsed, and so is a record's
    size: with ``max_record`` (bytes: ``[dataset] max_row_bytes``), an element of more bytes, or more
    bytes outside any object (an element that is not a record), refuses the file before anything is
    decoded or parsed (:func:`_oversized`; a parsed string takes one to four times its bytes again, its
    row as much once more).

    Raises:
        RecordLayoutError: not UTF-8, nested too deep, an element over ``max_record`` (its 0-based
            index, line and bytes), not a JSON array, an element that is not an object (its 0-based
            index and line), or a syntax error (line and column); the message names the remedy.
    """
    data, _bom = strip_bom(raw)
    depth = int(max_depths(data, per_line=False).max(initial=0))
    if depth > MAX_JSON_DEPTH:
        raise RecordLayoutError(f"JSON nested {depth} levels deep (datacheck reads at most {MAX_JSON_DEPTH})")
    if max_record is not None and len(data) > max_record:
        _oversized(data, max_record, len(raw) - len(data))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RecordLayoutError(f"not valid UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
                                "re-encode the file as UTF-8") from None
    dec = json.JSONDecoder()
    ws = " \t\r\n"
    i, n = 0, len(text)
    while i < n and text[i] in ws:
        i += 1
    if i >= n or text[i] != "[":
        raise RecordLayoutError("not a JSON array of records (the first non-blank character is not '['); "
                                "write one JSON object per line (JSON Lines) or a list of objects")
    i += 1
    values: list[dict[str, Any]] = []
    lines: list[int] = []
    line, pos = 1, 0

    def where(at: int) -> int:
        nonlocal line, pos
        line += text.count("\n", pos, at)
        pos = at
        return line

    def skip(at: int) -> int:
        while at < n and text[at] in ws:
            at += 1
        return at

    i = skip(i)
    if i < n and text[i] == "]":
        i += 1
    else:
        while True:
            start = i
            try:
                value, i = dec.raw_decode(text, start)
            except json.JSONDecodeError as exc:
                raise RecordLayoutError(f"not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
            except ValueError as exc:  # an integer over Python's digit limit
                raise RecordLayoutError(f"not readable JSON at line {where(start)}: {str(exc).splitlines()[0]}") from None
            if not isinstance(value, dict):
                raise RecordLayoutError(f"element {len(values)} of the JSON array (line {where(start)}) is "
                                        f"{type(value).__name__}, not an object: each element must be one record")
            values.append(value)
            lines.append(where(start))
            i = skip(i)
            if i < n and text[i] == ",":
                i = skip(i + 1)
                continue
            if i < n and text[i] == "]":
                i += 1
                break
            raise RecordLayoutError(f"the JSON array is not closed after element {len(values) - 1} (line {where(min(i, n))}): "
                                    "expected ',' or ']'")
    if skip(i) != n:
        raise RecordLayoutError(f"text after the JSON array's closing ']' (line {where(skip(i))})")
    return values, lines
