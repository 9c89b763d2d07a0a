"""One pass shared by several checks within one query: :func:`shared_pass` memoizes a
``map_batches`` kernel's result by key and by the identity of its input buffers, and the engine
forgets every entry after each query (:func:`clear_shared_passes`).
"""
from __future__ import annotations

import threading
from typing import Any, Callable

import polars as pl

__all__ = ["shared_pass", "clear_shared_passes"]

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
