"""``datacheck diff`` over a growing shard set whose shards are renamed between two audits: a shard
moved to another path with the same bytes is *renamed*, not added plus removed, and its findings are
compared with the OLD findings of the same bytes, so a rename alone is never a new policy failure."""
from __future__ import annotations

import json
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
from gatehelp import cli, load

VOCAB = 1000


def _shard(path, seed: int, bad_row: int | None = None) -> None:
    """20 rows of token ids in [3, VOCAB) (row ``bad_row`` holds VOCAB + 5 at position 2), full masks."""
    ids = [[3 + (seed * 131 + r * 17 + k) % (VOCAB - 3) for k in range(8)] for r in range(20)]
    if bad_row is not None:
        ids[bad_row][2] = VOCAB + 5
    pq.write_table(pa.table({"input_ids": pa.array(ids, pa.list_(pa.int32())),
                             "attention_mask": pa.array([[1] * 8] * 20, pa.list_(pa.int8()))}), path)


def test_renamed_shard_is_neither_added_nor_a_new_failure(tmp_path, monkeypatch):
    data = tmp_path / "data"
    data.mkdir()
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text(f"[tokens]\nvocab_size = {VOCAB}\n")
    _shard(data / "a.parquet", 1, bad_row=4)   # fails the policy: tokens.out_of_vocab
    _shard(data / "b.parquet", 2)
    _shard(data / "c.parquet", 3)
    common = ("--config", str(cfg), "--report-dir", str(tmp_path / "reports"), "--no-cache")
    r1 = cli("audit", str(data), *common, "-o", str(tmp_path / "old.json"), monkeypatch=monkeypatch)
    assert r1.returncode == 1
    (data / "a.parquet").rename(data / "a-moved.parquet")           # renamed, still failing
    (data / "b.parquet").rename(data / "b-moved.parquet")           # renamed, clean
    (data / "c.parquet").unlink()                                   # removed
    _shard(data / "d.parquet", 4)                                   # added
    r2 = cli("audit", str(data), *common, "-o", str(tmp_path / "new.json"), monkeypatch=monkeypatch)
    assert r2.returncode == 1
    old, new = load(tmp_path / "old.json"), load(tmp_path / "new.json")
    hashes = {s["path"]: s["content_hash"] for s in old["shards"]}

    r = cli("diff", str(tmp_path / "old.json"), str(tmp_path / "new.json"), monkeypatch=monkeypatch)
    assert r.returncode == 0, r.stdout          # the only failure (a.parquet's) was there before
    assert "shards: 1 added, 1 removed, 0 changed, 2 renamed (same content)" in r.stdout
    assert "  + d.parquet" in r.stdout and "  - c.parquet" in r.stdout
    assert "  > a.parquet -> a-moved.parquet" in r.stdout and "  > b.parquet -> b-moved.parquet" in r.stdout
    assert "findings: 0 new, 0 resolved, 0 grown, 0 reduced" in r.stdout
    assert "new policy failures: 0" in r.stdout

    js = json.loads(cli("diff", str(tmp_path / "old.json"), str(tmp_path / "new.json"), "--format", "json",
                        monkeypatch=monkeypatch).stdout)["result"]
    assert js["shards"]["added"] == ["d.parquet"] and js["shards"]["removed"] == ["c.parquet"]
    assert js["shards"]["renamed"] == [
        {"old_path": "a.parquet", "new_path": "a-moved.parquet", "content_hash": hashes["a.parquet"]},
        {"old_path": "b.parquet", "new_path": "b-moved.parquet", "content_hash": hashes["b.parquet"]}]
    assert js["new_policy_failures"] == []
    md = cli("diff", str(tmp_path / "old.json"), str(tmp_path / "new.json"), "--format", "markdown",
             monkeypatch=monkeypatch)
    assert md.returncode == 0 and "- renamed: `a.parquet` → `a-moved.parquet`" in md.stdout
    assert {s["path"] for s in new["shards"]} == {"a-moved.parquet", "b-moved.parquet", "d.parquet"}


def test_renamed_and_changed_shard_is_removed_and_added(tmp_path, monkeypatch):
    """Other bytes under another name are another shard: its failure is new (exit 1)."""
    data = tmp_path / "data"
    data.mkdir()
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text(f"[tokens]\nvocab_size = {VOCAB}\n")
    _shard(data / "a.parquet", 1)
    common = ("--config", str(cfg), "--report-dir", str(tmp_path / "reports"), "--no-cache")
    assert cli("audit", str(data), *common, "-o", str(tmp_path / "old.json"), monkeypatch=monkeypatch).returncode == 0
    (data / "a.parquet").unlink()
    _shard(data / "a2.parquet", 1, bad_row=0)
    assert cli("audit", str(data), *common, "-o", str(tmp_path / "new.json"), monkeypatch=monkeypatch).returncode == 1
    r = cli("diff", str(tmp_path / "old.json"), str(tmp_path / "new.json"), monkeypatch=monkeypatch)
    assert r.returncode == 1
    assert "shards: 1 added, 1 removed, 0 changed" in r.stdout and "renamed" not in r.stdout
    assert "! a2.parquet: tokens.out_of_vocab (input_ids) [error] 0 -> 1 FAILS POLICY" in r.stdout


def test_two_copies_renamed_pair_in_order(tmp_path, monkeypatch):
    """Two byte-identical shards both renamed: paired in sorted order, none left added or removed."""
    data = tmp_path / "data"
    data.mkdir()
    _shard(data / "x1.parquet", 7)
    shutil.copy(data / "x1.parquet", data / "x2.parquet")
    common = ("--report-dir", str(tmp_path / "reports"), "--no-cache")
    cli("audit", str(data), *common, "-o", str(tmp_path / "old.json"), monkeypatch=monkeypatch)
    (data / "x1.parquet").rename(data / "y1.parquet")
    (data / "x2.parquet").rename(data / "y2.parquet")
    cli("audit", str(data), *common, "-o", str(tmp_path / "new.json"), monkeypatch=monkeypatch)
    js = json.loads(cli("diff", str(tmp_path / "old.json"), str(tmp_path / "new.json"), "--format", "json",
                        monkeypatch=monkeypatch).stdout)["result"]
    assert [(x["old_path"], x["new_path"]) for x in js["shards"]["renamed"]] == [
        ("x1.parquet", "y1.parquet"), ("x2.parquet", "y2.parquet")]
    assert js["shards"]["added"] == [] and js["shards"]["removed"] == []
    assert js["findings"]["new"] == [] and js["findings"]["resolved"] == []
