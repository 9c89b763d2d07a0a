"""schema.inconsistent on shards whose number dtypes are inferred from text (CSV, TSV, JSONL): a
feature column whose values in one shard all happen to be integers is inferred Int64 there and
Float64 where a value has a fraction (R's write.csv and JavaScript's JSON write 2.0 as ``2``). That
is the same column of one table, not mixed preprocessing: no finding. A label column read as
Float64 in one shard and Int64 in another still is one (a float class target is read otherwise by
the loss), as is a parquet shard's typed Int64 next to floats."""
from __future__ import annotations

import json

import polars as pl
import pytest
from conftest import REALDATA, SHARED
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


SST2_VALIDATION = REALDATA / "sst2_vi_glue_parquet/validation-00000-of-00001.parquet"  # idx: int32 (HF glue schema)
MBERT_TEST = REALDATA / "dkhate_danish_offensive/dkhate_mbert/test/data-00000-of-00001.arrow"  # list<int32>/list<int8>


def _real(path):
    if not path.is_file():
        pytest.skip(f"{path} not present")
    return pl.read_ipc_stream(path) if path.suffix == ".arrow" else pl.read_parquet(path)


def test_a_jsonl_and_csv_copy_of_parquet_rows_is_no_inconsistency(tmp_path):
    """The real SST-2 validation split (``idx: int32``, PROVENANCE.md section 9) cut into a parquet,
    a JSONL and a CSV shard: JSON and CSV numbers carry no width (read as Int64), so the same
    column is no "mixed preprocessing" (it was an error: ``dtypes idx: Int32 (others Int64)``)."""
    df = _real(SST2_VALIDATION)
    assert df.schema["idx"] == pl.Int32 and df.height == 872
    df.slice(0, 400).write_parquet(tmp_path / "a.parquet")
    df.slice(400, 400).write_ndjson(tmp_path / "b.jsonl")
    df.slice(800).write_csv(tmp_path / "c.csv")
    assert not by_check(run(tmp_path), "schema.inconsistent")


def test_a_jsonl_copy_of_tokenized_arrow_rows_is_no_inconsistency(tmp_path):
    """Real mBERT-tokenized rows (``input_ids: list<int32>``, ``attention_mask``/``token_type_ids:
    list<int8>``) as Arrow and as JSONL (``List(Int64)`` as read): one dataset."""
    df = _real(MBERT_TEST)
    assert df.schema["input_ids"] == pl.List(pl.Int32) and df.schema["attention_mask"] == pl.List(pl.Int8)
    df.slice(0, 200).write_parquet(tmp_path / "a.parquet")
    df.slice(200).write_ndjson(tmp_path / "b.jsonl")
    assert not by_check(run(tmp_path), "schema.inconsistent")


def test_two_typed_widths_and_a_kind_change_are_still_inconsistent(tmp_path):
    """Widths two typed writers chose (parquet Int32 next to parquet Int64) and a JSONL column of
    another kind (floats where the parquet column holds integers) stay differences."""
    df = _real(SST2_VALIDATION)
    df.slice(0, 300).write_parquet(tmp_path / "a.parquet")
    df.slice(300, 300).write_parquet(tmp_path / "b.parquet")
    df.slice(600).with_columns(pl.col("idx").cast(pl.Int64)).write_parquet(tmp_path / "c.parquet")
    f = one(run(tmp_path), "schema.inconsistent")
    assert f.shards == ("c.parquet",) and f.details["dtypes"] == {"idx": {"expected": "Int32", "actual": "Int64"}}
    (tmp_path / "c.parquet").unlink()
    df.slice(600).with_columns(pl.col("idx") + 0.5).write_ndjson(tmp_path / "c.jsonl")
    f = one(run(tmp_path), "schema.inconsistent")
    assert f.shards == ("c.jsonl",) and f.details["dtypes"] == {"idx": {"expected": "Int32", "actual": "Float64"}}


IDENTITY = SHARED / "chat/llamafactory/identity.json"  # Alpaca rows, 91, "input" "" in every row


def test_a_json_shard_whose_column_is_null_in_every_row_is_no_inconsistency(tmp_path):
    """LLaMA-Factory's real identity.json (PROVENANCE.md: 91 Alpaca rows) split in two JSONL shards,
    the second writing the empty ``input`` as ``null``: polars reads that column as ``Null`` there,
    ``datasets`` casts it to the first file's string; no "mixed preprocessing" (it was an error:
    ``dtypes input: Null (others String)``)."""
    if not IDENTITY.is_file():
        pytest.skip("shared chat data not present")
    rows = json.loads(IDENTITY.read_text())
    assert len(rows) == 91 and all(r["input"] == "" for r in rows)
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:45]))
    (tmp_path / "b.jsonl").write_text("".join(json.dumps({**r, "input": None}) + "\n" for r in rows[45:]))
    assert pl.read_ndjson(tmp_path / "b.jsonl").schema["input"] == pl.Null
    assert not by_check(run(tmp_path), "schema.inconsistent")


def test_a_null_column_beside_a_real_difference_still_reports_the_difference(tmp_path):
    """The null column takes the others' dtype; a column of another kind in the same shard is still
    named."""
    rows = [{"text": f"t{k}", "note": f"n{k}", "score": k} for k in range(20)]
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:10]))
    (tmp_path / "b.jsonl").write_text("".join(json.dumps({**r, "note": None, "score": str(r["score"])}) + "\n"
                                              for r in rows[10:]))
    f = one(run(tmp_path), "schema.inconsistent")
    assert f.shards == ("b.jsonl",) and f.details["dtypes"] == {"score": {"expected": "Int64", "actual": "String"}}
