"""A Boolean class label (TRL's KTO rows: prompt / completion / label, True = desirable) has its two
classes by its dtype: labels.out_of_range and labels.unseen_class run without [labels] num_classes
instead of a skipped entry asking for it; a configured num_classes still wins."""
from __future__ import annotations

import json

from dshelp import by_check, one, run, write

KTO = {"prompt": ["Q1", "Q2", "Q3", "Q4"], "completion": ["A1", "A2", "A3", "A4"], "label": [True, False, True, False]}


def _skips(rep, check: str) -> list[str]:
    return [s["reason"] for s in rep.to_dict()["skipped"] if s["check"] == check]


def test_kto_bool_labels_need_no_num_classes(tmp_path):
    write(tmp_path, "kto.parquet", KTO)
    rep = run(tmp_path)
    assert rep.to_dict()["shards"][0]["layout"] == "kto"
    for check in ("labels.out_of_range", "labels.unseen_class"):
        assert _skips(rep, check) == [] and by_check(rep, check) == []


def test_kto_rows_of_one_label_name_the_class_never_seen(tmp_path):
    rows = [{"prompt": f"Q{i}", "completion": f"A{i}", "label": True} for i in range(3)]
    (tmp_path / "kto.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    rep = run(tmp_path)
    f = one(rep, "labels.unseen_class")
    never = sorted({False, True} - {r["label"] for r in rows})
    assert f.count == len(never) == 1 and f.details["unseen"] == never
    assert "only desirable examples" in f.message and _skips(rep, "labels.out_of_range") == []


def test_a_configured_num_classes_still_bounds_a_bool_label(tmp_path):
    write(tmp_path, "kto.parquet", KTO)
    rep = run(tmp_path, {"labels": {"num_classes": 1}})
    f = one(rep, "labels.out_of_range")
    assert f.rows == tuple(k for k, v in enumerate(KTO["label"]) if int(v) >= 1)


def test_integer_labels_beside_bool_ones_still_ask_for_num_classes(tmp_path):
    """Across shards the label is not Boolean everywhere: integer classes have no known count."""
    write(tmp_path, "a.parquet", {"text": ["x", "y"], "label": [True, False]})
    write(tmp_path, "b.parquet", {"text": ["z", "w"], "label": [0, 3]})
    rep = run(tmp_path)
    assert _skips(rep, "labels.unseen_class") == ["no [labels] num_classes or classes"]
