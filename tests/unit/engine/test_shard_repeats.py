"""engine/shard.py: whether a shard's candidate keys hold a repeated value (dup.exact_in_shard)."""
from __future__ import annotations

import polars as pl
from hypothesis import given
from hypothesis import strategies as st
from refs import FRAME_SETTINGS as SETTINGS

from datacheck.engine.shard import _has_repeats


@SETTINGS
@given(values=st.lists(st.one_of(st.none(), st.integers(0, 2**64 - 1)), max_size=30),
       dtype=st.sampled_from([pl.UInt64, pl.Int64, pl.String]))
def test_has_repeats_matches_a_set(values, dtype):
    """A repeated key (nulls count as one value, as polars' n_unique counts them) is found by the
    numpy sort of integer keys without nulls and by n_unique otherwise, alike."""
    if dtype == pl.Int64:
        values = [None if v is None else v - 2**63 for v in values]
    key = pl.Series("k", [None if v is None else (str(v) if dtype == pl.String else v) for v in values], dtype=dtype)
    assert _has_repeats(key) == (len(set(values)) < len(values))
