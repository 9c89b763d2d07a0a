"""``dup.exact_in_shard``'s exact comparison of candidate rows of long lists, a slice of their lists at a
time (``_repeats_in_slices``, forced here with slices of 3 elements), against a plain-Python reference:
the rows whose (lists, other columns) equal an earlier row's, each with the first such row (null equals
null; a list that is a prefix of another differs from it)."""
from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from datacheck.checks.dup import in_shard
from datacheck.checks.dup.in_shard import _repeats_of


def _reference(ids: list, extra: list) -> list[tuple[int, int]]:
    first: dict = {}
    out = []
    for i, k in enumerate(zip((None if v is None else tuple(v) for v in ids), extra)):
        if k in first:
            out.append((i, first[k]))
        first.setdefault(k, i)
    return out


def _got(df: pl.DataFrame, cols: list[str]) -> list[tuple[int, int]]:
    rep = _repeats_of(df, cols, "__row")
    return sorted(zip(np.asarray(rep.rows).tolist(), np.asarray(rep.earlier).tolist()))


_lists = st.lists(st.one_of(st.none(), st.lists(st.one_of(st.none(), st.integers(0, 2)), max_size=8)),
                  min_size=2, max_size=12)


@settings(max_examples=examples(200), deadline=None)
@given(_lists, st.data())
def test_slices_find_the_repeats_of_whole_rows(ids, data):
    extra = data.draw(st.lists(st.integers(0, 1), min_size=len(ids), max_size=len(ids)))
    df = pl.DataFrame({"__row": pl.Series(np.arange(len(ids)), dtype=pl.UInt32),
                       "input_ids": pl.Series(ids, dtype=pl.List(pl.Int64)), "x": extra})
    want = _reference(ids, extra)
    whole = _got(df, ["input_ids", "x"])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(in_shard, "SLICE_ELEMENTS", 3)
        mp.setattr(in_shard, "SLICED_ABOVE_BYTES", 0)
        sliced = _got(df, ["input_ids", "x"])
        sliced_one = _got(df, ["input_ids"])
    assert whole == want and sliced == want
    assert sliced_one == _reference(ids, [0] * len(ids))


def test_slices_are_taken_only_for_lists_longer_than_one_slice(monkeypatch):
    """Rows of lists within one slice are compared whole (one ``is_first_distinct``), as before."""
    calls = []
    real = in_shard._repeats_in_slices
    monkeypatch.setattr(in_shard, "_repeats_in_slices", lambda *a: calls.append(a[4]) or real(*a))
    monkeypatch.setattr(in_shard, "SLICED_ABOVE_BYTES", 0)
    monkeypatch.setattr(in_shard, "SLICE_ELEMENTS", 4)
    short = pl.DataFrame({"__row": pl.Series([0, 1], dtype=pl.UInt32), "ids": [[1, 2, 3, 4], [1, 2, 3, 4]]})
    assert _got(short, ["ids"]) == [(1, 0)] and not calls
    long = pl.DataFrame({"__row": pl.Series([0, 1, 2], dtype=pl.UInt32),
                         "ids": [[1, 2, 3, 4, 5], [1, 2, 3, 4, 6], [1, 2, 3, 4, 5]]})
    assert _got(long, ["ids"]) == [(2, 0)] and calls == [5]
