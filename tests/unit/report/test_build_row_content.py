"""The report's ``row_content`` says what the dup checks read: a shard whose row content was not read
(its dup checks skipped: a declared content column it lacks) contributes no columns, neither to the
report-level list nor as a shard entry. Before, the skipped shard's remaining columns were listed,
and the two shards' disagreement made the report-level list null. Real rows: realdata
sst2_vi_glue_parquet (validation 872 rows, test 1,821 rows of label -1)."""
from __future__ import annotations

import polars as pl
import pytest
from conftest import REALDATA
from dshelp import run, write

SST2 = REALDATA / "sst2_vi_glue_parquet"


def _pair(tmp_path):
    if not SST2.is_dir():
        pytest.skip("../shared/realdata is not present")
    val = pl.read_parquet(SST2 / "validation-00000-of-00001.parquet")
    test = pl.read_parquet(SST2 / "test-00000-of-00001.parquet")
    assert (val.height, test.height) == (872, 1821)  # PROVENANCE
    assert test["label"].unique().to_list() == [-1]
    root = tmp_path / "ds"
    # a premise/hypothesis layout: the validation rows carry a second text (the next row's sentence)
    write(root, "validation.parquet", val.with_columns(hypothesis=pl.col("sentence").shift(-1, fill_value="")))
    write(root, "test.parquet", test)  # lacks the declared hypothesis column
    return root


def test_a_shard_whose_content_was_not_read_is_left_out(tmp_path):
    root = _pair(tmp_path)
    text = ["sentence", "hypothesis"]
    rep = run(root, {"columns": {"text": text}})
    skipped = {(k["check"], tuple(k["shards"])) for k in rep.skipped}
    assert ("dup.exact_in_shard", ("test.parquet",)) in skipped  # the test shard's content was not read
    # the declared text columns, then the class label (roles in table order): the validation shard's
    assert rep.row_content["columns"] == [*text, "label"]
    assert [(s.path, s.row_content) for s in rep.shards] == [("test.parquet", None), ("validation.parquet", None)]


def test_shards_read_alike_are_unchanged(tmp_path):
    root = _pair(tmp_path)
    rep = run(root, {"columns": {"text": ["sentence"]}})
    assert not any(k["check"] == "dup.exact_in_shard" and k["shards"] for k in rep.skipped)
    assert rep.row_content["columns"] == ["sentence", "label"]
    assert all(s.row_content is None for s in rep.shards)
