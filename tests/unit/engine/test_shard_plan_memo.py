"""The registry's plan is built once per (config, roles, schema, file suffixes) and reused for every
shard of that kind; each shard's findings and skip reasons still name that shard."""
from __future__ import annotations

from pathlib import Path

import polars as pl

from datacheck.engine import shard as engine
from datacheck.execute.audit import audit
from datacheck.model.config import config_from_dict


def _count_plans(monkeypatch) -> list[str]:
    built: list[str] = []
    real = engine.shard_plan

    def spy(ctx, *a, **k):
        built.append(ctx.shard)
        return real(ctx, *a, **k)

    monkeypatch.setattr(engine, "shard_plan", spy)
    return built


def test_one_plan_for_shards_of_one_schema_each_named(tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "data"
    root.mkdir()
    empty = pl.DataFrame({"text": pl.Series([], dtype=pl.String), "label": pl.Series([], dtype=pl.Int64)})
    for name in ("a.parquet", "b.parquet", "c.parquet"):
        empty.write_parquet(root / name)
    pl.DataFrame({"text": ["x"], "label": [1]}).write_parquet(root / "d.parquet")
    cfg = config_from_dict({"labels": {"num_classes": 3}, "columns": {"target": "score"}})
    built = _count_plans(monkeypatch)
    rep = audit([root], cfg, workers=1, config_path=None)
    assert len(built) == 1 and engine.SHARD_TOKEN in built[0]  # one plan for the four shards
    by_shard = {s.path: s for s in rep.shards}
    for name in ("a.parquet", "b.parquet", "c.parquet"):
        (f,) = [f for f in by_shard[name].findings if f.check == "index.empty_shard"]
        assert f.message == f"{name} is readable but holds 0 rows"
    assert not [f for f in by_shard["d.parquet"].findings if f.check == "index.empty_shard"]
    for name, sh in by_shard.items():  # [columns] names a column no shard has: each message names its shard
        (f,) = [f for f in sh.findings if f.check == "schema.missing_column"]
        assert f"is absent from {name};" in f.message
    text = rep.to_json()
    assert engine.SHARD_TOKEN not in text and "datacheck-shard" not in text


def test_another_suffix_or_schema_gets_its_own_plan(tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "data"
    root.mkdir()
    pl.DataFrame({"text": ["x", "y"], "label": [1, 2]}).write_parquet(root / "a.parquet")
    pl.DataFrame({"text": ["x", "y"], "label": [1, 2]}).write_ndjson(root / "b.jsonl")
    pl.DataFrame({"text": ["x", "y"], "label": [1.5, 2.0]}).write_parquet(root / "c.parquet")
    cfg = config_from_dict({"labels": {"num_classes": 3}})
    built = _count_plans(monkeypatch)
    audit([root], cfg, workers=1, config_path=None)
    assert sorted(s.rsplit(".", 1)[-1] for s in built) == ["jsonl", "parquet", "parquet"]
