"""A struct's fields in name order: the canonical form of a JSON object's value (its keys have no order).

Polars orders a struct's fields as its reader met them: a JSONL file whose objects vary in their keys
got ``{a, b}`` read whole and ``{b, a}`` in chunks of one line, and a parquet file has its writer's
order. Two users of this order:

- the JSONL readers (:mod:`datacheck.formats.jsonl`) give every
  struct column its fields in name order, so the frame (dtype in the report, examples) does not
  depend on how the file was cut into chunks;
- the row content hash (:mod:`datacheck.io.rowhash`, ``datacheck-row-v3`` on) hashes a struct's
  fields in name order, so the same objects hash alike in a JSONL and a parquet shard.
"""
from __future__ import annotations

import polars as pl

__all__ = ["sorted_fields", "sorted_expr", "with_sorted_fields", "sorted_series"]


def sorted_fields(dtype: pl.DataType) -> pl.DataType:
    """``dtype`` with the fields of every struct in it (at any depth, in lists and arrays too) sorted
    by name; other dtypes unchanged."""
    if isinstance(dtype, pl.Struct):
        return pl.Struct({f.name: sorted_fields(f.dtype) for f in sorted(dtype.fields, key=lambda f: f.name)})
    if isinstance(dtype, pl.List):
        return pl.List(sorted_fields(dtype.inner))
    if isinstance(dtype, pl.Array):
        return pl.Array(sorted_fields(dtype.inner), dtype.shape)
    return dtype


def sorted_expr(e: pl.Expr, dtype: pl.DataType) -> pl.Expr:
    """``e`` (of ``dtype``) rebuilt with :func:`sorted_fields`' field order; a null struct stays null
    (polars cannot cast a struct to one whose fields are in another order)."""
    if isinstance(dtype, pl.Struct):
        fields = sorted(dtype.fields, key=lambda f: f.name)
        rebuilt = pl.struct([sorted_expr(e.struct.field(f.name), f.dtype).alias(f.name) for f in fields])
        return pl.when(e.is_null()).then(pl.lit(None, dtype=sorted_fields(dtype))).otherwise(rebuilt)
    if isinstance(dtype, pl.List):
        return e.list.eval(sorted_expr(pl.element(), dtype.inner))
    if isinstance(dtype, pl.Array):
        return e.arr.to_list().list.eval(sorted_expr(pl.element(), dtype.inner)).list.to_array(dtype.size)
    return e


def with_sorted_fields(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` with every struct's fields in name order; a frame without a struct out of order is
    returned as it is (no copy)."""
    change = [c for c, t in df.schema.items() if sorted_fields(t) != t]
    if not change:
        return df
    return df.with_columns([sorted_expr(pl.col(c), df.schema[c]).alias(c) for c in change])


def sorted_series(s: pl.Series) -> pl.Series:
    """``s`` with every struct's fields in name order (``s`` itself when they are)."""
    if sorted_fields(s.dtype) == s.dtype:
        return s
    return s.to_frame().select(sorted_expr(pl.col(s.name), s.dtype).alias(s.name)).to_series()
