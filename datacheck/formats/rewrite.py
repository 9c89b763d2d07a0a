"""What the rewriting formats share: the ``rewrite`` of the :class:`~datacheck.formats.base.Format`
protocol, how ``datacheck clean`` writes the kept rows of a shard in its own format.

- :class:`RewriteJob` in (the shard, the rows the audit read, the dropped rows and why), a
  :class:`Rewritten` out (counts, the reasons of each quarantined row); the kept rows go to
  ``target``, the dropped ones with the meta columns (:data:`META_COLUMNS`) to ``quarantine``, both
  files synced to disk (files made as bytes through the caller's ``write``), read back and
  compared row by row with the input's content hashes.
- :class:`TableRewrite` (parquet, Arrow IPC: :func:`rewrite_table`): rows read and written with
  pyarrow (schema and its metadata, e.g. Hugging Face features, kept; the same writer kind; a local
  parquet input's codec and row group size kept: :func:`datacheck.formats.arrowtypes.parquet_layout`).
- :class:`JsonArrayRewrite` (a ``.json`` file of one JSON array of records: :func:`rewrite_json_array`):
  the kept elements copied as their original bytes inside the input's brackets and separators, the
  dropped ones to a JSON array quarantine.
- :class:`RecordsRewrite` (JSONL, CSV/TSV: :func:`rewrite_records`): JSONL records copied as their
  original line bytes, CSV/TSV records re-written with the same separator and quote character;
  the input's line break (CRLF stays CRLF) and UTF-8 byte order mark kept. Records that do not
  parse (``decode.bad_record``) are not rows: kept as they were unless ``decode.bad_record`` is
  dropped, and then quarantined with their raw text (``_datacheck_raw``). Blank lines are not
  copied. A quarantined record that is not valid UTF-8 is stored decoded with replacement
  characters (U+FFFD), and its content hash is that of the record as decoded (a record that does
  not parse: of its bytes).

Row content hash (``"xxh3-128:<32 hex>"``): datacheck's one row encoding
(:func:`datacheck.io.rowhash.row_hash_series`, the same as the cross-shard duplicate checks) over
every column in order. Parquet/Arrow: the table's columns; JSONL (and a JSON array's elements, each
written as one line of JSON): the records parsed as the reader parses them, with the input's dtypes; CSV: the record's fields as strings. A record that does not
parse: the XXH3-128 of its raw line bytes (``datacheck.io.hashing.hash_bytes``).

A format name with no rewrite is refused (:class:`RewriteRefused`, naming the format and why:
its writer owns its layout) before anything is written.
"""
from __future__ import annotations

import csv
import gzip
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Protocol

import polars as pl

from datacheck.formats.arrowtypes import parquet_layout, write_table
from datacheck.formats.records import (
    RecordLayoutError,
    RecordSplit,
    csv_records,
    json_array_records,
    jsonl_records,
    strip_bom,
)
from datacheck.io.hashing import hash_bytes
from datacheck.io.rowhash import row_hash_series
from datacheck.io.safejson import element_spans
from datacheck.io.shardbytes import LongLine, bounded_line_chunks, read_bytes
from datacheck.io.stores import is_url
from datacheck.model.constants import MAX_ROW_BYTES
from datacheck.model.errors import InternalError, UsageError

__all__ = ["META_COLUMNS", "RAW_COLUMN", "JsonArrayRewrite", "RecordsRewrite", "RewriteJob", "RewriteRefused", "Rewriter", "Rewritten",
           "TableRewrite", "WriteBytes", "compressed_as", "rewrite_json_array", "rewrite_records", "rewrite_table",
           "row_hashes"]

#: Columns added to quarantined rows.
META_COLUMNS = ("_datacheck_row", "_datacheck_line", "_datacheck_shard", "_datacheck_checks", "_datacheck_row_hash")
#: raw text of a quarantined JSONL/CSV record that does not parse
RAW_COLUMN = "_datacheck_raw"
_RAW = RAW_COLUMN


#: ``(path, data)``: write the whole file ``path`` (its folder made), synced to disk
WriteBytes = Callable[[Path, bytes], None]


class RewriteRefused(Exception):
    """The format cannot rewrite its shards; the message names the format and why."""


@dataclass(frozen=True)
class RewriteJob:
    """One shard to rewrite.

    Attributes:
        source: the shard (a local path or the URL of an object in a store).
        fmt: its format name.
        rel: its report name (``_datacheck_shard`` of the quarantined rows).
        rows: the rows the audit read (a shard that reads otherwise now is an InternalError).
        reasons: {dropped row (0-based): the check keys it fails}; every other row is kept.
        drop: the dropped check IDs (records formats: ``decode.bad_record``, ``decode.invalid_utf8``).
        dataset: the ``[dataset]`` config (CSV separator, quote, header, names).
    """

    source: Path | str
    fmt: str
    rel: str
    rows: int
    reasons: dict[int, list[str]]
    drop: tuple[str, ...] = ()
    dataset: Any = None


@dataclass
class Rewritten:
    """What a rewrite wrote: ``input_rows`` (rows plus records that do not parse), ``kept`` (rows
    and records written to the target), ``kept_rows`` (of those, rows), ``reasons`` (the check keys
    of each quarantined row or record, in order), ``blank_lines`` (of a JSONL/CSV input, not copied)."""

    input_rows: int
    kept: int
    kept_rows: int
    reasons: list[list[str]] = field(default_factory=list)
    blank_lines: int = 0

    @property
    def quarantined(self) -> int:
        """Rows and records written to the quarantine."""
        return len(self.reasons)


class Rewriter(Protocol):
    """A format's rewrite: ``mode`` (``"table"`` or ``"records"``) and a call
    ``(job, target, quarantine, write) -> Rewritten``; ``write(path, bytes)`` is the caller's
    writer of whole files (``clean``'s: synced to disk), used for the files a rewrite makes as bytes."""

    @property
    def mode(self) -> str: ...

    def __call__(self, job: RewriteJob, target: Path, quarantine: Path, write: WriteBytes) -> Rewritten: ...


@dataclass(frozen=True)
class TableRewrite:
    """The rewrite of a table format: :func:`rewrite_table` with its ``read`` (``path or URL ->
    (pyarrow Table, writer kind)``)."""

    read: Callable[[Path | str], tuple[Any, str]]
    mode: ClassVar[str] = "table"

    def __call__(self, job: RewriteJob, target: Path, quarantine: Path, write: WriteBytes) -> Rewritten:
        return rewrite_table(self.read, job, target, quarantine)


@dataclass(frozen=True)
class RecordsRewrite:
    """The rewrite of a line format: :func:`rewrite_records` (``jsonl``: JSONL records, else CSV/TSV)."""

    jsonl: bool
    mode: ClassVar[str] = "records"

    def __call__(self, job: RewriteJob, target: Path, quarantine: Path, write: WriteBytes) -> Rewritten:
        return rewrite_records(self.jsonl, job, target, quarantine, write)


@dataclass(frozen=True)
class JsonArrayRewrite:
    """The rewrite of a JSON array file (format ``json``): :func:`rewrite_json_array`."""

    mode: ClassVar[str] = "records"

    def __call__(self, job: RewriteJob, target: Path, quarantine: Path, write: WriteBytes) -> Rewritten:
        return rewrite_json_array(job, target, quarantine, write)


# --------------------------------------------------------------------------------------------- row hashes
def _hash_strings(df: pl.DataFrame) -> list[str]:
    """``"xxh3-128:<32 hex>"`` per row of ``df``: :func:`datacheck.io.rowhash.row_hash_series` over
    all its columns in order (a frame without columns: the hash of no bytes, per row)."""
    if df.width == 0:
        return [hash_bytes(b"")] * df.height
    return [f"xxh3-128:{h:032x}" for h in row_hash_series(df.get_columns()).to_list()]


def row_hashes(table: Any) -> list[str]:
    """Per-row content hashes of a pyarrow Table or polars DataFrame (``"xxh3-128:<hex>"``, one per row).

    The encoding is datacheck's one row encoding (:data:`datacheck.io.rowhash.ROW_ENCODING`, see
    :mod:`datacheck.io.rowhash`) over every column in column order: stable across library versions;
    dtypes matter (a float and an int of the same value differ; Int32 and Int64 do not).
    """
    return _hash_strings(table if isinstance(table, pl.DataFrame) else pl.from_arrow(table))


#: the schema :func:`_jsonl_hashes` returns for rows polars' NDJSON parser cannot read as one frame
#: (the literals NaN / Infinity, a field whose type changes between rows, an integer beyond 128 bits:
#: the reader reads them all): every later call for the shard (the read-back, the quarantine) then
#: hashes its rows the same way, by their canonical JSON
_AS_JSON: dict[str, pl.DataType] = {}


def _canonical_hash(text: str) -> str:
    """The hash of one JSON object text's canonical form (Python's ``json``: keys sorted, no spaces)."""
    return hash_bytes(json.dumps(json.loads(text), sort_keys=True, ensure_ascii=False,
                                 separators=(",", ":")).encode("utf-8"))


def _jsonl_hashes(texts: list[str], schema: dict[str, pl.DataType] | None) -> tuple[list[str], dict[str, pl.DataType] | None]:
    """Row hashes of JSON object texts parsed as the reader parses them (``pl.read_ndjson``), with
    ``schema`` when given (the input's, so a subset of rows gets the input's dtypes), else inferred
    over every row; returns (hashes, the schema used). Rows polars cannot parse as one frame are
    hashed by their canonical JSON, and the schema returned is :data:`_AS_JSON`, which later calls
    for the same shard pass back."""
    if not texts:
        return [], schema
    if schema is not _AS_JSON:
        data = "\n".join(texts).encode("utf-8")
        try:
            df = (pl.read_ndjson(data, schema=schema) if schema is not None
                  else pl.read_ndjson(data, infer_schema_length=None))
            return _hash_strings(df), dict(df.schema)
        except (pl.exceptions.PolarsError, OverflowError):
            if schema is not None:  # the input parsed as one frame: a subset of its rows must too
                raise
    return [_canonical_hash(t) for t in texts], _AS_JSON


def _csv_hashes(rows: list[list[str]]) -> list[str]:
    """Row hashes of CSV records: their fields as String columns (the text as written, before any
    dtype inference)."""
    if not rows:
        return []
    width = len(rows[0])
    df = pl.DataFrame(rows, schema=[(f"c{i}", pl.String) for i in range(width)], orient="row")
    return _hash_strings(df)


# --------------------------------------------------------------------------------------------- records
def compressed_as(path_name: str, data: bytes) -> bytes:
    """``data`` compressed as the file name ``path_name`` says (``.gz``: gzip with mtime 0, ``.zst``:
    zstandard), else as it is."""
    return _compress(path_name, data)


def _compress(path_name: str, data: bytes) -> bytes:
    name = path_name.lower()
    if name.endswith(".gz"):
        return gzip.compress(data, mtime=0)
    if name.endswith(".zst"):
        import zstandard

        return zstandard.ZstdCompressor().compress(data)
    return data


@dataclass
class _Record:
    """One JSONL/CSV record (:class:`datacheck.formats.records.LineRecord`) with its content hash: a row's
    :func:`row_hashes` hash, or for a record that does not parse the hash of its bytes."""

    line: int  # 1-based first line
    raw: bytes  # original bytes (JSONL: the line; CSV: the record's lines)
    text: str  # decoded (lossy for invalid UTF-8)
    value: Any  # JSONL: parsed object; CSV: list of fields; None for a bad record
    row: int | None
    invalid_utf8: bool
    hash: str = ""


def _records(split: RecordSplit, hashes: list[str]) -> list[_Record]:
    """The split's records with hashes: ``hashes`` for the rows (in order), bytes hashes for the rest."""
    it = iter(hashes)
    return [_Record(r.line, r.raw, r.text, r.value, r.row, r.invalid_utf8,
                    next(it) if r.value is not None else hash_bytes(r.raw)) for r in split.records]


def _jsonl_records(raw: bytes, schema: dict[str, pl.DataType] | None = None
                   ) -> tuple[list[_Record], int, dict[str, pl.DataType] | None]:
    """(records, blank lines, row schema) of a JSONL shard, split by :func:`datacheck.formats.records.jsonl_records`."""
    split = jsonl_records(raw)
    hashes, schema = _jsonl_hashes([r.text for r in split.rows], schema)
    return _records(split, hashes), len(split.blank), schema


def _csv_dialect(fmt: str, dataset: Any) -> tuple[str, str | None]:
    sep = dataset.separator or ("\t" if fmt == "tsv" else ",")
    quote = dataset.quote_char if dataset.quote_char else None
    return sep, quote


def _csv_records(raw: bytes, fmt: str, dataset: Any) -> tuple[list[str] | None, list[_Record], int]:
    """(header line fields, records, blank lines) of a CSV/TSV shard, split by
    :func:`datacheck.formats.records.csv_records` (as the reader splits it)."""
    sep, quote = _csv_dialect(fmt, dataset)
    try:
        split = csv_records(raw, sep, quote, dataset.header, list(dataset.names) if dataset.names else None)
    except RecordLayoutError as exc:
        raise InternalError(f"the audit read this CSV but it does not split into records now: {exc}") from None
    return split.header_fields, _records(split, _csv_hashes([r.value for r in split.rows])), len(split.blank)


def _newline(raw: bytes) -> bytes:
    """The line break of a JSONL/CSV file: ``b"\r\n"`` when its first line ends with CRLF, else ``b"\n"``
    (copies keep the input's line endings)."""
    nl = raw.find(b"\n")
    return b"\r\n" if nl > 0 and raw[nl - 1:nl] == b"\r" else b"\n"


def _csv_bytes(header: list[str] | None, rows: list[list[str]], fmt: str, dataset: Any,
               newline: bytes = b"\n") -> bytes:
    sep, quote = _csv_dialect(fmt, dataset)
    buf = io.StringIO()
    w = csv.writer(buf, delimiter=sep, quotechar=quote or '"', lineterminator=newline.decode("ascii"),
                   quoting=csv.QUOTE_MINIMAL if quote else csv.QUOTE_NONE, escapechar=None if quote else "\\")
    if header is not None:
        w.writerow(header)
    w.writerows(rows)
    return buf.getvalue().encode("utf-8")


# --------------------------------------------------------------------------------------------- rewrites
def _take(table, idx: list[int]):
    """Rows ``idx`` (sorted) of a pyarrow Table, as slices of contiguous runs: works for every
    column type (``take`` has no kernel for e.g. ``string_view``, which polars writes to Arrow IPC)."""
    import pyarrow as pa

    runs: list[tuple[int, int]] = []
    for i in idx:
        if runs and runs[-1][1] == i:
            runs[-1] = (runs[-1][0], i + 1)
        else:
            runs.append((i, i + 1))
    if not runs:
        return table.slice(0, 0)
    return pa.concat_tables([table.slice(a, b - a) for a, b in runs]).combine_chunks()


def rewrite_table(read: Callable[[Path | str], tuple[Any, str]], job: RewriteJob, target: Path,
                  quarantine: Path) -> Rewritten:
    """Rewrite a table shard (parquet, Arrow IPC): the whole shard read by ``read`` (its format's
    ``read_table``: the pyarrow Table and its writer kind), the kept rows written to ``target`` and
    the dropped rows with the meta columns to ``quarantine`` (only when rows are dropped) in the
    same form (:func:`datacheck.formats.arrowtypes.write_table`), both read back and compared, row
    by row, with the input's content hashes. Raises :class:`InternalError` when they differ."""
    import pyarrow as pa

    reasons, rows = job.reasons, job.rows
    table, kind = read(job.source)
    if table.num_rows != rows:
        raise InternalError(f"{job.rel}: pyarrow reads {table.num_rows} rows but the audit read {rows}")
    hashes = row_hashes(table)
    drop_idx = sorted(reasons)
    keep_idx = [i for i in range(rows) if i not in reasons]
    kept = _take(table, keep_idx)
    # a local parquet input's row group size and codec kept (a shard in a store: pyarrow's defaults)
    local = kind == "parquet" and not (isinstance(job.source, str) and is_url(job.source))
    write_table(kept, target, kind, parquet_layout(Path(job.source)) if local else None)
    q = _take(table, drop_idx)
    meta = {
        "_datacheck_row": pa.array(drop_idx, type=pa.int64()),
        "_datacheck_line": pa.array([None] * len(drop_idx), type=pa.int64()),
        "_datacheck_shard": pa.array([job.rel] * len(drop_idx), type=pa.string()),
        "_datacheck_checks": pa.array([reasons[i] for i in drop_idx], type=pa.list_(pa.string())),
        "_datacheck_row_hash": pa.array([hashes[i] for i in drop_idx], type=pa.string()),
    }
    for name, arr in meta.items():
        q = q.append_column(name, arr)
    if drop_idx:  # a quarantine file only for a shard that lost rows
        write_table(q, quarantine, kind)
    # proof: read back what was written and compare per-row content hashes with the input, in order
    back, _ = read(target)
    qback = read(quarantine)[0] if drop_idx else q
    got_q = row_hashes(qback.drop_columns(list(META_COLUMNS)))
    _verify(job.rel, hashes, keep_idx, row_hashes(back), drop_idx, got_q,
            qback.column("_datacheck_row").to_pylist())
    return Rewritten(input_rows=rows, kept=len(keep_idx), kept_rows=len(keep_idx),
                     reasons=[reasons[i] for i in drop_idx])


def _verify(rel: str, hashes: list[str], keep_idx: list[int], got_kept: list[str], drop_idx: list[int],
            got_q: list[str], q_rows: list[int]) -> None:
    if len(got_kept) + len(got_q) != len(hashes) or sorted(keep_idx + list(q_rows)) != list(range(len(hashes))):
        raise InternalError(f"{rel}: kept {len(got_kept)} + quarantined {len(got_q)} != {len(hashes)} input rows")
    for k, (i, h) in enumerate(zip(keep_idx, got_kept)):
        if hashes[i] != h:
            raise InternalError(f"{rel}: kept row {k} (input row {i}) differs from the input after writing")
    for i, h in zip(q_rows, got_q):
        if hashes[i] != h:
            raise InternalError(f"{rel}: quarantined input row {i} differs from the input after writing")


def _quarantine_obj(rec: _Record, rel: str, reasons: list[str]) -> dict[str, Any]:
    base = dict(rec.value) if isinstance(rec.value, dict) else {_RAW: rec.text}
    base.update({"_datacheck_row": rec.row, "_datacheck_line": rec.line, "_datacheck_shard": rel,
                 "_datacheck_checks": reasons, "_datacheck_row_hash": rec.hash})
    return base


def _record_reasons(rec: _Record, reasons: dict[int, list[str]], drop: tuple[str, ...]) -> list[str]:
    out = list(reasons.get(rec.row, [])) if rec.row is not None else []
    if rec.row is None and "decode.bad_record" in drop:
        out.append("decode.bad_record")
    if rec.invalid_utf8 and "decode.invalid_utf8" in drop:
        out.append("decode.invalid_utf8")
    return sorted(out)


#: bytes read at a time by :func:`_refuse_long_line`'s pass over a file (the JSONL reader's chunk)
LINE_SCAN_BYTES = 16 << 20


def _long_line(job: RewriteJob, raw: bytes | None, limit: int) -> tuple[int, int, int] | None:
    """(1-based line, byte offset, bytes) of the first line of ``job.source`` longer than ``limit``
    bytes (the line break not counted; offsets in the decompressed bytes), else None. ``raw``: the
    file's bytes already read (a store object), else the local file is streamed
    (:func:`~datacheck.io.shardbytes.bounded_line_chunks`: a long line is passed over, never held;
    memory one chunk). A plain local file of at most ``limit`` bytes holds no such line: not read."""
    if raw is not None:
        if len(raw) <= limit:
            return None
        line, pos = 1, 0
        while pos <= len(raw):
            nl = raw.find(b"\n", pos)
            end = len(raw) if nl < 0 else nl
            length = end - pos  # as bounded_line_chunks measures it: the newline not counted
            if length > limit:
                return line, pos, length
            if nl < 0:
                return None
            pos, line = nl + 1, line + 1
        return None
    path = Path(job.source)
    if not path.name.lower().endswith((".gz", ".zst")) and path.stat().st_size <= limit:
        return None
    line, offset = 1, 0
    for chunk in bounded_line_chunks(path, LINE_SCAN_BYTES, limit):
        if isinstance(chunk, LongLine):
            return line, offset, chunk.length
        line += chunk.count(b"\n")
        offset += len(chunk)
    return None


def _refuse_long_line(job: RewriteJob, raw: bytes | None = None) -> None:
    """Raise :class:`~datacheck.model.errors.UsageError` when a line of the shard holds more than
    ``[dataset] max_row_bytes`` (:func:`_long_line`), naming the shard, the line, its byte offset and
    bytes: clean holds a shard's records in memory (each line split, decoded and parsed again: several
    copies of it), so it copies no such line, as the audit parses none (``decode.bad_record`` for
    JSONL; an unreadable CSV shard is not copied at all)."""
    limit = int(getattr(job.dataset, "max_row_bytes", None) or MAX_ROW_BYTES)
    got = _long_line(job, raw, limit)
    if got is None:
        return
    line, offset, length = got
    mib = f"{limit >> 20:,} MiB" if limit >= 1 << 20 and limit % (1 << 20) == 0 else f"{limit:,} bytes"
    raise UsageError(f"{job.rel}: line {line:,} (byte offset {offset:,}) holds {length:,} bytes, more than the {mib} "
                     f"a record datacheck holds ([dataset] max_row_bytes); clean copies a shard's records in memory "
                     f"and copies no such line, so no cleaned copy was made (nothing partial is left). Remove the "
                     f"line (the audit reads it as a record that does not parse), or raise [dataset] max_row_bytes "
                     f"on a machine with several times that memory free")


def rewrite_records(jsonl: bool, job: RewriteJob, target: Path, quarantine: Path, write: WriteBytes) -> Rewritten:
    """Rewrite a JSONL (``jsonl``) or CSV/TSV shard: its records split as the reader splits them
    (:mod:`datacheck.formats.records`); the kept records copied to ``target`` (JSONL: their line
    bytes; CSV: re-written with the same separator and quote; the input's line break and byte
    order mark kept, blank lines not copied), the dropped ones (rows of ``job.reasons``, and
    records that do not parse or hold invalid UTF-8 when ``job.drop`` names their ``decode.*``
    check) with the meta columns to ``quarantine`` (only when any is dropped), both by ``write``; both read back and
    compared record by record with the input's content hashes. Raises :class:`InternalError` when
    they differ or the records do not split as the audit read them, and
    :class:`~datacheck.model.errors.UsageError` for a line of more than ``[dataset] max_row_bytes``
    (:func:`_refuse_long_line`, before the shard is read whole)."""
    reasons, rows, drop, dataset = job.reasons, job.rows, job.drop, job.dataset
    remote = isinstance(job.source, str) and is_url(job.source)
    if not remote:
        _refuse_long_line(job)
    raw = read_bytes(job.source)
    if remote:
        _refuse_long_line(job, raw)
    schema = None
    if jsonl:
        header = None
        recs, blank, schema = _jsonl_records(raw)
    else:
        header, recs, blank = _csv_records(raw, job.fmt, dataset)
    nrows = sum(1 for r in recs if r.row is not None)
    if nrows != rows:
        raise InternalError(f"{job.rel}: {nrows} records parse here but the audit read {rows} rows")
    kept, quar = [], []
    for rec in recs:
        why = _record_reasons(rec, reasons, drop)
        (quar if why else kept).append((rec, why))
    nl = _newline(raw)
    if jsonl:
        body = b"".join(rec.raw + nl for rec, _ in kept)
        qbody = "".join(json.dumps(_quarantine_obj(rec, job.rel, why), ensure_ascii=False) + "\n"
                        for rec, why in quar).encode("utf-8")
    else:
        body = _csv_bytes(header, [rec.value if rec.value is not None else rec.text.split(_csv_dialect(job.fmt, dataset)[0])
                                   for rec, _ in kept], job.fmt, dataset, nl)
        cols = list(header) if header is not None else [f"column_{i + 1}" for i in range(len(
            next((r.value for r in recs if r.value is not None), [])))]
        qheader = [*META_COLUMNS, _RAW, *cols]
        qrows = []
        for rec, why in quar:
            fields = rec.value if rec.value is not None else [""] * len(cols)
            qrows.append(["" if rec.row is None else str(rec.row), str(rec.line), job.rel, ";".join(why), rec.hash,
                          "" if rec.value is not None else rec.text, *fields])
        qbody = _csv_bytes(qheader, qrows, job.fmt, dataset, nl)
    bom = raw[:len(raw) - len(strip_bom(raw)[0])]  # the input's UTF-8 byte order mark (or b""), kept
    write(target, _compress(target.name, bom + body))
    if quar:  # a quarantine file only for a shard that lost rows
        write(quarantine, _compress(quarantine.name, qbody))
    kept_rows = sum(1 for rec, _ in kept if rec.row is not None)
    # proof: read back and compare record hashes with the input, in order
    back = read_bytes(target)
    qback = read_bytes(quarantine) if quar else b""
    if jsonl:
        got, _, _ = _jsonl_records(back, schema)
        lossy = {rec.line for rec, _ in quar if rec.invalid_utf8}
        qgot = []
        qrows: list[tuple[int, str]] = []  # (line, object text without the meta columns)
        # split at "\n" only: json.dumps(ensure_ascii=False) leaves U+2028, U+2029 and NEL raw inside
        # strings (a value or shard name holding one), which str.splitlines would cut a record at
        for line in filter(None, qback.decode("utf-8").split("\n")):
            obj = json.loads(line)
            meta = {k: obj.pop(k) for k in META_COLUMNS}
            if _RAW in obj:  # a record that does not parse: its raw text (lossy only for invalid UTF-8)
                h = (meta["_datacheck_row_hash"] if meta["_datacheck_line"] in lossy
                     else hash_bytes(obj[_RAW].encode("utf-8")))
                qgot.append((meta["_datacheck_line"], h))
            else:
                qrows.append((meta["_datacheck_line"], json.dumps(obj, ensure_ascii=False)))
        qhashes, _ = _jsonl_hashes([t for _, t in qrows], schema)
        qgot += [(ln, h) for (ln, _), h in zip(qrows, qhashes)]
    else:
        _h, got, _b = _csv_records(back, job.fmt, dataset)
        qdataset = dataset.model_copy(update={"names": None, "header": True})
        _qh, qrecs, _qb = _csv_records(qback, job.fmt, qdataset)
        raw_of = {rec.line: rec for rec, _ in quar if rec.value is None}
        qgot = []
        qfields: list[tuple[int, list[str]]] = []
        for rec in qrecs:
            v = rec.value
            line, stored, raw_text, fields = int(v[1]), v[4], v[5], v[6:]
            if line in raw_of:  # a record that does not parse: compare its raw text
                ok = raw_of[line].invalid_utf8 or raw_of[line].text == raw_text
                qgot.append((line, stored if ok else hash_bytes(raw_text.encode("utf-8"))))
            else:
                qfields.append((line, fields))
        qgot += [(ln, h) for (ln, _), h in zip(qfields, _csv_hashes([f for _, f in qfields]))]
    want_kept = [rec.hash for rec, _ in kept if rec.row is not None]
    got_kept = [rec.hash for rec in got if rec.row is not None]
    want_q = [(rec.line, rec.hash) for rec, _ in quar]
    if want_kept != got_kept or sorted(want_q) != sorted(qgot) or len(got) != len(kept):
        raise InternalError(f"{job.rel}: the written records differ from the input (kept {len(kept)}, "
                            f"quarantined {len(quar)} of {len(recs)})")
    return Rewritten(input_rows=len(recs), kept=len(kept), kept_rows=kept_rows,
                     reasons=[why for _rec, why in quar], blank_lines=blank)


def _json_array_split(raw: bytes, rel: str, limit: int) -> tuple[bytes, bytes, list[dict[str, Any]], list[int],
                                                                  Any, Any]:
    """(byte order mark, text after it, elements, their 1-based start lines, span starts, span ends) of
    a JSON array file, parsed as the audit parses it
    (:func:`~datacheck.formats.records.json_array_records`, the same ``limit``); the spans
    (:func:`~datacheck.io.safejson.element_spans`) are each element's bytes. Raises
    :class:`InternalError` when the file does not parse as the audit read it."""
    data, nbom = strip_bom(raw)
    try:
        values, lines = json_array_records(raw, limit)
    except RecordLayoutError as exc:
        raise InternalError(f"{rel}: the audit read this JSON array but it does not parse now: {exc}") from None
    starts, ends = element_spans(data)
    if len(starts) != len(values):
        raise InternalError(f"{rel}: {len(values)} elements parse but {len(starts)} element spans were found")
    return raw[:nbom], data, values, lines, starts, ends


def _element_hashes(values: list[dict[str, Any]], schema: dict[str, pl.DataType] | None
                    ) -> tuple[list[str], dict[str, pl.DataType] | None]:
    """Row hashes of JSON array elements: each written as one line of JSON and hashed as a JSONL
    record (:func:`_jsonl_hashes`, with ``schema`` when given)."""
    return _jsonl_hashes([json.dumps(v, ensure_ascii=False) for v in values], schema)


def rewrite_json_array(job: RewriteJob, target: Path, quarantine: Path, write: WriteBytes) -> Rewritten:
    """Rewrite a JSON array file (one top-level array of objects; LLaMA-Factory's and FastChat's data
    files): its elements are its rows, numbered as the audit numbers them (0-based element index; the
    line of a row is the line its element starts on, none when two elements start on one line).

    The copy (``target``, compressed as its name says) is the input's bytes less the dropped
    elements: the UTF-8 byte order mark, the text before the first element and after the last one
    (the brackets and their whitespace) and each kept element's bytes stay as they were, and each
    kept element is followed by the separator that followed it in the input (the one after the last
    kept element dropped), so an input with nothing dropped is copied byte for byte and an indented
    file stays indented. The quarantine (``quarantine``, only when rows are dropped) is a JSON array
    of the dropped elements, one a line, with the meta columns (:data:`META_COLUMNS`). Both are read
    back and compared element by element with the input's content hashes (:func:`_element_hashes`).

    Memory: the file is held whole, parsed (as the audit holds it) and copied once more; an element
    of more than ``[dataset] max_row_bytes`` makes the audit read the file as unreadable, and this
    rewrite refuses it the same way.

    Raises:
        InternalError: the file does not parse as the audit read it (rows or elements differ), or
            the written rows differ from the input.
    """
    limit = int(getattr(job.dataset, "max_row_bytes", None) or MAX_ROW_BYTES)
    raw = read_bytes(job.source)
    bom, data, values, lines, starts, ends = _json_array_split(raw, job.rel, limit)
    if len(values) != job.rows:
        raise InternalError(f"{job.rel}: {len(values)} elements parse here but the audit read {job.rows} rows")
    hashes, schema = _element_hashes(values, None)
    keep_idx = [i for i in range(len(values)) if i not in job.reasons]
    drop_idx = sorted(i for i in job.reasons if 0 <= i < len(values))
    if not values:
        body = data
    else:
        parts = [data[:int(starts[0])]]
        for k, i in enumerate(keep_idx):
            parts.append(data[int(starts[i]):int(ends[i])])
            if k + 1 < len(keep_idx):
                parts.append(data[int(ends[i]):int(starts[i + 1])])  # the separator that followed it
        parts.append(data[int(ends[-1]):])
        body = b"".join(parts)
    write(target, _compress(target.name, bom + body))
    by_line = len(set(lines)) == len(lines)
    if drop_idx:  # a quarantine file only for a shard that lost rows
        objs = [{**values[i], "_datacheck_row": i, "_datacheck_line": lines[i] if by_line else None,
                 "_datacheck_shard": job.rel, "_datacheck_checks": sorted(job.reasons[i]),
                 "_datacheck_row_hash": hashes[i]} for i in drop_idx]
        qbody = "[\n" + ",\n".join(json.dumps(o, ensure_ascii=False) for o in objs) + "\n]\n"
        write(quarantine, _compress(quarantine.name, qbody.encode("utf-8")))
    # proof: read back what was written and compare per-row content hashes with the input, in order
    back = _json_array_split(read_bytes(target), job.rel, limit)[2]
    got_kept = _element_hashes(back, schema)[0] if back else []
    q_rows: list[int] = []
    got_q: list[str] = []
    if drop_idx:
        qvals, _ = json_array_records(read_bytes(quarantine))
        q_rows = [int(q.pop("_datacheck_row")) for q in qvals]
        for q in qvals:
            for name in META_COLUMNS[1:]:
                q.pop(name)
        got_q = _element_hashes(qvals, schema)[0]
    _verify(job.rel, hashes, keep_idx, got_kept, drop_idx, got_q, q_rows)
    return Rewritten(input_rows=len(values), kept=len(keep_idx), kept_rows=len(keep_idx),
                     reasons=[sorted(job.reasons[i]) for i in drop_idx])
