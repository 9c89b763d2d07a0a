"""The shard set is what lies on disk next to the audited shards, not the
selection; and auditing two sibling folders never walks their common parent."""
from __future__ import annotations

import json

from dshelp import by_check, write

import datacheck


def _set(folder, n=4, skip=()):
    for k in range(n):
        if k not in skip:
            write(folder, f"train-{k:05d}-of-{n:05d}.parquet", {"text": [f"t{k}"]})


def test_one_shard_of_a_complete_set_has_no_gap(tmp_path):
    _set(tmp_path / "d")
    rep = datacheck.audit(str(tmp_path / "d" / "train-00001-of-00004.parquet"))
    assert by_check(rep, "index.numbering_gap") == []
    sub = [str(tmp_path / "d" / f"train-0000{k}-of-00004.parquet") for k in (0, 2)]
    assert by_check(datacheck.audit(sub), "index.numbering_gap") == []


def test_a_gap_on_disk_is_still_found_from_a_subset(tmp_path):
    _set(tmp_path / "d", skip=(3,))
    rep = datacheck.audit(str(tmp_path / "d" / "train-00000-of-00004.parquet"))
    (f,) = by_check(rep, "index.numbering_gap")
    assert f.details["missing"] == [3]
    assert "train-00003-of-00004.parquet" in f.message


def test_sibling_folders_do_not_pick_up_the_parents_state_json(tmp_path):
    write(tmp_path / "a", "x.parquet", {"text": ["a"]})
    write(tmp_path / "b", "y.parquet", {"text": ["b"]})
    # an unrelated Hugging Face state.json next to the two folders
    (tmp_path / "state.json").write_text(json.dumps({"_data_files": [{"filename": "data-00000-of-00001.arrow"}],
                                                     "_split": "train"}))
    (tmp_path / "index.json").write_text("not json")  # would be exit 2 if read
    rep = datacheck.audit([str(tmp_path / "a"), str(tmp_path / "b")])
    assert [f.check for f in rep.findings if f.check.startswith("index.")] == []


def test_state_json_next_to_the_audited_shards_still_counts(tmp_path):
    write(tmp_path / "a", "data-00000-of-00002.arrow", {"text": ["a"]})
    (tmp_path / "a" / "state.json").write_text(json.dumps({"_data_files": [
        {"filename": "data-00000-of-00002.arrow"}, {"filename": "data-00001-of-00002.arrow"}], "_split": "train"}))
    write(tmp_path / "b", "y.parquet", {"text": ["b"]})
    rep = datacheck.audit([str(tmp_path / "a"), str(tmp_path / "b")])
    (f,) = by_check(rep, "index.missing_shard")
    assert f.shards == ("a/data-00001-of-00002.arrow",)
