"""finite.nan / finite.inf / finite.fp16_overflow: scalar and list float columns."""
from __future__ import annotations

import math

import polars as pl
import pytest
from checkhelp import audit_df, findings, one
from hypothesis import given
from hypothesis import strategies as st
from refs import SHARD_SETTINGS as SETTINGS
from refs import floats, rows_where
from refs import n_rows as _rows
from refs import shard_failing as failing

NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize(
    "values, nan_rows, inf_rows",
    [
        ([0.0, NAN, 1.0, None, NAN], [1, 4], []),
        ([INF, 1.0, -INF, 2.0], [], [0, 2]),
        ([NAN, INF, -INF, 3.0], [0], [1, 2]),
        ([None, None], [], []),
        ([1.5, -2.5], [], []),
    ],
)
def test_scalar_float_column(tmp_path, values, nan_rows, inf_rows):
    rep = audit_df(tmp_path, pl.DataFrame({"x": values}, schema={"x": pl.Float64}))
    for check, rows in (("finite.nan", nan_rows), ("finite.inf", inf_rows)):
        got = findings(rep, check, "x")
        if not rows:
            assert got == []
            continue
        (f,) = got
        assert (f.rows, f.count, f.severity) == (tuple(rows), len(rows), "error")
        assert f.ratio == pytest.approx(len(rows) / len(values))


@pytest.mark.parametrize(
    "values, nan_rows, inf_rows, nan_values",
    [
        ([[0.0, 1.0], [2.0, NAN, NAN], [], None, [INF]], [1], [4], 2),
        ([[NAN], [1.0, -INF, NAN], [None, 1.0]], [0, 1], [1], 2),
        ([[], None, [None]], [], [], 0),
    ],
)
def test_list_float_column(tmp_path, values, nan_rows, inf_rows, nan_values):
    rep = audit_df(tmp_path, pl.DataFrame({"xs": values}, schema={"xs": pl.List(pl.Float32)}))
    got = findings(rep, "finite.nan", "xs")
    assert [f.rows for f in got] == ([tuple(nan_rows)] if nan_rows else [])
    if nan_rows:
        assert f"({nan_values} value(s))" in got[0].message
    got = findings(rep, "finite.inf", "xs")
    assert [f.rows for f in got] == ([tuple(inf_rows)] if inf_rows else [])


def test_list_example_names_first_bad_position(tmp_path):
    rep = audit_df(tmp_path, {"xs": [[1.0, 2.0], [0.5, 0.25, NAN, 1.0]]})
    f = one(rep, "finite.nan", "xs")
    assert f.rows == (1,)
    assert f.examples[0].value == "'first at position 2 of 4: NaN'"


def test_nested_list_float_column(tmp_path):
    df = pl.DataFrame({"emb": [[[1.0, 2.0], [3.0]], [[4.0], [NAN]], [[INF]]]})
    rep = audit_df(tmp_path, df)
    assert one(rep, "finite.nan", "emb").rows == (1,)
    assert one(rep, "finite.inf", "emb").rows == (2,)


def test_integer_columns_are_not_float_checked(tmp_path):
    rep = audit_df(tmp_path, {"n": [1, 2, 3], "ns": [[1], [2], []]})
    assert not [f for f in rep.findings if f.check.startswith("finite.")]


@pytest.mark.parametrize(
    "compute_dtype, values, error_rows, warn_rows",
    [
        # fp16 max 65504 (IEEE 754 binary16); warn above 0.5 x 65504 = 32752
        ("fp16", [1.0, 65504.0, 65505.0, -70000.0, 32753.0, 32752.0, INF, NAN], [2, 3], [1, 4]),
        ("bf16", [2e38, 3.5e38, -3.4e38, 1e38], [1, 2], [0]),  # bf16 max 3.3895e38
        ("fp32", [1e300, -1e39, 3.0e38, 1.0], [0, 1], []),
    ],
)
def test_overflow_against_compute_dtype(tmp_path, compute_dtype, values, error_rows, warn_rows):
    rep = audit_df(tmp_path, pl.DataFrame({"x": values}, schema={"x": pl.Float64}),
                   {"numeric": {"compute_dtype": compute_dtype}})
    got = {f.severity: f for f in findings(rep, "finite.fp16_overflow", "x")}
    assert set(got) == ({"error"} if error_rows else set()) | ({"warn"} if warn_rows else set())
    if error_rows:
        f = got["error"]
        assert (f.rows, f.count) == (tuple(error_rows), len(error_rows))
        assert compute_dtype in f.message and "become inf" in f.message
        finite = [abs(v) for v in values if math.isfinite(v)]
        assert f"largest |value| {max(finite)}" in f.message
    if warn_rows:
        assert (got["warn"].rows, got["warn"].count) == (tuple(warn_rows), len(warn_rows))


def test_overflow_threshold_is_configurable(tmp_path):
    df = pl.DataFrame({"x": [60000.0, 40000.0, 10.0]})
    rep = audit_df(tmp_path, df, {"numeric": {"compute_dtype": "fp16", "overflow_warn_fraction": 0.9}})
    (f,) = findings(rep, "finite.fp16_overflow")
    assert (f.severity, f.rows) == ("warn", (0,))


def test_float32_storage_cannot_overflow_fp32(tmp_path):
    rep = audit_df(tmp_path, pl.DataFrame({"x": [3.4e38, 1.0]}, schema={"x": pl.Float32}))
    assert findings(rep, "finite.fp16_overflow") == []


# ---------------------------------------------------------------- property tests against a plain-Python reference
def ref_nan(v) -> bool:
    vals = v if isinstance(v, list) else [v]
    return any(x is not None and math.isnan(x) for x in vals)


def ref_inf(v) -> bool:
    vals = v if isinstance(v, list) else [v]
    return any(x is not None and math.isinf(x) for x in vals)


def ref_fp16_overflow(v, limit: float = 65504.0, warn_fraction: float = 0.5) -> bool:
    """Error (|x| > 65504) or warning (|x| > 0.5 x 65504) rows, both under one key."""
    vals = v if isinstance(v, list) else [v]
    return any(x is not None and math.isfinite(x) and abs(x) > limit * warn_fraction for x in vals)


@SETTINGS
@given(data=st.data(), n=_rows())
def test_finite_matches_reference(data, n):
    scal = data.draw(st.lists(floats, min_size=n, max_size=n))
    lst = data.draw(st.lists(st.one_of(st.none(), st.lists(floats, max_size=5)), min_size=n, max_size=n))
    df = pl.DataFrame({"x": scal, "xs": lst}, schema={"x": pl.Float64, "xs": pl.List(pl.Float64)})
    got = failing(df, {"numeric": {"compute_dtype": "fp16"}})
    for col, vals in (("x", scal), ("xs", lst)):
        assert got.get(f"finite.nan:{col}", set()) == rows_where(vals, lambda v: v is not None and ref_nan(v))
        assert got.get(f"finite.inf:{col}", set()) == rows_where(vals, lambda v: v is not None and ref_inf(v))
        assert got.get(f"finite.fp16_overflow:{col}", set()) == rows_where(
            vals, lambda v: v is not None and ref_fp16_overflow(v))
