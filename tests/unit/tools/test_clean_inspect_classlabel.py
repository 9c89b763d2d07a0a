"""clean and inspect take [labels] num_classes from a Hugging Face ClassLabel declaration as the
audit does: clean --drop labels.out_of_range drops the row an audit names, inspect shows it."""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from datacheck.model.config import config_from_dict
from datacheck.tools.clean import clean
from datacheck.tools.inspect import inspect_shards


def _hf_parquet(path: Path, labels: list[int], names: list[str]) -> None:
    feats = {"text": {"dtype": "string", "_type": "Value"}, "label": {"names": names, "_type": "ClassLabel"}}
    t = pa.table({"text": [f"t{i}" for i in range(len(labels))], "label": pa.array(labels, pa.int64())})
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(t.replace_schema_metadata({"huggingface": json.dumps({"info": {"features": feats}})}), path)


def test_clean_and_inspect_use_the_declared_count(tmp_path):
    names = ["neg", "pos"]
    labels = [0, 1, len(names), 0]
    bad = [i for i, v in enumerate(labels) if v >= len(names)]
    _hf_parquet(tmp_path / "in" / "train.parquet", labels, names)
    res = clean([str(tmp_path / "in")], tmp_path / "out", config_from_dict({}), drop=["labels.out_of_range"])
    assert res.kept == len(labels) - len(bad)
    assert pq.read_table(res.out / "train.parquet").column("label").to_pylist() == [v for v in labels if v < len(names)]
    (ins,) = inspect_shards([str(tmp_path / "in")], config_from_dict({}), checks=["labels.out_of_range"])
    assert ins.failing["labels.out_of_range:label"] == bad
    assert any(f"[labels] classes = the {len(names)} ClassLabel names of 'label'" in n for n in ins.notes)
