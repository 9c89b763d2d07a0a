"""Plain-text corpora (``.txt``, also ``.txt.gz``/``.txt.zst``): the one reader, for a local file and
a copy of an object in a store alike, reading the rows Hugging Face ``datasets``' ``text`` builder
(``datasets/packaged_modules/text/text.py``) gives, in one column ``text`` (String), streamed in
bounded memory.

Byte rules (those of ``text.py``: the file opened in text mode as UTF-8):

- line breaks are universal newlines: ``\\n``, ``\\r\\n`` and a lone ``\\r`` each end a line (Python's
  text mode translates them to ``\\n`` before ``text.py`` splits); a row never holds its line break
  (``keep_linebreaks = False``, the builder's default). The same breaks cut the file into chunks,
  number its lines and bound them: a file of lone ``\\r`` breaks (old Mac OS) is as many lines as
  ``\\n`` would make, each measured against ``[dataset] max_row_bytes`` on its own
  (:func:`datacheck.io.shardbytes.bounded_line_chunks` with ``universal``).
- a UTF-8 byte order mark is kept at the start of the first row, as ``open(encoding="utf-8")`` keeps it.
- invalid UTF-8 (``datasets`` raises ``UnicodeDecodeError`` and loads nothing) is one
  ``decode.invalid_utf8`` finding naming the first lines, byte offsets and bytes; the rows are
  audited with U+FFFD in place of each invalid sequence.
- UTF-16 or UTF-32 text (a byte order mark, or the NULs of ASCII text: ``datasets`` raises
  ``UnicodeDecodeError`` on it) is ``decode.unreadable`` naming the encoding and the iconv command,
  before any line is read (:mod:`datacheck.formats.wide`).

Rows, by ``[dataset] sample_by`` (the builder's option, same name and default):

- ``"line"`` (default): one row per line. A blank line (empty, or only Unicode ``White_Space``) is
  **not a row**: it separates paragraphs. ``datasets`` yields it as a ``""`` row, but a pre-training
  pipeline that tokenizes and packs the rows (``run_clm.py``'s ``group_texts``) gets no token from it,
  and ``run_mlm.py --line_by_line`` drops it (``len(line) > 0 and not line.isspace()``): counting it
  as an empty sample (``empty.text``) would be a false alarm on every book and wiki text. So row N is
  the N-th non-blank line, and every finding also names its 1-based line (``lines``). A line longer
  than ``[dataset] max_row_bytes`` is ``decode.bad_record`` (its line, byte offset and length), never
  held; the other lines are audited.
- ``"paragraph"``: the text split on ``"\\n\\n"`` (after the newline translation), as ``text.py``
  splits it: a row keeps the line breaks inside it (and a leading ``"\\n"`` after three breaks in a
  row, a trailing one at the end of the file), empty pieces are dropped, and so (here) are pieces of
  only whitespace (extra blank lines, not samples). A row's line is the line it starts on. A
  paragraph longer than ``max_row_bytes`` is ``decode.bad_record`` at its first line, never held.
- ``"document"``: one row per file, the whole text (an empty file is one ``""`` row: an empty
  document is an empty sample). A file longer than ``max_row_bytes`` after decompression is
  ``decode.unreadable`` (its one row cannot be held).

The rows of ``"line"`` and ``"paragraph"`` are pieces of a running text that the pipeline packs:
the duplicate checks judge them as such (:attr:`datacheck.checks.spec.ShardContext.running_text`).

Streaming: the file is read in chunks of whole lines (:func:`datacheck.io.shardbytes.bounded_line_chunks`,
``.gz``/``.zst`` inflated as a stream) of :data:`TEXT_CHUNK_BYTES`; each chunk is decoded and split
by polars (no Python object per line). Pass 1 (:func:`open_text`) keeps per chunk only its row
count and each row's line (8 bytes a row), plus the findings; pass 2 (:meth:`TextStream.batches`)
reads the file again and hands the rows out in batches (a file whose rows decode to at most
:data:`KEEP_BYTES` keeps pass 1's frames: read once). Memory: one chunk and one paragraph (at most
``max_row_bytes``), whatever the file's size.
"""
from __future__ import annotations

import csv as _csv
import json
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Iterator

import numpy as np
import polars as pl

from datacheck.formats.base import Format, ReadOptions, ShardData
from datacheck.formats.batches import BudgetedStreamedReader, cast_batches
from datacheck.formats.csv import SEPARATORS
from datacheck.formats.findings import bad_record_finding, long_line_message, utf8_finding
from datacheck.formats.rewrite import META_COLUMNS, RewriteJob, Rewritten, WriteBytes, compressed_as, row_hashes
from datacheck.formats.stream_source import budget, lazy_source, recut_frames
from datacheck.formats.wide import refuse_wide
from datacheck.io.shardbytes import LongLine, Unreadable, bounded_line_chunks, read_bytes
from datacheck.io.stores import is_url
from datacheck.model.constants import MAX_ROW_BYTES
from datacheck.model.errors import InternalError, UsageError
from datacheck.model.findings import Finding

__all__ = ["COLUMN", "FORMAT", "KEEP_BYTES", "SAMPLE_BY", "TEXT_CHUNK_BYTES", "TextRewrite", "TextStream", "open_text",
           "rewrite_text"]

#: the one column of a text shard (``text.py``'s column name)
COLUMN = "text"
#: ``[dataset] sample_by`` values (``TextConfig.sample_by``), the first the default
SAMPLE_BY = ("line", "paragraph", "document")
#: decompressed bytes read at once (whole lines; read at call time: the tests shrink it)
TEXT_CHUNK_BYTES = 16 * 2**20
#: decoded bytes of pass 1's frames kept for pass 2 (as :data:`datacheck.formats.jsonl.KEEP_BYTES`)
KEEP_BYTES = 64 * 2**20
#: invalid UTF-8 lines kept for the examples and the encoding guess (the count is exact)
_KEEP_BAD = 50
#: a line break of the bytes: the universal newlines of Python's text mode
_BREAK = re.compile(rb"\r\n|\r|\n")
_NOT_BLANK = r"\S"  # a character other than Unicode White_Space (polars' regex is Unicode-aware)


@dataclass
class _Issues:
    """What pass 1 reports: invalid UTF-8 lines (0-based line, byte offset of the bad byte, the
    byte, the line's bytes; the first :data:`_KEEP_BAD`) and their count; rows too long to hold
    (1-based line, byte offset, why, the start of their text) and their count."""

    utf8: list[tuple[int, int, int, bytes]] = field(default_factory=list)
    n_utf8: int = 0
    long: list[tuple[int, int, str, str]] = field(default_factory=list)
    n_long: int = 0
    keep: int = 5
    lines: int = 0

    def bad_line(self, line0: int, offset: int, byte: int, raw: bytes) -> None:
        self.n_utf8 += 1
        if len(self.utf8) < _KEEP_BAD:
            self.utf8.append((line0, offset, byte, raw))

    def too_long(self, line: int, offset: int, why: str, head: str) -> None:
        self.n_long += 1
        if len(self.long) < self.keep:
            self.long.append((line, offset, why, head))


@dataclass
class _Rows:
    """One chunk's rows: ``text`` (String) and the 1-based line each starts on (int64)."""

    text: pl.Series
    lines: np.ndarray


def _decode(chunk: bytes, line0: int, offset: int, issues: _Issues | None) -> str:
    """``chunk`` (whole lines, the first of them line ``line0`` (0-based), at byte ``offset`` of the
    file) as text: UTF-8, each invalid sequence replaced by U+FFFD; its invalid lines told to ``issues``."""
    try:
        return chunk.decode("utf-8")
    except UnicodeDecodeError:
        pass
    if issues is not None:
        start = 0
        k = 0
        for m in _BREAK.finditer(chunk):
            raw = chunk[start:m.start()]
            _check_line(raw, line0 + k, offset + start, issues)
            start, k = m.end(), k + 1
        if start < len(chunk):
            _check_line(chunk[start:], line0 + k, offset + start, issues)
    return chunk.decode("utf-8", errors="replace")


def _check_line(raw: bytes, line0: int, offset: int, issues: _Issues) -> None:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        issues.bad_line(line0, offset + exc.start, raw[exc.start], raw)


def _line_starts(chunk: bytes, offset: int) -> np.ndarray:
    """The byte offset in the file of each line of ``chunk`` (whole lines at byte ``offset``): 0 and
    every position after a ``\\n`` or a lone ``\\r``, as universal newlines break them."""
    buf = np.frombuffer(chunk, dtype=np.uint8)
    ends = np.flatnonzero(buf == 10)
    cr = np.flatnonzero(buf == 13)
    if cr.size:
        nxt = np.append(buf, np.uint8(0))[cr + 1]
        ends = np.union1d(ends, cr[nxt != 10])
    starts = np.concatenate([[0], ends + 1]).astype(np.int64)
    return starts[starts < len(chunk)] + offset


def _lines_of(text: str) -> pl.Series:
    """The lines of ``text`` (newlines translated, whole lines): each without its ``\\n``."""
    body = text[:-1] if text.endswith("\n") else text
    return pl.Series(COLUMN, [body], dtype=pl.String).str.split("\n").explode()


def _universal(text: str) -> str:
    """``text`` with ``\\r\\n`` and lone ``\\r`` made ``\\n`` (Python's text mode)."""
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def _is_row(pieces: pl.Series) -> pl.Series:
    """Per piece: holds a character other than whitespace (a blank line or paragraph is no row)."""
    return pieces.str.contains(_NOT_BLANK).fill_null(False)


def _line_rows(path: Path, chunk_bytes: int, max_line: int, issues: _Issues | None) -> Iterator[_Rows]:
    """``sample_by = "line"``: each chunk's non-blank lines (see the module docstring)."""
    line = 1  # the 1-based number of the next line
    offset = 0
    for chunk in bounded_line_chunks(path, chunk_bytes, max_line, universal=True):
        if isinstance(chunk, LongLine):
            if issues is not None:
                issues.too_long(line, offset, long_line_message(chunk.length, max_line),
                                chunk.head.decode("utf-8", errors="replace"))
            line += 1
            offset += chunk.nbytes
            continue
        text = _universal(_decode(chunk, line - 1, offset, issues))
        pieces = _lines_of(text)
        keep = _is_row(pieces)
        lines = np.arange(line, line + pieces.len(), dtype=np.int64)
        line += pieces.len()
        offset += len(chunk)
        yield _Rows(pieces.filter(keep), lines[keep.to_numpy()])
    if issues is not None:
        issues.lines = line - 1


def _paragraph_rows(path: Path, chunk_bytes: int, max_row: int, issues: _Issues | None) -> Iterator[_Rows]:
    """``sample_by = "paragraph"``: the text split on ``"\\n\\n"`` (see the module docstring), each
    chunk's complete non-blank paragraphs; the paragraph still open is carried to the next chunk
    (at most ``max_row`` bytes: a longer one is reported and passed over up to the next ``"\\n\\n"``)."""
    line = 1  # the 1-based number of the next line to read
    offset = 0  # the byte offset of the next chunk
    carry = ""  # the open paragraph, and the line and byte offset it starts at
    carry_line, carry_off = 1, 0
    skipping = False  # passing over a paragraph too long to hold, up to the next "\n\n"
    tail = ""  # while skipping: "\n" when the text passed over ends with a line break

    def too_long(at_line: int, at_off: int, why: str, head: str) -> None:
        if issues is not None:
            issues.too_long(at_line, at_off, why, head)

    for chunk in bounded_line_chunks(path, chunk_bytes, max_row, universal=True):
        if isinstance(chunk, LongLine):
            if not skipping:
                too_long(line, offset, long_line_message(chunk.length, max_row).replace("a line of", "a paragraph "
                         "with a line of", 1), chunk.head.decode("utf-8", errors="replace"))
                carry, skipping = "", True
            tail = "\n" if chunk.newline else ""
            line += 1
            offset += chunk.nbytes
            continue
        first = line
        starts = _line_starts(chunk, offset)
        text = _universal(_decode(chunk, line - 1, offset, issues))
        line += len(starts)
        offset += len(chunk)
        if skipping:
            buf = tail + text
            cut = buf.find("\n\n")
            if cut < 0:
                tail = "\n" if buf.endswith("\n") else ""
                continue
            skipping = False
            carry, carry_line = "", first - len(tail) + buf[:cut + 2].count("\n")
            carry_off = _offset_of(carry_line, first, starts, offset)
            text = buf[cut + 2:]
        parts = (carry + text).split("\n\n")
        row_texts: list[str] = []
        row_lines: list[int] = []
        at, at_off = carry_line, carry_off
        for p in parts[:-1]:
            if _over(p, max_row):
                too_long(at, at_off, _long_paragraph(max_row), p[:80])
            elif re.search(_NOT_BLANK, p):
                row_texts.append(p)
                row_lines.append(at)
            at += p.count("\n") + 2
            at_off = _offset_of(at, first, starts, offset)
        carry, carry_line, carry_off = parts[-1], at, at_off
        if _over(carry, max_row):
            too_long(carry_line, carry_off, _long_paragraph(max_row), carry[:80])
            carry, skipping, tail = "", True, "\n" if text.endswith("\n") else ""
        if row_texts:
            yield _Rows(pl.Series(COLUMN, row_texts, dtype=pl.String), np.asarray(row_lines, dtype=np.int64))
    if carry and not skipping and re.search(_NOT_BLANK, carry):
        yield _Rows(pl.Series(COLUMN, [carry], dtype=pl.String), np.asarray([carry_line], dtype=np.int64))
    if issues is not None:
        issues.lines = line - 1


def _over(text: str, max_row: int) -> bool:
    """Whether ``text`` holds more than ``max_row`` bytes as UTF-8 (encoded only when it may)."""
    return len(text) > max_row // 4 and len(text.encode("utf-8")) > max_row


def _long_paragraph(max_row: int) -> str:
    return (f"a paragraph of more than {max_row:,} bytes, more than a row datacheck decodes ([dataset] "
            "max_row_bytes): not parsed")


def _offset_of(target: int, first: int, starts: np.ndarray, end: int) -> int:
    """The byte offset of line ``target`` (1-based) among the lines of the chunk just read (``first``:
    its first line; ``starts``: their offsets; ``end``: the offset after the chunk, for a line past it)."""
    k = target - first
    return int(starts[k]) if 0 <= k < len(starts) else end


def _document_rows(path: Path, chunk_bytes: int, max_row: int, issues: _Issues | None) -> Iterator[_Rows]:
    """``sample_by = "document"``: the whole file as one row. Raises :class:`Unreadable` when it is
    longer than ``max_row`` bytes (after decompression)."""
    parts: list[str] = []
    size = 0
    line = 1
    for chunk in bounded_line_chunks(path, chunk_bytes, max_row, universal=True):
        n = chunk.nbytes if isinstance(chunk, LongLine) else len(chunk)
        size += n
        if isinstance(chunk, LongLine) or size > max_row:
            raise Unreadable(f"the file is one row ([dataset] sample_by = \"document\") and holds more than "
                             f"{max_row:,} bytes, more than a row datacheck decodes ([dataset] max_row_bytes): not "
                             "read; raise max_row_bytes, or read it by line or paragraph")
        text = _universal(_decode(chunk, line - 1, size - n, issues))
        line += text.count("\n")
        parts.append(text)
    yield _Rows(pl.Series(COLUMN, ["".join(parts)], dtype=pl.String), np.asarray([1], dtype=np.int64))


_MODES = {"line": _line_rows, "paragraph": _paragraph_rows, "document": _document_rows}


@dataclass
class TextStream(BudgetedStreamedReader):
    """A text file's rows, read again from the file batch by batch (pass 2, see the module docstring).

    Attributes:
        path: the file. mode: ``[dataset] sample_by``. max_row: ``[dataset] max_row_bytes``.
        chunk_bytes: the chunk size pass 1 read with (pass 2 cuts the same chunks).
        chunk_rows: the rows of each chunk in pass 1 (pass 2 checks the file did not change).
        rows: the rows of the file.
        frames: pass 1's row frames when they fit :data:`KEEP_BYTES` (pass 2 then reads no file).
        total_bytes: the decoded bytes of every row (pass 1's chunks): the file's average row, which the
            engine's one-batch read and its batches are sized by (not its first 1,024 rows).
    """

    path: Path
    mode: str
    max_row: int
    chunk_bytes: int
    chunk_rows: list[int]
    rows: int = 0
    schema: dict[str, pl.DataType] = field(default_factory=lambda: {COLUMN: pl.String()})
    frames: list[pl.DataFrame] | None = None
    total_bytes: int = 0

    def size(self, columns: list[str]) -> tuple[int | None, float | None]:
        """(rows, decoded bytes of one row on average over the file), from pass 1, no read; (rows, None)
        for a file of no rows."""
        return (self.rows, self.total_bytes / self.rows) if self.rows else (self.rows, None)


    def _frames(self) -> Iterator[pl.DataFrame]:
        """Each chunk's rows as a frame, in row order. Raises :class:`Unreadable` (the file changed)."""
        if self.frames is not None:
            yield from self.frames
            return
        changed = "the file changed while it was being read (its rows differ between two reads)"
        k = 0
        for got in _MODES[self.mode](self.path, self.chunk_bytes, self.max_row, None):
            if k >= len(self.chunk_rows) or got.text.len() != self.chunk_rows[k]:
                raise Unreadable(changed)
            k += 1
            yield got.text.to_frame()
        if k != len(self.chunk_rows):
            raise Unreadable(changed)

    def batches(self, columns: list[str] | None, rows: int, want: dict[str, pl.DataType] | None = None,
                ramp: bool = False, max_bytes: int | None = None) -> Iterator[pl.DataFrame]:
        """``columns`` (``["text"]`` or none) in batches of ``rows`` rows or ``max_bytes`` decoded bytes,
        (None: :data:`~datacheck.formats.stream_source.BATCH_BYTES`), whichever comes first (at least one row; the last may be shorter;
        :func:`~datacheck.formats.stream_source.recut`), cast to ``want`` when given. Raises :class:`Unreadable`."""
        cols = [COLUMN] if columns is None else list(columns)
        frames = (f.select(cols) for f in self._frames() if f.height)
        yield from cast_batches(recut_frames(frames, max(1, rows), budget(max_bytes)), want)

    def lazy(self) -> pl.LazyFrame:
        """The rows as a LazyFrame that reads the file again (pass 2) when collected."""
        return lazy_source(lambda cols, batch_size: self.batches(cols, batch_size or 65_536), self.schema,
                           "datacheck-text", str(self.path))


def open_text(path: Path, sample_by: str = "line", max_row: int = MAX_ROW_BYTES, max_examples: int = 5) -> ShardData:
    """Pass 1 over a local text file (plain, ``.gz``, ``.zst``): its rows' count and lines, its
    ``decode.*`` findings; the rows are read later, batch by batch (``ShardData.stream``). See the
    module docstring for the rows of each ``sample_by``.

    Raises:
        Unreadable: the file cannot be read or decompressed; it is UTF-16 or UTF-32 text
            (:func:`~datacheck.formats.wide.refuse_wide`: ``datasets`` raises ``UnicodeDecodeError``
            on it); with ``sample_by = "document"``, it is longer than ``max_row`` bytes.
    """
    if sample_by not in _MODES:
        raise Unreadable(f"[dataset] sample_by = {sample_by!r}: expected one of {', '.join(SAMPLE_BY)}")
    refuse_wide(path)
    size = TEXT_CHUNK_BYTES
    issues = _Issues(keep=max_examples)
    chunk_rows: list[int] = []
    lines: list[np.ndarray] = []
    kept: list[pl.DataFrame] | None = []
    kept_bytes = total = 0
    for got in _MODES[sample_by](path, size, max_row, issues):
        chunk_rows.append(got.text.len())
        lines.append(got.lines)
        total += got.text.estimated_size()
        if kept is not None:
            frame = got.text.to_frame()
            kept_bytes += frame.estimated_size()
            if kept_bytes <= KEEP_BYTES:
                kept.append(frame)
            else:
                kept = None
    findings: list[Finding] = []
    if issues.n_utf8:
        findings.append(utf8_finding(issues.utf8, max_examples, total=issues.n_utf8))
    if issues.n_long:
        findings.append(bad_record_finding(issues.long, issues.lines, max_examples, total=issues.n_long))
    rows = sum(chunk_rows)
    stream = TextStream(path=path, mode=sample_by, max_row=max_row, chunk_bytes=size, chunk_rows=chunk_rows,
                        rows=rows, frames=kept, total_bytes=total)
    line_of_row = np.concatenate(lines) if lines else np.empty(0, dtype=np.int64)
    return ShardData(lf=stream.lazy(), decode_findings=findings, line_format=True, line_of_row=line_of_row,
                     stream=stream)


#: a header field of a table (:func:`table_head`): a column name as tables name them
_HEADER_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
#: the head of a file :func:`table_head` judges: its first bytes, and at most this many non-blank lines
_HEAD_BYTES = 1 << 16
_HEAD_LINES = 200


def table_head(path: Path) -> tuple[str, str, int, int] | None:
    """Whether a ``.txt`` file holds a table of records rather than running text: its first non-blank
    line is a header of at least two column names (``[A-Za-z_][A-Za-z0-9_]*``, optionally quoted)
    under one of the CSV reader's separators (:data:`datacheck.formats.csv.SEPARATORS`, in that order),
    and each of the next non-blank lines within the first :data:`_HEAD_BYTES` bytes (at least two, at
    most :data:`_HEAD_LINES`) splits into as many fields under it (CSV quoting). dair-ai emotion's
    ``train.txt`` is one (``text;label_name``, then ``i didnt feel humiliated;sadness``). Returns
    (separator, header, columns, records judged), or None (also when the head cannot be read: the
    reader then says why)."""
    try:
        chunk = next(iter(bounded_line_chunks(path, _HEAD_BYTES, _HEAD_BYTES, universal=True)), b"")
    except (Unreadable, OSError):
        return None
    if isinstance(chunk, LongLine):
        return None
    lines = [ln for ln in _universal(bytes(chunk[:_HEAD_BYTES]).decode("utf-8", errors="replace")).split("\n")
             if ln.strip()][:_HEAD_LINES + 1]
    if len(lines) < 3:
        return None
    header, records = lines[0].lstrip("\ufeff"), lines[1:]
    for sep in SEPARATORS:
        names = [f.strip('"') for f in header.split(sep)]
        if len(names) < 2 or not all(_HEADER_FIELD.match(n) for n in names):
            continue
        widths = {len(r) for r in _csv.reader(records, delimiter=sep, quotechar='"', strict=False)}
        if widths == {len(names)}:
            return sep, header, len(names), len(records)
    return None


def _open(path: Path, fmt: str, opts: ReadOptions) -> ShardData:
    """The ``text`` format's open. With ``[dataset] format = "auto"`` a file that holds a table
    (:func:`table_head`) is refused (``Unreadable``: ``decode.unreadable``, naming the separator to set):
    read as lines, its columns (a label) would go unchecked and the audit pass on nothing."""
    if str(getattr(opts.dataset, "format", "auto") or "auto") == "auto":
        table = table_head(path)
        if table is not None:
            sep, header, n, k = table
            raise Unreadable(
                f"a table, not running text: its header {header!r} and the {k} line(s) after it split into {n} "
                f"columns under {sep!r}; set [dataset] format = \"csv\" and separator = {json.dumps(sep)} to audit "
                "its columns (labels, duplicates, leakage), or [dataset] format = \"text\" to audit each line as text")
    mode = str(getattr(opts.dataset, "sample_by", None) or SAMPLE_BY[0])
    limit = int(getattr(opts.dataset, "max_row_bytes", None) or MAX_ROW_BYTES)
    return open_text(path, mode, limit, opts.max_examples)


# --------------------------------------------------------------------------------------------- clean
def _rows_of(path: Path, sample_by: str, max_row: int) -> tuple[list[str], np.ndarray, list[Finding]]:
    """The rows the audit reads from ``path`` (:func:`open_text`), the 1-based line each starts on,
    and the reader's ``decode.*`` findings."""
    data = open_text(path, sample_by, max_row)
    if data.stream is None or data.line_of_row is None:
        raise InternalError(f"{path.name}: the text reader gave no stream")
    rows = [t for f in data.stream.batches(None, 1 << 16) for t in f.get_column(COLUMN).to_list()]
    return rows, np.asarray(data.line_of_row, dtype=np.int64), list(data.decode_findings)


def _hashes(rows: list[str]) -> list[str]:
    """Each row's content hash (``"xxh3-128:<hex>"``): datacheck's row encoding over the ``text`` column."""
    return row_hashes(pl.DataFrame({COLUMN: rows}, schema={COLUMN: pl.String}))


def _row_lines(row: str, line: int, sample_by: str, n_lines: int) -> tuple[int, int]:
    """(first, last) 0-based line of a row starting on 1-based ``line``: by line its line; by
    paragraph through its inner line breaks (a last paragraph's final break is its last line's);
    by document every line."""
    if sample_by == "document":
        return 0, n_lines - 1
    first = line - 1
    return first, first + (row.rstrip("\n").count("\n") if sample_by == "paragraph" else 0)


def _drop_lines(n_lines: int, rows: list[str], line_of_row: np.ndarray, dropped: list[int], sample_by: str) -> np.ndarray:
    """Per line of the file (shape (n_lines,), bool): whether it goes with a dropped row. By line, the
    row's line; by paragraph, the paragraph's lines and the empty line that ends the ``"\\n\\n"``
    after it (none after the file's last paragraph), so every other paragraph reads as it did (a
    paragraph never ends with a line break but the file's last); by document, every line."""
    out = np.zeros(n_lines, dtype=bool)
    for r in dropped:
        first, last = _row_lines(rows[r], int(line_of_row[r]), sample_by, n_lines)
        if sample_by == "paragraph" and last + 1 < n_lines:
            last += 1  # the separator's empty line
        out[first:last + 1] = True
    return out


def _invalid_rows(raw: bytes, starts: np.ndarray, rows: list[str], line_of_row: np.ndarray, sample_by: str) -> set[int]:
    """The rows whose bytes are not valid UTF-8 (the audit read them with U+FFFD)."""
    bad: set[int] = set()
    ends = np.append(starts[1:], len(raw))
    for r in range(len(rows)):
        first, last = _row_lines(rows[r], int(line_of_row[r]), sample_by, len(starts))
        if not len(starts):
            continue
        try:
            raw[int(starts[first]):int(ends[min(last, len(starts) - 1)])].decode("utf-8")
        except UnicodeDecodeError:
            bad.add(r)
    return bad


def rewrite_text(job: RewriteJob, target: Path, quarantine: Path, write: WriteBytes) -> Rewritten:
    """``datacheck clean`` of a plain-text shard: the rows the audit reads, by the same ``[dataset]
    sample_by`` and ``max_row_bytes`` (:func:`open_text`), less the dropped ones (``job.reasons``, and
    with ``decode.invalid_utf8`` in ``job.drop`` the rows holding invalid UTF-8).

    The copy (``target``, compressed as its name says) is the input's bytes without the lines of the
    dropped rows (:func:`_drop_lines`): line breaks (``\\r\\n``, lone ``\\r``), blank lines, the byte
    order mark before a kept first row and the bytes of the kept rows stay as they were, so the copy
    reads, by the same ``sample_by``, as exactly the kept rows. By document a dropped row is the
    whole file: no copy is written (``Rewritten.kept`` 0). The quarantine (``quarantine`` with
    ``.jsonl`` added; only when rows are dropped) is JSON Lines: ``text`` as the audit read it and
    the meta columns (:data:`~datacheck.formats.rewrite.META_COLUMNS`). Both are read back and
    compared row by row with the input's content hashes. The file is held in memory, as JSON Lines
    and CSV shards are.

    Raises:
        UsageError: the shard has a row over ``[dataset] max_row_bytes`` (the audit's ``decode.bad_record``:
            not a row, and clean holds no such row), before the file is held; nothing is written.
        InternalError: the file does not read as the audit read it, or the written rows differ.
    """
    sample_by = str(getattr(job.dataset, "sample_by", None) or SAMPLE_BY[0])
    max_row = int(getattr(job.dataset, "max_row_bytes", None) or MAX_ROW_BYTES)
    with tempfile.TemporaryDirectory(prefix="datacheck-text-") as tmp:
        if isinstance(job.source, str) and is_url(job.source):
            raw = read_bytes(job.source)  # decompressed
            local = Path(tmp) / "shard.txt"
            local.write_bytes(raw)
        else:
            local, raw = Path(job.source), b""
        rows, line_of_row, findings = _rows_of(local, sample_by, max_row)
        long = [f for f in findings if f.check == "decode.bad_record"]
        if long:
            raise UsageError(f"{job.rel}: {long[0].message}; clean holds a shard's rows in memory and copies no row over "
                             "[dataset] max_row_bytes, so no cleaned copy was made (nothing partial is left). Remove the "
                             "line, or raise [dataset] max_row_bytes on a machine with several times that memory free")
        if not raw:
            raw = read_bytes(local)
    if len(rows) != job.rows:
        raise InternalError(f"{job.rel}: {len(rows)} rows read here but the audit read {job.rows}")
    starts = _line_starts(raw, 0) if raw else np.zeros(0, dtype=np.int64)
    reasons = {r: sorted(set(why)) for r, why in job.reasons.items()}
    if "decode.invalid_utf8" in job.drop and raw:
        for r in _invalid_rows(raw, starts, rows, line_of_row, sample_by):
            reasons[r] = sorted({*reasons.get(r, []), "decode.invalid_utf8"})
    dropped = sorted(r for r in reasons if 0 <= r < len(rows))
    keep_idx = [r for r in range(len(rows)) if r not in reasons]
    hashes = _hashes(rows)
    gone = _drop_lines(len(starts), rows, line_of_row, dropped, sample_by)
    ends = np.append(starts[1:], len(raw)).astype(np.int64)
    body = b"".join(raw[int(a):int(b)] for a, b, g in zip(starts, ends, gone) if not g)
    written = bool(keep_idx) or sample_by != "document"
    if written:
        write(target, compressed_as(target.name, body))
    qpath = quarantine.with_name(quarantine.name + ".jsonl")
    if dropped:
        lines = [json.dumps({COLUMN: rows[r], "_datacheck_row": r, "_datacheck_line": int(line_of_row[r]),
                             "_datacheck_shard": job.rel, "_datacheck_checks": reasons[r],
                             "_datacheck_row_hash": hashes[r]}, ensure_ascii=False) for r in dropped]
        write(qpath, ("\n".join(lines) + "\n").encode("utf-8"))
    # proof: read back what was written and compare per-row content hashes with the input, in order
    got = _hashes(_rows_of(target, sample_by, max_row)[0]) if written else []
    # lines split at "\n" only: a row or shard name holding U+2028, U+2029 or NEL is written raw by json.dumps
    qrecs = [json.loads(x) for x in qpath.read_bytes().decode("utf-8").split("\n") if x] if dropped else []
    qgot = [(int(q["_datacheck_row"]), h) for q, h in zip(qrecs, _hashes([q[COLUMN] for q in qrecs]))]
    if (got != [hashes[r] for r in keep_idx] or qgot != [(r, hashes[r]) for r in dropped]
            or any(set(q) != {COLUMN, *META_COLUMNS} for q in qrecs)):
        raise InternalError(f"{job.rel}: the written rows differ from the input (kept {len(keep_idx)}, quarantined "
                            f"{len(dropped)} of {len(rows)})")
    return Rewritten(input_rows=len(rows), kept=len(keep_idx), kept_rows=len(keep_idx),
                     reasons=[reasons[r] for r in dropped])


@dataclass(frozen=True)
class TextRewrite:
    """The rewrite of plain text: :func:`rewrite_text` (rows by ``[dataset] sample_by``)."""

    mode: ClassVar[str] = "text"

    def __call__(self, job: RewriteJob, target: Path, quarantine: Path, write: WriteBytes) -> Rewritten:
        return rewrite_text(job, target, quarantine, write)


#: the extensions a forced ``[dataset] format = "text"`` reads: ``.txt``, and wikitext's ``.raw`` and
#: ``.tokens`` (``wiki.train.raw``), each also ``.gz``/``.zst``
_FORCED = tuple(b + c for b in (".txt", ".text", ".raw", ".tokens") for c in ("", ".gz", ".zst"))

FORMAT = Format(
    names=("text",),
    open=_open,
    extensions=((".txt.gz", "text"), (".txt.zst", "text"), (".txt", "text")),
    forced_extensions={"text": _FORCED},
    rewrite={"text": TextRewrite()},
)
