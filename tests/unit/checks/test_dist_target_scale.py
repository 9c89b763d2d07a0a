"""dist.target_scale of datacheck.checks.dist, decided from the shards' ``targets`` stats."""
from __future__ import annotations

import polars as pl

import datacheck


def test_target_scale_from_shard_stats(tmp_path):
    pl.DataFrame({"price": [1e5, 3e5, 2e5], "text": ["a", "b", "c"]}).write_parquet(tmp_path / "a.parquet")
    rep = datacheck.audit(str(tmp_path), config={"columns": {"target": "price"}})
    got = [f for f in rep.findings if f.check == "dist.target_scale"]
    assert len(got) == 1 and got[0].details["mean"] == 2e5 and got[0].severity == "warn"
    rep = datacheck.audit(str(tmp_path), config={"columns": {"target": "price"}, "numeric": {"target_scale_warn": 1e6}})
    assert not [f for f in rep.findings if f.check == "dist.target_scale"]
