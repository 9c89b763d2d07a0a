"""Declared classes of data in an object store (``s3://`` against the moto server of conftest.py):
the ``ClassLabel`` names a parquet shard's footer and a ``save_to_disk`` split's
``dataset_info.json`` object declare are read through fsspec, as the local files are, so the audit
of the uploaded data takes the same ``[labels] classes`` / ``tag_classes`` and reports the same
findings. The data is ``datasets``' own output; expected values are read from it with json / pyarrow."""
from __future__ import annotations

import json
from pathlib import Path

import datasets as hf
import pyarrow.parquet as pq
import pytest
from checkhelp import one
from s3help import upload

import datacheck

NER = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]
POS = [f"P{i}" for i in range(47)]
TAGS = [[3, 0, 7, 0], [1, 2], [5, 0]]


def _finding_keys(rep) -> list[tuple]:
    return sorted((f.check, f.column, f.count, tuple(f.rows)) for f in rep.findings)


@pytest.fixture
def local_and_url(tmp_path: Path, s3_server: dict[str, str], s3_endpoint: str) -> tuple[Path, str]:
    """A folder holding a parquet split with a scalar ClassLabel (``cls/``) and a save_to_disk
    CoNLL-style split (``ner/train``: arrow stream, dataset_info.json, state.json), uploaded as it is."""
    root = tmp_path / "data"
    (root / "cls").mkdir(parents=True)
    hf.Dataset.from_dict({"text": ["a", "b", "c"], "label": [0, 2, 0]},
                         features=hf.Features({"text": hf.Value("string"),
                                               "label": hf.ClassLabel(names=["neg", "neu", "pos"])})
                         ).to_parquet(str(root / "cls" / "train.parquet"))
    feats = hf.Features({"tokens": hf.List(hf.Value("string")), "pos_tags": hf.List(hf.ClassLabel(names=POS)),
                         "ner_tags": hf.List(hf.ClassLabel(names=NER))})
    hf.Dataset.from_dict({"tokens": [[f"w{i}" for i in range(len(r))] for r in TAGS],
                          "pos_tags": [[min(t, 46) for t in r] for r in TAGS], "ner_tags": TAGS},
                         features=feats).save_to_disk(str(root / "ner" / "train"))
    upload(s3_server, "classes", root, "data")
    return root, "s3://classes/data"


def test_s3_parquet_class_label_equals_local(local_and_url):
    """The parquet footer's ClassLabel is read from the store: label_facts and the unseen class the
    same as the local audit's, the names those of the file's metadata."""
    root, url = local_and_url
    meta = json.loads(pq.read_schema(root / "cls" / "train.parquet").metadata[b"huggingface"])
    names = meta["info"]["features"]["label"]["names"]
    local, remote = datacheck.audit(str(root / "cls")), datacheck.audit(f"{url}/cls")
    assert remote.label_facts == local.label_facts
    assert remote.label_facts["names"] == names and remote.label_facts["filled"] is True
    f = one(remote, "labels.unseen_class")
    assert f.details["unseen"] == [n for i, n in enumerate(names) if i not in {0, 2}]
    assert _finding_keys(remote) == _finding_keys(local)


def test_s3_save_to_disk_tags_equal_local(local_and_url):
    """A save_to_disk split in the store: its dataset_info.json object declares ner_tags and
    pos_tags; both bound their columns there as locally (tag_classes, unseen NER classes by name)."""
    root, url = local_and_url
    info = json.loads((root / "ner" / "train" / "dataset_info.json").read_text())
    ner = info["features"]["ner_tags"]["feature"]["names"]
    pos = info["features"]["pos_tags"]["feature"]["names"]
    local, remote = datacheck.audit(str(root / "ner")), datacheck.audit(f"{url}/ner")
    assert remote.label_facts == local.label_facts
    assert {c: t["names"][:50] for c, t in remote.label_facts["tag_classes"].items()} == {"ner_tags": ner,
                                                                                          "pos_tags": pos[:50]}
    assert "dataset_info.json" in remote.label_facts["source"]
    seen = {t for r in TAGS for t in r}
    assert one(remote, "labels.unseen_class", "ner_tags").details["unseen"] == [n for i, n in enumerate(ner)
                                                                               if i not in seen]
    assert _finding_keys(remote) == _finding_keys(local)
