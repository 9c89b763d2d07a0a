"""Token classification tags bounded by the data's own ``Sequence(ClassLabel(names=[...]))``
declaration (:mod:`datacheck.derive.classlabel`): CoNLL-2003's ``ner_tags`` as ``datasets`` writes it
(parquet ``huggingface`` schema metadata, the older ``Sequence`` JSON, a Hub card's ``sequence:``).
The data is written here with ``datasets`` itself (its real metadata); expected values are read
from that metadata with json / pyarrow, never from datacheck."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import datasets as hf
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from checkhelp import findings, one, skipped_reason

import datacheck
from datacheck.io.hfmeta import class_label_names, tag_label_names

#: CoNLL-2003's ner_tags names (the first five), as its dataset script declares them
NAMES = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG"]
WORDS = [["EU", "rejects", "German", "call"], ["Peter", "Blackburn"], ["BRUSSELS", "1996-08-22"],
         ["The", "European", "Commission", "said"]]
TAGS = [[3, 0, 0, 0], [1, 2], [0, 0], [0, 3, 4, 0]]


def _write(path: Path, tags: list[list[int]], **extra: tuple[list, hf.Features]) -> Path:
    """A parquet file written by ``datasets`` (tokens, ner_tags as List(ClassLabel(NAMES)))."""
    feats = {"tokens": hf.List(hf.Value("string")), "ner_tags": hf.List(hf.ClassLabel(names=NAMES))}
    data: dict[str, list] = {"tokens": WORDS, "ner_tags": tags}
    for col, (values, feat) in extra.items():
        feats[col], data[col] = feat, values
    hf.Dataset.from_dict(data, features=hf.Features(feats)).to_parquet(str(path))
    return path


def _declared(path: Path, col: str = "ner_tags") -> list[str]:
    """The tag names ``col`` declares in the file's huggingface metadata, read with json here."""
    feat = json.loads(pq.read_schema(path).metadata[b"huggingface"])["info"]["features"][col]
    assert feat["_type"] in ("List", "Sequence") and feat["feature"]["_type"] == "ClassLabel"
    return feat["feature"]["names"]


def _plant(src: Path, out: Path, col: str, row: int, pos: int, value: int) -> None:
    """``src`` copied to ``out`` with ``col[row][pos] = value``, the schema metadata kept."""
    t = pq.read_table(src)
    vals = t.column(col).to_pylist()
    vals[row][pos] = value
    i = t.schema.get_field_index(col)
    t = t.set_column(i, t.schema.field(i), pa.array(vals, t.schema.field(i).type))
    assert t.schema.metadata[b"huggingface"]
    pq.write_table(t, out)


def test_clean_ner_tags_zero_findings_and_bound_from_declaration(tmp_path):
    """Word-level NER tags inside the declared 5 names: zero findings; labels.out_of_range runs
    (it was skipped for want of [labels] num_classes) and label_facts says where the names came from."""
    path = _write(tmp_path / "train.parquet", TAGS)
    names = _declared(path)
    assert max(max(r) for r in TAGS) < len(names)
    rep = datacheck.audit(str(path))
    assert [s.layout for s in rep.shards] == ["token_classification"]
    assert rep.findings == []
    assert skipped_reason(rep, "labels.out_of_range") is None
    lf = rep.label_facts
    assert lf is not None and lf["filled"] is True and lf["column"] == "ner_tags"
    assert lf["num_classes"] == len(names) and lf["names"] == names
    assert "huggingface schema metadata" in lf["source"] and "Sequence(ClassLabel)" in lf["source"]


def test_planted_tag_equal_to_len_names_is_out_of_range(tmp_path):
    """One tag set to len(names) (CrossEntropyLoss' device-side assert): labels.out_of_range names the row."""
    src = _write(tmp_path / "src.parquet", TAGS)
    names = _declared(src)
    (tmp_path / "d").mkdir()
    out = tmp_path / "d" / "train.parquet"
    row = 3
    _plant(src, out, "ner_tags", row, 2, len(names))
    rep = datacheck.audit(str(out))
    f = one(rep, "labels.out_of_range", "ner_tags")
    assert f.count == 1 and f.rows == (row,)
    # the bound is the declared names' count, named as such (no num_classes was set anywhere)
    assert f"hold token labels >= the number of classes {len(names)} (largest {len(names)})" in f.message
    assert "num_classes" not in f.message
    # the planted tag was the only I-ORG (4): that class is now never seen
    planted = pq.read_table(out).column("ner_tags").to_pylist()
    seen = {t for r in planted for t in r}
    unseen = [n for i, n in enumerate(names) if i not in seen]
    assert unseen == ["I-ORG"]
    assert sorted(x.check for x in rep.findings) == ["labels.out_of_range", "labels.unseen_class"]
    assert one(rep, "labels.unseen_class", "ner_tags").details["unseen"] == unseen


def test_subword_labels_beside_declared_tags(tmp_path):
    """tokenize_and_align_labels kept ner_tags: the new 'labels' (declared as plain int64, -100 on
    special and continuation tokens) is bounded by ner_tags' names. Clean: zero findings; a label
    len(names) in one row: labels.out_of_range on 'labels' naming it."""
    ids = [[101, 7327, 19164, 2446, 102], [101, 2848, 13934, 102], [101, 9371, 102], [101, 1996, 2647, 3222, 102]]
    labels = [[-100, 3, 0, 0, -100], [-100, 1, 2, -100], [-100, 0, -100], [-100, 0, 3, 4, -100]]
    extra = {"input_ids": (ids, hf.List(hf.Value("int64"))), "attention_mask": ([[1] * len(r) for r in ids],
                                                                             hf.List(hf.Value("int8"))),
             "labels": (labels, hf.List(hf.Value("int64")))}
    (tmp_path / "clean").mkdir()
    clean = _write(tmp_path / "clean" / "train.parquet", TAGS, **extra)
    names = _declared(clean)
    rep = datacheck.audit(str(clean))
    assert [s.layout for s in rep.shards] == ["token_classification"]
    assert rep.findings == []
    assert rep.label_facts is not None and rep.label_facts["column"] == "labels"
    assert rep.label_facts["num_classes"] == len(names) and "'ner_tags'" in rep.label_facts["source"]
    (tmp_path / "bad").mkdir()
    bad = tmp_path / "bad" / "train.parquet"
    _plant(clean, bad, "labels", 2, 1, len(names))  # an 'O' of many: every class is still seen
    f = one(rep := datacheck.audit(str(bad)), "labels.out_of_range", "labels")
    assert f.rows == (2,) and [x.check for x in rep.findings] == ["labels.out_of_range"]


def test_two_declared_tag_columns_beside_labels_take_nothing(tmp_path):
    """CoNLL-2003 keeps pos_tags too: which tags 'labels' was aligned from is unknown (47 POS tags,
    9 NER tags), so no names are taken (no false alarm on POS-derived labels) and only the largest
    set bounds 'labels': a label past every declared set is labels.out_of_range, naming that set."""
    pos = [f"P{i}" for i in range(12)]
    labels = [[11, 0, 0, 0], [1, 2], [0, 0], [0, 3, 4, 0]]  # POS-derived: 11 < len(pos), >= len(NAMES)
    extra = {"pos_tags": ([[11, 0, 0, 0], [1, 2], [0, 0], [0, 3, 4, 0]], hf.List(hf.ClassLabel(names=pos))),
             "labels": (labels, hf.List(hf.Value("int64")))}
    (tmp_path / "clean").mkdir()
    path = _write(tmp_path / "clean" / "train.parquet", TAGS, **extra)
    rep = datacheck.audit(str(path))
    assert rep.label_facts is not None and "column" not in rep.label_facts  # no [labels] classes taken
    assert "which one its tags were aligned from is unknown" in rep.label_facts["tag_notes"][0]
    # each tag column is bound by its own names instead
    assert {c: t["num_classes"] for c, t in rep.label_facts["tag_classes"].items()} == {"ner_tags": len(NAMES),
                                                                                          "pos_tags": len(pos)}
    assert findings(rep, "labels.out_of_range") == []
    assert all(f.column != "labels" for f in findings(rep, "labels.unseen_class"))  # no names: no classes
    top = max(len(_declared(path, "pos_tags")), len(_declared(path)))
    assert f"({top} names: a label >= {top}" in rep.label_facts["tag_notes"][0]
    (tmp_path / "bad").mkdir()
    bad = tmp_path / "bad" / "train.parquet"
    _plant(path, bad, "labels", 3, 2, top)  # past POS (12) and NER (5) alike
    f = one(datacheck.audit(str(bad)), "labels.out_of_range", "labels")
    assert f.rows == (3,)
    assert f"token labels >= the number of names of the largest declared tag set 'pos_tags' {top}" in f.message


def test_config_num_classes_wins_over_declared_tags(tmp_path):
    """[labels] num_classes (the model's head) wins: a tag len(names) is inside num_classes len(names)+1,
    and label_facts notes both counts."""
    src = _write(tmp_path / "src.parquet", TAGS)
    names = _declared(src)
    (tmp_path / "d").mkdir()
    out = tmp_path / "d" / "train.parquet"
    _plant(src, out, "ner_tags", 0, 0, len(names))
    rep = datacheck.audit(str(out), config={"labels": {"num_classes": len(names) + 1}})
    assert findings(rep, "labels.out_of_range") == []
    assert rep.label_facts is not None and rep.label_facts["filled"] is False
    assert f"{len(names) + 1}" in rep.label_facts["note"] and f"{len(names)} names" in rep.label_facts["note"]


def test_hub_card_sequence_class_label_for_jsonl(tmp_path):
    """A Hub folder of JSONL shards whose README.md declares ner_tags as ``sequence: class_label``
    (CoNLL-2003's card form): the names bound the tags; tag len(names) in one row is out of range."""
    card = ("---\ndataset_info:\n  features:\n  - name: tokens\n    sequence: string\n  - name: ner_tags\n"
            "    sequence:\n      class_label:\n        names:\n"
            + "".join(f"          '{i}': {n}\n" for i, n in enumerate(NAMES)) + "---\n# conll-like\n")
    (tmp_path / "README.md").write_text(card)
    tags = [list(r) for r in TAGS]
    tags[2][1] = len(NAMES)
    (tmp_path / "train.jsonl").write_text(
        "".join(json.dumps({"tokens": w, "ner_tags": t}) + "\n" for w, t in zip(WORDS, tags)))
    rep = datacheck.audit(str(tmp_path))
    assert rep.label_facts is not None and rep.label_facts["names"] == NAMES
    assert rep.label_facts["source"].startswith("README.md")
    assert one(rep, "labels.out_of_range", "ner_tags").rows == (2,)


LEGACY = {"feature": {"num_classes": 5, "names": NAMES, "names_file": None, "id": None, "_type": "ClassLabel"},
          "length": -1, "id": None, "_type": "Sequence"}


@pytest.mark.parametrize("feat", [LEGACY, {"feature": {"names": NAMES, "_type": "ClassLabel"}, "_type": "List"},
                                  [{"names": NAMES, "_type": "ClassLabel"}]])
def test_tag_label_names_forms(feat):
    """datasets 1.x-3.x Sequence (with length -1), datasets 4+ List, a Python list feature."""
    assert tag_label_names({"ner_tags": feat}, "ner_tags") == tuple(NAMES)
    assert class_label_names({"ner_tags": feat}, "ner_tags") is None  # not a scalar class label


@pytest.mark.parametrize("feat", [{"names": NAMES, "_type": "ClassLabel"},
                                  {"feature": LEGACY, "_type": "Sequence"},
                                  {"feature": {"dtype": "int64", "_type": "Value"}, "_type": "Sequence"},
                                  {"feature": {"names": ["O", "O"], "_type": "ClassLabel"}, "_type": "List"}])
def test_tag_label_names_other_declarations_give_none(feat):
    """A scalar ClassLabel, a list of lists, a list of ints, duplicate names: no tag names."""
    assert tag_label_names({"ner_tags": feat}, "ner_tags") is None


def test_legacy_sequence_metadata_bounds_tags(tmp_path):
    """Parquet metadata in the datasets < 4 form (Sequence, length -1): the same bound."""
    meta = {"info": {"features": {"tokens": {"feature": {"dtype": "string", "_type": "Value"}, "_type": "Sequence"},
                                  "ner_tags": LEGACY}}}
    tags = [list(r) for r in TAGS]
    tags[1][0] = len(NAMES)
    t = pa.table({"tokens": WORDS, "ner_tags": pa.array(tags, pa.list_(pa.int64()))})
    pq.write_table(t.replace_schema_metadata({"huggingface": json.dumps(meta)}), tmp_path / "train.parquet")
    rep = datacheck.audit(str(tmp_path / "train.parquet"))
    assert rep.label_facts is not None and rep.label_facts["num_classes"] == len(LEGACY["feature"]["names"])
    assert one(rep, "labels.out_of_range", "ner_tags").rows == (1,)


def test_save_to_disk_dataset_info_bounds_tags(tmp_path):
    """A save_to_disk split: its dataset_info.json declares ner_tags (the arrow file is read by
    datacheck as a shard of that folder); a planted tag len(names) in row 0 is out of range, the clean
    split has no finding."""
    feats = hf.Features({"tokens": hf.List(hf.Value("string")), "ner_tags": hf.List(hf.ClassLabel(names=NAMES))})
    hf.Dataset.from_dict({"tokens": WORDS, "ner_tags": TAGS}, features=feats).save_to_disk(str(tmp_path / "clean"))
    info = json.loads((tmp_path / "clean" / "dataset_info.json").read_text())
    names = info["features"]["ner_tags"]["feature"]["names"]
    rep = datacheck.audit(str(tmp_path / "clean"))
    assert rep.findings == [] and rep.label_facts is not None
    assert rep.label_facts["num_classes"] == len(names) and "dataset_info.json" in rep.label_facts["source"]
    tags = [list(r) for r in TAGS]
    tags[0][0] = len(names)
    # datasets refuses to encode it, so the planted split is written with int tags and then given the
    # clean split's dataset_info.json (the declaration a stale copy carries)
    plain = hf.Features({"tokens": hf.List(hf.Value("string")), "ner_tags": hf.List(hf.Value("int64"))})
    hf.Dataset.from_dict({"tokens": WORDS, "ner_tags": tags}, features=plain).save_to_disk(str(tmp_path / "bad"))
    shutil.copy(tmp_path / "clean" / "dataset_info.json", tmp_path / "bad" / "dataset_info.json")
    assert one(datacheck.audit(str(tmp_path / "bad")), "labels.out_of_range", "ner_tags").rows == (0,)
