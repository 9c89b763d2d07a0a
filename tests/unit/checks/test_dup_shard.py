"""dup.shard of datacheck.checks.dup.shard: byte-identical shards, in any folder; empty files are
not duplicates of each other."""
from __future__ import annotations

import shutil

from checkhelp import findings, one, write_shard

import datacheck
from datacheck.model.config import config_from_dict
from datacheck.tools.clean import clean


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


def test_the_numbered_shard_is_the_copy_kept_not_a_stray_copy_of_it(tmp_path):
    """A file manager's copy ``train-00001-of-00003 (copy).parquet`` sorts before the numbered name
    (``' ' < '.'``): the numbered name is still the first of the group, the copy ``clean --drop
    dup.shard`` keeps, and the clean copy keeps the set's names without renumbering anything."""
    names = [f"train-{k:05d}-of-00003.parquet" for k in range(3)]
    for k, name in enumerate(names):
        write_shard(tmp_path, {"text": [f"row {k} {j}" for j in range(3)]}, name)
    stray = "train-00001-of-00003 (copy).parquet"
    shutil.copy(tmp_path / names[1], tmp_path / stray)
    assert sorted([stray, names[1]])[0] == stray  # path order alone would keep the stray copy
    f = one(datacheck.audit(str(tmp_path)), "dup.shard")
    assert f.shards == (names[1], stray)
    res = clean([str(tmp_path)], tmp_path.parent / "out", config_from_dict({}), drop=["dup.shard"])
    by = {s.path: s for s in res.shards}
    assert by[stray].duplicate_of == names[1]
    assert all(by[n].duplicate_of is None and by[n].written_as is None for n in names)
    assert sorted(p.name for p in res.out.glob("*.parquet")) == names
