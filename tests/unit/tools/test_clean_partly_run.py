"""``datacheck clean`` notes on a check that ran only in part: ``schema.nullable`` without a schema
still judges a tabular shard's numeric features (the layout's contract) while the schema's own rules
are skipped. The note said "could not run ... nothing dropped for it" beside the rows it dropped."""
from __future__ import annotations

import numpy as np
import pandas as pd

from datacheck.model.config import config_from_dict
from datacheck.tools.clean import clean


def _tabular_csv(path) -> list[int]:
    """pandas' to_csv of features with NaN planted (empty cells) and a class label; the rows with NaN."""
    rng = np.random.default_rng(3)
    df = pd.DataFrame({"x1": rng.normal(size=50), "x2": rng.normal(size=50), "label": rng.integers(0, 2, size=50)})
    df.loc[[4, 21], "x1"] = np.nan
    df.loc[[21, 33], "x2"] = np.nan
    df.to_csv(path, index=False)
    return sorted(set(np.flatnonzero(df[["x1", "x2"]].isna().any(axis=1).to_numpy()).tolist()))


def test_null_feature_rows_are_dropped_and_the_note_says_only_part_could_not_run(tmp_path):
    (tmp_path / "d").mkdir()
    bad = _tabular_csv(tmp_path / "d" / "train.csv")
    res = clean([str(tmp_path / "d")], tmp_path / "out", config_from_dict({}), drop=["schema.nullable"])
    assert res.quarantined == len(bad)
    kept = pd.read_csv(tmp_path / "out" / "train.csv")
    assert len(kept) == 50 - len(bad) and not kept.isna().any().any()
    assert not [n for n in res.notes if "nothing dropped" in n and "schema.nullable" in n]
    (note,) = [n for n in res.notes if n.startswith("schema.nullable")]
    assert "part of it could not run" in note and "no schema given" in note
    # the default drop (every row-level error check) does not list schema.nullable as not run either
    res = clean([str(tmp_path / "d")], tmp_path / "out2", config_from_dict({}))
    assert res.quarantined == len(bad)
    assert not [n for n in res.notes if "schema.nullable" in n]
