"""``store_part_results`` (``datacheck merge --cache-dir``): a part whose sidecar records no cache keys
(written before they were recorded) is named and none of its results stored; nothing is pruned then."""
from __future__ import annotations

from pathlib import Path

from datacheck.execute.cache import ShardCache
from datacheck.execute.merge import PartInput, store_part_results
from datacheck.model.results import ShardResult


def _result(path: str) -> ShardResult:
    return ShardResult(path=path, format="parquet", content_hash="xxh3-128:" + "ab" * 16, bytes=10, rows=1)


def test_a_part_without_cache_keys_is_named_and_nothing_is_stored_or_pruned(tmp_path):
    cache = tmp_path / "cache"
    kept = cache / "v1" / "ab" / ("ab" * 16 + ".dcr")
    kept.parent.mkdir(parents=True)
    kept.write_bytes(b"an entry of an earlier run")
    part = PartInput(Path("part-0.json"), None, [_result("a.parquet")], {"kind": "datacheck-part"})  # type: ignore[arg-type]
    stored, without = store_part_results([part], cache, prune=True)
    assert (stored, without) == (0, [Path("part-0.json")])
    assert kept.read_bytes() == b"an entry of an earlier run"


def test_only_recorded_shards_are_stored_under_the_recorded_salt(tmp_path):
    meta = {"cache": {"salt": "5a" * 16, "cross_shard": True, "shards": {"a.parquet": None}}}
    part = PartInput(Path("p.json"), None, [_result("a.parquet"), _result("b.parquet")], meta)  # type: ignore[arg-type]
    stored, without = store_part_results([part], tmp_path / "c")
    assert (stored, without) == (1, [])
    c = ShardCache(tmp_path / "c", None, salt="5a" * 16)
    got = c.get(c.key("a.parquet", "parquet", "xxh3-128:" + "ab" * 16), "a.parquet")
    assert got is not None and got.rows == 1
    assert c.get(c.key("b.parquet", "parquet", "xxh3-128:" + "ab" * 16), "b.parquet") is None
