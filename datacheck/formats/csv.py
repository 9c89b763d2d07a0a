"""CSV/TSV shards (``.csv``/``.tsv``, also ``.gz``; any ``[dataset] separator`` and ``quote_char``):
the one reader, for a local file and a copy of an object in a store alike, reading the file in two
streaming passes, in bounded memory.

Pass 1 (:func:`open_csv`, at open) reads the file once as a stream of lines
(:func:`datacheck.io.shardbytes.bounded_line_chunks`: decompressed as a stream, chunks of whole lines; a
line longer than ``[dataset] max_row_bytes`` is never held: the file is ``decode.unreadable`` naming the
line, byte offset and length, since the records after it cannot be told apart without reading it) through
the same record rules as :func:`datacheck.formats.records.csv_records` (Python's ``csv`` module,
``strict=False``, the field-size limit raised by :mod:`datacheck.formats.records`): it keeps

- the findings (``decode.invalid_utf8`` per line, ``decode.bad_record``
  for a wrong field count, blank lines, the header rules and ``[dataset] names``), with their
  lines, byte offsets, counts and examples (only the first examples are kept, not every bad line);
- the row count and the row -> line mapping (an int64 array only once a row is not on the line
  after the previous row's: a file without multi-line records, blank or bad lines needs none);
- the dtypes: each chunk of :data:`CSV_CHUNK_ROWS` good records (or :data:`CSV_CHUNK_CHARS`) is re-serialised and parsed by
  polars as a whole file would be (``infer_schema_length=None``,
  ``null_values=[""]``, no date parsing, text columns as strings; a column of floats one of which
  is spelled ``nan``, ``Inf`` or ``Infinity``, which polars' inference leaves a string, as Float64:
  :func:`_number_column`); the chunks' dtypes combine by
  polars' own inference rule (:func:`combine_dtypes`: a chunk whose column is all null says
  nothing; String or Boolean beside another type is String; ints and floats are Float64; the
  widest int otherwise), so a CSV's inferred dtypes are the ones polars infers over the whole file
  (``tests/unit/formats/test_streams.py`` holds it with hypothesis).

Pass 2 (:meth:`CsvStream.batches`, once per engine pass) reads the file again through the same
record splitter and hands out frames of ``rows`` good records, parsed by polars with the schema of
pass 1 fixed. The records are split by Python's ``csv`` module in both passes rather than by polars'
or pyarrow's CSV reader: those differ from it on malformed quoting, ragged rows and invalid UTF-8,
and the findings (lines, offsets) must not change.

``ShardData.lf`` stays a LazyFrame for every other consumer (inspect, clean, contracts, schema
infer): a ``polars.io.plugins.register_io_source`` scan that runs pass 2 when collected (projection
and ``n_rows`` pushed down, the predicate applied per batch).

A UTF-16 or UTF-32 file (Excel's "Unicode Text", pandas' ``to_csv(encoding="utf-16")``) is refused before
pass 1 (:mod:`datacheck.formats.wide`: ``decode.unreadable`` naming the encoding and the iconv command); a
UTF-8 byte order mark is skipped (the header names are read without it, as pandas reads them).

Line breaks: ``\\n`` and ``\\r\\n`` (a quoted field spanning a CRLF line break keeps its ``\\r`` in a
file with invalid UTF-8); a lone ``\\r`` (classic Mac line break) is not a line break.
"""
from __future__ import annotations

import csv
import io
import json
import re
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import numpy as np
import polars as pl

from datacheck.formats.base import Format, ReadOptions, ShardData, normalize_shard
from datacheck.formats.batches import BudgetedStreamedReader, cast_batches
from datacheck.formats.findings import bad_record_finding, blank_finding, long_line_message, unique_names, utf8_finding
from datacheck.formats.records import BOM, RecordLayoutError
from datacheck.formats.rewrite import RecordsRewrite
from datacheck.formats.stream_source import budget, lazy_source, recut_frames
from datacheck.formats.wide import refuse_wide
from datacheck.io.shardbytes import LongLine, Unreadable, bounded_line_chunks
from datacheck.model.constants import MAX_ROW_BYTES
from datacheck.model.findings import Finding

__all__ = ["CSV_CHUNK_ROWS", "FORMAT", "SEPARATORS", "CsvStream", "combine_dtypes", "open_csv"]

#: good records parsed by polars at once in pass 1 (dtype inference) and at most per frame in pass 2
CSV_CHUNK_ROWS = 65_536
#: characters of good records parsed by polars at once in pass 1 (whichever of the two comes first)
CSV_CHUNK_CHARS = 16 * 2**20
#: decompressed bytes read from the file at once (whole lines; a longer line makes a longer read)
_READ_BYTES = 2**20
#: bad UTF-8 lines kept for the encoding guess of ``decode.invalid_utf8`` (the encoding guess)
_ENCODING_SAMPLE = 50
_INT_RANK = [pl.Int64, pl.Int128]
#: the separators a delimited file is commonly written with; with ``[dataset] separator`` unset, a
#: header that is one column under the default separator but splits under one of the others is refused
#: (:func:`_wrong_separator`)
SEPARATORS = (",", ";", "\t", "|")
#: the first records of a one-column file held to judge another separator by (each must split into
#: as many fields as the header)
_SEPARATOR_SAMPLE = 1000


def combine_dtypes(seen: list[pl.DataType]) -> pl.DataType:
    """The dtype polars infers for a CSV column over the whole file, from the dtypes it infers over
    chunks of it (only chunks where the column has a non-null value). Rule (polars 1.x/2.x
    ``infer_schema_length=None``, checked by the tests): none -> String; one kind -> it; String, or
    Boolean beside a number -> String; Float64 beside ints -> Float64; ints -> the widest."""
    kinds = set(seen)
    if not kinds:
        return pl.String
    if len(kinds) == 1:
        return seen[0]
    if pl.String in kinds or pl.Boolean in kinds:
        return pl.String
    if pl.Float64 in kinds:
        return pl.Float64
    if kinds <= set(_INT_RANK):
        return max(kinds, key=_INT_RANK.index)
    return pl.String


def _number_column(s: pl.Series) -> pl.DataType:
    """The dtype of a CSV column as polars inferred it (``s``: one chunk), but Float64 for a String
    column every non-null value of which is a float: polars' inference reads ``NaN`` and ``inf`` as
    floats but not ``nan``, ``-nan``, ``Inf``, ``Infinity``, ``NAN`` (Python's ``csv`` module and
    ``numpy.savetxt`` write a NaN as ``nan``, R an infinity as ``Inf``), so one such cell turned a
    whole numeric column into text: its NaN invisible to ``finite.nan`` and the column no feature
    or target. Every spelling Python's ``float()`` takes (any case, a sign) is read by polars
    with the Float64 schema of pass 2 (``tests/unit/formats/test_csv_nonfinite.py``)."""
    if s.dtype != pl.String:
        return s.dtype
    return pl.Float64 if s.cast(pl.Float64, strict=False).null_count() == s.null_count() else pl.String


#: R's spelling of a missing value (``write.csv``'s default ``na = "NA"``): a cell of exactly this text in
#: a column whose other values are all numbers is missing (null), not a string that makes the column text
R_MISSING = "NA"


def _number_with_missing(s: pl.Series) -> pl.DataType | None:
    """The dtype of a String CSV column (one chunk, ``s.name`` its column) some cells of which are
    :data:`R_MISSING` and every other non-null value a number: the dtype polars' own inference gives
    the column with those cells empty (the null they are read as), with :func:`_number_column`'s
    spellings of NaN and infinity (Int64, Int128 for integers beyond Int64's range, Float64); None
    when no cell is ``NA``, when only ``NA`` and nulls are there (the chunk says nothing of the
    dtype), or when another value is text. An R export with one missing feature (``NA``) otherwise
    made the whole numeric column text: the tabular layout unseen, the column no feature, its NaNs
    unchecked. A column of 64-bit IDs beyond Int64 (``12345678901234567890``) with an ``NA`` is
    Int128, as it is without the ``NA``: read as Float64, whose 53-bit significand (IEEE 754
    binary64) holds integers exactly only up to 2**53, distinct IDs became one value (a row differing
    from another only by its ID read as its duplicate).

    Raises:
        polars.exceptions.PolarsError: polars infers a dtype a cell cannot be parsed as (an integer
            beyond 128 bits), as it does for the column without the ``NA`` cells."""
    na = s == R_MISSING
    if not na.any():
        return None
    cells = s.set(na.fill_null(False), None)
    if cells.null_count() == cells.len():
        return None
    again = pl.read_csv(_serialise([s.name], [[v] for v in cells.fill_null("").to_list()]),
                        infer_schema_length=None, null_values=[""], try_parse_dates=False).to_series()
    dt = _number_column(again)
    return dt if dt != pl.String else None


_UNPARSED = re.compile(r"could not parse `(?P<value>.*?)` as dtype `(?P<dtype>[^`]*)` at column '(?P<column>.*?)'")


def _refusal(exc: BaseException, cols: list[str], records: list[list[str]], lines: list[int]) -> Unreadable:
    """Why polars' inference refused a chunk of good ``records`` (``lines``: each one's 1-based line):
    a value it cannot parse as the dtype it inferred (an integer beyond 128 bits) is named by line,
    column and value, with what to write instead; any other error in polars' own words."""
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    m = _UNPARSED.search(first)
    if m is not None and m["column"] in cols:
        i, value = cols.index(m["column"]), m["value"]
        line = next((ln for rec, ln in zip(records, lines) if rec[i] == value), None)
        where = f"line {line}, " if line is not None else ""
        return Unreadable(
            f"{where}column {m['column']!r}: {value} cannot be read as a number (polars infers {m['dtype']} for the "
            "column, and no integer dtype holds a value beyond 128 bits); write it as a float, or name the column "
            "in [columns] text to read the column as strings")
    return Unreadable(f"CSV records do not form one table: {first}")


def _wrong_separator(header: str, sample: list[str], sep: str, quote: str | None) -> Unreadable | None:
    """The refusal of a file read as one column under the default separator ``sep`` whose ``header``
    and every one of the first records (``sample``: each record's single field) split into the same
    number (>= 2) of fields under another of :data:`SEPARATORS` (the first such, in that order):
    e.g. ``text;label_name`` read with ``,``. Read as it is, the file is one column that no check
    has a role for: a silent audit of nothing. None when no other separator splits them alike."""
    def width(text: str, cand: str) -> int:
        return len(next(csv.reader([text], delimiter=cand, quotechar=quote or '"',
                                   quoting=csv.QUOTE_MINIMAL if quote else csv.QUOTE_NONE, strict=False), []))

    for cand in SEPARATORS:
        if cand == sep:
            continue
        n = width(header, cand)
        if n >= 2 and all(width(rec, cand) == n for rec in sample):
            checked = f" and its first {len(sample)} record(s)" if sample else ""
            return Unreadable(
                f"the header {header!r} is one column under the separator {sep!r}, but it{checked} split into {n} "
                f"columns under {cand!r}: set [dataset] separator = {json.dumps(cand)} (or separator = {json.dumps(sep)} "
                "to read the file as one column)")
    return None


@dataclass
class _Record:
    line: int
    offset: int
    fields: list[str] | None
    error: str | None = None
    text: str = ""


def _lines(path: Path, max_line: int | None = None) -> Iterator[tuple[int, bytes, str, bool, int]]:
    """(byte offset in the file, the line's bytes without its break, the decoded line with its break
    as written (``\\n`` or ``\\r\\n``), invalid UTF-8, -1) for every line, streamed; a UTF-8 BOM skipped.
    A line of more than ``max_line`` bytes (None: no bound) is never held: it comes as (its offset,
    its first bytes, a bare line break, False, its length)
    (:func:`~datacheck.io.shardbytes.bounded_line_chunks`); the splitter stops there."""
    pos = 0
    first = True
    for chunk in bounded_line_chunks(path, _READ_BYTES, max_line):
        if isinstance(chunk, LongLine):
            first = False
            yield pos, chunk.head, "\n" if chunk.newline else "", False, chunk.length
            pos += chunk.nbytes
            continue
        start = 0
        if first:
            first = False
            if chunk.startswith(BOM):
                start = pos = len(BOM)
        n = len(chunk)
        while start < n:
            nl = chunk.find(b"\n", start)
            end = n if nl < 0 else nl
            raw = chunk[start:end]
            brk = "\n" if nl >= 0 else ""
            if raw.endswith(b"\r"):
                raw = raw[:-1]
                brk = "\r" + brk
            try:
                text, bad = raw.decode("utf-8"), False
            except UnicodeDecodeError:
                text, bad = raw.decode("utf-8", errors="replace"), True
            yield pos, raw, text + brk, bad, -1
            pos += end + 1 - start
            start = end + 1


class _Splitter:
    """The records of the file (the rules of :func:`datacheck.formats.records.csv_records`), streamed."""

    def __init__(self, path: Path, sep: str, quote: str | None, header: bool, names: list[str] | None,
                 keep_bad: int = _ENCODING_SAMPLE, max_line: int | None = None):
        self.path, self.sep, self.quote, self.header, self.names = path, sep, quote, header, names
        self.max_line = max_line
        self.keep_bad = max(keep_bad, _ENCODING_SAMPLE)
        self.offsets: dict[int, int] = {}
        self.raws: dict[int, bytes] = {}
        self.n_lines = 0
        self.bad_utf8: list[tuple[int, int, int, bytes]] = []
        self.n_bad_utf8 = 0
        self.nonblank = False
        self.header_fields: list[str] | None = None
        self.width: int | None = len(names) if names else None
        self.end = 0
        #: lines the csv reader had consumed when it gave its last record (set by :meth:`records`)
        self.done_lines = 0
        #: (first line, its byte offset, bytes so far) of the record being read
        self.pending = (0, 0, 0)

    def _text(self) -> Iterator[str]:
        for off, raw, text, bad, long in _lines(self.path, self.max_line):
            self.n_lines += 1
            self.offsets[self.n_lines] = off
            self.end = off + len(raw)
            if long >= 0:  # the quoting across it cannot be followed without reading it: the file stops here
                raise RecordLayoutError(f"line {self.n_lines} (byte offset {off}) is {long_line_message(long, self.max_line or 0)}, "
                                        "and the records after it cannot be told apart without it (a quoted field "
                                        "may span lines): the file was not read further")
            first, first_off, held = self.pending if self.n_lines - 1 > self.done_lines else (self.n_lines, off, 0)
            held += len(raw)
            self.pending = (first, first_off, held)
            if self.max_line is not None and held > self.max_line:  # a quoted field spanning lines
                lim = self.max_line
                bound = f"{lim >> 20:,} MiB" if lim >= 1 << 20 and lim % (1 << 20) == 0 else f"{lim:,} bytes"
                raise RecordLayoutError(
                    f"the record from line {first} (byte offset {first_off}) holds {held:,} bytes by line "
                    f"{self.n_lines} (a quoted field spanning lines), more than the {bound} a row datacheck "
                    "decodes ([dataset] max_row_bytes): it was not held, and the file was not read further")
            if bad:
                self.n_bad_utf8 += 1
                if len(self.bad_utf8) < self.keep_bad:
                    try:
                        raw.decode("utf-8")
                    except UnicodeDecodeError as exc:
                        self.bad_utf8.append((self.n_lines - 1, off + exc.start, raw[exc.start], raw))
            if not self.nonblank and text.strip():
                self.nonblank = True
            yield text

    def records(self) -> Iterator[_Record]:
        """Header handling, blank lines (``fields`` None, ``error`` "blank") and records in file order.
        Raises :class:`RecordLayoutError` (a ``csv`` parse error, ``names`` not fitting the header)."""
        reader = csv.reader(self._text(), delimiter=self.sep, quotechar=self.quote or '"',
                            quoting=csv.QUOTE_MINIMAL if self.quote else csv.QUOTE_NONE, strict=False)
        cols_known = not self.header
        prev = 0
        try:
            for rec in reader:
                start, prev = prev + 1, reader.line_num
                self.done_lines = prev
                off = self.offsets.get(start, self.end)
                for k in [k for k in self.offsets if k < start]:  # only the lines of the current record are kept
                    del self.offsets[k]
                if not rec or (len(rec) == 1 and not rec[0].strip() and (self.width or 0) != 1):
                    yield _Record(start, off, None, "blank")
                    continue
                if not cols_known:
                    cols_known = True
                    self.header_fields = rec
                    self.width = len(rec)
                    if self.names and len(self.names) != self.width:
                        raise RecordLayoutError(
                            f"[dataset] names lists {len(self.names)} column(s) but the header line {start} has "
                            f"{self.width} ({self.sep.join(rec)[:200]!r}); give one name per column")
                    continue
                if self.width is None:
                    self.width = len(rec)
                if len(rec) != self.width:
                    yield _Record(start, off, None, f"{len(rec)} fields, expected {self.width}", self.sep.join(rec))
                else:
                    yield _Record(start, off, rec)
        except csv.Error as exc:
            raise RecordLayoutError(f"CSV parse error at line {reader.line_num}: {exc}") from None

    def columns(self) -> list[str]:
        if self.names:
            return list(self.names)
        if self.header_fields is not None:
            return list(self.header_fields)
        return [f"column_{i + 1}" for i in range(self.width or 0)]


def _serialise(cols: list[str], records: list[list[str]]) -> bytes:
    buf = io.StringIO()
    w = csv.writer(buf, delimiter=",", quoting=csv.QUOTE_MINIMAL, lineterminator="\n")
    w.writerow(cols)
    w.writerows(records)
    return buf.getvalue().encode("utf-8")


@dataclass
class CsvStream(BudgetedStreamedReader):
    """A CSV/TSV file's rows as batches read straight from the file (pass 2, see the module docstring).

    Attributes:
        path: the file. sep, quote, header, names: the ``[dataset]`` CSV options.
        schema: ``{column: dtype}`` fixed by pass 1 (column names made unique).
        rows: the good records (rows) of the file.
        total_bytes: {column: decoded bytes of all its rows} (every chunk as pass 1 parsed it): the file's
            average row, which the engine's one-batch read and its batches are sized by (the first 1,024
            rows sized them before: a file of small rows, then long ones, was read as one batch of GBs).
    """

    path: Path
    sep: str
    quote: str | None
    header: bool
    names: list[str] | None
    schema: dict[str, pl.DataType] = field(default_factory=dict)
    rows: int = 0
    max_line: int | None = None
    #: numeric columns whose ``NA`` cells (R's missing value, :data:`R_MISSING`) are read as null
    r_missing: frozenset[str] = frozenset()
    total_bytes: dict[str, int] = field(default_factory=dict)

    def size(self, columns: list[str]) -> tuple[int | None, float | None]:
        """(rows, decoded bytes of one row of ``columns`` on average over the file), both from pass 1 (its
        parse of every chunk), no read; (rows, None) for a file of no rows. The engine's batches and the
        layout's sample are sized by it instead of parsing the first 1,024 records again (records of up
        to ``[dataset] max_row_bytes`` each: 128 GiB), which may be far smaller than the later ones."""
        if not self.rows:
            return int(self.rows), None
        return int(self.rows), sum(self.total_bytes.get(c, 0) for c in columns) / self.rows

    def _parse(self, records: list[list[str]], columns: list[str] | None) -> pl.DataFrame:
        cols = list(self.schema)
        if self.r_missing:
            at = [i for i, c in enumerate(cols) if c in self.r_missing]
            records = [[("" if k in at and v == R_MISSING else v) for k, v in enumerate(r)]
                       if any(r[k] == R_MISSING for k in at if k < len(r)) else r for r in records]
        try:
            return pl.read_csv(_serialise(cols, records), schema=self.schema, columns=columns,
                               null_values=[""], try_parse_dates=False)
        except (pl.exceptions.PolarsError, pl.exceptions.PanicException) as exc:
            raise Unreadable(f"CSV records do not form one table: {exc}") from None

    def batches(self, columns: list[str] | None, rows: int,
                want: dict[str, pl.DataType] | None = None, ramp: bool = False,
                max_bytes: int | None = None) -> Iterator[pl.DataFrame]:
        """The ``columns`` (all when None) of the rows in frames of ``rows`` rows or ``max_bytes`` decoded
        bytes, (None: :data:`~datacheck.formats.stream_source.BATCH_BYTES`), whichever comes first (at least one row; the last may be shorter;
        :func:`~datacheck.formats.stream_source.recut`; at most :data:`CSV_CHUNK_ROWS` records or
        :data:`CSV_CHUNK_CHARS` characters parsed at once, concatenated up to that), with the dtypes of
        :attr:`schema`, cast to ``want`` (when given). Raises :class:`Unreadable` (the file changed,
        cannot be read)."""
        yield from cast_batches(recut_frames(self._pieces(columns, max(1, min(rows, CSV_CHUNK_ROWS))), rows,
                                             budget(max_bytes)), want)


    def _pieces(self, columns: list[str] | None, step: int) -> Iterator[pl.DataFrame]:
        """The good records parsed ``step`` at a time, or :data:`CSV_CHUNK_CHARS` characters at a time
        (as pass 1 parses them; the last piece may be shorter)."""
        recs: list[list[str]] = []
        chars = 0
        split = _Splitter(self.path, self.sep, self.quote, self.header, self.names, max_line=self.max_line)
        try:
            for r in split.records():
                if r.fields is None:
                    continue
                recs.append(r.fields)
                chars += sum(map(len, r.fields))
                if len(recs) >= step or chars >= CSV_CHUNK_CHARS:
                    yield self._parse(recs, columns)
                    recs, chars = [], 0
        except RecordLayoutError as exc:
            raise Unreadable(str(exc)) from None
        if recs:
            yield self._parse(recs, columns)

    def lazy(self) -> pl.LazyFrame:
        """The rows as a LazyFrame that reads the file again (pass 2) when collected."""
        return lazy_source(lambda cols, batch_size: self.batches(cols, batch_size or CSV_CHUNK_ROWS),
                           self.schema, "datacheck-csv")


def open_csv(path: Path, fmt: str, dataset_cfg, max_examples: int, string_columns: tuple[str, ...]) -> ShardData:
    """Pass 1 over a local CSV/TSV file (see the module docstring): its findings, rows, line mapping
    and dtypes; the rows are read later, batch by batch (``ShardData.stream``).

    Raises:
        Unreadable: the file cannot be read or decompressed, it is UTF-16 or UTF-32 text
            (:func:`~datacheck.formats.wide.refuse_wide`: Excel's "Unicode Text"), the ``csv`` module
            cannot parse it, ``[dataset] names`` does not fit the header, or the records do not form one table.
    """
    refuse_wide(path)
    sep = dataset_cfg.separator or ("\t" if fmt == "tsv" else ",")
    quote = dataset_cfg.quote_char if dataset_cfg.quote_char else None
    header = dataset_cfg.header
    names = list(dataset_cfg.names) if dataset_cfg.names else None
    limit = int(getattr(dataset_cfg, "max_row_bytes", None) or MAX_ROW_BYTES)
    split = _Splitter(path, sep, quote, header, names, keep_bad=max_examples, max_line=limit)
    bad: list[tuple[int, int, str, str]] = []
    n_bad = 0
    blank: list[tuple[int, int]] = []
    n_blank = 0
    first_line: int | None = None
    rows = 0
    lines: array | None = None  # only once a row is not on the line after the previous one
    recs: list[list[str]] = []
    rec_lines: list[int] = []  # the line of each of recs
    chars = 0
    seen: dict[int, list[pl.DataType]] = {}
    na_cols: set[int] = set()  # columns holding R's NA (R_MISSING) cells
    cols: list[str] | None = None
    # the default separator of a file with a header: hold the first records while it reads as one column
    guessed = dataset_cfg.separator is None and header and names is None
    sample: list[str] = []
    total_bytes: dict[str, int] = {}

    def infer(chunk: list[list[str]], chunk_lines: list[int]) -> None:
        nonlocal cols
        if cols is None:
            cols = unique_names(split.columns())
        try:
            df = pl.read_csv(_serialise(cols, chunk), infer_schema_length=None,
                             schema_overrides={c: pl.String for c in cols if c in string_columns},
                             null_values=[""], try_parse_dates=False)
        except (pl.exceptions.PolarsError, pl.exceptions.PanicException) as exc:
            raise _refusal(exc, cols, chunk, chunk_lines) from None
        for name in df.columns:
            total_bytes[name] = total_bytes.get(name, 0) + df.get_column(name).estimated_size()
        for i, s in enumerate(df.get_columns()):
            if s.dtype == pl.String and cols[i] not in string_columns and (s == R_MISSING).any():
                na_cols.add(i)  # R's NA cells: read as null where the column turns out numeric
                try:
                    dt = _number_with_missing(s)
                except (pl.exceptions.PolarsError, pl.exceptions.PanicException) as exc:
                    raise _refusal(exc, cols, chunk, chunk_lines) from None
                if dt is not None:
                    seen.setdefault(i, []).append(dt)
                    continue
                if (s == R_MISSING).fill_null(True).all():  # only NA (and empty cells): nothing said
                    continue
            if s.null_count() < s.len():
                seen.setdefault(i, []).append(_number_column(s) if cols[i] not in string_columns else s.dtype)

    try:
        for r in split.records():
            if r.fields is None:
                if r.error == "blank":
                    n_blank += 1
                    if len(blank) < max_examples or not blank:
                        blank.append((r.line, r.offset))
                else:
                    n_bad += 1
                    if len(bad) < max_examples or not bad:
                        bad.append((r.line, r.offset, r.error or "", r.text))
                continue
            if first_line is None:
                first_line = r.line
            elif lines is None and r.line != first_line + rows:
                lines = array("q", range(first_line, first_line + rows))
            if lines is not None:
                lines.append(r.line)
            rows += 1
            if guessed and len(sample) < _SEPARATOR_SAMPLE and len(r.fields) == 1:
                sample.append(r.fields[0])
            recs.append(r.fields)
            rec_lines.append(r.line)
            chars += sum(map(len, r.fields))
            if len(recs) >= CSV_CHUNK_ROWS or chars >= CSV_CHUNK_CHARS:
                infer(recs, rec_lines)
                recs, rec_lines, chars = [], [], 0
    except RecordLayoutError as exc:
        raise Unreadable(str(exc)) from None
    if guessed and split.header_fields is not None and len(split.header_fields) == 1:
        wrong = _wrong_separator(split.header_fields[0], sample, sep, quote)
        if wrong is not None:
            raise wrong
    if recs:
        infer(recs, rec_lines)
    findings: list[Finding] = []
    if split.n_bad_utf8:
        findings.append(utf8_finding(split.bad_utf8, max_examples, total=split.n_bad_utf8))
    base = 2 if header else 1
    if not split.nonblank:  # only whitespace: no rows, no columns (the encoding guess)
        return ShardData(lf=pl.LazyFrame(), decode_findings=findings, line_format=True, line_base=base)
    if n_bad:
        findings.append(bad_record_finding(bad, split.n_lines, max_examples, total=n_bad))
    if n_blank:
        findings.append(blank_finding(blank, max_examples, total=n_blank))
    if cols is None:
        cols = unique_names(split.columns())
    schema = {c: (pl.String if not rows else combine_dtypes(seen.get(i, []))) for i, c in enumerate(cols)}
    if rows:
        for c in cols:
            if c in string_columns:
                schema[c] = pl.String
    missing = frozenset(cols[i] for i in na_cols if schema[cols[i]] != pl.String)
    stream = CsvStream(path=path, sep=sep, quote=quote, header=header, names=names, schema=schema, rows=rows,
                       max_line=limit, r_missing=missing, total_bytes=total_bytes)
    return ShardData(
        lf=stream.lazy(), decode_findings=findings, line_format=True,
        line_of_row=None if lines is None else np.frombuffer(lines, dtype=np.int64).copy(),
        line_base=first_line if first_line is not None else base, stream=stream,
    )


def _open(path: Path, fmt: str, opts: ReadOptions) -> ShardData:
    return normalize_shard(open_csv(path, fmt, opts.dataset, opts.max_examples, opts.string_columns))


_TEXT_EXTENSIONS = tuple(b + c for b in (".csv", ".tsv", ".txt", ".data") for c in ("", ".gz"))

FORMAT = Format(
    names=("csv", "tsv"),
    open=_open,
    extensions=((".csv.gz", "csv"), (".tsv.gz", "tsv"), (".csv", "csv"), (".tsv", "tsv")),
    forced_extensions={"csv": _TEXT_EXTENSIONS, "tsv": _TEXT_EXTENSIONS},
    rewrite={"csv": RecordsRewrite(jsonl=False), "tsv": RecordsRewrite(jsonl=False)},
)
