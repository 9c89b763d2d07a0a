"""``schema.nullable`` on the numeric feature columns of a ``tabular``/``regression`` shard, with no
schema given. An empty cell in a numeric feature column of a CSV (pandas' ``to_csv`` writes NaN so), a
JSON null (pandas' ``to_json``) or a parquet null (pandas' ``to_parquet``: pyarrow stores NaN as null)
passed with no finding at all: datacheck read it as null, ``finite.nan`` counts NaN only and no null
check covered the features; only ``--schema tabular`` reported it. Every consumer turns it into NaN
(asserted here with pandas, polars and torch) and the loss with it. The layout's contract (the
built-in ``tabular`` schema) declares feature columns non-nullable: the same ID, with or without a
schema. Answers stay ``labels.null``'s; token and text layouts are unchanged."""
from __future__ import annotations

import numpy as np
import pandas as pd
import polars as pl
import pyarrow.parquet as pq
import pytest
from checkhelp import findings

import datacheck

FEATURES = ["x1", "x2", "age"]


def _frame(n: int = 240, seed: int = 7, answer: str = "label") -> pd.DataFrame:
    """A realistic tabular set: two standardized measurements, an integer age, and a class label (or
    a float regression target ``y``), with NaN planted in two feature columns at random rows."""
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"x1": rng.normal(size=n), "x2": rng.normal(loc=3.0, scale=0.5, size=n),
                       "age": rng.integers(18, 90, size=n).astype("float64")})
    if answer == "label":
        df["label"] = (df["x1"] + rng.normal(scale=0.3, size=n) > 0).astype("int64")
    else:
        df["y"] = 2.0 * df["x1"] - df["x2"] + rng.normal(scale=0.1, size=n)
    df.loc[rng.choice(n, size=5, replace=False), "x1"] = np.nan
    df.loc[rng.choice(n, size=3, replace=False), "age"] = np.nan
    return df


def _expected(df: pd.DataFrame) -> dict[str, list[int]]:
    """column -> the 0-based rows pandas holds NaN at (the nulls of the written shard)."""
    return {c: sorted(np.flatnonzero(df[c].isna().to_numpy()).tolist()) for c in FEATURES if df[c].isna().any()}


def _nullable(rep) -> dict[str, list[int]]:
    return {f.column: list(f.rows) for f in findings(rep, "schema.nullable")}


@pytest.mark.parametrize("answer, layout", [("label", "tabular"), ("y", "regression")])
def test_pandas_to_csv_nan_features_are_schema_nullable_at_their_rows(tmp_path, answer, layout):
    df = _frame(answer=answer)
    path = tmp_path / "train.csv"
    df.to_csv(path, index=False)
    want = _expected(df)
    # what a consumer reads: pandas' NaN at those rows, polars' null turned NaN by to_numpy and to_torch
    back = pd.read_csv(path)
    assert {c: sorted(np.flatnonzero(back[c].isna().to_numpy()).tolist()) for c in want} == want
    pf = pl.read_csv(path)
    assert {c: pf[c].null_count() for c in want} == {c: len(r) for c, r in want.items()}
    assert np.isnan(pf["x1"].to_numpy()[want["x1"][0]])
    torch = pytest.importorskip("torch")
    assert torch.isnan(pf.select(FEATURES).to_torch(dtype=pl.Float32)).any(dim=1).sum().item() == len(
        set(want["x1"]) | set(want["age"]))

    rep = datacheck.audit([str(path)])
    assert rep.shards[0].layout == layout
    assert _nullable(rep) == want
    f = findings(rep, "schema.nullable", "x1")[0]
    assert f.count == len(want["x1"]) and f.severity == "error" and not rep.passed
    assert list(f.lines) == [r + 2 for r in want["x1"]]  # line 1 is the header
    for words in ("NaN", "pandas", "torch", "XGBoost", "nullable: true", '[policy] "schema.nullable"'):
        assert words in f.message
    # a null is not NaN in the shard: finite.nan stays silent, and no other check reports the cells
    assert {x.check for x in rep.findings} == {"schema.nullable"}


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_pandas_parquet_and_jsonl_null_features_are_found(tmp_path, fmt):
    df = _frame(seed=11)
    path = tmp_path / f"train.{fmt}"
    if fmt == "parquet":
        df.to_parquet(path, index=False)
        table = pq.read_table(path)  # pyarrow stores pandas' NaN as null: no NaN left for finite.nan
        assert {c: table.column(c).null_count for c in FEATURES} == {c: int(df[c].isna().sum()) for c in FEATURES}
    else:
        df.to_json(path, orient="records", lines=True)
        assert path.read_text().count('"x1":null') == int(df["x1"].isna().sum())
    rep = datacheck.audit([str(path)])
    assert rep.shards[0].layout == "tabular"
    assert _nullable(rep) == _expected(df)


def test_clean_tabular_data_gives_no_finding(tmp_path):
    df = _frame().fillna(0.0)
    for fmt in ("csv", "parquet", "jsonl"):
        path = tmp_path / fmt / f"train.{fmt}"
        path.parent.mkdir()
        {"csv": lambda: df.to_csv(path, index=False), "parquet": lambda: df.to_parquet(path, index=False),
         "jsonl": lambda: df.to_json(path, orient="records", lines=True)}[fmt]()
        rep = datacheck.audit([str(path)])
        assert rep.shards[0].layout == "tabular"
        assert rep.findings == [] and rep.passed, fmt


def test_list_feature_null_row_and_null_element(tmp_path):
    emb = [[0.1, 0.2], None, [0.3, None], [0.5, 0.6], [float("nan"), 0.1]]
    df = pl.DataFrame({"emb": emb, "y": [0.5, 1.5, 2.5, 3.5, 4.5]}, schema={"emb": pl.List(pl.Float32), "y": pl.Float64})
    df.write_parquet(tmp_path / "emb.parquet")
    rep = datacheck.audit([str(tmp_path / "emb.parquet")])
    assert rep.shards[0].layout == "regression"
    want = [i for i, v in enumerate(emb) if v is None or any(x is None for x in v)]
    assert _nullable(rep) == {"emb": want}
    assert [list(f.rows) for f in findings(rep, "schema.nullable")][0] == [1, 2]
    assert list(findings(rep, "finite.nan")[0].rows) == [4]  # NaN stays finite.nan's


def test_integer_feature_with_an_empty_cell(tmp_path):
    """An integer CSV column with an empty cell: polars reads Int64 with a null, pandas float64 NaN."""
    ages = [31, 45, None, 27, 60, 38]
    lines = ["age,income,label"] + [f"{'' if a is None else a},{1000 * (i + 1)},{i % 2}" for i, a in enumerate(ages)]
    (tmp_path / "t.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert pd.read_csv(tmp_path / "t.csv")["age"].isna().tolist() == [a is None for a in ages]
    rep = datacheck.audit([str(tmp_path / "t.csv")])
    assert _nullable(rep) == {"age": [i for i, a in enumerate(ages) if a is None]}


def test_a_missing_answer_stays_labels_null_only(tmp_path):
    df = _frame(answer="y").dropna()
    df.iloc[4, df.columns.get_loc("y")] = np.nan
    df.to_csv(tmp_path / "t.csv", index=False)
    rep = datacheck.audit([str(tmp_path / "t.csv")])
    assert {f.check: list(f.rows) for f in rep.findings} == {"labels.null": [4]}


def test_accepting_missing_values_for_gradient_boosting(tmp_path):
    """XGBoost/LightGBM/CatBoost take missing values: a schema declaring a column nullable keeps its
    nulls (the other feature columns are still judged); [policy] sets the severity of them all."""
    df = _frame()
    df.to_csv(tmp_path / "t.csv", index=False)
    want = _expected(df)
    (tmp_path / "cfg").mkdir()
    schema = tmp_path / "cfg" / "boost.yaml"
    schema.write_text("columns:\n  x1:\n    nullable: true\n", encoding="utf-8")
    rep = datacheck.audit([str(tmp_path / "t.csv")], config={"dataset": {"schema": str(schema)}})
    assert _nullable(rep) == {"age": want["age"]}
    assert [f.check for f in rep.findings] == ["schema.nullable"]
    rep = datacheck.audit([str(tmp_path / "t.csv")], config={"policy": {"schema.nullable": {"severity": "info"}}})
    assert _nullable(rep) == want and rep.passed
    rep = datacheck.audit([str(tmp_path / "t.csv")], config={"policy": {"schema.nullable": {"ignore": True}}})
    assert rep.passed


def test_schema_tabular_reports_each_column_once(tmp_path):
    df = _frame()
    df.to_csv(tmp_path / "t.csv", index=False)
    rep = datacheck.audit([str(tmp_path / "t.csv")], config={"dataset": {"schema": "tabular"}})
    got = [(f.column, list(f.rows)) for f in findings(rep, "schema.nullable")]
    assert sorted(got) == sorted(_expected(df).items())


def test_a_cell_of_another_json_type_is_schema_dtype_not_a_null(tmp_path):
    rows = ['{"x1": 0.5, "label": 0}', '{"x1": "n/a", "label": 1}', '{"x1": null, "label": 0}', '{"x1": 1.5, "label": 1}']
    (tmp_path / "t.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    rep = datacheck.audit([str(tmp_path / "t.jsonl")])
    assert rep.shards[0].layout == "tabular"
    assert _nullable(rep) == {"x1": [2]}
    assert [list(f.rows) for f in findings(rep, "schema.dtype", "x1")] == [[1]]


def test_text_and_token_layouts_are_unchanged(tmp_path):
    """A null in a numeric column of a text or token row is no feature of the model: no finding."""
    n = 6
    text = pl.DataFrame({"text": [f"review {i}" for i in range(n)], "label": [i % 2 for i in range(n)],
                         "idx": [0, None, 2, 3, None, 5]})
    text.write_parquet(tmp_path / "text.parquet")
    sts = pl.DataFrame({"sentence1": ["a b"] * n, "sentence2": ["b c"] * n, "label": [0.5 * i for i in range(n)],
                        "idx": [0, 1, None, 3, 4, 5]})
    sts.write_parquet(tmp_path / "sts.parquet")
    tok = pl.DataFrame({"input_ids": [[1, 2, 3]] * n, "attention_mask": [[1, 1, 1]] * n,
                        "label": [i % 2 for i in range(n)], "weight": [1.0, None, 1.0, 1.0, 1.0, 1.0]})
    tok.write_parquet(tmp_path / "tok.parquet")
    layouts = {}
    for name in ("text", "sts", "tok"):
        rep = datacheck.audit([str(tmp_path / f"{name}.parquet")])
        layouts[name] = rep.shards[0].layout
        assert findings(rep, "schema.nullable") == [], name
    assert layouts == {"text": "text_classification", "sts": "regression", "tok": "text_classification"}


def test_real_sst2_validation_with_null_idx_is_unchanged(tmp_path, realdata):
    """Real GLUE SST-2 (PROVENANCE.md: sentence, label, idx; validation 872 rows), its ``idx`` nulled on
    some rows: a text classifier's metadata, never a feature: no schema.nullable."""
    src = realdata / "sst2_vi_glue_parquet" / "validation-00000-of-00001.parquet"
    df = pl.read_parquet(src)
    assert df.columns == ["sentence", "label", "idx"] and df.height == 872
    df = df.with_columns(pl.when(pl.int_range(pl.len()) % 100 == 0).then(None).otherwise(pl.col("idx")).alias("idx"))
    df.write_parquet(tmp_path / "validation.parquet")
    rep = datacheck.audit([str(tmp_path / "validation.parquet")])
    assert rep.shards[0].layout == "text_classification"
    assert findings(rep, "schema.nullable") == []
