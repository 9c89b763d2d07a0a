"""Position-wise rules over the flat value buffers of aligned list columns (numpy), for the rules
whose work is sparse: a few positions per row matter (end-of-turn ids, supervised tokens outside
the assistant spans), so the rule finds them in one vectorized pass over a buffer and looks at
the other columns only there, instead of exploding every column into the flat position view.

A rule built on these helpers is one ``pl.map_batches`` over its columns in the shard's fused
query: per row, the number of failing positions (UInt32). The columns it receives are the view's
columns with the rows the position view leaves out (lists of different lengths, a mask that is
not binary; :meth:`FlatView.row_ok`) set to null, so every buffer has the same offsets and those
rows never fail, exactly as in the view. No Python loop over rows.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import polars as pl

__all__ = ["Flat", "aligned", "is_one"]


def aligned(ok: pl.Expr, cols: Sequence[pl.Expr]) -> list[pl.Expr]:
    """``cols`` with the rows where ``ok`` is not true set to null (one length per row afterwards)."""
    return [pl.when(ok).then(c) for c in cols]


def is_one(mask: pl.Expr, inner: pl.DataType) -> pl.Expr:
    """A 0/1 mask list (int, bool or float elements) as a list the flat helpers compare with 1: ints
    as they are, booleans as Int8, floats cast to Int64 (the view's ``cast(pl.Int64) == 1``)."""
    if inner.is_integer():
        return mask
    if inner == pl.Boolean:
        return mask.cast(pl.List(pl.Int8))
    return mask.cast(pl.List(pl.Int64))


class Flat:
    """The flat positions of a batch of aligned list rows (every column with the same per-row
    lengths; a null row has no position).

    Attributes:
        n: rows. offsets: int64 (n + 1,), row ``r`` holds positions ``offsets[r] .. offsets[r+1]``.
        total: positions. first: bool (total,), True at the first position of each row.
    """

    def __init__(self, rows: pl.Series) -> None:
        self.n = rows.len()
        lens = rows.list.len().fill_null(0).to_numpy().astype(np.int64)
        self.offsets = np.zeros(self.n + 1, dtype=np.int64)
        np.cumsum(lens, out=self.offsets[1:])
        self.total = int(self.offsets[-1])
        self.first = np.zeros(self.total, dtype=bool)
        self.first[self.offsets[:-1][lens > 0]] = True

    @staticmethod
    def values(s: pl.Series) -> tuple[np.ndarray, np.ndarray | None]:
        """(values, validity or None when no null) of a list column's flat buffer (int dtypes kept;
        a null element is 0 in ``values`` and False in the validity)."""
        f = s.explode(empty_as_null=False, keep_nulls=False)
        if f.null_count():
            return f.fill_null(0).to_numpy(), f.is_not_null().to_numpy()
        return f.to_numpy(), None

    def equals(self, s: pl.Series, value: int) -> np.ndarray:
        """bool (total,): the element equals ``value`` (False for a null element)."""
        v, ok = self.values(s)
        out = v == value
        return out if ok is None else (out & ok)

    def not_equal(self, s: pl.Series, value: int) -> np.ndarray:
        """bool (total,): the element is not null and differs from ``value``."""
        v, ok = self.values(s)
        out = v != value
        return out if ok is None else (out & ok)

    def is_in(self, s: pl.Series, values: Sequence[int]) -> np.ndarray:
        """bool (total,): the element is one of ``values`` (False for a null element)."""
        v, ok = self.values(s)
        out = np.zeros(self.total, dtype=bool)
        for x in values:
            out |= v == x
        return out if ok is None else (out & ok)

    def prev_at(self, a: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """``a`` (bool, total) at the position before each of ``idx`` in the same row (False at a
        row's first position)."""
        ok = ~self.first[idx]
        return ok & a[np.where(ok, idx - 1, 0)]

    def prev(self, a: np.ndarray) -> np.ndarray:
        """``a`` (bool, total) at the previous position of the same row (False at a row's first)."""
        out = np.empty_like(a)
        if self.total:
            out[0] = False
            out[1:] = a[:-1]
            out &= ~self.first
        return out

    def counts(self, idx: np.ndarray) -> pl.Series:
        """Per row (UInt32, n): how many of the flat positions ``idx`` it holds."""
        rows = np.searchsorted(self.offsets, idx, side="right") - 1
        return pl.Series(np.bincount(rows, minlength=self.n).astype(np.uint32))
