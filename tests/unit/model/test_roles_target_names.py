"""A float column named ``target``/``targets``/``score``/``y`` is the regression ``target`` role, inferred
by the names the layout recognizer calls a shard ``regression`` by (it made the layout regression but
not the role: ``dist.target_scale`` was skipped and a null target passed unless ``[columns] target``
was set).

Material: sample_data/defects/finite/regression.parquet (sample_data/generate.py: a float ``target``
with NaN, inf, 70000 and 40000 planted) and small frames; expected statistics computed with numpy."""
from __future__ import annotations

import math

import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest
from checkhelp import audit_df, findings, one
from conftest import ROOT

import datacheck
from datacheck.model.config import ColumnsSection
from datacheck.model.roles import resolve_roles

REG = ROOT / "sample_data" / "defects" / "finite" / "regression.parquet"


@pytest.mark.parametrize("name", ["target", "targets", "score", "y"])
def test_a_float_column_named_as_a_target_is_the_target(name):
    roles = resolve_roles(ColumnsSection(), {"text": pl.String, name: pl.Float64})
    assert roles.target == (name,) and "target" in roles.inferred
    # an integer column of that name, or a class label beside it, is no regression target
    assert resolve_roles(ColumnsSection(), {"text": pl.String, name: pl.Int64}).target == ()
    assert resolve_roles(ColumnsSection(), {"text": pl.String, "label": pl.Int64, name: pl.Float64}).target == ()
    # the config's choice wins
    given = resolve_roles(ColumnsSection(target="other"), {"other": pl.Float64, name: pl.Float64})
    assert given.target == ("other",)


def test_target_scale_on_the_sample_regression_shard(tmp_path):
    t = pq.read_table(REG).column("target").to_numpy()
    finite = t[np.isfinite(t)]
    mean, std = float(finite.mean()), float(finite.std(ddof=1))
    assert max(abs(mean), std) > 1000  # the default [numeric] target_scale_warn
    rep = datacheck.audit(str(REG), config={})
    assert rep.shards[0].layout == "regression"
    f = one(rep, "dist.target_scale", "target")
    assert f.severity == "warn" and f.details["count"] == finite.size
    assert math.isclose(f.details["mean"], mean, rel_tol=1e-9) and math.isclose(f.details["std"], std, rel_tol=1e-9)
    assert "dist.target_scale" not in {s["check"] for s in rep.skipped}


def test_a_null_score_is_labels_null(tmp_path):
    rep = audit_df(tmp_path, {"text": ["a", "b", "c", "d"], "score": [0.5, None, 2.5, 1.0]})
    assert rep.shards[0].layout == "regression"
    assert one(rep, "labels.null", "score").rows == (1,)
    assert findings(rep, "dist.target_scale") == []  # |mean| and std of 0.5, 2.5, 1.0 are far under 1000
