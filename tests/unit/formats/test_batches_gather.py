"""gather_rows: the wanted shard rows of a batch, from a set, a list or a numpy array; a run of
consecutive rows is taken as a slice and gives what the lookup gives."""
from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from datacheck.formats.batches import gather_rows

FRAME = pl.DataFrame({"x": list(range(100, 110))})  # a batch of 10 rows starting at shard row 50


@pytest.mark.parametrize("wanted", [
    [52, 53, 54],                        # a run: sliced
    np.array([54, 52, 53], np.int64),    # the same run, unsorted, as an array
    {57, 51, 59},                        # scattered: looked up
    np.array([50, 51, 52, 53, 54, 55, 56, 57, 58, 59]),  # every row of the batch
    [58, 59, 60, 61],                    # a run past the batch's end: the rows it holds
    [],
])
def test_rows_are_the_wanted_ones(wanted):
    got = gather_rows(FRAME.lazy(), wanted, offset=50)
    expect = sorted(r for r in set(int(w) for w in wanted) if 50 <= r < 60)
    assert got is not None
    assert got["__row"].dtype == pl.UInt32 and got.columns == ["__row", "x"]
    assert got["__row"].to_list() == expect
    assert got["x"].to_list() == [100 + r - 50 for r in expect]
