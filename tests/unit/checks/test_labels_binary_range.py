"""labels.binary_out_of_range of datacheck.checks.labels: binary targets outside [0, 1], the {0, 255}
hint, skipped for regression targets."""
from __future__ import annotations

from refs import rows, run, skip


def test_binary_out_of_range_hints_0_255():
    df = {"target": [0.0, 1.0, 255.0, 0.5], "text": ["a", "b", "c", "d"]}
    res = run(df, {"columns": {"target": "target"}, "labels": {"target_kind": "binary"}})
    assert rows(res, "labels.binary_out_of_range:target") == [2]
    res = run({"target": [[0.0, 255.0], [0.0, 0.0]]}, {"columns": {"target": "target"}, "labels": {"target_kind": "binary"}})
    f = next(f for f in res.findings if f.check == "labels.binary_out_of_range")
    assert f.rows == (0,) and "{0, 255}" in f.message and f.details["max"] == 255.0
    assert "regression" in skip(run(df, {"columns": {"target": "target"}}), "labels.binary_out_of_range")
