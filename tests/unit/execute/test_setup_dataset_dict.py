"""A Hugging Face ``DatasetDict`` folder (``dataset_dict.json`` + one
``save_to_disk`` folder per split) is audited with the splits it declares: its train/test leakage is
``dup.split_overlap``, not a repeat within the data; an explicit ``[splits]`` wins; a declared split
missing on disk is a finding about ``dataset_dict.json``."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from dshelp import by_check, hf_split, one, run

import datacheck
from datacheck.model.config import config_from_dict

SHARED = "the same sentence in train and in test"


def _dataset_dict(root: Path, splits: list[str] = ["train", "test"]) -> Path:
    hf_split(root, "train", ["data-00000-of-00001.arrow"], 3, ["data-00000-of-00001.arrow"],
             rows={"text": ["train only one", SHARED, "train only two"], "label": [0, 1, 0]})
    hf_split(root, "test", ["data-00000-of-00001.arrow"], 2, ["data-00000-of-00001.arrow"],
             rows={"text": ["test only", SHARED], "label": [1, 1]})
    (root / "dataset_dict.json").write_text(json.dumps({"splits": splits}))
    return root


def test_leakage_between_declared_splits(tmp_path):
    root = _dataset_dict(tmp_path / "dd")
    rep = run(root)
    f = one(rep, "dup.split_overlap")
    assert f.count == 1 and f.shards == ("test/data-00000-of-00001.arrow",)
    assert f.details["split"] == "test" and f.details["train_split"] == "train"
    assert f.details["examples"][0]["row"] == 1 and f.details["examples"][0]["train_row"] == 1
    assert by_check(rep, "dup.exact_across_shards") == [] and by_check(rep, "index.missing_shard") == []
    # the declared splits are the audit's [splits] (the report's config hash says so)
    assert rep.config_hash == config_from_dict({"splits": {"train": "train/*", "test": "test/*"}}).hash()


def test_dataset_dict_below_the_audited_root(tmp_path):
    _dataset_dict(tmp_path / "data" / "my dataset[1]")
    f = one(run(tmp_path / "data"), "dup.split_overlap")
    assert f.shards == ("my dataset[1]/test/data-00000-of-00001.arrow",)


def test_explicit_splits_win(tmp_path):
    root = _dataset_dict(tmp_path / "dd")
    rep = run(root, {"splits": {"all": "*"}})  # the user's own choice (one split) is kept
    assert rep.config_hash == config_from_dict({"splits": {"all": "*"}}).hash()
    assert by_check(rep, "dup.split_overlap") == []
    assert one(rep, "dup.exact_across_shards").count == 1


def test_declared_split_missing_on_disk_is_a_finding(tmp_path):
    root = _dataset_dict(tmp_path / "dd", ["train", "test", "validation"])
    rep = run(root)
    f = one(rep, "index.missing_shard")
    assert f.shards == ("dataset_dict.json",) and f.details["split"] == "validation"
    assert "validation/state.json" in f.message
    assert one(rep, "dup.split_overlap").count == 1  # the splits on disk are still compared


def test_broken_dataset_dict_is_a_finding_not_exit_2(tmp_path, cli):
    root = _dataset_dict(tmp_path / "dd")
    (root / "dataset_dict.json").write_text('{"splits": "train"}')
    rep = run(root)
    f = one(rep, "index.missing_shard")
    assert f.shards == ("dataset_dict.json",) and "splits" in f.details["broken"]
    p = cli("audit", str(root), "--no-cache", "--no-progress", "--report-dir", str(tmp_path / "r"))
    assert p.returncode == 1, p.stderr


def test_cli_reports_the_leakage(tmp_path, cli):
    root = _dataset_dict(tmp_path / "dd")
    p = cli("audit", str(root), "--format", "json", "--no-cache", "--no-progress", "--report-dir", str(tmp_path / "r"))
    doc = json.loads(p.stdout)
    assert p.returncode == 1
    assert [f["count"] for f in doc["findings"] if f["check"] == "dup.split_overlap"] == [1]


def test_several_dataset_dicts_are_not_mixed(tmp_path):
    _dataset_dict(tmp_path / "a")
    _dataset_dict(tmp_path / "b")
    rep = datacheck.audit(tmp_path, {}, fail_on="never")
    assert by_check(rep, "dup.split_overlap") == []
    reasons = [s["reason"] for s in rep.skipped if s["check"] == "dup.split_overlap"]
    assert any("2 DatasetDict folders" in r for r in reasons), reasons


def test_the_splits_are_in_the_order_load_from_disk_gives(tmp_path):
    """``datasets.load_from_disk`` gives a DatasetDict's splits in ``dataset_dict.json``'s order (not
    sorted): the audit's [splits], its training split (the first listed when none is ``train``) and
    the plan's other splits follow that order. Checked against the real ``datasets``."""
    datasets = pytest.importorskip("datasets")
    from datacheck.execute.plan import row_space

    order = ["validation", "test", "extra"]  # sorted would be extra, test, validation
    rows = {"validation": ["v0", SHARED], "test": [SHARED, "t1", "t2"], "extra": ["e0"]}
    dd = datasets.DatasetDict({name: datasets.Dataset.from_dict({"text": rows[name]}) for name in order})
    root = tmp_path / "dd"
    dd.save_to_disk(str(root))
    loaded = list(datasets.load_from_disk(str(root)).keys())
    assert loaded == order == json.loads((root / "dataset_dict.json").read_text())["splits"]
    cfg = datacheck.data_config(root)
    assert list(cfg.splits) == loaded
    f = one(run(root), "dup.split_overlap")
    assert f.details["train_split"] == loaded[0] and f.details["split"] == "test"
    plan_cfg = config_from_dict({"batch": {"batch_size": 1}})
    space, _ = row_space([str(root)], plan_cfg, split="test")
    assert list(space.other_splits) == [s for s in loaded if s != "test"]
