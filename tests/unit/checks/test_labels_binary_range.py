"""labels.binary_out_of_range of datacheck.checks.labels: binary targets outside [0, 1], the {0, 255}
hint, skipped for regression targets."""
from __future__ import annotations

import math

from refs import rows, run, skip


def test_binary_out_of_range_hints_0_255():
    df = {"target": [0.0, 1.0, 255.0, 0.5], "text": ["a", "b", "c", "d"]}
    res = run(df, {"columns": {"target": "target"}, "labels": {"target_kind": "binary"}})
    assert rows(res, "labels.binary_out_of_range:target") == [2]
    res = run({"target": [[0.0, 255.0], [0.0, 0.0]]}, {"columns": {"target": "target"}, "labels": {"target_kind": "binary"}})
    f = next(f for f in res.findings if f.check == "labels.binary_out_of_range")
    assert f.rows == (0,) and "{0, 255}" in f.message and f.details["max"] == 255.0
    assert "regression" in skip(run(df, {"columns": {"target": "target"}}), "labels.binary_out_of_range")


def _outside(values) -> bool:
    """A value (or list of values) holds a number outside [0, 1]; NaN is no number here (finite.nan's)."""
    vals = values if isinstance(values, list) else [values]
    return any(v is not None and not math.isnan(v) and not 0.0 <= v <= 1.0 for v in vals)


def test_binary_out_of_range_leaves_nan_to_finite_nan():
    """polars orders NaN above 1: a scalar NaN target was counted as out of range (and finite.nan)."""
    nan = float("nan")
    cfg = {"columns": {"target": "target"}, "labels": {"target_kind": "binary"}}
    scalars = [0.0, nan, 1.0, 2.0, -0.5, nan, 0.25]
    lists = [[0.0, nan], [nan, 2.0], [1.0, 0.0], [nan, nan], [-1.0, 1.0]]
    for values in (scalars, lists):
        res = run({"target": values, "text": [f"t{i}" for i in range(len(values))]}, cfg)
        want = [i for i, v in enumerate(values) if _outside(v)]
        assert rows(res, "labels.binary_out_of_range:target") == want
        assert rows(res, "finite.nan:target") == [i for i, v in enumerate(values)
                                                  if any(math.isnan(x) for x in (v if isinstance(v, list) else [v]))]
