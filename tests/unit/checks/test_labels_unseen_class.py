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
