"""``datacheck.data_config``: the config an audit of the data runs under (the facts it takes from the
data filled), whose hash is the audit report's ``config_hash``: what a training loop's BatchGuard
takes so that it checks the classes the gate checked. The data is ``datasets``' own parquet output;
expected classes are read from its metadata with json."""
from __future__ import annotations

import json

import datasets as hf
import pyarrow.parquet as pq

import datacheck

NER = ["O", "B-PER", "I-PER"]
POS = [f"P{i}" for i in range(12)]


def test_data_config_is_the_audits_config(tmp_path):
    path = tmp_path / "d" / "train.parquet"
    path.parent.mkdir()
    feats = hf.Features({"tokens": hf.List(hf.Value("string")), "ner_tags": hf.List(hf.ClassLabel(names=NER)),
                         "pos_tags": hf.List(hf.ClassLabel(names=POS))})
    hf.Dataset.from_dict({"tokens": [["a", "b"]], "ner_tags": [[1, 2]], "pos_tags": [[3, 11]]},
                         features=feats).to_parquet(str(path))
    meta = json.loads(pq.read_schema(path).metadata[b"huggingface"])["info"]["features"]
    cfg = datacheck.data_config(path.parent, config={})
    assert cfg.labels.classes == meta["ner_tags"]["feature"]["names"]
    assert cfg.labels.tag_classes == {c: meta[c]["feature"]["names"] for c in ("ner_tags", "pos_tags")}
    assert cfg.classes_of_tags is True
    assert cfg.hash() == datacheck.audit(str(path.parent), config={}).config_hash
    assert datacheck.data_config(str(path), config={"labels": {"num_classes": 5}}).labels.classes is None
