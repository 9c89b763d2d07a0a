"""JSON records as polars frames, shared by the JSONL and JSON-array readers (:mod:`datacheck.formats.jsonl`).

- A chunk of JSONL lines is parsed by ``pl.read_ndjson`` when it can be taken as written
  (:func:`_fast_chunk`: valid UTF-8, no blank line, nesting within :data:`MAX_JSON_DEPTH`, and no
  string-bearing column whose JSON types polars may have changed, :func:`_types_as_written`), else
  line by line (``jsonl_records``: every bad line reported with its 1-based line number, byte offset
  and the parser's message; the good records still audited). :func:`jsonl_chunks` yields the chunks
  of a file (plain, ``.gz``, ``.zst``: decompressed as a stream, :data:`JSONL_CHUNK_BYTES` of whole
  lines each).
- A column's JSON type is decided over the whole file (the most common kind wins; a value of another
  kind is read as null with a ``schema.dtype`` finding naming its lines).
- A column's dtype is its values' dtypes joined by one rule, :func:`join_dtypes` (the rule of
  polars' NDJSON parser: ints beside floats are Float64, an int beyond Int64 makes Int128, Null
  joins anything, lists join their items, objects join field by field; a number or a boolean never
  becomes a string), row by row on the per-line path (:func:`_column_series`) and chunk by chunk
  (:func:`datacheck.formats.jsonl.open_jsonl`): the same dtype whatever the chunking. Values whose
  dtypes do not join (a field that is a number in one line and a string in another, array items
  of several types, an integer beyond 128 bits) make the column null with a ``schema.dtype``
  finding (:data:`TYPES_CHANGE`, :data:`BEYOND_128_BITS`).
- Records parsed by ``json.loads`` (NaN/Infinity are floats, big integers exact) become a frame with
  :func:`_frame_from_records` (the JSON-array reader).
"""
from __future__ import annotations

import io
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import polars as pl

from datacheck.formats.base import ShardData
from datacheck.formats.findings import bad_record_finding, blank_finding, long_line_message, utf8_finding
from datacheck.formats.records import VALUE_BYTES, jsonl_records, many_values_line, strip_bom
from datacheck.io.safejson import MAX_JSON_DEPTH, max_line_depth
from datacheck.io.shardbytes import READ_ERRORS, LongLine, Unreadable, bounded_line_chunks
from datacheck.io.structs import with_sorted_fields
from datacheck.model.findings import Example, Finding, show_value

__all__ = ["BEYOND_128_BITS", "JSONL_CHUNK_BYTES", "TYPES_CHANGE", "join_dtypes", "jsonl_chunks"]

#: JSON values of one line parsed by polars at most (:func:`_fast_chunk`): its parser held about 130 bytes a
#: value (a line of 10**7 ``1,``, 19 MiB: 1,271 MiB peak), Python's ``json`` 8 to 36 (105 MiB); a chunk with a
#: line of more takes the per-line path
FAST_VALUES = 1 << 20

#: Decompressed bytes of one JSONL chunk (whole lines; a longer line makes a longer chunk).
JSONL_CHUNK_BYTES = 16 * 2**20  # 16 MiB: pass 1 peaks ~100 MiB lower than at 32 MiB, no slower (bench_jsonl_stream.py)


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
    except READ_ERRORS:
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
        except READ_ERRORS:
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


def mixed_types_finding(name: str, major: str, n_bad: int, n_present: int, total: int,
                        by_type: dict[str, list[int]], by_count: dict[str, int], max_examples: int,
                        examples: tuple[Example, ...]) -> Finding:
    """``schema.dtype`` for a JSON column whose values are of several kinds: ``n_bad`` of its
    ``n_present`` values are not of the ``major`` kind and were read as null (``by_type``: kind -> the
    first lines holding it, ``by_count``: kind -> values; ``examples`` carry row, kind, value, line)."""
    others = ", ".join(f"{k} at {_lines_text_counted(ls, by_count[k])}" for k, ls in by_type.items() if k != major)
    return Finding(
        check="schema.dtype", severity="error", column=name, count=n_bad, ratio=n_bad / total,
        message=(f"column {name!r} mixes JSON types: mostly {major} ({n_present - n_bad} "
                 f"row(s)), but {others}. Those values were read as null; the other rows were audited. "
                 "Write one JSON type per column."),
        rows=tuple(e.row for e in examples if e.row is not None),
        lines=tuple(e.line for e in examples if e.line is not None),
        examples=examples,
        details={"json_types": {k: ls[:max_examples] for k, ls in by_type.items()}, "read_as": major},
        rows_truncated=n_bad > max_examples,
    )


def major_kind(counts: dict[str, int], star_seen: bool) -> str | None:
    """The JSON kind most values of a column have (``counts``: kind -> values; ties go to the kind
    met first); ``array<*>`` (only empty arrays, any item type) when nothing else was seen; None for a
    column of nulls only."""
    if not counts and star_seen:
        return "array<*>"
    return max(counts, key=lambda k: counts[k]) if counts else None


def _compatible(kind: str, major: str) -> bool:
    """An empty array (``array<*>``) fits any array type."""
    return kind == major or (kind == "array<*>" and major.startswith("array<"))


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


#: why a column's values cannot be one column (the same words whatever chunks its values were parsed in)
TYPES_CHANGE = "an object's field or an array's items change type between rows"
#: why a column holding an integer beyond 128 bits cannot be one column
BEYOND_128_BITS = "an integer beyond 128 bits, which no column type holds"


class _Beyond128Bits(ValueError):
    """An integer outside Int128's range: no column dtype holds it (:data:`BEYOND_128_BITS`)."""


def join_dtypes(a: pl.DataType, b: pl.DataType) -> pl.DataType | None:
    """The dtype of one column whose values have dtype ``a`` in some rows (or chunks) and ``b`` in
    others, by the rule polars' NDJSON parser follows over a whole file, or None when they do not
    form one column. Null joins any dtype; numbers widen (Float64 beside a float, Int128 beside an
    int beyond Int64); lists join their items; objects (structs) join field by field, a field
    missing on one side kept as it is. Nothing else joins: a number or a boolean is never read as a
    string, nor a list as a value (``pl.concat(how="diagonal_relaxed")`` would turn ``{"a": 1}``
    beside ``{"a": "x"}`` into the string ``"1"``, and fails on ``{"a": [1]}`` beside ``{"a": 1}``)."""
    if a == b:
        return a
    if a == pl.Null:
        return b
    if b == pl.Null:
        return a
    if a.is_numeric() and b.is_numeric():
        if a.is_float() or b.is_float():
            return pl.Float64()
        return a if a == pl.Int128 else b if b == pl.Int128 else pl.Int128()
    if isinstance(a, pl.List) and isinstance(b, pl.List):
        inner = join_dtypes(a.inner, b.inner)  # type: ignore[arg-type]
        return None if inner is None else pl.List(inner)
    if isinstance(a, pl.Struct) and isinstance(b, pl.Struct):
        fields = {f.name: f.dtype for f in a.fields}
        for f in b.fields:
            t = join_dtypes(fields[f.name], f.dtype) if f.name in fields else f.dtype
            if t is None:
                return None
            fields[f.name] = t
        return pl.Struct(fields)
    return None


# the dtypes most values have, made once: a column's rows mostly share one of them (compared by identity)
_NULL, _INT64, _INT128, _FLOAT64 = pl.Null(), pl.Int64(), pl.Int128(), pl.Float64()
_LISTS = {t: pl.List(t) for t in (_NULL, _INT64, _INT128, _FLOAT64)}
_SCALAR_DTYPES: dict[type, pl.DataType] = {bool: pl.Boolean(), float: _FLOAT64, str: pl.String()}


def _int_dtype(values: list[int]) -> pl.DataType:
    """Int64, else Int128, for the ints ``values``. Raises :class:`_Beyond128Bits`."""
    lo, hi = min(values), max(values)
    if -2**63 <= lo and hi < 2**63:
        return _INT64
    if -2**127 <= lo and hi < 2**127:
        return _INT128
    raise _Beyond128Bits


def _value_dtype(v: Any) -> pl.DataType | None:
    """The dtype polars' NDJSON parser gives the JSON value ``v`` (as ``json.loads`` returns it), or
    None when its parts do not join (:func:`join_dtypes`). Raises :class:`_Beyond128Bits`."""
    if v is None:
        return _NULL
    if isinstance(v, int) and not isinstance(v, bool):
        return _int_dtype([v])
    t = _SCALAR_DTYPES.get(type(v))
    if t is not None:
        return t
    if isinstance(v, list):
        kinds = {type(x) for x in v} - {type(None)}
        if kinds <= {int}:  # a list of ints (token ids): no walk item by item
            items = [x for x in v if x is not None] if None in v else v
            return _LISTS[_int_dtype(items) if items else _NULL]
        if kinds <= {int, float}:
            return _LISTS[_FLOAT64]
        joined: pl.DataType | None = _NULL
        for x in v:
            xt = _value_dtype(x)
            joined = None if xt is None or joined is None else join_dtypes(joined, xt)
            if joined is None:
                return None
        return pl.List(joined)
    if isinstance(v, dict):
        fields = {}
        for k, x in v.items():
            xt = _value_dtype(x)
            if xt is None:
                return None
            fields[k] = xt
        return pl.Struct(fields)
    return None


def _conform(v: Any, dtype: pl.DataType) -> Any:
    """``v`` with its ints written as floats where ``dtype`` reads them as Float64 (polars' builder
    refuses an int among the floats of a struct's list; outside structs it converts them itself)."""
    if v is None:
        return None
    if dtype == pl.Float64 and isinstance(v, int) and not isinstance(v, bool):
        return float(v)
    if isinstance(dtype, pl.List) and isinstance(v, list):
        return [_conform(x, dtype.inner) for x in v]  # type: ignore[arg-type]
    if isinstance(dtype, pl.Struct) and isinstance(v, dict):
        return {f.name: _conform(v.get(f.name), f.dtype) for f in dtype.fields}
    return v


def _holds(dtype: pl.DataType, what: type) -> bool:
    """Whether ``dtype`` is, or holds in its lists and struct fields, a dtype of the class ``what``."""
    if isinstance(dtype, what):
        return True
    if isinstance(dtype, pl.List):
        return _holds(dtype.inner, what)  # type: ignore[arg-type]
    if isinstance(dtype, pl.Struct):
        return any(_holds(f.dtype, what) for f in dtype.fields)
    return False


def _column_series(name: str, values: list) -> pl.Series | str:
    """The column of the Python values ``values`` (``json.loads``), with the dtype polars' NDJSON
    parser gives them: every value's dtype (:func:`_value_dtype`) joined (:func:`join_dtypes`), so a
    column's dtype does not depend on which rows share a chunk, and every value kept as written
    (ints beside floats as Float64, as the parser reads them). Polars' own builder is not trusted
    with the dtype: it takes a list column's item type from its first list (``[[1], [2.5]]`` became
    ``List(Int64)``, 2.5 read as 2), a struct's fields from the first object (a later field
    dropped), UInt64 for ints the parser reads as Int128.

    Returns why not when the values do not form one column: :data:`BEYOND_128_BITS`, else
    :data:`TYPES_CHANGE`."""
    dtype: pl.DataType | None = _NULL
    last = None  # the dtype joined last: rows mostly repeat it (the same object, see _INT64)
    try:
        for v in values:
            t = _value_dtype(v)
            if t is None:
                return TYPES_CHANGE
            if t is last:
                continue
            dtype = None if dtype is None else join_dtypes(dtype, t)
            if dtype is None:
                return TYPES_CHANGE
            last = t
    except _Beyond128Bits:
        return BEYOND_128_BITS
    assert dtype is not None
    objects = _holds(dtype, pl.Struct)
    data = [_conform(v, dtype) for v in values] if objects and _holds(dtype, pl.Float64) else values
    try:
        got = pl.Series(name, data, dtype=dtype, strict=True)
    except (TypeError, OverflowError, ValueError, pl.exceptions.PolarsError):
        return TYPES_CHANGE
    if objects:  # every field kept (checked, as polars' struct builder is lax)
        if not all(_same_json(a, b) for a, b in zip(data, got.to_list())):
            return TYPES_CHANGE
    return got


def _lines_text(lines: list[int]) -> str:
    shown = ", ".join(map(str, lines[:5])) + (f" (+{len(lines) - 5} more)" if len(lines) > 5 else "")
    return f"line {shown}" if len(lines) == 1 else f"lines {shown}"


def _rows_text(rows: list[int]) -> str:
    shown = ", ".join(map(str, rows[:5])) + (f" (+{len(rows) - 5} more)" if len(rows) > 5 else "")
    return f"row {shown}" if len(rows) == 1 else f"rows {shown}"


def _frame_from_records(values: list[dict], line_of_row: list[int] | None, max_examples: int,
                        retyped: dict[str, np.ndarray] | None = None) -> tuple[pl.DataFrame, list[Finding]]:
    """The rows of the parsed JSON records (``json.loads``: ``NaN``/``Infinity`` are floats, big
    integers exact) as a frame, with one ``schema.dtype`` finding per column that mixes JSON types.

    A column is read as its most common JSON type (rows counted; ties: the type seen first); a value
    of another type is read as null and its line reported (the finding's ``lines`` and
    ``details["json_types"]``: JSON type -> 1-based lines), so the other rows are still audited;
    its rows (0-based, int64) are put in ``retyped`` under the column's name when it is given.
    ``line_of_row`` None (records that share lines: a JSON array written on one line): the finding
    names rows only, and ``details["json_types"]`` maps each JSON type to 0-based rows.
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
                    by_type.setdefault(k if not _compatible(k, major) else major, []).append(  # type: ignore[arg-type]
                        i if line_of_row is None else line_of_row[i])
            where = _rows_text if line_of_row is None else _lines_text
            others = ", ".join(f"{k} at {where(ls)}" for k, ls in by_type.items() if k != major)
            findings.append(Finding(
                check="schema.dtype", severity="error", column=name, count=len(bad), ratio=len(bad) / len(col),
                message=(f"column {name!r} mixes JSON types: mostly {major} ({len(col) - len(bad) - kinds.count(None)} "
                         f"row(s)), but {others}. Those values were read as null; the other rows were audited. "
                         "Write one JSON type per column."),
                rows=tuple(bad[:max_examples]),
                lines=() if line_of_row is None else tuple(line_of_row[i] for i in bad[:max_examples]),
                examples=tuple(Example(row=i, value=f"{kinds[i]}: {show_value(col[i], 60)}",
                                       line=None if line_of_row is None else line_of_row[i])
                               for i in bad[:max_examples]),
                details={"json_types": {k: ls[:max_examples] for k, ls in by_type.items()}, "read_as": major},
                rows_truncated=len(bad) > max_examples,
            ))
            for i in bad:
                col[i] = None
            if retyped is not None:
                retyped[name] = np.asarray(bad, dtype=np.int64)
        built = _column_series(name, col)
        if isinstance(built, str):
            if retyped is not None:  # the whole column is read as null, which this finding says
                retyped.pop(name, None)
            findings.append(Finding(
                check="schema.dtype", severity="error", column=name, count=len(col) - kinds.count(None),
                message=(f"column {name!r}: its JSON values do not form one column ({built}); the column was "
                         "read as null, the other columns were audited. Write one JSON type per field."),
                details={"reason": built},
            ))
            built = pl.Series(name, [None] * len(col), dtype=pl.Null)
        series.append(built)
    return _frame_of(series), findings


def _fast_chunk(data: bytes) -> pl.DataFrame | None:
    """One chunk of JSONL lines (no BOM) parsed by ``pl.read_ndjson``: one row a line with the types
    as written, or None when the chunk needs the exact per-line path (invalid UTF-8, a blank line, a
    line nested deeper than :data:`MAX_JSON_DEPTH`, a parse error, types polars would change)."""
    if many_values_line(data, FAST_VALUES):
        return None  # the per-line path: json holds 8 bytes a value where polars' parser held about 130
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
    except READ_ERRORS:
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


def _frame_of(series: list[pl.Series]) -> pl.DataFrame:
    """A frame of ``series`` with their names as written: a JSON key ``""`` stays the column ``""``
    (``pl.DataFrame`` of a list of Series renames an unnamed one ``column_<i>``)."""
    return pl.DataFrame({s.name: s for s in series})


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
            df = _frame_of([*df.get_columns(), *missing])
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
    return _frame_of(series), broken, empties


def _broken_finding(name: str, why: str, count: int) -> Finding:
    """``schema.dtype`` of a column whose JSON values do not form one column (``count``: its non-null values)."""
    return Finding(
        check="schema.dtype", severity="error", column=name, count=count,
        message=(f"column {name!r}: its JSON values do not form one column ({why}); the column was "
                 "read as null, the other columns were audited. Write one JSON type per field."),
        details={"reason": why},
    )


def _join_pieces(pieces: list[_Piece], max_examples: int,
                 retyped: dict[str, np.ndarray] | None = None) -> tuple[pl.DataFrame, list[Finding]]:
    """The frame of a JSONL file's chunks, and the ``schema.dtype`` findings of columns that mix JSON
    types, exactly as :func:`_frame_from_records` decides them over the whole file: a column's kind
    is its most common JSON type over all chunks (ties: the one seen first), and a value of another
    kind, in any chunk, is read as null with its line reported.

    The chunks' frames are then joined like ``pl.concat(how="diagonal_relaxed")`` (the schema a
    whole-file parse infers): a column absent from a chunk is null there, numbers that are ints in
    one chunk and floats in another are Float64, struct fields are the union of the chunks' fields;
    columns come in the order they first appear in the file. The rows read as null (0-based, int64)
    go into ``retyped`` under their column's name when it is given (not for a column read as null
    as a whole).
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
        major = major_kind(counts, star_seen)
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
        findings.append(mixed_types_finding(
            name, major, n_bad, n_present, total, by_type, by_count, max_examples,
            tuple(Example(row=starts[pi] + r, value=f"{x}: {show_value(_value_at(pieces[pi], name, r), 60)}",
                          line=int(pieces[pi].lines[r])) for pi, r, x in bad)))
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
    if retyped is not None:
        parts: dict[str, list[np.ndarray]] = {}
        for pi, cols in nulled.items():
            for name, rows in cols.items():
                if name not in broken:
                    parts.setdefault(name, []).append(rows.astype(np.int64) + starts[pi])
        retyped.update({name: np.concatenate(got) for name, got in parts.items()})
    try:
        df = frames[0] if len(frames) == 1 else pl.concat(frames, how="diagonal_relaxed", rechunk=True)
    except READ_ERRORS as exc:
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


def _long_line_chunk(long: LongLine, line0: int, off0: int, limit: int) -> _JsonlChunk:
    """A line over the bound (:class:`~datacheck.io.shardbytes.LongLine`) as a chunk of no rows and one
    bad record (its 1-based line and byte offset); its CRC-32 is of its length and first bytes."""
    text = long.head.decode("utf-8", errors="replace") + "..."
    crc = zlib.crc32(long.head, long.length & 0xFFFFFFFF)
    return _JsonlChunk(_Piece(rows=0, lines=np.zeros(0, dtype=np.int64), values=[]),
                       [(line0 + 1, off0, long_line_message(long.length, limit), text)], [], [], 1, long.nbytes,
                       True, crc)


def jsonl_chunks(path: Path, chunk_bytes: int | None = None, fast: list[bool] | None = None,
                 max_line: int | None = None) -> Iterator[_JsonlChunk]:
    """A JSONL file (plain, ``.gz``, ``.zst``) chunk by chunk (:func:`~datacheck.io.shardbytes.line_chunks`, :data:`JSONL_CHUNK_BYTES`
    read at call time): a chunk is parsed by polars (:func:`_fast_chunk`) or, when that fails, line
    by line (``jsonl_records``: the bad lines, blank lines and invalid UTF-8 of that chunk only, with
    the file's line numbers and byte offsets). ``chunk_bytes``: the chunk size (default
    :data:`JSONL_CHUNK_BYTES`). Deterministic: reading the file again with the same chunk size gives
    the same chunks (the streamed JSONL source, :mod:`datacheck.formats.jsonl`, relies on it).
    ``fast``: for a second read, whether each chunk took the fast path in the first (its checks are
    not repeated: the chunk is parsed by ``pl.read_ndjson`` directly; ``crc32`` tells whether its
    bytes changed). ``max_line``: a line of more bytes (``[dataset] max_row_bytes``; None: no bound)
    is never held nor parsed: it comes as a chunk of its own with no rows and one bad record naming its
    line, byte offset and length (:func:`~datacheck.io.shardbytes.bounded_line_chunks`), and the
    other lines are read as before. Raises :class:`Unreadable`."""
    line0 = off0 = 0
    size = JSONL_CHUNK_BYTES if chunk_bytes is None else chunk_bytes  # read at call time (tests shrink it)
    for k, chunk in enumerate(bounded_line_chunks(path, size, max_line)):
        if isinstance(chunk, LongLine):
            yield _long_line_chunk(chunk, line0, off0, max_line or 0)
            line0 += 1
            off0 += chunk.nbytes
            continue
        data, b = strip_bom(chunk) if k == 0 else (chunk, 0)
        n_lines = data.count(b"\n") + (0 if not data or data.endswith(b"\n") else 1)
        if fast is not None and k < len(fast) and fast[k]:
            try:
                df = pl.read_ndjson(data, infer_schema_length=None)
            except READ_ERRORS as exc:
                raise Unreadable(f"the file changed while it was being read: {str(exc).splitlines()[0]}") from None
        elif max_line is not None and many_values_line(data, max_line // VALUE_BYTES):
            df = None  # a line of more values than a row holds: refused on the per-line path, never parsed
        else:
            df = _fast_chunk(data)
        bad: list[tuple[int, int, str, str]] = []
        blank: list[tuple[int, int]] = []
        utf8_bad: list[tuple[int, int, int, bytes]] = []
        if df is not None:
            piece = _Piece(rows=df.height, lines=np.arange(line0 + 1, line0 + 1 + df.height, dtype=np.int64), frame=df)
        else:
            split = jsonl_records(chunk if k == 0 else b"\n" + chunk, max_line)
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
        findings.append(utf8_finding(utf8_bad, max_examples))
    if bad:
        findings.append(bad_record_finding(bad, total_lines, max_examples))
    if blank:
        findings.append(blank_finding(blank, max_examples))
    return findings


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
    retyped: dict[str, np.ndarray] = {}
    df, typed = _join_pieces(pieces, max_examples, retyped)
    df = with_sorted_fields(df)  # a JSON object's keys have no order (io/structs.py)
    findings.extend(typed)
    if not slow:
        return ShardData(lf=df.lazy(), decode_findings=findings, line_format=True, line_base=1, retyped=retyped)
    return ShardData(lf=df.lazy(), decode_findings=findings, line_format=True,
                     line_of_row=np.concatenate([p.lines for p in pieces]), retyped=retyped)
