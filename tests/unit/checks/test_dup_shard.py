"""dup.shard of datacheck.checks.dup.shard: byte-identical shards, in any folder; empty files are
not duplicates of each other."""
from __future__ import annotations

import shutil

from checkhelp import findings, one, write_shard

import datacheck


def test_dup_shard_identical_bytes(tmp_path):
    p = write_shard(tmp_path, {"text": ["a", "b"]}, "part-0.parquet")
    shutil.copy(p, tmp_path / "part-1.parquet")
    (tmp_path / "sub").mkdir()
    shutil.copy(p, tmp_path / "sub" / "part-2.parquet")
    write_shard(tmp_path, {"text": ["c"]}, "part-3.parquet")
    rep = datacheck.audit(str(tmp_path))
    f = one(rep, "dup.shard")
    assert (f.count, f.severity) == (2, "error")
    assert f.shards == ("part-0.parquet", "part-1.parquet", "sub/part-2.parquet")


def test_zero_byte_shards_are_not_duplicates_of_each_other(tmp_path):
    (tmp_path / "a.parquet").write_bytes(b"")
    (tmp_path / "b.parquet").write_bytes(b"")
    rep = datacheck.audit(str(tmp_path))
    assert findings(rep, "dup.shard") == []
    assert len(findings(rep, "decode.unreadable")) == 2
