"""The shard-set checks of datacheck.checks.index: index.numbering_gap, index.temp_file and
index.empty_shard."""
from __future__ import annotations

import polars as pl
import pytest
from checkhelp import findings, one, write_shard

import datacheck


@pytest.mark.parametrize(
    "names, count, missing",
    [
        (["train-00000-of-00004.parquet", "train-00001-of-00004.parquet", "train-00003-of-00004.parquet"], 1, [2]),
        (["train-00000-of-00002.parquet", "train-00001-of-00002.parquet"], 0, []),
        (["data-00000-of-00003.parquet"], 2, [1, 2]),
    ],
)
def test_numbering_gap(tmp_path, names, count, missing):
    for i, n in enumerate(names):
        write_shard(tmp_path, {"text": [f"row {i}"]}, n)
    rep = datacheck.audit(str(tmp_path))
    got = findings(rep, "index.numbering_gap")
    if not count:
        assert got == []
        return
    (f,) = got
    assert (f.count, f.severity, f.details["missing"]) == (count, "error", missing)
    width = len(names[0].split("-of-")[1].split(".")[0])
    n_total = int(names[0].split("-of-")[1].split(".")[0])
    prefix = names[0].split("-")[0]
    for m in missing:
        assert f"{prefix}-{m:0{width}d}-of-{n_total:0{width}d}.parquet" in f.message


def test_numbering_disagreeing_counts(tmp_path):
    write_shard(tmp_path, {"text": ["a"]}, "train-00000-of-00002.parquet")
    write_shard(tmp_path, {"text": ["b"]}, "train-00001-of-00003.parquet")
    rep = datacheck.audit(str(tmp_path))
    msgs = [f.message for f in findings(rep, "index.numbering_gap")]
    assert any("disagree on the shard count: -of-[2, 3]" in m for m in msgs)


def test_numbering_per_folder(tmp_path):
    write_shard(tmp_path, {"text": ["a"]}, "train/data-00000-of-00001.parquet")
    write_shard(tmp_path, {"text": ["b"]}, "test/data-00000-of-00001.parquet")
    rep = datacheck.audit(str(tmp_path))
    assert findings(rep, "index.numbering_gap") == []


def test_temp_file_does_not_count_as_present(tmp_path):
    write_shard(tmp_path, {"text": ["a"]}, "train-00000-of-00002.parquet")
    (tmp_path / "train-00001-of-00002.parquet.partial").write_bytes(b"PAR1")
    (tmp_path / ".~lock.train.parquet#").write_bytes(b"")
    rep = datacheck.audit(str(tmp_path))
    tmp = one(rep, "index.temp_file")
    assert (tmp.severity, tmp.count) == ("warn", 2)
    assert tmp.shards == (".~lock.train.parquet#", "train-00001-of-00002.parquet.partial")
    assert [s.path for s in rep.shards] == ["train-00000-of-00002.parquet"]
    gap = one(rep, "index.numbering_gap")
    assert gap.details["missing"] == [1]
    assert "train-00001-of-00002.parquet" in gap.message


def test_temp_files_listed(tmp_path):
    write_shard(tmp_path, {"text": ["a"]}, "a.parquet")
    for name in ("b.parquet.tmp", "c.jsonl.incomplete", "d.parquet.crdownload"):
        (tmp_path / name).write_bytes(b"x")
    rep = datacheck.audit(str(tmp_path))
    f = one(rep, "index.temp_file")
    assert f.shards == ("b.parquet.tmp", "c.jsonl.incomplete", "d.parquet.crdownload")
    assert "not audited" in f.message


def test_empty_shard(tmp_path):
    write_shard(tmp_path, pl.DataFrame({"text": []}, schema={"text": pl.String}), "a.parquet")
    (tmp_path / "b.jsonl").write_text("")
    write_shard(tmp_path, {"text": ["x"]}, "c.parquet")
    rep = datacheck.audit(str(tmp_path))
    got = [(s.path, s.rows, [f.check for f in s.findings]) for s in rep.shards]
    assert got == [("a.parquet", 0, ["index.empty_shard"]), ("b.jsonl", 0, ["index.empty_shard"]),
                   ("c.parquet", 1, [])]
    assert all(f.severity == "warn" for f in findings(rep, "index.empty_shard"))


def test_numbering_gap_names_missing_shards_like_the_present_ones(tmp_path):
    for name in ("part-0-of-4.parquet", "part-1-of-4.parquet", "part-3-of-4.parquet"):
        write_shard(tmp_path, {"text": [name]}, name)
    f = one(datacheck.audit(str(tmp_path)), "index.numbering_gap")
    assert "part-2-of-4.parquet" in f.message
    for name in ("train-000000-of-000003.parquet",):
        write_shard(tmp_path / "six", {"text": [name]}, name)
    f = one(datacheck.audit(str(tmp_path / "six")), "index.numbering_gap")
    assert "train-000001-of-000003.parquet, train-000002-of-000003.parquet" in f.message
