"""The read path's cast of 128-bit integer role columns to the role's 64-bit dtype
(:func:`datacheck.model.roles.cast_expr`): every value clipped to Int64's range, nulls kept, every
other cast strict."""
from __future__ import annotations

import polars as pl
import pytest
from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from datacheck.model.roles import INT64_MAX, INT64_MIN, cast_expr, narrows_wide_int

INT128 = st.integers(-(2**127), 2**127 - 1)


def _clip(v):
    return None if v is None else min(max(v, -(2**63)), 2**63 - 1)


def test_bounds_are_int64s():
    assert (INT64_MIN, INT64_MAX) == (-(2**63), 2**63 - 1)


@settings(max_examples=examples(200))
@given(st.lists(st.one_of(st.none(), INT128), max_size=20))
def test_property_scalar_values_are_clipped_never_null(values):
    s = pl.Series("a", values, dtype=pl.Int128)
    out = s.to_frame().select(cast_expr("a", pl.Int128(), pl.Int64()))["a"]
    assert out.dtype == pl.Int64
    assert out.to_list() == [_clip(v) for v in values]


@settings(max_examples=examples(200))
@given(st.lists(st.one_of(st.none(), st.lists(st.one_of(st.none(), INT128), max_size=6)), max_size=10))
def test_property_list_values_are_clipped_never_null(rows):
    s = pl.Series("ids", rows, dtype=pl.List(pl.Int128))
    out = s.to_frame().select(cast_expr("ids", pl.List(pl.Int128), pl.List(pl.Int64)))["ids"]
    assert out.dtype == pl.List(pl.Int64)
    assert out.to_list() == [None if r is None else [_clip(v) for v in r] for r in rows]


def test_unsigned_128_bit_values_are_clipped_at_the_top():
    values = [0, 5, 2**63 - 1, 2**63, 2**128 - 1, None]
    s = pl.Series("a", values, dtype=pl.UInt128)
    out = s.to_frame().select(cast_expr("a", pl.UInt128(), pl.Int64()))["a"]
    assert out.to_list() == [0, 5, 2**63 - 1, 2**63 - 1, 2**63 - 1, None]


def test_other_casts_stay_strict():
    assert not narrows_wide_int(pl.Int64(), pl.Int32())
    df = pl.DataFrame({"a": [2**40]})
    with pytest.raises(pl.exceptions.InvalidOperationError):
        df.select(cast_expr("a", pl.Int64(), pl.Int32()))


def test_integral_decimals_are_read_as_int64_clipped():
    """``decimal(38, 0)`` (a SQL export's integer column): each value as an Int64, one beyond it at
    the nearest bound; a list of them likewise."""
    from decimal import Decimal

    values = [0, 7, -(10**30), 10**37, None]
    s = pl.Series("a", [None if v is None else Decimal(v) for v in values], dtype=pl.Decimal(38, 0))
    assert narrows_wide_int(s.dtype, pl.Int64())
    out = s.to_frame().select(cast_expr("a", s.dtype, pl.Int64()))["a"]
    assert out.to_list() == [_clip(v) for v in values]
    rows = [[1, None, 10**30], None, []]
    ls = pl.Series("ids", [None if r is None else [None if v is None else Decimal(v) for v in r] for r in rows],
                   dtype=pl.List(pl.Decimal(38, 0)))
    got = ls.to_frame().select(cast_expr("ids", ls.dtype, pl.List(pl.Int64)))["ids"]
    assert got.to_list() == [[1, None, 2**63 - 1], None, []]


def test_a_decimal_with_a_fraction_is_not_read_as_integers():
    assert not narrows_wide_int(pl.Decimal(10, 2), pl.Int64())
