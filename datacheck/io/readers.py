"""Opening one shard as a polars LazyFrame, with decode findings for line formats.

Formats:
- parquet: ``pl.scan_parquet`` (lazy; the fused query reads only the needed columns).
- Arrow types polars cannot read (union, interval, run-end-encoded, list views, decimal256), in
  parquet or Arrow IPC: the file is read by pyarrow instead, converted where a lossless polars type
  exists and the other columns dropped with a ``schema.dtype`` finding each
  (:func:`arrow_for_polars`), never handed to polars (whose Rust code panics on them).
- Arrow IPC file (``ARROW1`` magic): ``pl.scan_ipc``; Arrow IPC stream (Hugging Face
  ``save_to_disk`` ``data-*.arrow``): ``pyarrow.ipc.open_stream`` over a memory map.
- JSONL (plain, ``.gz``, ``.zst``): decompressed as a stream and parsed in chunks of whole lines
  (:data:`JSONL_CHUNK_BYTES`), so neither the inflated bytes nor their line lists are ever held
  whole; a chunk whose fast parse fails (a bad or blank line, invalid UTF-8, mixed types, NaN) is
  validated line by line, that chunk only, so every bad line is reported with its 1-based line
  number, byte offset and the parser's message, and the good records are still audited. The
  findings do not depend on where the chunks are cut (a column's JSON type is decided over the
  whole file); the chunks' frames are joined as ``pl.concat(how="diagonal_relaxed")`` does
  (:func:`_join_pieces`: ints in one chunk and floats in another are Float64, a column missing
  from a chunk is null there).
- Megatron ``.bin``/``.idx``, MosaicML MDS, WebDataset tar and litdata chunks: the readers of
  :mod:`datacheck.io.formats` (each documents its layout rules; a broken rule is ``decode.unreadable``).
- CSV/TSV: Python's ``csv`` module finds records with a wrong field count (line and byte offset);
  the good records are parsed by polars.
- A shard in an object store (``path`` a URL, :mod:`datacheck.io.stores`): parquet is opened with
  ``pyarrow.dataset`` over the store's fsspec filesystem and scanned lazily by polars
  (``pl.scan_pyarrow_dataset``), so only the footer and the columns the checks need are fetched; every
  other format is copied to a temporary local folder (streaming; a Megatron ``.bin`` with its
  ``.idx``), read by the same reader as a local file and held in memory, and the copy deleted.
Invalid UTF-8 in a line format is reported (``decode.invalid_utf8``) and the line is decoded with
replacement characters so the rest of the record is still audited.
"""
from __future__ import annotations

import csv
import gzip
import io
import tempfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import polars as pl

from datacheck.io.formats import FormatError
from datacheck.io.formats.litdata import read_litdata_chunk
from datacheck.io.formats.mds import read_mds
from datacheck.io.formats.megatron import read_megatron
from datacheck.io.formats.webdataset import read_webdataset
from datacheck.io.records import RecordLayoutError, csv_records, json_array_records, jsonl_records, strip_bom
from datacheck.io.safejson import MAX_JSON_DEPTH, max_line_depth
from datacheck.io.stores import filesystem, is_url
from datacheck.io.structs import with_sorted_fields
from datacheck.model.findings import Example, Finding, show_value
from datacheck.model.roles import TEXT_NAMES

__all__ = ["ShardData", "Unreadable", "arrow_for_polars", "needs_conversion", "normalize_frame", "normalize_shard", "validate_arrow", "open_shard",
           "read_bytes"]

#: A reader's failure: any exception, and polars' ``PanicException`` (a ``BaseException``) on bytes
#: the engine cannot handle. Each becomes :class:`Unreadable` (``decode.unreadable``), never a crash.
_READ_ERRORS: tuple[type[BaseException], ...] = (Exception, pl.exceptions.PanicException)


class Unreadable(Exception):
    """The shard cannot be opened or parsed; ``reason`` says why and where (becomes ``decode.unreadable``)."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


@dataclass
class ShardData:
    """An opened shard.

    Attributes:
        lf: the rows as read (0-based row index = position in this frame).
        decode_findings: ``decode.*`` findings found while opening.
        line_format: True for JSONL/CSV (findings then also carry 1-based line numbers).
        line_of_row: 1-based line number of each row, or None when ``row + line_base``.
        line_base: offset of row 0's line when ``line_of_row`` is None (1 for JSONL, 2 for CSV with header).
        stream: a batch source reading the rows straight from the file, batch by batch (an object
            with ``schema``, ``rows`` and ``batches(columns, rows)``: :class:`datacheck.io.jsonl_stream.JsonlSource`,
            :mod:`datacheck.io.csv_stream`, :mod:`datacheck.io.ipc_stream`), or None; the engine reads its
            batches from it instead of slicing ``lf`` (which, for these, reads the file again when collected).
    """

    lf: pl.LazyFrame
    decode_findings: list[Finding] = field(default_factory=list)
    line_format: bool = False
    line_of_row: np.ndarray | None = None
    line_base: int = 1
    stream: Any = None

    def lines_of(self, rows: list[int]) -> list[int]:
        if not self.line_format:
            return []
        if self.line_of_row is None:
            return [r + self.line_base for r in rows]
        return [int(self.line_of_row[r]) for r in rows if r < len(self.line_of_row)]


def read_bytes(path: Path | str) -> bytes:
    """The shard's bytes, decompressed for ``.gz``/``.zst``; ``path`` may be the URL of an object in a
    store (:mod:`datacheck.io.stores`). Raises :class:`Unreadable`."""
    if isinstance(path, str) and is_url(path):
        fs, key = filesystem(path)
        try:
            raw = fs.cat_file(key)
        except _READ_ERRORS as exc:
            raise Unreadable(_store_reason(path, exc)) from None
        name = key.rpartition("/")[2].lower()
    else:
        path = Path(path)
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise Unreadable(f"cannot read file: {exc.strerror or exc}") from None
        name = path.name.lower()
    try:
        if name.endswith(".gz"):
            return gzip.decompress(raw)
        if name.endswith(".zst"):
            import zstandard

            return zstandard.ZstdDecompressor().stream_reader(io.BytesIO(raw)).read()
    except _READ_ERRORS as exc:  # corrupt compressed stream
        raise Unreadable(f"cannot decompress .{name.rpartition('.')[2]} data: {exc}") from None
    return raw


#: Decompressed bytes of one JSONL chunk (whole lines; a longer line makes a longer chunk).
JSONL_CHUNK_BYTES = 16 * 2**20  # 16 MiB: pass 1 peaks ~100 MiB lower than at 32 MiB, no slower (bench_jsonl_stream.py)


def line_chunks(path: Path, chunk_bytes: int = JSONL_CHUNK_BYTES) -> Iterator[bytes]:
    """The file's bytes, decompressed as a stream for ``.gz``/``.zst``, in chunks of about
    ``chunk_bytes`` that end right after a newline (the last chunk may end without one). Memory:
    one chunk plus one read block, whatever the inflated size.

    Raises:
        Unreadable: the file cannot be read, or its compressed stream is corrupt (the reason says which).
    """
    name = path.name.lower()
    try:
        raw = open(path, "rb")
    except OSError as exc:
        raise Unreadable(f"cannot read file: {exc.strerror or exc}") from None
    try:
        if name.endswith(".gz"):
            f: Any = gzip.GzipFile(fileobj=raw)
        elif name.endswith(".zst"):
            import zstandard

            f = zstandard.ZstdDecompressor().stream_reader(raw)
        else:
            f = raw
        buf = b""  # the bytes after the last newline seen (a partial line)
        while True:
            try:
                block = f.read(chunk_bytes)
            except OSError as exc:
                if exc.errno is not None:  # the disk or the file system, not the bytes
                    raise Unreadable(f"cannot read file: {exc.strerror or exc}") from None
                raise Unreadable(f"cannot decompress {path.suffix} data: {exc}") from None  # BadGzipFile
            except _READ_ERRORS as exc:  # corrupt compressed stream (zlib.error, EOFError, zstd errors)
                raise Unreadable(f"cannot decompress {path.suffix} data: {exc}") from None
            if not block:
                break
            data = buf + block if buf else block
            del block  # only one copy of the chunk is kept while the caller works on it
            cut = data.rfind(b"\n")
            if cut < 0:
                buf = data
                continue
            if cut == len(data) - 1:
                buf = b""
            else:
                buf = data[cut + 1:]
                data = data[:cut + 1]
            yield data
            del data
        if buf:
            yield buf
    finally:
        raw.close()


def _suggest_encoding(b: bytes) -> str:
    for enc in ("cp1252", "latin-1"):
        try:
            b.decode(enc)
            return enc
        except UnicodeDecodeError:
            continue
    return "latin-1"


def _valid_utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def _utf8_findings(lines: list[tuple[int, bytes]], max_examples: int, header_lines: int = 0) -> tuple[list[Finding], dict[int, str]]:
    """decode.invalid_utf8 over lines; returns the finding(s) and {line index: lossy text}."""
    bad: list[tuple[int, int, int, bytes]] = []  # (line idx, byte offset, byte, line)
    fixed: dict[int, str] = {}
    for i, (off, line) in enumerate(lines):
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as exc:
            bad.append((i, off + exc.start, line[exc.start], line))
            fixed[i] = line.decode("utf-8", errors="replace")
    return ([_utf8_finding(bad, max_examples)] if bad else []), fixed


def _utf8_finding(bad: list[tuple[int, int, int, bytes]], max_examples: int, total: int | None = None) -> Finding:
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


def unique_names(cols: list[str]) -> list[str]:
    """Duplicate header names made unique (``a``, ``a_1``, ``a_2``), first occurrence kept: the CSV
    readers' (in-memory and streamed) one rule."""
    seen: dict[str, int] = {}
    out = []
    for c in cols:
        n = seen.get(c, 0)
        out.append(c if n == 0 else f"{c}_{n}")
        seen[c] = n + 1
    return out


def _bad_record_finding(bad: list[tuple[int, int, str, str]], total_lines: int, max_examples: int,
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


def _blank_finding(blank: list[tuple[int, int]], max_examples: int, total: int | None = None) -> Finding:
    total = len(blank) if total is None else total
    return Finding(
        check="decode.bad_record", severity="info", count=total,
        message=f"{total} blank line(s) skipped (first: line {blank[0][0]})",
        lines=tuple(b[0] for b in blank[:max_examples]),
        examples=tuple(Example(row=None, value="''", line=ln, byte_offset=o) for ln, o in blank[:max_examples]),
        details={"blank_lines": total},
        rows_truncated=total > max_examples,
    )


def _has_string(dtype: pl.DataType) -> bool:
    """``dtype`` holds strings at some depth (a String column, a list or struct of them)."""
    if dtype == pl.String:
        return True
    if isinstance(dtype, (pl.List, pl.Array)):
        return _has_string(dtype.inner)  # type: ignore[arg-type]
    if isinstance(dtype, pl.Struct):
        return any(_has_string(f.dtype) for f in dtype.fields)
    return False


def _arrow_type(dtype: pl.DataType):
    """The Arrow type Arrow's JSON reader converts to for a polars dtype (plain ``string``/``list``:
    it cannot convert to the large variants polars uses)."""
    import pyarrow as pa

    if dtype == pl.String:
        return pa.string()
    if isinstance(dtype, (pl.List, pl.Array)):
        return pa.list_(_arrow_type(dtype.inner))  # type: ignore[arg-type]
    if isinstance(dtype, pl.Struct):
        return pa.struct([(f.name, _arrow_type(f.dtype)) for f in dtype.fields])
    return pl.Series([], dtype=dtype).to_arrow().type


def _types_as_written(df: pl.DataFrame, data: bytes) -> bool:
    """False when polars' NDJSON reader may have turned non-string JSON values into strings.

    polars reads a column that mixes JSON types (``"1"``, ``1.5``, ``[1]``) and integers above
    uint64's range inside lists as strings, silently. Only string-bearing columns can hide that:
    Arrow's JSON reader (strict: a value of another JSON type than the column's is an error) parses
    the bytes again with just those columns at polars' types. Frames without strings are returned
    as read (token-id shards pay nothing); any doubt (an Arrow error) sends the shard to the exact,
    per-record path. Cost: ``benchmarks/bench_jsonl_read.py``."""
    suspects = {c: t for c, t in df.schema.items() if _has_string(t)}
    if not suspects:
        return True
    import pyarrow as pa
    import pyarrow.json as pj

    try:
        schema = pa.schema([(c, _arrow_type(t)) for c, t in suspects.items()])
    except _READ_ERRORS:
        return False
    parse = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
    block = 1 << 24
    while True:
        try:
            pj.read_json(io.BytesIO(data), read_options=pj.ReadOptions(block_size=block), parse_options=parse)
            return True
        except pa.ArrowInvalid as exc:
            if "straddl" in str(exc) and block < len(data):  # a record longer than the block
                block = len(data) + 1
                continue
            return False
        except _READ_ERRORS:
            return False


_NUMBER = "number"


def _json_type(v) -> str | None:
    """The JSON type of a parsed value as a comparable key: ``None`` for null, ``"number"`` (ints and
    floats: one type in JSON), ``"string"``, ``"boolean"``, ``"object"``, ``"array<T>"`` (``T``: the
    type of its non-null elements, ``"*"`` when it has none, ``"mixed"`` when they differ)."""
    if v is None:
        return None
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return _NUMBER
    if isinstance(v, str):
        return "string"
    if isinstance(v, dict):
        return "object"
    if isinstance(v, list):
        inner = {t for t in map(_json_type, v) if t is not None}
        inner = {t for t in inner if t != "array<*>"} or inner
        if len(inner) > 1 and all(t.startswith("array<") for t in inner):
            inner = {"array<mixed>"}
        return f"array<{inner.pop() if len(inner) == 1 else ('*' if not inner else 'mixed')}>"
    return type(v).__name__


def _compatible(kind: str, major: str) -> bool:
    """An empty array (``array<*>``) fits any array type."""
    return kind == major or (kind == "array<*>" and major.startswith("array<"))


def _leaves(values: list) -> tuple[int, bool]:
    """(list depth, any float among the leaves) of a column's Python values."""
    depth, has_float, level = 0, False, [v for v in values if v is not None]
    while level:
        if any(isinstance(v, float) for v in level):
            has_float = True
        lists = [v for v in level if isinstance(v, list)]
        if not lists:
            break
        depth += 1
        level = [x for v in lists for x in v if x is not None]
    return depth, has_float


def _has_object(values: list) -> bool:
    """Whether a JSON object (dict) is among ``values`` at any depth (in lists)."""
    level = values
    while level:
        if any(isinstance(v, dict) for v in level):
            return True
        level = [x for v in level if isinstance(v, list) for x in v if isinstance(x, (list, dict))]
    return False


def _same_json(a: Any, b: Any) -> bool:
    """Whether the value polars holds (``b``, from ``Series.to_list``) is the JSON value ``a``: an
    object's missing field equals a null one (a struct has every field of its dtype), numbers
    compare by value (1 == 1.0), a boolean is never a number, NaN equals NaN."""
    if isinstance(a, dict):
        return isinstance(b, dict) and all(_same_json(a.get(k), b.get(k)) for k in a.keys() | b.keys())
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(_same_json(x, y) for x, y in zip(a, b))
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, float) and a != a:
        return isinstance(b, float) and b != b
    return bool(a == b)


def _object_series(name: str, values: list) -> pl.Series | str:
    """A column holding JSON objects: polars' Series builder takes a struct's fields from the first
    object only (``[{"a": 1}, {"b": "t"}]`` became ``{a}``, row 2's ``b`` silently dropped) and
    ``from_dicts`` casts fields that change type (``[1]`` next to ``[{"q": 1}]`` became ``{q: 1}``).
    Each build is kept only when it holds every value exactly (:func:`_same_json`); else polars'
    message, or a message saying that the objects' fields change type."""
    why = "the objects' fields change type between rows"
    for build in (lambda: pl.Series(name, values),
                  lambda: pl.from_dicts([{name: v} for v in values], infer_schema_length=None).to_series()):
        try:
            got = build()
        except (TypeError, OverflowError, ValueError, pl.exceptions.PolarsError) as exc:
            why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            continue
        if all(_same_json(a, b) for a, b in zip(values, got.to_list())):
            return got
    return why


def _column_series(name: str, values: list) -> pl.Series | str:
    """The column as polars builds it from Python values; numbers that polars' strict builder refuses
    are given one dtype: Float64 when some are floats (ints next to floats), else Int128 (integers
    beyond 64 bits, e.g. a uint64 id next to a negative one); objects: :func:`_object_series`.
    Returns polars' message when the values still do not form one column (e.g. objects whose fields
    change type)."""
    if _has_object(values):
        return _object_series(name, values)
    try:
        return pl.Series(name, values)
    except (TypeError, OverflowError, pl.exceptions.PolarsError):
        depth, has_float = _leaves(values)
        dtype: pl.DataType = pl.Float64() if has_float else pl.Int128()
        for _ in range(depth):
            dtype = pl.List(dtype)
        try:
            return pl.Series(name, values, dtype=dtype)
        except (TypeError, OverflowError, pl.exceptions.PolarsError) as exc:
            return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _lines_text(lines: list[int]) -> str:
    shown = ", ".join(map(str, lines[:5])) + (f" (+{len(lines) - 5} more)" if len(lines) > 5 else "")
    return f"line {shown}" if len(lines) == 1 else f"lines {shown}"


def _frame_from_records(values: list[dict], line_of_row: list[int], max_examples: int) -> tuple[pl.DataFrame, list[Finding]]:
    """The rows of the parsed JSON records (``json.loads``: ``NaN``/``Infinity`` are floats, big
    integers exact) as a frame, with one ``schema.dtype`` finding per column that mixes JSON types.

    A column is read as its most common JSON type (rows counted; ties: the type seen first); a value
    of another type is read as null and its line reported (the finding's ``lines`` and
    ``details["json_types"]``: JSON type -> 1-based lines), so the other rows are still audited.
    """
    columns: dict[str, list] = {}
    for i, rec in enumerate(values):
        for k in rec:
            if k not in columns:
                columns[k] = [None] * i
        for k, col in columns.items():
            col.append(rec.get(k))
    findings: list[Finding] = []
    series = []
    for name, col in columns.items():
        kinds = [_json_type(v) for v in col]
        counts: dict[str, int] = {}
        for k in kinds:
            if k is not None and k != "array<*>":
                counts[k] = counts.get(k, 0) + 1
        if not counts and "array<*>" in kinds:
            counts["array<*>"] = 1
        major = max(counts, key=lambda k: counts[k]) if counts else None
        bad = [i for i, k in enumerate(kinds) if k is not None and major is not None and not _compatible(k, major)]
        if bad:
            by_type: dict[str, list[int]] = {major: []}  # type: ignore[dict-item]
            for i, k in enumerate(kinds):
                if k is not None:
                    by_type.setdefault(k if not _compatible(k, major) else major, []).append(line_of_row[i])  # type: ignore[arg-type]
            others = ", ".join(f"{k} at {_lines_text(ls)}" for k, ls in by_type.items() if k != major)
            findings.append(Finding(
                check="schema.dtype", severity="error", column=name, count=len(bad), ratio=len(bad) / len(col),
                message=(f"column {name!r} mixes JSON types: mostly {major} ({len(col) - len(bad) - kinds.count(None)} "
                         f"row(s)), but {others}. Those values were read as null; the other rows were audited. "
                         "Write one JSON type per column."),
                lines=tuple(line_of_row[i] for i in bad[:max_examples]),
                examples=tuple(Example(row=i, value=f"{kinds[i]}: {show_value(col[i], 60)}", line=line_of_row[i])
                               for i in bad[:max_examples]),
                details={"json_types": {k: ls[:max_examples] for k, ls in by_type.items()}, "read_as": major},
                rows_truncated=len(bad) > max_examples,
            ))
            for i in bad:
                col[i] = None
        built = _column_series(name, col)
        if isinstance(built, str):
            findings.append(Finding(
                check="schema.dtype", severity="error", column=name, count=len(col) - kinds.count(None),
                message=(f"column {name!r}: its JSON values do not form one column ({built}); the column was "
                         "read as null, the other columns were audited. Write one JSON type per field."),
                details={"reason": built},
            ))
            built = pl.Series(name, [None] * len(col), dtype=pl.Null)
        series.append(built)
    return pl.DataFrame(series), findings


def _fast_chunk(data: bytes) -> pl.DataFrame | None:
    """One chunk of JSONL lines (no BOM) parsed by ``pl.read_ndjson``: one row a line with the types
    as written, or None when the chunk needs the exact per-line path (invalid UTF-8, a blank line, a
    line nested deeper than :data:`MAX_JSON_DEPTH`, a parse error, types polars would change)."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    if not lines or any(not ln.strip() for ln in lines) or max_line_depth(data) > MAX_JSON_DEPTH:
        return None
    try:
        df = pl.read_ndjson(data, infer_schema_length=None)
    except _READ_ERRORS:
        return None
    if df.height != len(lines) or not _types_as_written(df, data):
        return None
    return df


@dataclass
class _Piece:
    """One chunk of a JSONL file: ``frame`` (fast parse) or ``values`` (the parsed records of the
    exact per-line path); ``rows``: its rows; ``lines``: the 1-based line of each row."""

    rows: int
    lines: np.ndarray
    frame: pl.DataFrame | None = None
    values: list[dict] | None = None


def _dtype_kind(dtype: pl.DataType) -> str | None:
    """The :func:`_json_type` of every non-null, non-empty value of a column polars parsed with ``dtype``
    (None when the kinds must be computed value by value: nested lists, null-only lists)."""
    if dtype == pl.Boolean:
        return "boolean"
    if dtype.is_numeric():
        return _NUMBER
    if dtype == pl.String:
        return "string"
    if isinstance(dtype, pl.Struct):
        return "object"
    if isinstance(dtype, pl.List) and not isinstance(dtype.inner, (pl.List, pl.Array)) and dtype.inner != pl.Null:
        inner = _dtype_kind(dtype.inner)  # type: ignore[arg-type]
        return None if inner is None else f"array<{inner}>"
    return None


def _piece_kinds(piece: _Piece, name: str) -> list[str | None] | tuple[str, np.ndarray, np.ndarray]:
    """The JSON kinds of column ``name`` in ``piece``: a list (one kind a row), or, for a fast-parsed
    column of one kind, (kind, rows of that kind, rows that are empty arrays ``array<*>``)."""
    if piece.values is not None:
        return [_json_type(rec.get(name)) for rec in piece.values]
    assert piece.frame is not None
    if name not in piece.frame.columns:
        return [None] * piece.rows
    s = piece.frame[name]
    kind = _dtype_kind(s.dtype)
    if kind is None:
        return [_json_type(v) for v in s.to_list()]
    present = s.is_not_null()
    if kind.startswith("array<"):
        filled = s.list.drop_nulls().list.len().fill_null(0) > 0
        star = (present & ~filled).to_numpy()
        present = present & filled
    else:
        star = np.zeros(piece.rows, dtype=bool)
    return kind, np.flatnonzero(present.to_numpy()), np.flatnonzero(star)


def _kind_groups(kinds: list[str | None] | tuple[str, np.ndarray, np.ndarray]) -> list[tuple[str, np.ndarray]]:
    """(JSON kind, piece-local rows as sorted int64) of one column, from its :func:`_piece_kinds`:
    kinds in the order they first appear, null values left out, empty arrays the kind ``array<*>``
    (a kind with no rows left out)."""
    if isinstance(kinds, tuple):
        rows_of = [(x, r) for x, r in ((kinds[0], kinds[1]), ("array<*>", kinds[2])) if len(r)]
    else:
        groups: dict[str, list[int]] = {}
        for i, x in enumerate(kinds):
            if x is not None:
                groups.setdefault(x, []).append(i)
        rows_of = [(x, np.asarray(r, dtype=np.int64)) for x, r in groups.items()]
    rows_of.sort(key=lambda g: int(g[1][0]))
    return rows_of


def _value_at(piece: _Piece, name: str, i: int) -> Any:
    if piece.values is not None:
        return piece.values[i].get(name)
    assert piece.frame is not None
    return piece.frame[name].slice(i, 1).to_list()[0]  # as Python values (lists, dicts)


def _piece_frame(p: _Piece, names: list[str], drop: dict[str, np.ndarray]) -> tuple[pl.DataFrame, dict[str, str], dict[str, np.ndarray]]:
    """One chunk's frame as :func:`_join_pieces` joins it: the values of the rows in ``drop``
    (column -> rows of a JSON type other than the column's) read as null; a fast-parsed column left
    all null is ``Null``; one left with only empty lists is ``Null`` too, its empty lists' rows
    returned (set again once the joined type is known). Returns (frame, {column: why its values do
    not form one column}, {column: rows of the empty lists})."""
    broken: dict[str, str] = {}
    empties: dict[str, np.ndarray] = {}
    if p.frame is not None:
        df = p.frame
        for name, rows in drop.items():
            mask = np.zeros(p.rows, dtype=bool)
            mask[rows] = True
            s = pl.select(pl.when(pl.Series(mask)).then(None).otherwise(df[name]).alias(name)).to_series()
            if s.null_count() == p.rows:
                s = pl.Series(name, [None] * p.rows, dtype=pl.Null)
            elif isinstance(s.dtype, pl.List) and not (s.list.len().fill_null(0) > 0).any():
                # only empty arrays left: set after the join, with the type the other chunks give
                empties[name] = np.flatnonzero(s.is_not_null().to_numpy())
                s = pl.Series(name, [None] * p.rows, dtype=pl.Null)
            df = df.with_columns(s)
        missing = [pl.Series(n, [None] * p.rows, dtype=pl.Null) for n in names if n not in df.columns]
        if missing:  # a chunk of ``{}`` records has no columns, yet its rows count
            df = pl.DataFrame([*df.get_columns(), *missing]) if df.width else pl.DataFrame(missing)
        return df, broken, empties
    values = p.values or []
    series = []
    for name in names:
        col = [rec.get(name) for rec in values]
        for r in drop.get(name, ()):
            col[int(r)] = None
        built = _column_series(name, col)
        if isinstance(built, str):
            broken.setdefault(name, built)
            built = pl.Series(name, [None] * len(col), dtype=pl.Null)
        series.append(built)
    return pl.DataFrame(series), broken, empties


def _broken_finding(name: str, why: str, count: int) -> Finding:
    """``schema.dtype`` of a column whose JSON values do not form one column (``count``: its non-null values)."""
    return Finding(
        check="schema.dtype", severity="error", column=name, count=count,
        message=(f"column {name!r}: its JSON values do not form one column ({why}); the column was "
                 "read as null, the other columns were audited. Write one JSON type per field."),
        details={"reason": why},
    )


def _join_pieces(pieces: list[_Piece], max_examples: int) -> tuple[pl.DataFrame, list[Finding]]:
    """The frame of a JSONL file's chunks, and the ``schema.dtype`` findings of columns that mix JSON
    types, exactly as :func:`_frame_from_records` decides them over the whole file: a column's kind
    is its most common JSON type over all chunks (ties: the one seen first), and a value of another
    kind, in any chunk, is read as null with its line reported.

    The chunks' frames are then joined like ``pl.concat(how="diagonal_relaxed")`` (the schema a
    whole-file parse infers): a column absent from a chunk is null there, numbers that are ints in
    one chunk and floats in another are Float64, struct fields are the union of the chunks' fields;
    columns come in the order they first appear in the file.
    """
    names: list[str] = []
    seen: set[str] = set()
    for p in pieces:
        cols = p.frame.columns if p.frame is not None else [k for rec in (p.values or []) for k in rec]
        for c in cols:
            if c not in seen:
                seen.add(c)
                names.append(c)
    total = sum(p.rows for p in pieces)
    starts = np.concatenate([[0], np.cumsum([p.rows for p in pieces])]).astype(int).tolist()
    if not names:
        return pl.DataFrame(), []
    findings: list[Finding] = []
    nulled: dict[int, dict[str, np.ndarray]] = {}  # piece -> column -> rows read as null
    for name in names:
        kinds = [_piece_kinds(p, name) for p in pieces]
        counts: dict[str, int] = {}
        star_seen = False
        for k in kinds:
            if isinstance(k, tuple):
                if len(k[1]):
                    counts[k[0]] = counts.get(k[0], 0) + len(k[1])
                star_seen = star_seen or bool(len(k[2]))
            else:
                for x in k:
                    if x is not None and x != "array<*>":
                        counts[x] = counts.get(x, 0) + 1
                    elif x == "array<*>":
                        star_seen = True
        if not counts and star_seen:
            counts["array<*>"] = 1
        major = max(counts, key=lambda k: counts[k]) if counts else None
        if major is None:
            continue
        by_type: dict[str, list[int]] = {major: []}
        by_count: dict[str, int] = {major: 0}
        bad: list[tuple[int, int, str]] = []  # (piece, row in piece, kind) of the first examples
        n_bad = n_present = 0
        keep = max(5, max_examples)
        for pi, (p, k) in enumerate(zip(pieces, kinds)):
            rows_of = _kind_groups(k)
            per_key: dict[str, list[np.ndarray]] = {}
            bad_rows: list[tuple[np.ndarray, str]] = []
            for kind, rows in rows_of:
                n_present += len(rows)
                ok = _compatible(kind, major)
                per_key.setdefault(major if ok else kind, []).append(rows)
                if not ok:
                    n_bad += len(rows)
                    bad_rows.append((rows, kind))
            for key, parts in per_key.items():
                rows = np.sort(np.concatenate(parts))
                got = by_type.setdefault(key, [])
                by_count[key] = by_count.get(key, 0) + len(rows)
                got.extend(int(p.lines[r]) for r in rows[:max(0, keep - len(got))])
            if bad_rows:
                nulled.setdefault(pi, {})[name] = np.sort(np.concatenate([r for r, _ in bad_rows]))
                ex = sorted((int(r), kind) for rows, kind in bad_rows for r in rows[:max_examples])
                bad.extend((pi, r, kind) for r, kind in ex[:max(0, max_examples - len(bad))])
        if not n_bad:
            continue
        others = ", ".join(f"{k} at {_lines_text_counted(ls, by_count[k])}" for k, ls in by_type.items() if k != major)
        findings.append(Finding(
            check="schema.dtype", severity="error", column=name, count=n_bad, ratio=n_bad / total,
            message=(f"column {name!r} mixes JSON types: mostly {major} ({n_present - n_bad} "
                     f"row(s)), but {others}. Those values were read as null; the other rows were audited. "
                     "Write one JSON type per column."),
            lines=tuple(int(pieces[pi].lines[r]) for pi, r, _ in bad),
            examples=tuple(Example(row=starts[pi] + r, value=f"{x}: {show_value(_value_at(pieces[pi], name, r), 60)}",
                                   line=int(pieces[pi].lines[r])) for pi, r, x in bad),
            details={"json_types": {k: ls[:max_examples] for k, ls in by_type.items()}, "read_as": major},
            rows_truncated=n_bad > max_examples,
        ))
    frames: list[pl.DataFrame] = []
    broken: dict[str, str] = {}
    empties: dict[str, list[np.ndarray]] = {}
    for pi, p in enumerate(pieces):
        df, why_broken, empty_rows = _piece_frame(p, names, nulled.get(pi, {}))
        for name, why in why_broken.items():
            broken.setdefault(name, why)
        for name, rows in empty_rows.items():
            empties.setdefault(name, []).append(starts[pi] + rows)
        frames.append(df)
    for name, why in broken.items():
        count = 0
        for p in pieces:
            if p.values is not None:
                count += sum(1 for rec in p.values if rec.get(name) is not None)
            elif p.frame is not None and name in p.frame.columns:
                count += p.rows - p.frame[name].null_count()
        findings.append(_broken_finding(name, why, count))
        frames = [f.with_columns(pl.lit(None).alias(name)) if name in f.columns else f for f in frames]
    try:
        df = frames[0] if len(frames) == 1 else pl.concat(frames, how="diagonal_relaxed", rechunk=True)
    except _READ_ERRORS as exc:
        raise Unreadable(f"the JSONL chunks do not form one table: {str(exc).splitlines()[0]}") from None
    for name, parts in empties.items():
        if name in broken or not isinstance(df.schema[name], pl.List):
            continue
        mask = np.zeros(df.height, dtype=bool)
        mask[np.concatenate(parts)] = True
        empty = pl.Series(name, [[]], dtype=df.schema[name])
        df = df.with_columns(pl.when(pl.Series(mask)).then(pl.lit(empty).first()).otherwise(pl.col(name)).alias(name))
    return df.select(names), findings


def _lines_text_counted(lines: list[int], count: int) -> str:
    shown = ", ".join(map(str, lines[:5])) + (f" (+{count - 5} more)" if count > 5 else "")
    return f"line {shown}" if count == 1 else f"lines {shown}"


@dataclass
class _JsonlChunk:
    """One chunk of a JSONL file as :func:`jsonl_chunks` reads it: its rows (``piece``), the bad
    records (1-based line, byte offset, message, text), blank lines (line, offset) and invalid UTF-8
    lines (0-based line index, byte offset, byte, line) found in it, with the file's line numbers
    and offsets; ``lines``: the lines of the chunk; ``nbytes``: its bytes; ``slow``: it took the
    per-line path; ``crc``: the CRC-32 of its bytes (``zlib.crc32``: a second read checks it)."""

    piece: _Piece
    bad: list[tuple[int, int, str, str]]
    blank: list[tuple[int, int]]
    utf8_bad: list[tuple[int, int, int, bytes]]
    lines: int
    nbytes: int
    slow: bool
    crc: int = 0


def jsonl_chunks(path: Path, chunk_bytes: int | None = None, fast: list[bool] | None = None) -> Iterator[_JsonlChunk]:
    """A JSONL file (plain, ``.gz``, ``.zst``) chunk by chunk (:func:`line_chunks`, :data:`JSONL_CHUNK_BYTES`
    read at call time): a chunk is parsed by polars (:func:`_fast_chunk`) or, when that fails, line
    by line (``jsonl_records``: the bad lines, blank lines and invalid UTF-8 of that chunk only, with
    the file's line numbers and byte offsets). ``chunk_bytes``: the chunk size (default
    :data:`JSONL_CHUNK_BYTES`). Deterministic: reading the file again with the same chunk size gives
    the same chunks (the streamed JSONL source, :mod:`datacheck.io.jsonl_stream`, relies on it).
    ``fast``: for a second read, whether each chunk took the fast path in the first (its checks are
    not repeated: the chunk is parsed by ``pl.read_ndjson`` directly; ``crc32`` tells whether its
    bytes changed). Raises :class:`Unreadable`."""
    line0 = off0 = 0
    size = JSONL_CHUNK_BYTES if chunk_bytes is None else chunk_bytes  # read at call time (tests shrink it)
    for k, chunk in enumerate(line_chunks(path, size)):
        data, b = strip_bom(chunk) if k == 0 else (chunk, 0)
        n_lines = data.count(b"\n") + (0 if not data or data.endswith(b"\n") else 1)
        if fast is not None and k < len(fast) and fast[k]:
            try:
                df = pl.read_ndjson(data, infer_schema_length=None)
            except _READ_ERRORS as exc:
                raise Unreadable(f"the file changed while it was being read: {str(exc).splitlines()[0]}") from None
        else:
            df = _fast_chunk(data)
        bad: list[tuple[int, int, str, str]] = []
        blank: list[tuple[int, int]] = []
        utf8_bad: list[tuple[int, int, int, bytes]] = []
        if df is not None:
            piece = _Piece(rows=df.height, lines=np.arange(line0 + 1, line0 + 1 + df.height, dtype=np.int64), frame=df)
        else:
            split = jsonl_records(chunk if k == 0 else b"\n" + chunk)
            shift_l, shift_o = (line0, off0) if k == 0 else (line0 - 1, off0 - 1)
            lines = split.lines if k == 0 else split.lines[1:]
            for i, (off, line) in enumerate(lines):
                try:
                    line.decode("utf-8")
                except UnicodeDecodeError as exc:
                    utf8_bad.append((line0 + i, off + shift_o + exc.start, line[exc.start], line))
            bad.extend((r.line + shift_l, r.offset + shift_o, r.error or "", r.text) for r in split.bad)
            blank.extend((ln + shift_l, o + shift_o) for ln, o in split.blank if k == 0 or ln > 1)
            rows = split.rows
            piece = _Piece(rows=len(rows), lines=np.asarray([r.line + shift_l for r in rows], dtype=np.int64),
                           values=[r.value for r in rows])
            del split, lines, rows  # each line's bytes and text: not kept while the caller works
        n_bytes, crc, slow = len(chunk), zlib.crc32(chunk), df is None
        del chunk, data, df  # the caller holds the piece; the bytes go before the next chunk is read
        yield _JsonlChunk(piece, bad, blank, utf8_bad, n_lines, n_bytes, slow, crc)
        del piece
        line0 += n_lines
        off0 += n_bytes


def _jsonl_decode_findings(bad: list[tuple[int, int, str, str]], blank: list[tuple[int, int]],
                           utf8_bad: list[tuple[int, int, int, bytes]], total_lines: int,
                           max_examples: int) -> list[Finding]:
    """The ``decode.*`` findings of a JSONL file from the bad, blank and invalid UTF-8 lines of its chunks."""
    findings: list[Finding] = []
    if utf8_bad:
        findings.append(_utf8_finding(utf8_bad, max_examples))
    if bad:
        findings.append(_bad_record_finding(bad, total_lines, max_examples))
    if blank:
        findings.append(_blank_finding(blank, max_examples))
    return findings


def _read_jsonl(path: Path, max_examples: int) -> ShardData:
    """A JSONL file (plain, ``.gz``, ``.zst``) read chunk by chunk (:func:`jsonl_chunks`) and joined
    into one frame (:func:`_join_pieces`). The findings over all chunks equal those of one chunk
    holding the whole file. The one read path opens a local file with the streamed source instead
    (:mod:`datacheck.io.jsonl_stream`: the same frame and findings, never the whole decoded file);
    this one serves files copied from an object store and is the reference the tests compare with."""
    chunks = list(jsonl_chunks(path))
    return _finish_jsonl([c.piece for c in chunks], [b for c in chunks for b in c.bad],
                         [b for c in chunks for b in c.blank], [u for c in chunks for u in c.utf8_bad],
                         sum(c.lines for c in chunks), any(c.slow for c in chunks), max_examples)


def _finish_jsonl(pieces: list[_Piece], bad: list[tuple[int, int, str, str]], blank: list[tuple[int, int]],
                  utf8_bad: list[tuple[int, int, int, bytes]], total_lines: int, slow: bool,
                  max_examples: int) -> ShardData:
    """The opened JSONL shard from all its chunks' pieces and decode bits (joined in memory)."""
    n_rows = sum(p.rows for p in pieces)
    if not utf8_bad and n_rows == 0 and not bad:
        return ShardData(lf=pl.LazyFrame(), line_format=True)
    findings = _jsonl_decode_findings(bad, blank, utf8_bad, total_lines, max_examples)
    pieces = [p for p in pieces if p.rows]
    if not pieces:
        return ShardData(lf=pl.DataFrame().lazy(), decode_findings=findings, line_format=True,
                         line_of_row=np.zeros(0, dtype=np.int64))
    df, typed = _join_pieces(pieces, max_examples)
    df = with_sorted_fields(df)  # a JSON object's keys have no order (io/structs.py)
    findings.extend(typed)
    if not slow:
        return ShardData(lf=df.lazy(), decode_findings=findings, line_format=True, line_base=1)
    return ShardData(lf=df.lazy(), decode_findings=findings, line_format=True,
                     line_of_row=np.concatenate([p.lines for p in pieces]))


def _read_json_array(path: Path, max_examples: int) -> ShardData:
    """A ``.json`` file holding one JSON array of records (LLaMA-Factory's and FastChat's data files):
    one row per element, read as the JSONL records are (:func:`_frame_from_records`: mixed JSON
    types are ``schema.dtype`` findings with lines); each row's line is the line its element starts on."""
    try:
        values, lines = json_array_records(read_bytes(path))
    except RecordLayoutError as exc:
        raise Unreadable(f"{path.name}: {exc}") from None
    if not values:
        return ShardData(lf=pl.LazyFrame(), line_format=True)
    df, findings = _frame_from_records(values, lines, max_examples)
    return ShardData(lf=df.lazy(), decode_findings=findings, line_format=True,
                     line_of_row=np.asarray(lines, dtype=np.int64))


def _read_csv(path: Path, fmt: str, dataset_cfg, max_examples: int,
              string_columns: tuple[str, ...] = TEXT_NAMES) -> ShardData:
    sep = dataset_cfg.separator or ("\t" if fmt == "tsv" else ",")
    quote = dataset_cfg.quote_char if dataset_cfg.quote_char else None
    header = dataset_cfg.header
    names = list(dataset_cfg.names) if dataset_cfg.names else None
    raw = read_bytes(path)
    try:
        split = csv_records(raw, sep, quote, header, names)
    except RecordLayoutError as exc:
        raise Unreadable(str(exc)) from None
    lines = split.lines
    findings: list[Finding] = []
    if not _valid_utf8(strip_bom(raw)[0]):
        findings.extend(_utf8_findings(lines, max_examples)[0])
    if not split.records and not split.blank and split.header_fields is None:
        return ShardData(lf=pl.LazyFrame(), decode_findings=findings, line_format=True, line_base=2 if header else 1)
    records = [r.value for r in split.rows]
    line_of_row = [r.line for r in split.rows]
    bad = [(r.line, r.offset, r.error or "", r.text) for r in split.bad]
    if bad:
        findings.append(_bad_record_finding(bad, len(lines), max_examples))
    if split.blank:
        findings.append(_blank_finding(split.blank, max_examples))
    cols = split.header or []
    # Duplicate header names would break the frame: make them unique and say so through the schema.
    uniq = unique_names(cols)
    if not records:
        df = pl.DataFrame({c: pl.Series(c, [], dtype=pl.String) for c in uniq})
    else:
        # Re-serialise the good records and let polars infer dtypes as in a plain read.
        buf = io.StringIO()
        w = csv.writer(buf, delimiter=",", quoting=csv.QUOTE_MINIMAL, lineterminator="\n")
        w.writerow(uniq)
        w.writerows(records)
        try:
            df = pl.read_csv(buf.getvalue().encode("utf-8"), infer_schema_length=None,
                             schema_overrides={c: pl.String for c in uniq if c in string_columns},
                             null_values=[""], try_parse_dates=False)
        except _READ_ERRORS as exc:
            raise Unreadable(f"CSV records do not form one table: {exc}") from None
    contiguous = bool(line_of_row) and line_of_row[-1] - line_of_row[0] == len(line_of_row) - 1
    return ShardData(
        lf=df.lazy(), decode_findings=findings, line_format=True,
        line_of_row=None if contiguous else np.asarray(line_of_row, dtype=np.int64),
        line_base=line_of_row[0] if line_of_row else (2 if header else 1),
    )


def _parquet_reason(path: Path, exc: BaseException, fs=None, url: str = "") -> str:
    """Why a parquet file does not open: zero bytes, bad leading or footer magic, else the reader's
    message. ``fs``/``url``: the file is ``path`` in that fsspec filesystem (an object store)."""
    try:
        if fs is None:
            size = path.stat().st_size
            with open(path, "rb") as f:
                head = f.read(4)
                f.seek(max(0, size - 4))
                tail = f.read(4)
        else:
            size = int(fs.size(str(path)))
            head = fs.cat_file(str(path), start=0, end=min(4, size)) if size else b""
            tail = fs.cat_file(str(path), start=max(0, size - 4), end=size) if size else b""
    except OSError as e:
        return f"cannot read file: {e.strerror or e}" if fs is None else _store_reason(url, e)
    except Exception as e:  # noqa: BLE001 - a store client's error after its retries
        return _store_reason(url, e)
    if size == 0:
        return "zero-byte file (an interrupted download or write?)"
    if head != b"PAR1":
        return f"not a parquet file: bad magic bytes {head!r} at offset 0 (expected b'PAR1')"
    if tail != b"PAR1":
        return f"truncated parquet file: no footer magic at the end ({size} bytes; the write was cut off)"
    return f"parquet reader error: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"


def _polars_type(t):
    """The Arrow type polars can import that holds the same values as Arrow type ``t``, or None
    when there is none (polars 1.x/2.x: no union, no interval, no 256-bit decimal beyond 38 digits;
    reading them panics in polars' Rust code or raises).

    Lossless equivalents: run-end-encoded -> its decoded value type; ``list_view`` /
    ``large_list_view`` -> ``list`` / ``large_list``; ``decimal256(p <= 38)`` -> ``decimal128``; the
    same inside lists, structs, maps and dictionaries. Everything else is ``t`` itself (``string_view``
    and ``binary_view`` are native to polars and read as String / Binary)."""
    import pyarrow as pa
    import pyarrow.types as pt

    if pt.is_union(t) or pt.is_interval(t):
        return None
    if pt.is_run_end_encoded(t):
        return _polars_type(t.value_type)
    if pt.is_decimal256(t):
        return pa.decimal128(t.precision, t.scale) if t.precision <= 38 else None
    if pt.is_list_view(t) or pt.is_large_list_view(t) or pt.is_list(t) or pt.is_large_list(t) \
            or pt.is_fixed_size_list(t):
        inner = _polars_type(t.value_type)
        if inner is None:
            return None
        field = pa.field(t.value_field.name, inner, t.value_field.nullable)
        if pt.is_fixed_size_list(t):
            return pa.list_(field, t.list_size)
        return pa.large_list(field) if pt.is_large_list(t) or pt.is_large_list_view(t) else pa.list_(field)
    if pt.is_map(t):
        k, v = _polars_type(t.key_type), _polars_type(t.item_type)
        return None if k is None or v is None else pa.map_(k, v)
    if pt.is_struct(t):
        fields = []
        for f in t:
            ft = _polars_type(f.type)
            if ft is None:
                return None
            fields.append(pa.field(f.name, ft, f.nullable))
        return pa.struct(fields)
    if pt.is_dictionary(t):
        v = _polars_type(t.value_type)
        return None if v is None else pa.dictionary(t.index_type, v, t.ordered)
    return t


def needs_conversion(schema) -> bool:
    """Some column of the Arrow ``schema`` has no polars type as stored (see :func:`_polars_type`)."""
    return any(_polars_type(f.type) != f.type for f in schema)


def _convert_column(col, target):
    """A chunked Arrow column as ``target`` (:func:`_polars_type`): run-end-encoded values decoded
    (``pyarrow.compute.run_end_decode``), then a pyarrow cast checked by full validation, else the
    values rebuilt from Python objects (pyarrow's list_view cast can yield invalid offsets)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.types as pt

    if pt.is_run_end_encoded(col.type):
        col = pc.run_end_decode(col)
    if col.type == target:
        return col
    try:
        out = col.cast(target)
        out.validate(full=True)
        return out
    except (pa.ArrowException, ValueError, TypeError):
        return pa.chunked_array([pa.array(c.to_pylist(), type=target) for c in col.chunks], type=target)


def arrow_for_polars(table, max_examples: int = 0) -> tuple[object, list[Finding]]:
    """``table`` (a ``pyarrow.Table``) with every column polars can read: columns with a lossless
    polars equivalent converted (:func:`_polars_type`), columns without one (union, interval,
    decimal256 over 38 digits, or a struct/list holding one) dropped, each with one ``schema.dtype``
    finding naming the column and its Arrow type: its checks did not run (``schema.dtype``: the
    column's type is not one datacheck can check; the shard is still audited, so this is not
    ``decode.unreadable``, which means the whole shard is lost).

    Returns:
        (the converted table, the findings). Raises pyarrow's errors on a failed conversion.
    """
    keep, findings = [], []
    for i, f in enumerate(table.schema):
        target = _polars_type(f.type)
        if target is None:
            findings.append(Finding(
                check="schema.dtype", severity="error", column=f.name, count=table.num_rows,
                message=(f"column {f.name!r} has the Arrow type {f.type}, which has no equivalent in the engine "
                         "(polars reads no union, interval or decimal256 over 38 digits): the column was left out, "
                         "so none of its checks ran; the other columns were audited. Store it as a plain type "
                         "(e.g. a struct of its members, or int64 months/days/nanoseconds)"),
                details={"arrow_type": str(f.type), "checks_run": False},
            ))
            continue
        keep.append((f.name, _convert_column(table.column(i), target)))
    import pyarrow as pa

    return pa.table(dict(keep)) if keep else pa.table({}), findings


def _read_parquet(path: Path) -> ShardData:
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
    except _READ_ERRORS:
        schema = None  # the polars reader below names the reason
    if schema is not None and needs_conversion(schema):
        try:
            table = pq.read_table(path)
            validate_arrow(table, "the parquet file")
            table, findings = arrow_for_polars(table)
            return ShardData(lf=pl.from_arrow(table).lazy(), decode_findings=findings)  # type: ignore[union-attr]
        except Unreadable:
            raise
        except _READ_ERRORS as exc:
            raise Unreadable(_parquet_reason(path, exc)) from None
    try:
        lf = pl.scan_parquet(path)
        lf.collect_schema()
    except _READ_ERRORS as exc:
        raise Unreadable(_parquet_reason(path, exc)) from None
    return ShardData(lf=lf)


def validate_arrow(data, where: str) -> None:
    """Full validation of Arrow data (``validate(full=True)``: every offset, index and UTF-8 string
    checked against its buffers) before polars sees it: polars trusts offsets, and a corrupt inner list
    offset kills the process (SIGSEGV/SIGBUS, issue 15). Costs one pass over the data (CPU, no copy).
    Raises :class:`Unreadable` naming ``where`` and pyarrow's reason."""
    try:
        data.validate(full=True)
    except _READ_ERRORS as exc:
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise Unreadable(f"corrupt Arrow data in {where} (full validation failed: {msg}); "
                         "the file was damaged or written by a broken writer: re-create or re-download it") from None


def _read_arrow(path: Path) -> ShardData:
    import pyarrow as pa

    try:
        size = path.stat().st_size
    except OSError as exc:
        raise Unreadable(f"cannot read file: {exc.strerror or exc}") from None
    if size == 0:
        raise Unreadable("zero-byte file (an interrupted download or write?)")
    try:
        with open(path, "rb") as f:
            head = f.read(8)
    except OSError as exc:
        raise Unreadable(f"cannot read file: {exc.strerror or exc}") from None
    try:
        if head.startswith(b"ARROW1"):
            with pa.memory_map(str(path), "r") as src:
                reader = pa.ipc.open_file(src)
                for i in range(reader.num_record_batches):
                    validate_arrow(reader.get_batch(i), f"record batch {i}")
                if needs_conversion(reader.schema):  # polars would panic on the schema: convert first
                    table, findings = arrow_for_polars(reader.read_all())
                    return ShardData(lf=pl.from_arrow(table).lazy(), decode_findings=findings)  # type: ignore[union-attr]
            lf = pl.scan_ipc(path)
            lf.collect_schema()
            return ShardData(lf=lf)
        with pa.memory_map(str(path), "r") as src:
            table = pa.ipc.open_stream(src).read_all()
        validate_arrow(table, "the stream")
        table, findings = arrow_for_polars(table) if needs_conversion(table.schema) else (table, [])
        return ShardData(lf=pl.from_arrow(table).lazy(), decode_findings=findings)  # type: ignore[union-attr]
    except Unreadable:
        raise
    except _READ_ERRORS as exc:
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise Unreadable(f"not a readable Arrow IPC file or stream (first bytes {head!r}): {msg}") from None


def _as_lists(dtype: pl.DataType) -> pl.DataType:
    """``dtype`` with every fixed-size ``Array`` (at any depth, also inside structs) made a ``List``."""
    if isinstance(dtype, pl.Array):
        return pl.List(_as_lists(dtype.inner))  # type: ignore[arg-type]
    if isinstance(dtype, pl.List):
        return pl.List(_as_lists(dtype.inner))  # type: ignore[arg-type]
    if isinstance(dtype, pl.Struct):
        return pl.Struct([pl.Field(f.name, _as_lists(f.dtype)) for f in dtype.fields])
    return dtype


def _normalize(data: ShardData) -> ShardData:
    """Fixed-size list columns (Arrow ``fixed_size_list``, polars ``Array``: e.g. Hugging Face
    ``Sequence(length=N)`` features or numpy-written parquet) are read as variable-size ``List``
    columns, so that every list check sees one list type. The cast is lazy (part of the fused query)."""
    try:
        schema = data.lf.collect_schema()
    except _READ_ERRORS as exc:
        raise Unreadable(f"cannot read the schema: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    casts = {c: _as_lists(t) for c, t in schema.items() if _as_lists(t) != t}
    if casts:
        data.lf = data.lf.with_columns([pl.col(c).cast(t) for c, t in casts.items()])
    return data


def normalize_shard(data: ShardData) -> ShardData:
    """An opened shard with fixed-size lists read as lists (see :func:`_normalize`). Raises :class:`Unreadable`."""
    return _normalize(data)


def normalize_frame(lf: pl.LazyFrame) -> ShardData:
    """An in-memory frame as an opened shard: fixed-size lists as lists (see :func:`_normalize`),
    no decode findings, no line numbers. Raises :class:`Unreadable` when its schema cannot be read."""
    return _normalize(ShardData(lf=lf))


#: format -> reader ``(path, max_examples) -> (frame, decode findings)`` (:mod:`datacheck.io.formats`)
_FORMAT_READERS = {
    "megatron": lambda p, _m: (read_megatron(p), []),
    "mds": read_mds,
    "webdataset": read_webdataset,
    "litdata": lambda p, _m: (read_litdata_chunk(p), []),
}


def _store_reason(url: str, exc: BaseException) -> str:
    msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return f"cannot read {url} from the object store (after the client's retries): {msg}"


def _open_remote(url: str, fmt: str, dataset_cfg, max_examples: int, string_columns: tuple[str, ...]) -> ShardData:
    """Open a shard in an object store (see the module docstring). Raises :class:`Unreadable`."""
    fs, path = filesystem(url)
    if fmt == "parquet":
        import pyarrow.dataset as pads
        from pyarrow.fs import FSSpecHandler, PyFileSystem

        try:
            dataset = pads.dataset(path, filesystem=PyFileSystem(FSSpecHandler(fs)), format="parquet")
            lf = pl.scan_pyarrow_dataset(dataset)
            lf.collect_schema()
        except _READ_ERRORS as exc:
            raise Unreadable(_parquet_reason(Path(path), exc, fs=fs, url=url)) from None
        return ShardData(lf=lf)
    with tempfile.TemporaryDirectory(prefix="datacheck-store-") as tmp:
        name = path.rpartition("/")[2] or "shard"
        local = Path(tmp) / name
        sources = [(path, local)]
        if fmt == "megatron":
            sources.append((path[: -len(".bin")] + ".idx", local.with_suffix(".idx")))
        for src, dst in sources:
            try:
                fs.get_file(src, str(dst))
            except _READ_ERRORS as exc:
                raise Unreadable(_store_reason(url if src == path else src, exc)) from None
        data = _open_local(local, fmt, dataset_cfg, max_examples, string_columns)
        try:
            data.lf = data.lf.collect().lazy()  # the copy is deleted when this block ends
        except _READ_ERRORS as exc:
            raise Unreadable(f"reading the data failed: {str(exc).splitlines()[0] if str(exc) else exc}") from None
        return data


def open_shard(path: Path | str, fmt: str, dataset_cfg, max_examples: int,
               string_columns: tuple[str, ...] = TEXT_NAMES) -> ShardData:
    """Open ``path`` as format ``fmt``. Raises :class:`Unreadable` with the reason and where.

    ``path``: a local file, or the URL of an object in a store (:mod:`datacheck.io.stores`; a read that
    fails after the store client's retries is :class:`Unreadable` naming the URL).

    ``string_columns``: CSV/TSV columns read as strings whatever their values look like (text
    columns: :func:`datacheck.roles.text_column_names`); other CSV columns get inferred dtypes.

    Fixed-size list (``Array``) columns come back as ``List`` columns (see :func:`_normalize`).
    """
    if isinstance(path, str) and is_url(path):
        return _normalize(_open_remote(path, fmt, dataset_cfg, max_examples, string_columns))
    return _open_local(Path(path), fmt, dataset_cfg, max_examples, string_columns)


def _open_local(path: Path, fmt: str, dataset_cfg, max_examples: int, string_columns: tuple[str, ...]) -> ShardData:
    """:func:`open_shard` for a local file."""
    if fmt == "parquet":
        return _normalize(_read_parquet(path))
    if fmt == "arrow":
        return _normalize(_read_arrow(path))
    if fmt == "jsonl":
        return _normalize(_read_jsonl(path, max_examples))
    if fmt == "json":
        return _normalize(_read_json_array(path, max_examples))
    if fmt in ("csv", "tsv"):
        return _normalize(_read_csv(path, fmt, dataset_cfg, max_examples, string_columns))
    if fmt in _FORMAT_READERS:
        try:
            df, findings = _FORMAT_READERS[fmt](path, max_examples)
        except FormatError as exc:
            raise Unreadable(exc.reason) from None
        return _normalize(ShardData(lf=df.lazy(), decode_findings=findings))
    raise Unreadable(f"unknown format {fmt!r}")
