"""Where the declared classes are read (:mod:`datacheck.derive.classlabel`): a bare ``.arrow`` file
(no ``state.json`` / ``dataset_info.json`` beside it) declares its features in its own Arrow schema
metadata (``b"huggingface"``), as ``datasets`` writes into every arrow file. The files are
``datasets``' own ``save_to_disk`` output with the arrow file taken out alone; expected values are
read from that metadata with pyarrow / json, never from datacheck."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import datasets as hf
import pyarrow as pa
from checkhelp import findings, one

import datacheck

NER = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]
TAGS = [[3, 0, 7, 0, 0, 0, 7, 0, 0], [1, 2], [5, 0], [6, 4, 8, 0]]


def _bare_arrow(tmp_path: Path, data: dict, feats: hf.Features, name: str = "train.arrow") -> Path:
    """``datasets``' save_to_disk arrow file, copied alone into a fresh folder (no companions)."""
    hf.Dataset.from_dict(data, features=feats).save_to_disk(str(tmp_path / "saved"))
    out = tmp_path / "bare" / name
    out.parent.mkdir()
    shutil.copy(tmp_path / "saved" / "data-00000-of-00001.arrow", out)
    return out


def _schema_features(path: Path) -> dict:
    with pa.OSFile(str(path), "rb") as f:
        meta = pa.ipc.open_stream(f).schema.metadata
    return json.loads(meta[b"huggingface"])["info"]["features"]


def _rewrite(path: Path, col: str, values: list) -> None:
    """``path`` (an IPC stream) rewritten with ``col`` replaced, its schema metadata kept."""
    with pa.OSFile(str(path), "rb") as f:
        t = pa.ipc.open_stream(f).read_all()
    i = t.schema.get_field_index(col)
    t = t.set_column(i, t.schema.field(i), pa.array(values, t.schema.field(i).type))
    assert t.schema.metadata[b"huggingface"]
    with pa.OSFile(str(path), "wb") as f, pa.ipc.new_stream(f, t.schema) as w:
        w.write_table(t)


def test_bare_arrow_token_tags_bound_by_schema_metadata(tmp_path):
    """A bare .arrow of CoNLL-style tags: the names come from its schema metadata; clean data has no
    finding, a tag len(names) is labels.out_of_range on 'ner_tags'."""
    feats = hf.Features({"tokens": hf.List(hf.Value("string")), "ner_tags": hf.List(hf.ClassLabel(names=NER))})
    words = [[f"w{i}" for i in range(len(r))] for r in TAGS]
    path = _bare_arrow(tmp_path, {"tokens": words, "ner_tags": TAGS}, feats)
    assert not (path.parent / "dataset_info.json").exists() and not (path.parent / "state.json").exists()
    names = _schema_features(path)["ner_tags"]["feature"]["names"]
    assert {t for r in TAGS for t in r} == set(range(len(names)))  # every class seen: nothing unseen
    rep = datacheck.audit(str(path.parent))
    assert rep.findings == []
    assert rep.label_facts["num_classes"] == len(names) and rep.label_facts["names"] == names
    assert "train.arrow (its huggingface schema metadata)" in rep.label_facts["source"]
    planted = [list(r) for r in TAGS]
    assert planted[0][1] == 0  # an 'O' of many: every class is still seen after the plant
    planted[0][1] = len(names)
    assert {t for r in planted for t in r if t < len(names)} == set(range(len(names)))
    _rewrite(path, "ner_tags", planted)
    rep = datacheck.audit(str(path.parent))
    f = one(rep, "labels.out_of_range", "ner_tags")
    assert f.rows == (0,) and f"the number of classes {len(names)}" in f.message
    assert [x.check for x in rep.findings] == ["labels.out_of_range"]


def test_bare_arrow_class_label_names(tmp_path):
    """A bare .arrow with a scalar ClassLabel: [labels] classes from its schema metadata; a class no
    row carries is labels.unseen_class by name."""
    names = ["NOT", "OFF", "HATE"]
    feats = hf.Features({"text": hf.Value("string"), "label": hf.ClassLabel(names=names)})
    labels = [0, 1, 0, 0]
    path = _bare_arrow(tmp_path, {"text": ["a", "b", "c", "d"], "label": labels}, feats)
    declared = _schema_features(path)["label"]["names"]
    assert declared == names
    rep = datacheck.audit(str(path))
    assert rep.label_facts["column"] == "label" and rep.label_facts["num_classes"] == len(declared)
    f = one(rep, "labels.unseen_class")
    assert f.details["unseen"] == [n for i, n in enumerate(declared) if i not in labels]
    assert findings(rep, "labels.out_of_range") == []


def test_real_bare_arrow_without_class_label_takes_no_classes(tmp_path, realdata):
    """dkhate's processed save_to_disk split (PROVENANCE.md: label int64 0/1, declared as a plain
    Value): its arrow file alone declares no ClassLabel in its schema metadata, so no classes are
    taken and the bare copy's findings are the split folder's, row for row."""
    split = realdata / "dkhate_danish_offensive" / "dkhate_processed_hf" / "train"
    src = split / "data-00000-of-00001.arrow"
    feats = _schema_features(src)
    assert feats["label"] == {"dtype": "int64", "_type": "Value"}
    (tmp_path / "bare").mkdir()
    shutil.copy(src, tmp_path / "bare" / src.name)
    bare, folder = datacheck.audit(str(tmp_path / "bare")), datacheck.audit(str(split))
    assert bare.label_facts is None and folder.label_facts is None
    assert sorted((f.check, f.column, f.count) for f in bare.findings) == \
        sorted((f.check, f.column, f.count) for f in folder.findings)


def test_a_footer_pyarrow_cannot_read_is_no_crash(tmp_path, monkeypatch):
    """Reading the declared classes never crashes the audit: a parquet footer whose schema pyarrow does
    not implement (the fuzz run's mutant declared a 128-bit integer: ``ArrowNotImplementedError``, a
    ``NotImplementedError``, not the ``ValueError`` of ``ArrowInvalid``; it escaped as a traceback, exit
    3) gives no classes, and the audit goes on; the data is never touched."""
    import pyarrow.parquet as pq

    good = tmp_path / "d" / "train-00000-of-00001.parquet"
    good.parent.mkdir()
    pq.write_table(pa.table({"text": ["a", "b"], "label": [0, 1]}), good)
    raw = good.read_bytes()

    def spoiled(source, *a, **k):
        raise pa.ArrowNotImplementedError("Integers with more than 64 bits not implemented")

    monkeypatch.setattr(pq, "read_schema", spoiled)
    rep = datacheck.audit(str(good.parent))
    assert raw == good.read_bytes()
    assert rep.label_facts is None or not rep.label_facts.get("classes")
    assert rep.summary["shards"] == 1


def test_a_spoiled_arrow_schema_is_no_crash(tmp_path, monkeypatch):
    """The same for a bare arrow file whose schema pyarrow does not implement (``Integers with less
    than 8 bits``): no classes, no crash; the file's own read reports what it can."""
    out = _bare_arrow(tmp_path, {"tags": TAGS}, hf.Features({"tags": hf.Sequence(hf.ClassLabel(names=NER))}))

    def spoiled(*a, **k):
        raise pa.ArrowNotImplementedError("Integers with less than 8 bits not implemented")

    monkeypatch.setattr(pa.ipc, "open_file", spoiled)
    monkeypatch.setattr(pa.ipc, "open_stream", spoiled)
    rep = datacheck.audit(str(out.parent))
    assert rep.label_facts is None or not rep.label_facts.get("tag_classes")
