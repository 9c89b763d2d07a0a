"""Expression helpers shared by the check families (scalar, list and nested-list columns alike)."""
from __future__ import annotations

from typing import Any, Callable

import polars as pl

from datacheck.model.findings import EXAMPLE_LENGTH, EXAMPLE_POSITION, EXAMPLE_TEXT
from datacheck.model.roles import INT64_MAX, inner_dtype, is_list

__all__ = ["struct_float_fields", "supervised_total", "flat_list", "any_element", "count_elements", "first_bad", "first_at", "value_counts", "is_int", "is_numeric", "int_max",
           "as_int64"]

Pred = Callable[[pl.Expr], pl.Expr]


def flat_list(col: str, dtype: pl.DataType) -> pl.Expr:
    """``col`` as a one-level list (Arrays become Lists; nested lists are flattened per row)."""
    e = pl.col(col)
    depth = 0
    t = dtype
    while isinstance(t, (pl.List, pl.Array)):
        if isinstance(t, pl.Array) and depth == 0:
            e = e.arr.to_list() if not isinstance(t.inner, pl.Array) else e.cast(pl.List(pl.List(inner_dtype(t))))
        depth += 1
        t = t.inner  # type: ignore[assignment]
    for _ in range(depth - 1):
        e = e.list.eval(pl.element().explode())
    return e


def _float_leaves(t: pl.DataType, path: str, in_struct: bool) -> list[tuple[str, Callable[[pl.Expr], pl.Expr], bool]]:
    """(path, f, scalar) for every float leaf of ``t`` under a struct: ``f`` maps an expression of
    dtype ``t`` to the leaf's values (a scalar when ``scalar``, else a flat list)."""
    if t.is_float():
        return [(path, lambda e: e, True)] if in_struct else []
    out: list[tuple[str, Callable[[pl.Expr], pl.Expr], bool]] = []
    if isinstance(t, pl.Struct):
        for f in t.fields:
            for p, fn, sc in _float_leaves(f.dtype, f"{path}.{f.name}", True):
                out.append((p, lambda e, fn=fn, n=f.name: fn(e.struct.field(n)), sc))
    elif isinstance(t, (pl.List, pl.Array)):
        for p, fn, sc in _float_leaves(t.inner, f"{path}[]", in_struct):  # type: ignore[arg-type]
            if sc:
                out.append((p, lambda e, fn=fn: e.list.eval(fn(pl.element())), False))
            else:
                out.append((p, lambda e, fn=fn: e.list.eval(fn(pl.element()).explode()), False))
    return out


def struct_float_fields(col: str, dtype: pl.DataType) -> list[tuple[str, pl.Expr, bool]]:
    """Float fields inside structs of ``col`` (e.g. ``messages[].loss_weight`` of a chat column,
    List(Struct{role, content, loss_weight: Float64})): ``(path, values, scalar)`` per field, where
    ``values`` is per row the field's value (``scalar``) or a flat list of its values at any depth."""
    return [(p, fn(pl.col(col) if not isinstance(dtype, pl.Array) else pl.col(col).arr.to_list()), sc)
            for p, fn, sc in _float_leaves(dtype, col, False)]


def any_element(col: str, dtype: pl.DataType, pred: Pred) -> pl.Expr:
    """Per row: does any value (the scalar itself, or any element of the list) satisfy ``pred``?"""
    if not is_list(dtype):
        return pred(pl.col(col))
    return flat_list(col, dtype).list.eval(pred(pl.element())).list.any()


def count_elements(col: str, dtype: pl.DataType, pred: Pred) -> pl.Expr:
    """Aggregate: number of values (elements, for lists) that satisfy ``pred`` in the shard."""
    if not is_list(dtype):
        return pred(pl.col(col)).sum()
    return flat_list(col, dtype).list.eval(pred(pl.element()).cast(pl.UInt32)).list.sum().sum()


def first_bad(col: str, dtype: pl.DataType, pred: Pred, null_text: str | None = None) -> pl.Expr:
    """Per row, for examples: ``"first at position {pos} of {len}: {value}"`` of the first element
    satisfying ``pred`` (or the scalar itself). For lists, a struct of that text
    (:data:`~datacheck.model.findings.EXAMPLE_TEXT`), the position and the length, which the engine
    turns into :meth:`Example.of <datacheck.model.findings.Example.of>`. With ``null_text``, a null element found by ``pred``
    shows as that text (e.g. ``"null id"``) instead of blanking the whole example."""
    if not is_list(dtype):
        return pl.col(col)
    lst = flat_list(col, dtype)
    pos = lst.list.eval(pl.arg_where(pred(pl.element())).first()).list.first()
    val = lst.list.eval(pl.element().filter(pred(pl.element())).first()).list.first()
    if null_text is not None:
        val = val.cast(pl.String).fill_null(null_text)
    n = lst.list.len()
    return pl.struct(pl.format("first at position {} of {}: {}", pos, n, val).alias(EXAMPLE_TEXT),
                     pos.alias(EXAMPLE_POSITION), n.alias(EXAMPLE_LENGTH))


def first_at(cols: list[str], pred: Callable[..., bool], show: Callable[..., str],
             count: pl.Expr | None = None, what: str = "") -> pl.Expr:
    """Per row, for examples of a rule over several aligned lists (evaluated in the second pass, on
    example rows only, so a Python function per row is fine): the :data:`EXAMPLE_TEXT` struct of the
    first position ``k`` where ``pred(a[k], b[k], ...)`` holds (one argument per column of ``cols``),
    shown as ``"{count} {what}; first at position {k} of {len}: {show(a[k], b[k], ...)}"`` (the count
    part only with ``count``, a per-row expression). Null when the lists are null or no position fails."""
    def one(r: dict[str, Any]) -> dict[str, Any] | None:
        vals = [r[c] for c in cols]
        if any(v is None for v in vals):
            return None
        for k in range(min(len(v) for v in vals)):
            at = [v[k] for v in vals]
            if None not in at and pred(*at):
                head = f"{r['__n']} {what}; " if count is not None else ""
                return {EXAMPLE_TEXT: f"{head}first at position {k} of {len(vals[0])}: {show(*at)}",
                        EXAMPLE_POSITION: k, EXAMPLE_LENGTH: len(vals[0])}
        return None

    fields = [pl.col(c) for c in cols] + ([count.alias("__n")] if count is not None else [])
    return pl.struct(fields).map_elements(one, return_dtype=pl.Struct(
        {EXAMPLE_TEXT: pl.String, EXAMPLE_POSITION: pl.Int64, EXAMPLE_LENGTH: pl.Int64}))


def value_counts(expr: pl.Expr, limit: int = 20) -> pl.Expr:
    """Aggregate: the most common values of ``expr`` as a list of {value, count} structs."""
    return expr.value_counts(sort=True, name="count").head(limit).implode()


def is_int(dtype: pl.DataType) -> bool:
    return dtype.is_integer()


def is_numeric(dtype: pl.DataType) -> bool:
    return dtype.is_numeric()


def int_max(dtype: pl.DataType) -> int | None:
    """Largest value an integer dtype can hold (None for non-integers)."""
    table = {pl.Int8: 2**7 - 1, pl.Int16: 2**15 - 1, pl.Int32: 2**31 - 1, pl.Int64: 2**63 - 1,
             pl.UInt8: 2**8 - 1, pl.UInt16: 2**16 - 1, pl.UInt32: 2**32 - 1, pl.UInt64: 2**64 - 1}
    for t, m in table.items():
        if dtype == t:
            return m
    return None


def id_storage_cap(dtype: pl.DataType, vocab_size: int) -> int | None:
    """The largest id the (element) integer type of ``dtype`` can store, when that is below
    ``vocab_size - 1`` (``tokens.dtype_overflow``: e.g. uint16, max 65535, for mBERT's 119547); else None."""
    cap = int_max(inner_dtype(dtype))
    return cap if cap is not None and cap < vocab_size - 1 else None


def counts_to_pairs(vc: list[dict] | None) -> list[list]:
    """``value_counts`` output (list of {value, count}) as ``[[value, count], ...]``."""
    if not vc:
        return []
    return [[_value_of(d), d.get("count")] for d in vc]


def _value_of(d: dict) -> Any:
    """The value of a ``value_counts`` entry: its first field other than ``count``."""
    items = iter(d.items())
    k, v = next(items)
    if k == "count":
        k, v = next(items)
    return v


def as_int64(col: str, dtype: pl.DataType) -> pl.Expr:
    """Column ``col`` of dtype ``dtype`` (a scalar or one list level) as ``Int64`` /
    ``List(Int64)``, for arithmetic that needs signed values: a ``UInt64`` value beyond Int64
    (``2**63`` and above) is read as Int64's largest value ``2**63 - 1`` (a strict cast raised on
    it, failing the check on data it should judge). No row length, offset, position or vocabulary
    reaches that value, so such a row still breaks the rule it broke. Other dtypes are cast as
    before (strictly)."""
    e = pl.col(col)
    listed = is_list(dtype)
    if inner_dtype(dtype) == pl.UInt64:
        e = e.list.eval(pl.element().clip(upper_bound=INT64_MAX)) if listed else e.clip(upper_bound=INT64_MAX)
    return e.cast(pl.List(pl.Int64) if listed else pl.Int64)


def positions_count(cols: list[str], pred: Callable[..., pl.Expr],
                    schema: dict[str, pl.DataType] | None = None) -> pl.Expr:
    """Per row: how many positions ``p`` satisfy ``pred(col0[p], col1[p], ...)``, for list columns of
    equal length in that row (rows whose lengths differ give null; they are ``length.mismatch``).

    The lists are concatenated into one Int64 list and split back by position inside ``list.eval``
    (``pl.len() // k``), which keeps every operation inside polars' list kernels; element-wise
    arithmetic between two list columns is avoided on purpose (it panicked in polars 2.1 inside
    large fused queries). With ``schema`` (the shard's dtypes), each column is read by
    :func:`as_int64` (a uint64 value beyond Int64 at Int64's largest value, not a cast error).
    """
    k = len(cols)
    lens = [pl.col(c).list.len() for c in cols]
    same = pl.all_horizontal([x == lens[0] for x in lens[1:]]) if k > 1 else pl.lit(True)
    both = pl.concat_list([as_int64(c, schema[c]) if schema is not None and c in schema
                           else pl.col(c).cast(pl.List(pl.Int64)) for c in cols])
    n = pl.len() // k
    parts = [pl.element().slice(i * n, n) for i in range(k)]
    return pl.when(same).then(both.list.eval(pred(*parts).cast(pl.UInt32).sum()).list.first())


def truncated(col: str, max_len: int | None, side: str) -> pl.Expr:
    """The list in ``col`` as the trainer sees it after truncation to ``max_len`` on ``side``."""
    e = pl.col(col)
    if max_len is None:
        return e
    return e.list.head(max_len) if side == "right" else e.list.tail(max_len)


def supervised_per_row(col: str, ignore_index: int, max_len: int | None, side: str) -> pl.Expr:
    """Per row (UInt32): token labels other than ``ignore_index`` after truncation. Built the same
    way wherever it is used, so the fused query computes it once (common-subexpression elimination)."""
    return truncated(col, max_len, side).list.eval((pl.element() != ignore_index).cast(pl.UInt32)).list.sum()


def supervised_count(col: str, ignore_index: int) -> pl.Expr:
    """Per row (UInt32): labels (list of int) other than ``ignore_index`` and null; null for a null
    row. List kernels (``count_matches``), built the same way by every user (the ``supervised_tokens``
    and ``supervised_fraction`` stats), so the fused query computes it once."""
    lab = pl.col(col)
    return (lab.list.len() - lab.list.count_matches(ignore_index) - lab.list.count_matches(None)).cast(pl.UInt32)


def supervised_total(col: str, dtype: pl.DataType, ignore_index: int) -> pl.Expr:
    """The shard's (a batch's) count of labels other than ``ignore_index`` and null in ``col``: the sum
    of :func:`supervised_count` over the rows. A ``List`` of numbers (``dtype``) is counted over its
    flat values (``explode`` of a list column is its value buffer; a null row or an empty list gives
    one null, which is not counted): 5.7 ms CPU for 10,000 x 1,024 int64 labels, where the two
    ``count_matches`` list kernels took 15-16 ms (measured on the 2-core development machine). Other
    dtypes (fixed-size arrays, nested lists) sum :func:`supervised_count`, as before."""
    if isinstance(dtype, pl.List) and dtype.inner.is_numeric():
        return (pl.col(col).explode() != ignore_index).sum()
    return supervised_count(col, ignore_index).sum()
