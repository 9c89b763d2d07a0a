"""The report's ``row_content.columns`` tells the truth for every shard, and row hashes
over different column sets are never compared with each other (no silent miss, no false alarm)."""
from __future__ import annotations

import json

import jsonschema
from conftest import ROOT, run_cli
from dshelp import by_check, one, run, write

SCHEMA = json.loads((ROOT / "schemas" / "report.schema.json").read_text())
IDS = [[1, 2, 3], [4, 5, 6], [7, 8, 9]]


def _skips(rep, check: str) -> list[str]:
    return [s["reason"] for s in rep.skipped if s["check"] == check]


def _mixed(tmp_path):
    """a.parquet: input_ids, attention_mask, labels; b.parquet: the same rows without labels."""
    root = tmp_path / "ds"
    write(root, "a.parquet", {"input_ids": IDS, "attention_mask": [[1, 1, 1]] * 3, "labels": IDS})
    write(root, "b.parquet", {"input_ids": IDS, "attention_mask": [[1, 1, 1]] * 3})
    return root


def test_row_content_per_shard_when_shards_differ(tmp_path):
    rep = run(_mixed(tmp_path))
    d = rep.to_dict()
    # before: ["input_ids", "attention_mask", "labels"] for both shards (the first shard's columns)
    assert d["row_content"]["columns"] is None
    assert {s["path"]: s["row_content"]["columns"] for s in d["shards"]} == {
        "a.parquet": ["input_ids", "attention_mask", "labels"], "b.parquet": ["input_ids", "attention_mask"]}
    jsonschema.validate(d, SCHEMA)
    # the columns the shards' row hashes were really computed over (the cross-shard payload)
    assert rep.row_content["encoding"] == "datacheck-row-v3"


def test_row_content_one_list_when_shards_agree(tmp_path):
    root = tmp_path / "ds"
    write(root, "a.parquet", {"text": ["x", "y"], "label": [0, 1], "idx": [0, 1]})
    write(root, "b.parquet", {"text": ["z", "x"], "label": [1, 0], "idx": [2, 3]})
    d = run(root).to_dict()
    assert d["row_content"]["columns"] == ["text", "label"]  # idx has no role: never content
    assert all("row_content" not in s for s in d["shards"])
    jsonschema.validate(d, SCHEMA)


def test_no_roles_content_is_every_column(tmp_path):
    root = tmp_path / "ds"
    write(root, "a.parquet", {"u": [1, 2], "v": [3, 4]})
    write(root, "b.parquet", {"u": [1, 2], "v": [3, 4]})
    rep = run(root)
    assert rep.row_content["columns"] == ["u", "v"]
    assert one(rep, "dup.exact_across_shards").count == 2


def test_hashes_over_different_columns_are_not_compared(tmp_path):
    rep = run(_mixed(tmp_path))
    assert by_check(rep, "dup.exact_across_shards") == []
    (reason,) = _skips(rep, "dup.exact_across_shards")
    assert reason.startswith("the shards' row contents are made of different columns, so rows are compared only "
                             "among shards of the same columns")
    assert "input_ids, attention_mask, labels (a.parquet); input_ids, attention_mask (b.parquet)" in reason


def test_no_false_alarm_from_equal_values_in_other_columns(tmp_path):
    """No roles: a.parquet's content is (p, q), b.parquet's (p, r) with equal values. The hash covers
    values, not names: before, 2 rows were reported as repeats across shards."""
    root = tmp_path / "ds"
    write(root, "a.parquet", {"p": [1, 2], "q": [5, 6]})
    write(root, "b.parquet", {"p": [1, 2], "r": [5, 6]})
    rep = run(root)
    assert by_check(rep, "dup.exact_across_shards") == []
    assert "p, q (a.parquet); p, r (b.parquet)" in _skips(rep, "dup.exact_across_shards")[0]


def test_repeats_found_within_each_column_group(tmp_path):
    root = _mixed(tmp_path)
    write(root, "c.parquet", {"input_ids": [IDS[2], [0]], "attention_mask": [[1, 1, 1], [1]]})
    rep = run(root)
    f = one(rep, "dup.exact_across_shards")
    assert f.count == 1  # c row 0 = b row 2; never a.parquet (labels are part of its content)
    assert [e.value for e in f.examples] == ["c.parquet row 0 = b.parquet row 2"]
    assert rep.to_dict()["shards"][2]["row_content"] == {"columns": ["input_ids", "attention_mask"]}


def test_conflicting_labels_only_within_a_column_group(tmp_path):
    root = tmp_path / "ds"
    write(root, "a.parquet", {"text": ["x", "y"], "label": [0, 1]})
    write(root, "b.parquet", {"text": ["x", "y"], "label": [1, 1], "features": [0.5, 0.5]})
    cfg = {"columns": {"features": ["features"]}}
    write(root, "c.parquet", {"text": ["x"], "label": [1]})
    rep = run(root, cfg)
    f = one(rep, "dup.conflicting_labels")
    assert f.count == 1 and f.shards == ("a.parquet", "c.parquet")  # "x": 0 in a, 1 in c; b hashes text+features
    assert any("text (a.parquet, c.parquet)" in r for r in _skips(rep, "dup.conflicting_labels"))


def test_split_overlap_names_shards_with_no_counterpart(tmp_path):
    root = tmp_path / "ds"
    write(root, "train/a.parquet", {"input_ids": IDS, "attention_mask": [[1, 1, 1]] * 3})
    write(root, "test/b.parquet", {"input_ids": IDS[:1], "attention_mask": [[1, 1, 1]]})
    write(root, "test/c.parquet", {"input_ids": IDS[1:2], "attention_mask": [[1, 1, 1]], "labels": IDS[1:2]})
    rep = run(root, {"splits": {"train": "train/*", "test": "test/*"}})
    f = one(rep, "dup.split_overlap")
    assert f.count == 1 and f.shards == ("test/b.parquet",)
    (reason,) = _skips(rep, "dup.split_overlap")
    assert reason.startswith("1 shard(s) of split 'test' hash rows over columns no shard of split 'train' has")
    assert "input_ids, attention_mask, labels (test/c.parquet)" in reason


def test_cli_report_states_each_shards_row_content(tmp_path):
    root = _mixed(tmp_path)
    out = tmp_path / "r.json"
    p = run_cli("audit", str(root), "--report-dir", str(tmp_path / "reports"), "--output", str(out),
                "--fail-on", "warn")
    assert p.returncode == 1, p.stderr  # schema.inconsistent (error): b.parquet lacks labels
    d = json.loads(out.read_text())
    jsonschema.validate(d, SCHEMA)
    assert d["row_content"]["columns"] is None
    assert [s["row_content"]["columns"] for s in d["shards"]] == [["input_ids", "attention_mask", "labels"],
                                                                  ["input_ids", "attention_mask"]]
    assert [s["check"] for s in d["skipped"] if "made of different columns" in s["reason"]] == ["dup.exact_across_shards"]
