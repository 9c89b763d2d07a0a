"""A tabular shard whose class column is an integer (or Boolean) ``target``/``targets``/``y``
(scikit-learn's ``X, y``, Kaggle's ``target``: ``pd.DataFrame(X).assign(target=y).to_csv``) is a
``tabular`` shard with that column as its class label, as the same shard with a ``label`` column is.

It was of no layout ("no layout fits the columns ..."): a float ``target``/``y`` made it
``regression`` and an integer ``label`` made it ``tabular``, but an integer ``target`` was no role at
all, so a NaN feature written by pandas (an empty CSV cell, a parquet null) passed the gate silently
while the same data with its class column named ``label`` failed it (``schema.nullable``). Expected
rows come from pandas' own NaN positions; class counts from numpy."""
from __future__ import annotations

import numpy as np
import pandas as pd
import polars as pl
import pytest
from checkhelp import findings

import datacheck
from datacheck.model.config import ColumnsSection
from datacheck.model.roles import resolve_roles


def _frame(answer: str, n: int = 300, seed: int = 3) -> pd.DataFrame:
    """Numeric features with legitimate zeros and negatives, an integer class column ``answer``."""
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"age": rng.integers(18, 90, n), "balance": np.round(rng.normal(0, 1000, n), 2),
                       "children": rng.integers(0, 4, n), "temp_c": np.round(rng.normal(-5, 10, n), 1),
                       "member": rng.integers(0, 2, n).astype(bool)})
    df[answer] = (df["balance"] + rng.normal(0, 300, n) > 0).astype("int64")
    return df


@pytest.mark.parametrize("answer", ["target", "targets", "y"])
@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_null_features_beside_an_integer_target_are_found(tmp_path, answer, fmt):
    df = _frame(answer)
    rng = np.random.default_rng(5)
    bal = sorted(rng.choice(len(df), 6, replace=False).tolist())
    temp = sorted(rng.choice(len(df), 2, replace=False).tolist())
    df.loc[bal, "balance"] = np.nan
    df.loc[temp, "temp_c"] = np.nan
    path = tmp_path / f"train.{fmt}"
    df.to_csv(path, index=False) if fmt == "csv" else df.to_parquet(path, index=False)
    back = pd.read_csv(path) if fmt == "csv" else pd.read_parquet(path)
    want = {c: sorted(np.flatnonzero(back[c].isna().to_numpy()).tolist()) for c in ("balance", "temp_c")}
    assert want == {"balance": bal, "temp_c": temp}

    rep = datacheck.audit([str(path)])
    assert rep.shards[0].layout == "tabular"
    assert {f.column: list(f.rows) for f in findings(rep, "schema.nullable")} == want
    assert not rep.passed
    # the class column is the label: its counts are the data's
    counts = dict(zip(*np.unique(df[answer].to_numpy(), return_counts=True)))
    stats = rep.shards[0].stats["labels"]
    assert stats["column"] == answer
    assert {int(k): v for k, v in stats["counts"]} == {int(k): int(v) for k, v in counts.items()}


@pytest.mark.parametrize("answer", ["target", "y"])
def test_clean_integer_target_shard_passes(tmp_path, answer):
    df = _frame(answer)
    for fmt in ("csv", "parquet"):
        path = tmp_path / fmt / f"train.{fmt}"
        path.parent.mkdir()
        df.to_csv(path, index=False) if fmt == "csv" else df.to_parquet(path, index=False)
        rep = datacheck.audit([str(path)])
        assert rep.shards[0].layout == "tabular", fmt
        assert rep.findings == [] and rep.passed, fmt


def test_role_inference_of_class_target_names():
    for name in ("target", "targets", "y"):
        for dtype in (pl.Int64, pl.Int8, pl.UInt8, pl.Boolean):
            roles = resolve_roles(ColumnsSection(), {"x": pl.Float64, name: dtype})
            assert roles.label == name and "label" in roles.inferred and roles.target == ()
        # a float one stays the regression target, a string one (seq2seq target text) no class
        assert resolve_roles(ColumnsSection(), {"x": pl.Float64, name: pl.Float64}).target == (name,)
        assert resolve_roles(ColumnsSection(), {"text": pl.String, name: pl.String}).label is None
        # a label column, or the config's choice, wins
        assert resolve_roles(ColumnsSection(), {"label": pl.Int64, name: pl.Int64}).label == "label"
        assert resolve_roles(ColumnsSection(target=name), {"x": pl.Float64, name: pl.Int64}).label is None
        assert resolve_roles(ColumnsSection(label="x"), {"x": pl.Int64, name: pl.Int64}).label == "x"
    # Kaggle's disaster tweets: text and an integer target is text classification
    assert resolve_roles(ColumnsSection(), {"id": pl.Int64, "text": pl.String, "target": pl.Int64}).label == "target"
