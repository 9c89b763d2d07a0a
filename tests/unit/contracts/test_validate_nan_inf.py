"""Pandera counts NaN as null and lets inf through some checks; the report counts each non-finite
value once, as finite.nan / finite.inf, and never misses one."""
from __future__ import annotations

import math

import polars as pl
from schemahelp import audit, summary, write

from datacheck.contracts import load_contract, validate_with_pandera

SCHEMA = """
schema_type: polars_dataframe
columns:
  x:
    dtype: Float64
    in_range: {min_value: 0.0, max_value: 10.0}
  v:
    dtype: List(Float32)
datacheck:
  columns:
    v: {min_value: -1.0, max_value: 1.0}
"""


def test_nan_and_inf_reported_once_by_finite(tmp_path):
    df = pl.DataFrame({
        "x": [1.0, math.nan, math.inf, None, 11.0, -math.inf],
        "v": pl.Series([[0.5], [math.nan], [0.1, math.inf], [0.0], [2.0], [0.0]], dtype=pl.List(pl.Float32)),
    })
    shard = write(tmp_path, df)
    (tmp_path / "s.yaml").write_text(SCHEMA)
    report = audit(shard, tmp_path / "s.yaml")
    assert summary(report) == {
        ("schema.nullable", "x", 1, (3,)),  # the real null only; NaN (row 1) is not null here
        ("schema.check", "x", 1, (4,)),  # 11.0 > 10; NaN and +/-inf are not counted here
        ("schema.check", "v", 1, (4,)),  # 2.0 > 1; NaN and inf elements are not counted here
    }
    fin = summary(report, "finite.")
    assert ("finite.nan", "x", 1, (1,)) in fin
    assert ("finite.inf", "x", 2, (2, 5)) in fin
    assert ("finite.nan", "v", 1, (1,)) in fin
    assert ("finite.inf", "v", 1, (2,)) in fin


def test_pandera_itself_counts_nan_as_null(tmp_path):
    """The reference path shows the double count the audit avoids."""
    df = pl.DataFrame({"x": [1.0, math.nan, math.inf, None, 11.0, -math.inf],
                       "v": pl.Series([[0.0]] * 6, dtype=pl.List(pl.Float32))})
    (tmp_path / "s.yaml").write_text(SCHEMA)
    got = validate_with_pandera(load_contract(str(tmp_path / "s.yaml")), df.lazy())
    assert got[("schema.nullable", "x", "not_nullable")] == [1, 3]
    assert got[("schema.check", "x", "in_range(0.0, 10.0)")] == [1, 2, 4, 5]


def test_sample_regression_against_tabular_and_its_inferred_schema(tmp_path):
    from conftest import ROOT

    from datacheck.tools.infer import infer_contract, infer_yaml

    p = ROOT / "sample_data" / "defects" / "finite" / "regression.parquet"
    if not p.is_file():
        import pytest

        pytest.skip("sample_data not generated")
    data, _ = infer_contract([str(p)])
    assert data["columns"]["target"]["in_range"]["max_value"] == 70000.0  # finite values only
    (tmp_path / "inferred.yaml").write_text(infer_yaml(data, [p.name]))
    for schema in ("tabular", tmp_path / "inferred.yaml"):
        report = audit(p, schema)
        assert summary(report) == set(), schema
        fin = {(f.check, f.column, f.rows) for f in report.findings if f.check in ("finite.nan", "finite.inf")}
        assert fin == {("finite.nan", "target", (1,)), ("finite.nan", "features", (2,)),
                       ("finite.inf", "target", (3,)), ("finite.inf", "features", (4,))}
