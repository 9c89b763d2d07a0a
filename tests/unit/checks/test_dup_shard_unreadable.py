"""``dup.shard`` counts readable shards only: identical broken files feed no row twice."""
from __future__ import annotations

import polars as pl

import datacheck


def test_identical_unreadable_shards_are_not_dup_shard(tmp_path):
    good = tmp_path / "good.parquet"
    pl.DataFrame({"text": ["a", "b"]}).write_parquet(good)
    half = good.read_bytes()[: good.stat().st_size // 2]  # a truncated parquet file (no footer)
    (tmp_path / "t1.parquet").write_bytes(half)
    (tmp_path / "t2.parquet").write_bytes(half)
    report = datacheck.audit([str(tmp_path)], {}, fail_on="error")
    assert not [f for f in report.dataset_findings if f.check == "dup.shard"]
    assert sorted(s.path for s in report.shards for f in s.findings if f.check == "decode.unreadable") == [
        "t1.parquet", "t2.parquet"]


def test_identical_readable_shards_still_are(tmp_path):
    pl.DataFrame({"text": ["a", "b"]}).write_parquet(tmp_path / "a.parquet")
    (tmp_path / "b.parquet").write_bytes((tmp_path / "a.parquet").read_bytes())
    report = datacheck.audit([str(tmp_path)], {}, fail_on="error")
    dup = [f for f in report.dataset_findings if f.check == "dup.shard"]
    assert [(f.count, f.shards) for f in dup] == [(1, ("a.parquet", "b.parquet"))]
