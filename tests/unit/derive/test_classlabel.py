"""[labels] num_classes from the data's own Hugging Face ``ClassLabel`` declaration
(:mod:`datacheck.derive.classlabel`): parquet ``huggingface`` schema metadata and a ``save_to_disk``
folder's ``dataset_info.json``. Expected values are read from the metadata here (json / pyarrow),
never from datacheck."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from checkhelp import findings, one, skipped_reason

import datacheck
from datacheck.io.hfmeta import class_label_names

SST2 = "sst2_vi_glue_parquet"


def _names(path: Path) -> list[str]:
    """The ClassLabel names of ``label`` in a parquet file's ``huggingface`` metadata, read with json."""
    meta = pq.read_schema(path).metadata
    feat = json.loads(meta[b"huggingface"])["info"]["features"]["label"]
    assert feat["_type"] == "ClassLabel"
    return feat["names"]


def test_sst2_validation_clean_takes_num_classes_from_classlabel(realdata):
    """Real GLUE SST-2 validation (872 rows, labels 0/1, ClassLabel ['negative', 'positive']): zero
    findings, and labels.out_of_range / labels.unseen_class run (they were skipped for want of
    [labels] num_classes) with the count the metadata declares, said in the report's label_facts."""
    path = realdata / SST2 / "validation-00000-of-00001.parquet"
    names = _names(path)
    labels = pq.read_table(path, columns=["label"]).column("label").to_pylist()
    assert len(labels) == 872 and set(labels) == set(range(len(names)))  # PROVENANCE: validation 872
    rep = datacheck.audit(str(path))
    assert rep.findings == []
    assert skipped_reason(rep, "labels.out_of_range") is None
    assert skipped_reason(rep, "labels.unseen_class") is None
    assert rep.label_facts is not None
    assert rep.label_facts["num_classes"] == len(names) and rep.label_facts["names"] == names
    assert rep.label_facts["filled"] is True and rep.label_facts["column"] == "label"
    assert "huggingface schema metadata" in rep.label_facts["source"]
    assert json.loads(rep.to_json())["label_facts"]["num_classes"] == len(names)


def test_planted_label_equal_to_len_names_is_out_of_range(realdata, tmp_path):
    """One SST-2 validation row relabelled to len(names) (the off-by-one): labels.out_of_range names
    that row, with no [labels] in the config."""
    src = realdata / SST2 / "validation-00000-of-00001.parquet"
    names = _names(src)
    table = pq.read_table(src)
    labels = table.column("label").to_pylist()
    row = 417
    labels[row] = len(names)
    i = table.schema.get_field_index("label")
    table = table.set_column(i, table.schema.field(i), pa.array(labels, pa.int64()))
    assert table.schema.metadata[b"huggingface"]  # the declaration travels with the copy
    out = tmp_path / "validation-00000-of-00001.parquet"
    pq.write_table(table, out)
    rep = datacheck.audit(str(out))
    f = one(rep, "labels.out_of_range", "label")
    assert f.count == 1 and f.rows == (row,)
    assert f"equal the number of classes ({len(names)})" in f.message or f"({len(names)})" in f.message


def test_glue_test_split_minus_one_is_not_out_of_range(realdata):
    """GLUE hides its test labels as -1 (PROVENANCE: SST-2 test 1,821 rows, all -1): with num_classes
    taken from the ClassLabel, no row is labels.out_of_range and no class is 'unseen' (the split
    carries none); labels.unexpected_sentinel names the unlabeled split, as before."""
    path = realdata / SST2 / "test-00000-of-00001.parquet"
    labels = pq.read_table(path, columns=["label"]).column("label").to_pylist()
    assert len(labels) == 1821 and set(labels) == {-1}
    rep = datacheck.audit(str(path))
    assert rep.label_facts is not None and rep.label_facts["num_classes"] == len(_names(path))
    assert findings(rep, "labels.out_of_range") == []
    assert findings(rep, "labels.unseen_class") == []
    assert "unlabeled split" in (skipped_reason(rep, "labels.unseen_class") or "")
    s = one(rep, "labels.unexpected_sentinel", "label")
    assert s.count == len(labels) and "the split is unlabeled" in s.message


def test_config_num_classes_wins_with_a_note(realdata):
    """[labels] num_classes = len(names) + 1 is the model's head: it is used (the extra class is
    labels.unseen_class), and label_facts notes the declared count it overrode."""
    path = realdata / SST2 / "validation-00000-of-00001.parquet"
    k = len(_names(path))
    rep = datacheck.audit(str(path), config={"labels": {"num_classes": k + 1}})
    u = one(rep, "labels.unseen_class", "label")
    assert u.details["unseen"] == [k]
    assert rep.label_facts is not None and rep.label_facts["filled"] is False
    assert f"gives {k + 1} class(es)" in rep.label_facts["note"] and f"with {k} names" in rep.label_facts["note"]


def test_config_agreeing_has_no_note(realdata):
    path = realdata / SST2 / "validation-00000-of-00001.parquet"
    rep = datacheck.audit(str(path), config={"labels": {"num_classes": len(_names(path))}})
    assert rep.findings == [] and rep.label_facts is not None
    assert rep.label_facts["filled"] is False and "note" not in rep.label_facts


def _hf_parquet(path: Path, labels: list[int], names: list[str] | None) -> None:
    feats: dict = {"text": {"dtype": "string", "_type": "Value"},
                   "label": ({"names": names, "_type": "ClassLabel"} if names is not None
                             else {"dtype": "int64", "_type": "Value"})}
    t = pa.table({"text": [f"t{i}" for i in range(len(labels))], "label": pa.array(labels, pa.int64())})
    t = t.replace_schema_metadata({"huggingface": json.dumps({"info": {"features": feats}})})
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(t, path)


def test_shards_declaring_different_names_take_nothing(tmp_path):
    """Two shards whose ClassLabels differ (2 vs 3 names): no count is taken (the gate does not pass on
    a guess): labels.out_of_range stays skipped, and label_facts says why."""
    _hf_parquet(tmp_path / "a.parquet", [0, 1, 2], ["x", "y"])
    _hf_parquet(tmp_path / "b.parquet", [0, 1, 2], ["x", "y", "z"])
    rep = datacheck.audit(str(tmp_path))
    assert skipped_reason(rep, "labels.out_of_range") is not None
    assert rep.label_facts is not None and rep.label_facts["filled"] is False
    assert "different names" in rep.label_facts["note"]


def test_value_feature_declares_no_classes(tmp_path):
    """A label declared as Value('int64') (dkhate's processed split) gives no count: still skipped."""
    _hf_parquet(tmp_path / "a.parquet", [0, 1, 5], None)
    rep = datacheck.audit(str(tmp_path))
    assert skipped_reason(rep, "labels.out_of_range") is not None and rep.label_facts is None


def test_save_to_disk_dataset_info_classlabel(realdata, tmp_path):
    """A save_to_disk split (real dkhate processed arrow, labels 0/1) whose dataset_info.json declares
    'label' as ClassLabel(names=['NOT', 'OFF']): num_classes 2 from that file; one planted label 2
    (= len(names)) is labels.out_of_range naming the row."""
    src = realdata / "dkhate_danish_offensive" / "dkhate_processed_hf" / "test"
    dst = tmp_path / "test"
    shutil.copytree(src, dst)
    info = json.loads((dst / "dataset_info.json").read_text())
    info["features"]["label"] = {"names": ["NOT", "OFF"], "_type": "ClassLabel"}
    (dst / "dataset_info.json").write_text(json.dumps(info))
    arrow = dst / "data-00000-of-00001.arrow"
    with pa.ipc.open_stream(arrow) as r:
        table = r.read_all()
    labels = table.column("label").to_pylist()
    assert len(labels) == 329 and set(labels) == {0, 1}  # PROVENANCE: test 329 rows, labels 0/1
    clean = datacheck.audit(str(dst))
    assert clean.label_facts is not None and clean.label_facts["num_classes"] == 2
    assert clean.label_facts["source"] == "dataset_info.json"
    assert findings(clean, "labels.out_of_range") == [] and skipped_reason(clean, "labels.out_of_range") is None
    row = 100
    labels[row] = len(info["features"]["label"]["names"])
    i = table.schema.get_field_index("label")
    table = table.set_column(i, table.schema.field(i), pa.array(labels, pa.int64()))
    arrow.chmod(0o644)
    with pa.ipc.new_stream(arrow, table.schema) as w:
        w.write_table(table)
    f = one(datacheck.audit(str(dst)), "labels.out_of_range", "label")
    assert f.rows == (row,)


@pytest.mark.parametrize("feat", [
    {"names": [], "_type": "ClassLabel"},
    {"names": ["a", "a"], "_type": "ClassLabel"},
    {"names": ["a", 1], "_type": "ClassLabel"},
    {"feature": {"names": ["a", "b"], "_type": "ClassLabel"}, "_type": "Sequence"},
    {"dtype": "int64", "_type": "Value"},
])
def test_malformed_or_other_declarations_give_no_names(feat):
    assert class_label_names({"label": feat}, "label") is None


def test_old_style_classlabel_with_num_classes():
    feat = {"num_classes": 3, "names": ["a", "b", "c"], "names_file": None, "id": None, "_type": "ClassLabel"}
    assert class_label_names({"label": feat}, "label") == ("a", "b", "c")


CARD = """---
language:
- en
dataset_info:
  features:
  - name: text
    dtype: string
  - name: label
    dtype:
      class_label:
        names:
          '0': sadness
          '1': joy
          '2': love
  splits:
  - name: train
    num_examples: 4
---
# a card
"""


def _card_names(card: str) -> list[str]:
    """The class names of ``label`` in a card, read with yaml here."""
    front = card.split("---\n")[1]
    feats = yaml.safe_load(front)["dataset_info"]["features"]
    names = next(f["dtype"]["class_label"]["names"] for f in feats if f["name"] == "label")
    return [names[str(i)] for i in range(len(names))]


def test_hub_card_declares_classlabel_for_jsonl(tmp_path):
    """A Hub-style folder: JSONL shards (no metadata of their own) and a README.md whose front matter
    declares 'label' as class_label with 3 names: num_classes 3 from the card; label 3 is out of range."""
    names = _card_names(CARD)
    (tmp_path / "README.md").write_text(CARD)
    rows = [0, 1, 2, len(names)]
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.jsonl").write_text(
        "".join(json.dumps({"text": f"t{i}", "label": v}) + "\n" for i, v in enumerate(rows)))
    rep = datacheck.audit(str(tmp_path))
    assert rep.label_facts is not None and rep.label_facts["num_classes"] == len(names)
    assert rep.label_facts["names"] == names and rep.label_facts["source"].startswith("README.md")
    assert one(rep, "labels.out_of_range", "label").rows == (rows.index(len(names)),)


def test_hub_card_configs_that_differ_take_nothing(tmp_path):
    card = CARD.replace("dataset_info:\n  features:", "dataset_info:\n- config_name: a\n  features:").replace(
        "  splits:\n  - name: train\n    num_examples: 4\n", "")
    card = card.replace("---\n# a card", "- config_name: b\n  features:\n  - name: label\n    dtype:\n      class_label:\n"
                        "        names:\n          '0': x\n          '1': y\n---\n# a card")
    (tmp_path / "README.md").write_text(card)
    (tmp_path / "train.jsonl").write_text('{"text": "a", "label": 0}\n{"text": "b", "label": 1}\n')
    rep = datacheck.audit(str(tmp_path))
    assert rep.label_facts is not None and rep.label_facts["filled"] is False and "per config" in rep.label_facts["note"]
    assert skipped_reason(rep, "labels.out_of_range") is not None


def test_hub_card_with_aliases_is_not_read(tmp_path):
    """A card using YAML anchors/aliases (the Hub never writes them; a bomb could) is not read."""
    card = CARD.replace("  - name: text\n    dtype: string\n", "  - &t\n    name: text\n    dtype: string\n  - *t\n")
    (tmp_path / "README.md").write_text(card)
    (tmp_path / "train.jsonl").write_text('{"text": "a", "label": 0}\n')
    rep = datacheck.audit(str(tmp_path))
    assert rep.label_facts is None and skipped_reason(rep, "labels.out_of_range") is not None


def test_card_disagreeing_with_parquet_metadata_takes_nothing(tmp_path):
    (tmp_path / "README.md").write_text(CARD)
    _hf_parquet(tmp_path / "train.parquet", [0, 1], ["neg", "pos"])
    rep = datacheck.audit(str(tmp_path))
    assert rep.label_facts is not None and rep.label_facts["filled"] is False
    assert "different names" in rep.label_facts["note"]


def test_hub_card_over_string_labels_checks_the_names(tmp_path):
    """A card's class_label over a JSONL that holds the names themselves (load_dataset encodes them with
    str2int): no schema.dtype false alarm for not being integers; a name outside the card's is
    labels.out_of_range naming its row; every name is seen."""
    names = _card_names(CARD)
    (tmp_path / "README.md").write_text(CARD)
    rows = [*names, names[0]]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps({"text": f"t{i}", "label": v}) + "\n"
                                                  for i, v in enumerate(rows)))
    clean = datacheck.audit(str(tmp_path))
    assert clean.findings == [] and clean.label_facts is not None and clean.label_facts["num_classes"] == len(names)
    assert skipped_reason(clean, "labels.out_of_range") is None and skipped_reason(clean, "labels.unseen_class") is None
    rows[1] = "anger"  # not one of the card's names
    (tmp_path / "train.jsonl").write_text("".join(json.dumps({"text": f"t{i}", "label": v}) + "\n"
                                                  for i, v in enumerate(rows)))
    rep = datacheck.audit(str(tmp_path))
    assert one(rep, "labels.out_of_range", "label").rows == (1,)
    assert one(rep, "labels.unseen_class", "label").details["unseen"] == [names[1]]
