"""schema.inconsistent on shards whose number dtypes are inferred from text (CSV, TSV, JSONL): a
feature column whose values in one shard all happen to be integers is inferred Int64 there and
Float64 where a value has a fraction (R's write.csv and JavaScript's JSON write 2.0 as ``2``). That
is the same column of one table, not mixed preprocessing: no finding. A label column read as
Float64 in one shard and Int64 in another still is one (a float class target is read otherwise by
the loss), as is a parquet shard's typed Int64 next to floats."""
from __future__ import annotations

import json

from dshelp import by_check, one, run, write


def _rows(n: int, frac: bool, k: int) -> list[dict]:
    """Rows of (count, x, label): ``count`` integral unless ``frac``; values from the row number."""
    return [{"count": (r % 7) + (0.5 if frac and r % 2 else 0), "x": r / 8 + 0.125, "label": r % 2}
            for r in range(k * n, k * n + n)]


def _csv(path, rows: list[dict], float_label: bool = False) -> None:
    cell = lambda v: repr(float(v)) if float_label else str(v)  # noqa: E731
    path.write_text("count,x,label\n" + "".join(
        f"{r['count']:g},{r['x']!r},{cell(r['label'])}\n" for r in rows))


def test_an_integral_csv_feature_column_is_no_inconsistency(tmp_path):
    shards = [_rows(20, frac=k == 2, k=k) for k in range(3)]
    for k, rows in enumerate(shards):
        _csv(tmp_path / f"part-{k}.csv", rows)
    # the data: shards 0 and 1 hold only whole counts (inferred Int64), shard 2 fractions (Float64)
    assert all(float(r["count"]).is_integer() for r in shards[0] + shards[1])
    assert not all(float(r["count"]).is_integer() for r in shards[2])
    rep = run(tmp_path, {"columns": {"label": "label"}})
    assert not by_check(rep, "schema.inconsistent")


def test_an_integral_jsonl_feature_column_is_no_inconsistency(tmp_path):
    for k in range(3):
        rows = _rows(20, frac=k == 0, k=k)
        (tmp_path / f"part-{k}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    rep = run(tmp_path, {"columns": {"label": "label"}})
    assert not by_check(rep, "schema.inconsistent")


def test_a_label_read_as_float_in_one_shard_is_still_inconsistent(tmp_path):
    for k in range(3):
        _csv(tmp_path / f"part-{k}.csv", _rows(20, frac=True, k=k), float_label=k == 2)
    f = one(run(tmp_path, {"columns": {"label": "label"}}), "schema.inconsistent")
    assert f.shards == ("part-2.csv",)


def test_a_typed_integer_column_next_to_csv_floats_is_still_inconsistent(tmp_path):
    """A parquet shard's Int64 is its writer's dtype, not an inference."""
    rows = _rows(20, frac=False, k=0)
    write(tmp_path, "a.parquet", {"count": [int(r["count"]) for r in rows], "x": [r["x"] for r in rows],
                                  "label": [r["label"] for r in rows]})
    write(tmp_path, "b.parquet", {"count": [int(r["count"]) for r in rows], "x": [r["x"] for r in rows],
                                  "label": [r["label"] for r in rows]})
    _csv(tmp_path / "c.csv", _rows(20, frac=True, k=1))
    f = one(run(tmp_path, {"columns": {"label": "label"}}), "schema.inconsistent")
    assert f.shards == ("c.csv",)
