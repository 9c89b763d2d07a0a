"""JSON Lines shards (``.jsonl``/``.ndjson``, also ``.gz``/``.zst``; a ``.json`` file sniffed as
JSON Lines) and JSON-array files (``.json``: one array of records, LLaMA-Factory's and FastChat's
data files). The one reader of each, for a local file and a copy of an object in a store alike.

A JSONL file is a streamed source: the decoded frame of the whole file never exists. It is read in
chunks of whole lines (:func:`datacheck.formats.jsonvalues.jsonl_chunks`: a stream decompressed into
:data:`~datacheck.formats.jsonvalues.JSONL_CHUNK_BYTES` chunks, each parsed by polars or, when that
fails, line by line, so every bad line is reported with its 1-based line number, byte offset and
the parser's message, and the good records are still audited). The findings do not depend on where
the chunks are cut:

- **Pass 1** (:func:`open_jsonl`) streams the chunks once and keeps, per chunk, only a summary: its
  row count, the JSON kinds of each column (count, the first rows and lines, the first example
  values), its dtypes; plus the decode findings (bad, blank, invalid UTF-8 lines; NaN/Infinity are
  values the ``finite.*`` checks see) and the row -> line mapping (None when every chunk parsed
  fast, else one int64 per row). From those it decides over the whole file: each column's JSON
  kind (the most common wins; a value of another kind is null with a ``schema.dtype`` finding
  naming its lines), the unified schema (the chunks' dtypes joined column by column,
  :func:`datacheck.formats.jsonvalues.join_dtypes`: ints in one chunk and floats in another are
  Float64, a column absent from a chunk is null there, struct fields unioned), columns whose
  values do not form one column (in a chunk, or across chunks: a field that is a number in one
  chunk and a string in another). When a column mixes kinds, the
  chunks' dtypes after nulling are only known once the kind is decided: the file is streamed a
  second time for the schema alone (only then).
- **Pass 2** (:meth:`JsonlSource.frames`) streams the file again and hands each chunk's rows,
  nulled where pass 1 decided, cast to the unified schema and projected to the wanted columns (a
  chunk that parsed fast in pass 1 is only parsed again, its checks not repeated; a chunk whose
  row count or CRC-32 differs from pass 1's makes the shard unreadable: the file changed).
  The engine reads its batches through :meth:`JsonlSource.batches` (chunks re-cut to exactly the
  batch's rows, the next chunk decoded in a background thread while the engine checks the current
  batch): the JSONL shard's :class:`~datacheck.formats.base.ShardReader` (``ShardData.stream``).
- **Every other consumer** (inspect, clean, schema infer, contracts, the one-batch engine read)
  gets ``ShardData.lf``: a polars ``LazyFrame`` over an IO plugin
  (``polars.io.plugins.register_io_source``) whose schema is the unified schema (no read for
  ``collect_schema``) and which runs pass 2 when collected (projection, predicate and ``n_rows``
  applied per chunk).

A file whose chunks all parse fast and decode to at most :data:`KEEP_BYTES` keeps pass 1's chunk
frames: pass 2 reads them (parsed once; no change check, the file is not read again). A file of one
chunk is held in memory (its single chunk is in memory after pass 1 anyway; the rows, findings and
line numbers are those of the streamed path: ``tests/unit/formats/test_jsonl_chunks.py``).

Memory: one chunk (raw and decoded) and one batch ahead, whatever the file's size; the row -> line
mapping (8 bytes a row) only when some chunk took the per-line path. Time: the file is parsed
twice by an audit (pass 1, the engine's batches), three times when a column mixes JSON kinds;
the engine re-streams it to re-read the candidate rows of key checks (duplicate keys) on a
shard of several batches. A check that needs a column the read path derives (the Alpaca
``messages``, chat-template renderings) reads the needed columns of the shard once into memory.

A UTF-16 or UTF-32 file (JSON Lines or array) is refused before anything is parsed
(:mod:`datacheck.formats.wide`: ``decode.unreadable`` naming the encoding and the iconv command); the
``.json`` sniffers read such a head transcoded, so the file is refused as what it holds, not left out.

A JSON-array file (:func:`open_json_array`) is parsed whole (``json`` records with their lines) and
held in memory; mixed JSON types are ``schema.dtype`` findings with lines, as in JSONL. An element of
more than ``[dataset] max_row_bytes`` makes the file ``decode.unreadable`` (element, line, bytes) before
anything is parsed: a JSON array has no line to pass over.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import polars as pl

from datacheck.formats import jsonvalues
from datacheck.formats.base import Format, ReadOptions, ShardData
from datacheck.formats.batches import BudgetedStreamedReader, cast_batches
from datacheck.formats.jsonvalues import (
    TYPES_CHANGE,
    _broken_finding,
    _compatible,
    _finish_jsonl,
    _frame_from_records,
    _jsonl_decode_findings,
    _JsonlChunk,
    _kind_groups,
    _Piece,
    _piece_frame,
    _piece_kinds,
    join_dtypes,
    jsonl_chunks,
    major_kind,
    mixed_types_finding,
)
from datacheck.formats.records import RecordLayoutError, json_array_records
from datacheck.formats.rewrite import JsonArrayRewrite, RecordsRewrite
from datacheck.formats.stream_source import ahead, budget, lazy_source, recut_frames
from datacheck.formats.wide import HEAD_BYTES, refuse_wide, wide_encoding
from datacheck.io.shardbytes import READ_ERRORS, Unreadable, read_bytes
from datacheck.io.structs import sorted_fields, with_sorted_fields
from datacheck.model.constants import MAX_ROW_BYTES
from datacheck.model.findings import Example, Finding, show_value

__all__ = ["FORMAT", "JsonlSource", "open_json_array", "open_jsonl", "sniff", "sniff_json_array", "sniff_json_lines",
           "sniff_lines_object"]

#: Decoded bytes of pass 1's chunk frames kept for pass 2 (64 MiB: about what streaming holds anyway,
#: one chunk raw and decoded plus one ahead). A file whose chunks all parse fast and stay under it
#: (up to ~60 MiB of JSONL) is parsed once: pass 2 and every re-read use the kept frames.
KEEP_BYTES = 64 * 2**20


@dataclass
class _Kind:
    """The rows of one JSON kind of one column in one chunk: ``count`` rows; ``rows``/``lines``: the
    first ones (chunk-local rows, sorted; their 1-based lines); ``values``: the first ones' values."""

    count: int
    rows: np.ndarray
    lines: np.ndarray
    values: list


@dataclass
class _Summary:
    """What pass 1 keeps of one chunk (no rows): its row count, its columns (file order), the kinds
    of each column (in the order they first appear), its dtypes before any nulling, the columns whose
    values do not form one column there (with polars' reason)."""

    rows: int
    names: list[str]
    kinds: dict[str, list[tuple[str, _Kind]]]
    schema: dict[str, pl.DataType] = field(default_factory=dict)
    broken: dict[str, str] = field(default_factory=dict)


def _piece_names(p: _Piece) -> list[str]:
    cols = p.frame.columns if p.frame is not None else [k for rec in (p.values or []) for k in rec]
    return list(dict.fromkeys(cols))


def _values(p: _Piece, name: str, rows: np.ndarray) -> list:
    if p.values is not None:
        return [p.values[int(r)].get(name) for r in rows]
    assert p.frame is not None
    return p.frame[name].gather(rows).to_list() if len(rows) else []


def _summarize(p: _Piece, keep: int, max_examples: int) -> _Summary:
    kinds: dict[str, list[tuple[str, _Kind]]] = {}
    names = _piece_names(p)
    for name in names:
        out = []
        for kind, rows in _kind_groups(_piece_kinds(p, name)):
            head = rows[:keep]
            out.append((kind, _Kind(len(rows), head, p.lines[head], _values(p, name, head[:max_examples]))))
        kinds[name] = out
    return _Summary(rows=p.rows, names=names, kinds=kinds)


def _drops(p: _Piece, majors: dict[str, str]) -> dict[str, np.ndarray]:
    """Column -> chunk-local rows of ``p`` whose JSON kind is not the column's (read as null)."""
    out: dict[str, np.ndarray] = {}
    names = set(_piece_names(p))
    for name, major in majors.items():
        if name not in names:
            continue
        bad = [rows for kind, rows in _kind_groups(_piece_kinds(p, name)) if not _compatible(kind, major)]
        if bad:
            out[name] = np.sort(np.concatenate(bad))
    return out


def _decide(sums: list[_Summary], names: list[str], total: int, starts: list[int],
            max_examples: int) -> tuple[list[Finding], dict[str, str]]:
    """The ``schema.dtype`` findings of columns that mix JSON kinds and {column: its kind} for those
    columns, decided from the chunks' summaries exactly as :func:`datacheck.formats.jsonvalues._join_pieces` decides them
    from the chunks' rows (same counts, lines, examples and order)."""
    findings: list[Finding] = []
    majors: dict[str, str] = {}
    keep = max(5, max_examples)
    for name in names:
        counts: dict[str, int] = {}
        star_seen = False
        for s in sums:
            for kind, kr in s.kinds.get(name, ()):
                if kind == "array<*>":
                    star_seen = True
                else:
                    counts[kind] = counts.get(kind, 0) + kr.count
        major = major_kind(counts, star_seen)
        if major is None:
            continue
        by_type: dict[str, list[int]] = {major: []}
        by_count: dict[str, int] = {major: 0}
        bad: list[tuple[int, int, str, int, Any]] = []  # (chunk, row in chunk, kind, line, value)
        n_bad = n_present = 0
        for pi, s in enumerate(sums):
            per_key: dict[str, list[_Kind]] = {}
            bad_kinds: list[tuple[_Kind, str]] = []
            for kind, kr in s.kinds.get(name, ()):
                n_present += kr.count
                ok = _compatible(kind, major)
                per_key.setdefault(major if ok else kind, []).append(kr)
                if not ok:
                    n_bad += kr.count
                    bad_kinds.append((kr, kind))
            for key, parts in per_key.items():
                rows = np.concatenate([kr.rows for kr in parts])
                lines = np.concatenate([kr.lines for kr in parts])
                order = np.argsort(rows, kind="stable")
                got = by_type.setdefault(key, [])
                by_count[key] = by_count.get(key, 0) + sum(kr.count for kr in parts)
                got.extend(int(x) for x in lines[order][:max(0, keep - len(got))])
            if bad_kinds:
                ex = sorted((int(kr.rows[i]), kind, int(kr.lines[i]), kr.values[i])
                            for kr, kind in bad_kinds for i in range(min(max_examples, len(kr.rows))))
                bad.extend((pi, r, kind, ln, v) for r, kind, ln, v in ex[:max(0, max_examples - len(bad))])
        if not n_bad:
            continue
        majors[name] = major
        findings.append(mixed_types_finding(
            name, major, n_bad, n_present, total, by_type, by_count, max_examples,
            tuple(Example(row=starts[pi] + r, value=f"{x}: {show_value(v, 60)}", line=ln) for pi, r, x, ln, v in bad)))
    return findings, majors


@dataclass
class JsonlSource(BudgetedStreamedReader):
    """A JSONL file's rows, streamed (see the module docstring).

    Attributes:
        path: the file.
        chunk_bytes: the chunk size pass 1 used (pass 2 cuts the same chunks).
        rows: the rows (records that parse).
        schema: ``{column: dtype}`` of the rows (column order: first seen).
        chunk_rows: the rows of each chunk (pass 2 checks the file did not change).
        chunk_crc: the CRC-32 of each chunk's bytes (pass 2 checks them too).
        chunk_fast: whether each chunk parsed fast in pass 1 (pass 2 then only parses it).
        total_bytes: {column: decoded bytes of all its rows} (every chunk as pass 1 parsed it, before
            unification): the file's average row, which the engine's one-batch read and its batches are
            sized by (the first 1,024 rows sized them before: 1,100 rows of 50 bytes, then 100 of 4 MB, were
            read as one batch of 400 MB, 1.69 GB peak RSS).
        pieces: pass 1's chunks (those with rows), kept when they fit :data:`KEEP_BYTES`; pass 2
            then reads them instead of the file (None: pass 2 streams the file again).
        majors: {column: JSON kind} of the columns that mix kinds (values of other kinds are null).
        broken: the columns whose values do not form one column (read as null).
        max_line: the line bound pass 1 used (``[dataset] max_row_bytes``; pass 2 passes over the same lines).
    """

    path: Path
    chunk_bytes: int
    rows: int
    schema: dict[str, pl.DataType]
    chunk_rows: list[int]
    majors: dict[str, str]
    broken: set[str]
    chunk_crc: list[int] = field(default_factory=list)
    chunk_fast: list[bool] = field(default_factory=list)
    total_bytes: dict[str, int] = field(default_factory=dict)
    pieces: list[_Piece] | None = None
    max_line: int | None = None

    def bytes_per_row(self, columns: list[str]) -> float:
        """Decoded bytes of one row of ``columns``, on average over every row (pass 1's chunks; no read)."""
        return sum(self.total_bytes.get(c, 0) for c in columns) / self.rows if self.rows else 0.0

    def frames(self, columns: list[str] | None = None) -> Iterator[pl.DataFrame]:
        """Each chunk's rows with the unified dtypes, ``columns`` only (all when None), in row order
        (chunks without rows left out). Raises :class:`Unreadable` (a decode error, or the file
        changed since pass 1)."""
        names = list(self.schema)
        cols = names if columns is None else columns
        empty = pl.DataFrame(schema=self.schema)
        for p in (iter(self.pieces) if self.pieces is not None else self._stream()):
            if not p.rows:
                continue
            df, _, empties = _piece_frame(p, names, _drops(p, self.majors) if self.majors else {})
            gone = [n for n in self.broken if n in df.columns]
            if gone:
                df = df.with_columns([pl.lit(None).alias(n) for n in gone])
            try:
                df = pl.concat([empty, df], how="diagonal_relaxed").select(names)
            except READ_ERRORS as exc:
                raise Unreadable(f"the JSONL chunks do not form one table: {str(exc).splitlines()[0]}") from None
            for name, rows in empties.items():
                dtype = self.schema[name]
                if name in self.broken or not isinstance(dtype, pl.List):
                    continue
                mask = np.zeros(df.height, dtype=bool)
                mask[rows] = True
                e = pl.Series(name, [[]], dtype=dtype)
                df = df.with_columns(pl.when(pl.Series(mask)).then(pl.lit(e).first()).otherwise(pl.col(name)).alias(name))
            out = with_sorted_fields(df.select(cols))
            del p, df  # the chunk's other columns go before the next chunk is read
            yield out
            del out

    def _stream(self) -> Iterator[_Piece]:
        """The file's chunks read again, checked against pass 1's (rows, CRC-32, count)."""
        changed = "the file changed while it was being read (its chunks differ between two reads)"
        seen = 0
        for c in jsonl_chunks(self.path, self.chunk_bytes, fast=self.chunk_fast, max_line=self.max_line):
            seen += 1
            if seen > len(self.chunk_rows) or c.piece.rows != self.chunk_rows[seen - 1] \
                    or c.crc != self.chunk_crc[seen - 1]:
                raise Unreadable(changed)
            p = c.piece
            del c
            yield p
            del p
        if seen != len(self.chunk_rows):
            raise Unreadable(changed)

    def size(self, columns: list[str]) -> tuple[int | None, float | None]:
        """(rows, decoded bytes of one row of ``columns`` on average over the file): both from pass 1, no read."""
        return self.rows, self.bytes_per_row(columns)

    def batches(self, columns: list[str], rows: int, want: dict[str, pl.DataType] | None = None,
                ramp: bool = False, max_bytes: int | None = None) -> Iterator[pl.DataFrame]:
        """``columns`` in batches of ``rows`` rows or ``max_bytes`` decoded bytes (None:
        :data:`~datacheck.formats.stream_source.BATCH_BYTES`), whichever comes first
        (at least one row; the last may be shorter; :func:`~datacheck.formats.stream_source.recut`), in row
        order, cast to ``want`` (when given); the next chunk is decoded one ahead in a background thread.
        Raises :class:`Unreadable`."""
        yield from cast_batches(recut_frames(ahead(self.frames(columns), "datacheck-jsonl-decode"), rows,
                                             budget(max_bytes)), want)


    def lazy(self) -> pl.LazyFrame:
        """The rows as a ``LazyFrame`` (an IO plugin: its schema is known, collecting it runs pass 2)."""
        return lazy_source(lambda cols, _batch_size: self.frames(cols), self.schema, "datacheck JSONL",
                           str(self.path))


def open_jsonl(path: Path, max_examples: int, max_line: int | None = MAX_ROW_BYTES) -> ShardData:
    """A local JSONL file (plain, ``.gz``, ``.zst``) opened as a streamed source (see the module
    docstring), with ``ShardData.stream`` the :class:`JsonlSource` (None for a file of one chunk, kept in memory).
    A line of more than ``max_line`` bytes (``[dataset] max_row_bytes``, default 128 MiB; None: no
    bound) is a ``decode.bad_record`` naming its line, byte offset and length, never held nor parsed
    (as a parquet row group whose rows average more is refused from its footer); the other lines are
    audited.

    Raises:
        Unreadable: the file cannot be read or decompressed, it is UTF-16 or UTF-32 text
            (:func:`~datacheck.formats.wide.refuse_wide`), or its chunks do not form one table.
    """
    refuse_wide(path)
    size = jsonvalues.JSONL_CHUNK_BYTES  # read at call time (tests shrink it)
    bad: list[tuple[int, int, str, str]] = []
    blank: list[tuple[int, int]] = []
    utf8_bad: list[tuple[int, int, int, bytes]] = []
    total_lines = 0
    slow = False
    keep = max(5, max_examples)
    first: _JsonlChunk | None = None
    sums: list[_Summary] = []  # chunks with rows
    chunk_rows: list[int] = []
    chunk_crc: list[int] = []
    chunk_fast: list[bool] = []
    names: dict[str, None] = {}
    nonnull: dict[str, int] = {}
    lines_parts: list[np.ndarray | tuple[int, int]] = []
    total_bytes: dict[str, int] = {}
    kept: list[list[_Piece] | None] = [[]]  # pass 1's pieces while they fit KEEP_BYTES
    kept_bytes = [0]

    def absorb(c: _JsonlChunk) -> None:
        p = c.piece
        chunk_rows.append(p.rows)
        chunk_crc.append(c.crc)
        chunk_fast.append(not c.slow)
        if not p.rows:
            return
        s = _summarize(p, keep, max_examples)
        for n in s.names:
            names.setdefault(n)
            nonnull[n] = nonnull.get(n, 0) + sum(kr.count for _, kr in s.kinds[n])
        ordered = [n for n in names if n in s.kinds]
        df, s.broken, _ = _piece_frame(p, ordered, {})
        s.schema = dict(df.schema)
        for n in df.columns:
            total_bytes[n] = total_bytes.get(n, 0) + df[n].estimated_size()
        sums.append(s)
        lines_parts.append(p.lines if c.slow else (int(p.lines[0]), p.rows))
        pieces = kept[0]
        if pieces is not None:  # per-line pieces (Python values) are never kept
            kept_bytes[0] += p.frame.estimated_size() if p.frame is not None else KEEP_BYTES + 1
            if kept_bytes[0] <= KEEP_BYTES:
                pieces.append(p)
            else:
                kept[0] = None

    n_chunks = 0
    for c in jsonl_chunks(path, size, max_line=max_line):
        n_chunks += 1
        bad += c.bad
        blank += c.blank
        utf8_bad += c.utf8_bad
        total_lines += c.lines
        slow = slow or c.slow
        if n_chunks == 1:
            first = c
            continue
        if first is not None:
            absorb(first)
            first = None
        absorb(c)
        del c  # only the summary stays: the chunk's frame goes before the next chunk is read
    if first is not None or n_chunks == 0:  # one chunk (or none): held in memory
        return _finish_jsonl([first.piece] if first is not None else [], bad, blank, utf8_bad, total_lines, slow,
                             max_examples)
    n_rows = sum(s.rows for s in sums)
    if n_rows == 0:
        return _finish_jsonl([], bad, blank, utf8_bad, total_lines, slow, max_examples)
    findings = _jsonl_decode_findings(bad, blank, utf8_bad, total_lines, max_examples)
    line_of_row = None
    if slow:
        line_of_row = np.concatenate([x if isinstance(x, np.ndarray) else np.arange(x[0], x[0] + x[1], dtype=np.int64)
                                      for x in lines_parts])
    order = list(names)
    if not order:  # records without fields: an empty frame
        return ShardData(lf=pl.DataFrame().lazy(), decode_findings=findings, line_format=True,
                         line_of_row=line_of_row)
    starts = np.concatenate([[0], np.cumsum([s.rows for s in sums])]).astype(int).tolist()
    typed, majors = _decide(sums, order, n_rows, starts, max_examples)
    findings += typed
    schemas = [s.schema for s in sums]
    broken: dict[str, str] = {}
    retyped: dict[str, list[np.ndarray]] = {}
    if majors:  # the chunks' dtypes after nulling (and the rows nulled): a second stream for them alone
        schemas = []
        again = kept[0] if kept[0] is not None else (c.piece for c in jsonl_chunks(path, size, fast=chunk_fast, max_line=max_line))
        first = 0  # the shard row of the chunk's row 0
        for p in again:
            if not p.rows:
                continue
            here = set(_piece_names(p))
            drops = _drops(p, majors)
            for n, rows in drops.items():
                retyped.setdefault(n, []).append(rows.astype(np.int64) + first)
            first += p.rows
            df, why, _ = _piece_frame(p, [n for n in order if n in here], drops)
            schemas.append(dict(df.schema))
            for n, w in why.items():
                broken.setdefault(n, w)
            del p, df
    else:
        for s in sums:
            for n, w in s.broken.items():
                broken.setdefault(n, w)
    joined: dict[str, pl.DataType] = {}  # the chunks' dtypes joined column by column (join_dtypes)
    for sch in schemas:
        for n, t in sch.items():
            if n in broken:
                continue
            got = join_dtypes(joined[n], t) if n in joined else t
            if got is None:  # e.g. a field that is a number in one chunk and a string in another
                broken[n] = TYPES_CHANGE
                continue
            joined[n] = got
    for n, w in broken.items():
        findings.append(_broken_finding(n, w, nonnull.get(n, 0)))
    schema = {c: pl.Null() if c in broken else sorted_fields(joined.get(c, pl.Null())) for c in order}
    src = JsonlSource(path=path, chunk_bytes=size, rows=n_rows, schema=schema, chunk_rows=chunk_rows,
                      majors=majors, broken=set(broken), chunk_crc=chunk_crc, chunk_fast=chunk_fast, total_bytes=total_bytes,
                      pieces=kept[0], max_line=max_line)
    return ShardData(lf=src.lazy(), decode_findings=findings, line_format=True, line_of_row=line_of_row,
                     line_base=1, stream=src,
                     retyped={n: np.concatenate(parts) for n, parts in retyped.items() if n not in broken})


def open_json_array(path: Path, max_examples: int, max_record: int | None = MAX_ROW_BYTES) -> ShardData:
    """A ``.json`` file holding one JSON array of records (LLaMA-Factory's and FastChat's data files):
    one row per element, read as the JSONL records are (:func:`_frame_from_records`: mixed JSON
    types are ``schema.dtype`` findings with lines); each row's line is the line its element starts on.

    When two elements start on the same line (``json.dump(rows, f)`` without ``indent`` writes the
    whole array on line 1) a line names no row: the findings then name rows only (every finding
    said "line 1" and the table's first column "lines 1,1,1").

    The file is read whole; an element of more than ``max_record`` bytes (``[dataset] max_row_bytes``)
    makes it unreadable, naming the element, its line and bytes, before anything is parsed
    (:func:`~datacheck.formats.records.json_array_records`).

    Raises:
        Unreadable: the file cannot be read, it is UTF-16 or UTF-32 text
            (:func:`~datacheck.formats.wide.refuse_wide`), or
            :func:`~datacheck.formats.records.json_array_records` refuses it (the reason prefixed with
            the file's name).
    """
    refuse_wide(path)
    try:
        values, lines = json_array_records(read_bytes(path), max_record)
    except RecordLayoutError as exc:
        raise Unreadable(f"{path.name}: {exc}") from None
    if not values:
        return ShardData(lf=pl.LazyFrame(), line_format=True)
    retyped: dict[str, np.ndarray] = {}
    by_line = len(set(lines)) == len(lines)
    df, findings = _frame_from_records(values, lines if by_line else None, max_examples, retyped)
    return ShardData(lf=df.lazy(), decode_findings=findings, line_format=by_line,
                     line_of_row=np.asarray(lines, dtype=np.int64) if by_line else None, retyped=retyped)


#: bytes read to sniff a ``.json`` file
_SNIFF_BYTES = 1 << 16


def _as_utf8(head: bytes) -> bytes:
    """A file's first bytes as UTF-8 for the sniffers: without a UTF-8 byte order mark, and UTF-16 or
    UTF-32 text (:func:`~datacheck.formats.wide.wide_encoding`) transcoded, so that such a ``.json`` file
    is sniffed as what it holds and its reader refuses it naming the encoding (not left out as no shard)."""
    wide = wide_encoding(head[:HEAD_BYTES])
    if wide is not None:
        head = head.decode(wide.encoding, errors="replace").lstrip("\ufeff").encode("utf-8")
    return head[3:] if head.startswith(b"\xef\xbb\xbf") else head


def _sniff_head(path: Path) -> bytes | None:
    """The first 64 KiB of ``path`` as UTF-8 (:func:`_as_utf8`), or None when it cannot be read."""
    try:
        with open(path, "rb") as f:
            head = f.read(_SNIFF_BYTES)
    except OSError:
        return None
    return _as_utf8(head)


def _looks_like_lines(head: bytes) -> bool:
    lines = [ln.strip() for ln in head.splitlines()]
    lines = [ln for ln in lines if ln]
    return len(lines) >= 2 and lines[0].startswith(b"{") and lines[1].startswith(b"{")


def sniff_json_lines(path: Path) -> bool:
    """True when ``path`` looks like JSON Lines: its first non-blank byte is ``{`` and its second
    non-blank line also starts with ``{`` (a one-object file or a pretty-printed document is not).
    Reads at most 64 KiB; an unreadable file is not JSON Lines (False)."""
    head = _sniff_head(path)
    return head is not None and _looks_like_lines(head)


def sniff_json_array(path: Path) -> bool:
    """True when ``path`` looks like a JSON array of records: its first non-blank byte (after a
    UTF-8 byte order mark) is ``[`` and the next non-blank byte is ``{``. Reads at most 64 KiB; an
    unreadable file is not one (False)."""
    head = _sniff_head(path)
    if head is None:
        return False
    head = head.lstrip()
    return head.startswith(b"[") and head[1:].lstrip().startswith(b"{")


def sniff_lines_object(fs: Any, key: str) -> bool:
    """:func:`sniff_json_lines` for the object ``key`` of the fsspec filesystem ``fs`` (reads at most 64 KiB)."""
    try:
        with fs.open(key, "rb") as f:
            head = f.read(_SNIFF_BYTES)
    except Exception:  # noqa: BLE001 - an unreadable object is not JSON Lines
        return False
    return _looks_like_lines(_as_utf8(head))


def sniff(path: Path) -> str | None:
    """A ``.json`` file: ``jsonl`` when it is JSON Lines, ``json`` when it holds one JSON array of
    records (LLaMA-Factory's and FastChat's data files), else None."""
    if not path.name.lower().endswith(".json"):
        return None
    if sniff_json_lines(path):
        return "jsonl"
    return "json" if sniff_json_array(path) else None


def _open(path: Path, fmt: str, opts: ReadOptions) -> ShardData:
    limit = int(getattr(opts.dataset, "max_row_bytes", None) or MAX_ROW_BYTES)
    if fmt == "json":
        return open_json_array(path, opts.max_examples, limit)
    return open_jsonl(path, opts.max_examples, limit)  # JSON has no fixed-size lists to normalize


FORMAT = Format(
    names=("jsonl", "json"),
    open=_open,
    extensions=(*((b + c, "jsonl") for b in (".jsonl", ".ndjson") for c in (".gz", ".zst")),
                (".jsonl", "jsonl"), (".ndjson", "jsonl")),
    forced_extensions={
        "jsonl": tuple(b + c for b in (".jsonl", ".ndjson", ".json", ".txt") for c in ("", ".gz", ".zst")),
        "json": tuple(".json" + c for c in ("", ".gz", ".zst")),
    },
    sniff=sniff,
    rewrite={"jsonl": RecordsRewrite(jsonl=True), "json": JsonArrayRewrite()},
)
