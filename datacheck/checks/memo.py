"""One pass shared by several checks within one query: :func:`shared_pass` memoizes a
``map_batches`` kernel's result by key and by the identity of its input buffers, and the engine
forgets every entry after each query (:func:`clear_shared_passes`).

:func:`shared_column` goes one step further for a per-row kernel whose result several checks
read: the checks read a column, and the engine computes that column once per frame it evaluates
them on (:func:`with_shared_columns`), where polars would call the kernel once per expression that
reads it (a Python function is never a common subexpression): twelve calls of the shared token
pass on a batch, each costing its inputs' conversion and the memo's lookup (about 0.2 ms each).
"""
from __future__ import annotations

import hashlib
import threading
from typing import Any, Callable, Iterable

import polars as pl

__all__ = ["shared_pass", "clear_shared_passes", "shared_column", "SHARED_PREFIX", "shared_roots",
           "with_shared_columns"]

#: results of :func:`shared_pass` for the query being run: key -> (the inputs, held so that their
#: buffer addresses stay theirs, and the value); emptied by the engine after each query
_SHARED: dict[tuple, tuple[list[pl.Series], Any]] = {}
_SHARED_LOCK = threading.Lock()
_SHARED_KEY_LOCKS: dict[tuple, threading.Lock] = {}


def _buffers(s: pl.Series) -> tuple:
    """The identity of a series' data: per chunk, the addresses of its Arrow buffers (a chunk's
    export is zero-copy), its offset and length."""
    parts = []
    for c in s.get_chunks():
        a = c.to_arrow()
        parts.append((a.offset, len(a), tuple(b.address if b is not None else 0 for b in a.buffers())))
    return (s.name, str(s.dtype), tuple(parts))


def shared_pass(key: tuple, inputs: list[pl.Series], compute: Callable[[], Any]) -> Any:
    """The value of ``compute()`` (a pass over ``inputs``, the Series handed to a ``map_batches``
    kernel), computed once per query for equal ``key`` and equal input data: several checks whose
    expressions call the same kernel (each reading its own field of the result) cost one pass, where
    polars evaluates each ``map_batches`` of a select separately (it does not merge Python UDFs).

    Data are equal when their Arrow buffers are the same, chunk by chunk (addresses of live
    buffers: the entry holds the inputs, so no other data can take those addresses while it
    exists). The engine empties the entries after
    each query (:func:`clear_shared_passes`), so they never outlive a batch. Thread-safe: polars
    runs the expressions of a select in parallel; a second caller waits for the first."""
    full = (key, tuple(_buffers(s) for s in inputs))
    with _SHARED_LOCK:
        lock = _SHARED_KEY_LOCKS.setdefault(full, threading.Lock())
    with lock:
        got = _SHARED.get(full)
        if got is not None:
            return got[1]
        value = compute()
        _SHARED[full] = (list(inputs), value)
        return value


def clear_shared_passes() -> None:
    """Forget every :func:`shared_pass` result (the engine calls it after each query)."""
    with _SHARED_LOCK:
        _SHARED.clear()
        _SHARED_KEY_LOCKS.clear()


#: the name of every shared column starts with it (no column of the data does: the engine
#: reserves ``__``-names)
SHARED_PREFIX = "__shared_"
#: shared column name -> the expression computing it (over the frame's own columns)
_COLUMNS: dict[str, pl.Expr] = {}


def shared_column(key: tuple, expr: pl.Expr) -> pl.Expr:
    """``pl.col`` of a column holding ``expr``'s per-row value, computed by the engine once per frame
    it evaluates the checks on (:func:`with_shared_columns`). The column is named by ``key`` (the
    kernel's parameters) and by ``expr``'s text (its inputs, e.g. a row condition that differs by a
    column's dtype; a Python function prints as ``python_udf``): equal keys and equal expressions, one
    column, registered for the life of the process; a key that misses a parameter the expression
    carries still gives another column. ``expr`` reads only the frame's own columns. Every engine
    evaluation of check expressions (the fused query, its flat views before they explode, the second
    pass's details and examples) adds the shared columns they read."""
    name = SHARED_PREFIX + hashlib.blake2b(f"{key!r}\n{expr}".encode(), digest_size=8).hexdigest()
    with _SHARED_LOCK:
        _COLUMNS.setdefault(name, expr)
    return pl.col(name)


def shared_roots(exprs: Iterable[pl.Expr]) -> tuple[set[str], set[str]]:
    """(the shared columns ``exprs`` read, the frame columns those shared columns read)."""
    names: set[str] = set()
    for e in exprs:
        names.update(n for n in e.meta.root_names() if n.startswith(SHARED_PREFIX))
    roots: set[str] = set()
    for n in names:
        roots.update(_COLUMNS[n].meta.root_names())
    return names, roots


def with_shared_columns(lf: pl.LazyFrame, exprs: Iterable[pl.Expr]) -> pl.LazyFrame:
    """``lf`` with the shared columns ``exprs`` read (:func:`shared_column`), in name order;
    ``lf`` itself when they read none. A shared column ``lf`` holds already is kept, not computed
    again: rows gathered from a frame that held it (a per-row value depends on its row only)."""
    names, _ = shared_roots(exprs)
    if not names:
        return lf
    held = set(lf.collect_schema().names())
    todo = sorted(n for n in names if n not in held)
    return lf.with_columns([_COLUMNS[n].alias(n) for n in todo]) if todo else lf
