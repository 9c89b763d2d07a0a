"""``datacheck audit EVAL --against TRAIN`` when the two sides share shards.

- The same path on both sides (``audit DATA --against DATA``, also spelled through a symlinked
  folder, a folder that holds the audited shards): a config mistake, refused with exit 2 before any
  shard is read, naming each shared shard by both paths and its content hash; no report is written.
  Otherwise every row would be reported as a train/eval leak and the gate would fail on data that is fine.
- A copy under another name (equal content hashes), a hard link, a file symlink followed with
  ``--follow-symlinks`` (a content-addressed cache gives byte-identical splits one file): a real
  leak, ``dup.split_overlap`` (exit 1), whose message names both shards and the content hash first,
  with ``details.same_bytes``.

Material: SST-2 (Vietnamese) validation and dkhate test shards from ../shared/realdata; the expected
hashes are xxh3-128 of the files' bytes and the expected leak count is computed with polars here."""
from __future__ import annotations

import json
import os
import shutil

import polars as pl
import pytest
import xxhash
from conftest import REALDATA, run_cli

import datacheck
from datacheck.model.errors import UsageError

SST2 = REALDATA / "sst2_vi_glue_parquet" / "validation-00000-of-00001.parquet"
DKHATE = REALDATA / "dkhate_danish_offensive" / "raw_parquet" / "test-00000-of-00001.parquet"


@pytest.fixture
def data(tmp_path):
    if not REALDATA.is_dir():
        pytest.skip("../shared/realdata is not present")
    ev, tr = tmp_path / "data" / "eval", tmp_path / "data" / "train"
    ev.mkdir(parents=True)
    tr.mkdir(parents=True)
    shutil.copy(SST2, ev / "sst2.parquet")
    shutil.copy(DKHATE, tr / "dkhate.parquet")
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text("", encoding="utf-8")
    return ev, tr, cfg


def _hash(path) -> str:
    return "xxh3-128:" + xxhash.xxh3_128_hexdigest(path.read_bytes())


def _audit(tmp_path, cfg, *args):
    return run_cli("audit", *args, "--config", str(cfg), "--no-cache", "--no-progress",
                   "--report-dir", str(tmp_path / "reports"), "--format", "json")


@pytest.mark.realdata
def test_the_same_folder_on_both_sides_is_refused(data, tmp_path):
    ev, _tr, cfg = data
    r = _audit(tmp_path, cfg, str(ev), "--against", str(ev))
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stdout == "" and not (tmp_path / "reports").exists()  # refused before any report
    assert (f"--against {ev}: 1 of its 1 shard(s) are shards this audit reads: sst2.parquet = against:sst2.parquet "
            f"({_hash(ev / 'sst2.parquet')})") in r.stderr
    assert "dup.split_overlap" in r.stderr and "[splits]" in r.stderr
    with pytest.raises(UsageError, match="are shards this audit reads"):
        datacheck.audit(str(ev), config={}, against=str(ev))


@pytest.mark.realdata
def test_a_parent_folder_holding_the_audited_shard_is_refused(data, tmp_path):
    ev, tr, cfg = data
    r = _audit(tmp_path, cfg, str(ev / "sst2.parquet"), "--against", str(ev.parent))
    assert r.returncode == 2, r.stderr
    assert (f"1 of its 2 shard(s) are shards this audit reads: sst2.parquet = against:eval/sst2.parquet "
            f"({_hash(ev / 'sst2.parquet')})") in r.stderr


@pytest.mark.realdata
def test_the_same_folder_through_a_symlinked_folder_is_refused(data, tmp_path):
    ev, _tr, cfg = data
    (tmp_path / "eval_link").symlink_to(ev, target_is_directory=True)
    r = _audit(tmp_path, cfg, str(ev), "--against", str(tmp_path / "eval_link"))
    assert r.returncode == 2, r.stderr
    assert f"sst2.parquet = against:sst2.parquet ({_hash(ev / 'sst2.parquet')})" in r.stderr


def _same_bytes_leak(r, ev, against_rel):
    """The run ``r`` reports every eval row as a leak, the shard named by its bytes."""
    assert r.returncode == 1, r.stderr
    rep = json.loads(r.stdout)
    (f,) = [f for f in rep["findings"] if f["check"] == "dup.split_overlap"]
    h = _hash(ev / "sst2.parquet")
    assert f["details"]["same_bytes"] == [{"shard": "sst2.parquet", "against_shard": against_rel, "content_hash": h}]
    assert f["count"] == pl.read_parquet(ev / "sst2.parquet").height
    assert f["severity"] == "error" and f["fails_policy"] is True


@pytest.mark.realdata
def test_a_hard_link_in_the_other_folder_is_a_leak_named_by_its_bytes(data, tmp_path):
    """One inode under two paths (DVC's hardlink cache, ``cp -al``): the eval split is the train
    file, a leak of every row, never refused as a config mistake."""
    ev, tr, cfg = data
    os.link(ev / "sst2.parquet", tr / "linked.parquet")
    _same_bytes_leak(_audit(tmp_path, cfg, str(ev), "--against", str(tr)), ev, "linked.parquet")


@pytest.mark.realdata
def test_a_followed_file_symlink_is_a_leak_named_by_its_bytes(data, tmp_path):
    """Hugging Face's hub cache links byte-identical split files to one blob."""
    ev, tr, cfg = data
    (tr / "blob.parquet").symlink_to(ev / "sst2.parquet")
    r = _audit(tmp_path, cfg, str(ev), "--against", str(tr), "--follow-symlinks")
    _same_bytes_leak(r, ev, "blob.parquet")


@pytest.mark.realdata
def test_a_copy_under_another_name_is_a_leak_named_by_its_bytes(data, tmp_path):
    ev, tr, cfg = data
    shutil.copy(SST2, tr / "copy.parquet")
    r = _audit(tmp_path, cfg, str(ev), "--against", str(tr))
    assert r.returncode == 1, r.stderr
    rep = json.loads(r.stdout)
    (f,) = [f for f in rep["findings"] if f["check"] == "dup.split_overlap"]
    h = _hash(ev / "sst2.parquet")
    assert h == _hash(tr / "copy.parquet") and h == rep["shards"][0]["content_hash"]
    assert f["details"]["same_bytes"] == [{"shard": "sst2.parquet", "against_shard": "copy.parquet", "content_hash": h}]
    assert f["message"].startswith("1 audited shard(s) have the same bytes as a shard of the --against dataset "
                                   f"(sst2.parquet = against:copy.parquet ({h})): every row of them is in both sets. ")
    # every eval row whose sentence is in the train side (here: all of them, the copy holds them)
    eval_text = pl.read_parquet(ev / "sst2.parquet")["sentence"]
    train_text = set(pl.read_parquet(tr / "copy.parquet")["sentence"]) | set(pl.read_parquet(tr / "dkhate.parquet")["text"])
    assert f["count"] == sum(t in train_text for t in eval_text.to_list()) == eval_text.len()
    assert f["severity"] == "error" and f["fails_policy"] is True


@pytest.mark.realdata
def test_shards_of_different_bytes_are_not_named(data, tmp_path):
    """No shard in common: the comparison and its report are as before (no ``same_bytes``)."""
    ev, tr, cfg = data
    shared = pl.read_parquet(ev / "sst2.parquet").head(5).select(pl.col("sentence").alias("text"), "label")
    pl.concat([pl.read_parquet(tr / "dkhate.parquet").select("text"), shared.select("text")]).write_parquet(
        tr / "dkhate.parquet")
    r = _audit(tmp_path, cfg, str(ev), "--against", str(tr))
    rep = json.loads(r.stdout)
    (f,) = [f for f in rep["findings"] if f["check"] == "dup.split_overlap"]
    eval_text = pl.read_parquet(ev / "sst2.parquet")["sentence"].to_list()
    assert f["count"] == sum(t in set(shared["text"]) for t in eval_text)
    assert "same_bytes" not in f["details"] and f["message"].startswith(f"{f['count']} row(s) of the audited data")
