"""A split without the label column (an unlabeled test split) is a normal layout."""
from __future__ import annotations

from dshelp import by_check, run, write

SPLITS = {"train": "train*.parquet", "test": "test.parquet"}


def test_unlabeled_test_split_is_not_inconsistent(tmp_path):
    write(tmp_path, "train-0.parquet", {"text": ["a", "b", "c"], "label": [0, 1, 0]})
    write(tmp_path, "train-1.parquet", {"text": ["d", "e"], "label": [1, 1]})
    write(tmp_path, "test.parquet", {"text": ["x", "y", "a"]})
    rep = run(tmp_path, {"splits": SPLITS})
    assert by_check(rep, "schema.inconsistent") == []
    (leak,) = by_check(rep, "dup.split_overlap")
    assert leak.count == 1


def test_conflicting_labels_name_the_label_column_when_a_split_has_none(tmp_path):
    write(tmp_path, "test.parquet", {"text": ["x"]})
    write(tmp_path, "train-0.parquet", {"text": ["b", "b"], "label": [0, 1]})
    rep = run(tmp_path, {"splits": SPLITS})
    (f,) = by_check(rep, "dup.conflicting_labels")
    assert "in 'label'" in f.message and "None" not in f.message
    assert f.column == "label"


def test_shards_of_one_split_must_still_agree(tmp_path):
    write(tmp_path, "train-0.parquet", {"text": ["a", "b"], "label": [0, 1]})
    write(tmp_path, "train-1.parquet", {"text": ["c", "d"], "label": [1, 0]})
    write(tmp_path, "train-2.parquet", {"text": ["e"]})
    write(tmp_path, "test.parquet", {"text": ["x"], "idx": [3]})
    rep = run(tmp_path, {"splits": SPLITS})
    got = {f.shards: f.details for f in by_check(rep, "schema.inconsistent")}
    # the label-less train shard is inconsistent within train; the test split differs in a content column
    assert got[("train-2.parquet",)]["missing"] == ["label"]
    assert got[("test.parquet",)]["extra"] == ["idx"]


# ---------------------------------------------------------------- --against without shared columns
def test_against_without_shared_content_columns_is_skipped_not_passed(tmp_path):
    write(tmp_path / "eval", "e.parquet", {"text": ["a", "b"]})
    write(tmp_path / "train", "t.parquet", {"input_ids": [[1, 2], [3]], "attention_mask": [[1, 1], [1]]})
    rep = run(tmp_path / "eval", against=tmp_path / "train")
    assert by_check(rep, "dup.split_overlap") == []
    (reason,) = [s["reason"] for s in rep.skipped if s["check"] == "dup.split_overlap"]
    assert "['text']" in reason and "['input_ids', 'attention_mask']" in reason


def test_splits_without_shared_content_columns_are_skipped(tmp_path):
    write(tmp_path, "train.parquet", {"sentence": ["a", "b"], "label": [0, 1]})
    write(tmp_path, "test.parquet", {"input_ids": [[1]]})
    rep = run(tmp_path, {"splits": {"train": "train.parquet", "test": "test.parquet"}})
    (reason,) = [s["reason"] for s in rep.skipped if s["check"] == "dup.split_overlap"]
    assert "split 'test'" in reason and "['input_ids']" in reason and "['sentence']" in reason


def test_same_roles_under_other_names_are_still_compared(tmp_path):
    write(tmp_path / "eval", "e.parquet", {"sentence": ["a", "z"]})
    write(tmp_path / "train", "t.parquet", {"text": ["a", "b"]})
    rep = run(tmp_path / "eval", against=tmp_path / "train")
    (f,) = by_check(rep, "dup.split_overlap")
    assert f.count == 1
