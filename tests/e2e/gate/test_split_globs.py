"""``[splits]``: a split is one glob or a list of globs (a split made of files no single glob names,
as dair-ai emotion's ``val.txt`` and ``test.txt`` held out together)."""
from __future__ import annotations

import shutil

import pytest
from conftest import REALDATA, run_cli

import datacheck
from datacheck.model.config import config_from_dict
from datacheck.model.errors import ConfigError

EMOTION = REALDATA / "emotion"
FACTS = {"dataset": {"format": "csv", "separator": ";"}, "columns": {"text": "text", "label": "label_name"}}


def _texts(name: str) -> list[str]:
    lines = (EMOTION / name).read_text(encoding="utf-8").splitlines()[1:]
    return [ln.rsplit(";", 1)[0] for ln in lines if ln]


@pytest.fixture
def emotion(tmp_path):
    root = tmp_path / "emotion"
    root.mkdir()
    for name in ("train.txt", "val.txt", "test.txt"):
        shutil.copy(EMOTION / name, root / name)
    return root


def test_a_split_of_several_globs_is_compared_with_train(emotion):
    train = set(_texts("train.txt"))
    leaked = {n: sum(t in train for t in _texts(n)) for n in ("val.txt", "test.txt")}
    assert leaked == {"val.txt": 5, "test.txt": 11}  # PROVENANCE.md: 5 val and 11 test texts also in train
    cfg = {**FACTS, "splits": {"train": "train.txt", "heldout": ["val.txt", "test*.txt"]}}
    rep = datacheck.audit([str(emotion)], config=cfg, workers=1)
    (f,) = [f for f in rep.findings if f.check == "dup.split_overlap"]
    assert f.count == leaked["val.txt"] + leaked["test.txt"]
    assert set(f.shards) == {"val.txt", "test.txt"}
    assert "'heldout'" in f.message


def test_a_glob_of_a_list_that_matches_nothing_is_said(emotion):
    cfg = {**FACTS, "splits": {"train": "train.txt", "heldout": ["val.txt", "tst*.txt"]}}
    rep = datacheck.audit([str(emotion)], config=cfg, workers=1)
    reasons = [s["reason"] for s in rep.skipped if s["check"] == "dup.split_overlap"]
    assert any("'tst*.txt' matches no shard" in r for r in reasons), reasons


def test_an_empty_list_is_a_config_error():
    with pytest.raises(ConfigError) as e:
        config_from_dict({"splits": {"test": []}})
    assert "splits.test" in str(e.value)


def test_the_cli_takes_a_list_from_toml(emotion, tmp_path):
    toml = tmp_path / "datacheck.toml"
    toml.write_text('[dataset]\nformat = "csv"\nseparator = ";"\n[columns]\ntext = "text"\nlabel = "label_name"\n'
                    '[splits]\ntrain = "train.txt"\nheldout = ["val.txt", "test.txt"]\n', encoding="utf-8")
    r = run_cli("audit", str(emotion), "--config", str(toml), "--no-cache", "--no-progress", "--workers", "1",
                "--report-dir", str(tmp_path / "reports"))
    assert r.returncode == 1, r.stderr
    assert "16 row(s) of split 'heldout' also occur in split 'train'" in r.stdout
