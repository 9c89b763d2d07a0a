"""Arrow data as the engine (polars) can take it: full validation before polars sees a buffer
(:func:`validate_arrow`), and the Arrow types polars cannot read converted where a lossless polars
type exists, the other columns dropped with a ``schema.dtype`` finding each (:func:`arrow_for_polars`).
Shared by the parquet and Arrow IPC readers and the parquet batches; :func:`write_table` writes the
rows ``clean`` keeps in the shard's own form (parquet, Arrow IPC file or stream).
"""
from __future__ import annotations

import os
from pathlib import Path

from datacheck.io.shardbytes import READ_ERRORS, Unreadable
from datacheck.model.findings import Finding

__all__ = ["arrow_for_polars", "needs_conversion", "parquet_layout", "validate_arrow", "write_table"]


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


def validate_arrow(data, where: str) -> None:
    """Full validation of Arrow data (``validate(full=True)``: every offset, index and UTF-8 string
    checked against its buffers) before polars sees it: polars trusts offsets, and a corrupt inner list
    offset kills the process (SIGSEGV/SIGBUS). Costs one pass over the data (CPU, no copy).
    Raises :class:`Unreadable` naming ``where`` and pyarrow's reason."""
    try:
        data.validate(full=True)
    except READ_ERRORS as exc:
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise Unreadable(f"corrupt Arrow data in {where} (full validation failed: {msg}); "
                         "the file was damaged or written by a broken writer: re-create or re-download it") from None


#: a parquet column chunk's codec (``ColumnChunkMetaData.compression``) as ``pyarrow.parquet.write_table``
#: names it; a codec pyarrow does not write (``LZO``) is not kept
_CODECS = {"UNCOMPRESSED": "none", "SNAPPY": "snappy", "GZIP": "gzip", "BROTLI": "brotli", "LZ4": "lz4",
           "LZ4_RAW": "lz4", "ZSTD": "zstd"}


def parquet_layout(path: Path) -> dict[str, object]:
    """How the local parquet file ``path`` is laid out, as keyword arguments of
    ``pyarrow.parquet.write_table``: ``row_group_size`` (rows of its largest row group) and
    ``compression`` (the codec of its column chunks, when they share one that pyarrow writes). {} when
    it has no row group or cannot be read (the caller writes pyarrow's defaults). A rewritten copy
    (``clean``) written with them reads as the input does: the same codec, row groups no larger."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        meta = pq.ParquetFile(path).metadata
    except (OSError, ValueError, pa.ArrowException):
        return {}
    if meta.num_row_groups == 0:
        return {}
    out: dict[str, object] = {"row_group_size": max(1, max(meta.row_group(i).num_rows
                                                           for i in range(meta.num_row_groups)))}
    rg = meta.row_group(0)
    codecs = {rg.column(j).compression for j in range(rg.num_columns)}
    if len(codecs) == 1 and (codec := _CODECS.get(next(iter(codecs)))) is not None:
        out["compression"] = codec
    return out


def write_table(table, path: Path, kind: str, layout: dict[str, object] | None = None) -> None:
    """Write the pyarrow ``table`` to ``path`` as ``kind`` (``"parquet"``, ``"ipc_file"`` or
    ``"ipc_stream"``: the writer kind :func:`datacheck.formats.registry.read_table` gave), synced to disk.
    ``layout``: for parquet, ``write_table`` keyword arguments (:func:`parquet_layout` of the input:
    its row group size and codec); None: pyarrow's defaults."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "parquet":
        pq.write_table(table, path, **(layout or {}))  # type: ignore[arg-type]
    else:
        with pa.OSFile(str(path), "wb") as sink:
            opener = pa.ipc.new_file if kind == "ipc_file" else pa.ipc.new_stream
            with opener(sink, table.schema) as w:
                w.write_table(table)
    with open(path, "rb+") as f:
        os.fsync(f.fileno())
