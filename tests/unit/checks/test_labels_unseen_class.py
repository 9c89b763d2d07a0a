"""labels.unseen_class on a small multi-shard folder: classes of [labels] num_classes or classes that
no shard holds."""
from __future__ import annotations

from dshelp import by_check, one, run, write


def test_unseen_class(tmp_path):
    write(tmp_path, "a.parquet", {"text": ["a", "b"], "label": [0, 2]})
    write(tmp_path, "b.parquet", {"text": ["c", "d"], "label": [2, 4]})
    f = one(run(tmp_path, {"labels": {"num_classes": 5}}), "labels.unseen_class")
    assert f.count == 2 and f.details["unseen"] == [1, 3] and f.severity == "warn"
    f = one(run(tmp_path, {"labels": {"classes": [0, 2, 4, 7]}}), "labels.unseen_class")
    assert f.details["unseen"] == [7]
    assert by_check(run(tmp_path, {"labels": {"num_classes": 3}}), "labels.unseen_class")[0].details["unseen"] == [1]


def test_every_label_negative_has_no_unseen_class(tmp_path):
    """A split whose every label is -1 (GLUE's hidden test labels) carries no class: no class is
    'unseen' (labels.unexpected_sentinel says the split is unlabeled), the check is skipped saying so."""
    labels = [-1, -1, -1]
    write(tmp_path, "test.parquet", {"text": ["a", "b", "c"], "label": labels})
    rep = run(tmp_path, {"labels": {"num_classes": 2}})
    assert by_check(rep, "labels.unseen_class") == []
    assert "unlabeled split" in next(s["reason"] for s in rep.skipped if s["check"] == "labels.unseen_class")
    assert one(rep, "labels.unexpected_sentinel").count == len(labels)
    # one labelled row among them: the other class is unseen, as before
    write(tmp_path, "train.parquet", {"text": ["d"], "label": [0]})
    assert one(run(tmp_path, {"labels": {"num_classes": 2}}), "labels.unseen_class").details["unseen"] == [1]
