"""Config values that once sized memory: ``labels.unseen_class`` is computed from the
seen classes, so a huge ``num_classes`` costs nothing; values past any real model are refused."""
from __future__ import annotations

import polars as pl
import pytest
from conftest import run_cli

import datacheck


@pytest.fixture
def three_classes(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    pl.DataFrame({"text": ["a", "b", "c", "d"], "label": [0, 1, 2, 1]}).write_parquet(d / "train.parquet")
    return d


def test_unseen_class_of_twenty_million_classes_is_counted_not_listed(three_classes):
    rep = datacheck.audit([str(three_classes)], config={"labels": {"num_classes": 20_000_000}})
    (f,) = [f for f in rep.findings if f.check == "labels.unseen_class"]
    assert f.count == 20_000_000 - 3
    assert f.details["unseen"][:3] == [3, 4, 5] and len(f.details["unseen"]) == 1000


def test_unseen_class_small(three_classes):
    rep = datacheck.audit([str(three_classes)], config={"labels": {"num_classes": 5}})
    (f,) = [f for f in rep.findings if f.check == "labels.unseen_class"]
    assert f.count == 2 and f.details["unseen"] == [3, 4]


@pytest.mark.parametrize("line", ["[labels]\nnum_classes = 9223372036854775807",
                                  "[tokens]\nvocab_size = 99999999999999999999"])
def test_num_classes_past_any_model_is_exit_2(tmp_path, three_classes, line):
    cfg = tmp_path / "c.toml"
    cfg.write_text(line + "\n")
    p = run_cli("audit", str(three_classes), "--config", str(cfg), "--report-dir", str(tmp_path / "r"), cwd=tmp_path)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert ("labels.num_classes" in p.stderr) or ("tokens.vocab_size" in p.stderr), p.stderr
