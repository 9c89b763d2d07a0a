"""The dataset card of a Hub repository (README.md at its root, YAML ``dataset_info`` declaring the
label's ClassLabel names) holds for shards audited in its ``data/`` folder too: before, only a card
at the audited folder was read, so auditing ``repo/data`` lost the class count and a label past it
passed. Rows: realdata sst2_vi_glue_parquet (the HF glue/sst2 schema: sentence, label, idx;
validation 872 rows, labels 0/1), laid out as ``push_to_hub`` writes a repository."""
from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from conftest import REALDATA

import datacheck

SST2 = REALDATA / "sst2_vi_glue_parquet"
#: GLUE sst2's card front matter (the Hub's dataset_info form): label = ClassLabel(names=[negative, positive])
CARD = """---
dataset_info:
- config_name: sst2
  features:
  - name: sentence
    dtype: string
  - name: label
    dtype:
      class_label:
        names:
          '0': negative
          '1': positive
  - name: idx
    dtype: int32
---
# SST-2 (Vietnamese)
"""


def _repo(tmp_path: Path, defect: bool = False) -> Path:
    if not SST2.is_dir():
        pytest.skip("../shared/realdata is not present")
    val = pl.read_parquet(SST2 / "validation-00000-of-00001.parquet")
    assert val.height == 872 and sorted(val["label"].unique().to_list()) == [0, 1]  # PROVENANCE
    repo = tmp_path / "repo"
    (repo / "data").mkdir(parents=True)
    (repo / ".git").mkdir()  # a clone of the Hub repository
    (repo / "README.md").write_text(CARD)
    if defect:  # one label past the card's two classes
        val = val.with_columns(pl.when(pl.int_range(pl.len()) == 5).then(2).otherwise(pl.col("label")).alias("label"))
    val.write_parquet(repo / "data" / "validation-00000-of-00001.parquet")
    return repo


def test_the_card_above_the_shards_folder_declares_the_classes(tmp_path):
    repo = _repo(tmp_path)
    at_root = datacheck.audit(str(repo), {}, fail_on="never")
    in_data = datacheck.audit(str(repo / "data"), {}, fail_on="never")
    names = ["negative", "positive"]
    assert at_root.label_facts["names"] == in_data.label_facts["names"] == names
    assert at_root.label_facts["source"].startswith("README.md")
    assert in_data.label_facts["source"].startswith("../README.md")
    # clean data: zero findings of the label checks either way
    for rep in (at_root, in_data):
        assert [f.check for f in rep.findings if f.check.startswith("labels.")] == []


def test_a_label_past_the_cards_classes_is_caught_from_the_shards_folder(tmp_path):
    repo = _repo(tmp_path, defect=True)
    rep = datacheck.audit(str(repo / "data"), {}, fail_on="never")
    (f,) = [f for f in rep.findings if f.check == "labels.out_of_range"]
    assert list(f.rows) == [5] and f.count == 1


def test_no_card_above_a_repository_root(tmp_path):
    """The card of a project that holds the dataset's own repository is not the dataset's."""
    repo = _repo(tmp_path)
    outer = tmp_path / "repo"
    inner = outer / "vendored"
    (inner / "data").mkdir(parents=True)
    (inner / ".git").mkdir()
    (outer / "data" / "validation-00000-of-00001.parquet").rename(inner / "data" / "v.parquet")
    rep = datacheck.audit(str(inner / "data"), {}, fail_on="never")
    assert rep.label_facts is None or not rep.label_facts.get("names"), rep.label_facts
    assert repo.is_dir()
