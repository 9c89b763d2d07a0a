"""prepare_audit takes [labels] num_classes from a ClassLabel declaration before any cached result is
looked up: the filled count is part of the cache's key, so a result cached without it is never reused."""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
from checkhelp import one, skipped_reason

import datacheck
from datacheck.execute.merge import merge_parts
from datacheck.execute.parts import audit_part, write_part
from datacheck.execute.setup import AuditOptions
from datacheck.model.config import config_from_dict


def _split(folder: Path, labels: list[int], label_feature: dict) -> None:
    """A save_to_disk split: one Arrow IPC stream, state.json and dataset_info.json."""
    folder.mkdir(parents=True, exist_ok=True)
    t = pa.table({"text": [f"row {i}" for i in range(len(labels))], "label": pa.array(labels, pa.int64())})
    with pa.ipc.new_stream(folder / "data-00000-of-00001.arrow", t.schema) as w:
        w.write_table(t)
    (folder / "state.json").write_text(json.dumps({"_data_files": [{"filename": "data-00000-of-00001.arrow"}],
                                                   "_split": "train"}))
    (folder / "dataset_info.json").write_text(json.dumps(
        {"features": {"text": {"dtype": "string", "_type": "Value"}, "label": label_feature}}))


def test_cached_result_without_the_declared_count_is_not_reused(tmp_path):
    labels = [0, 1, 2, 1]
    names = ["a", "b"]  # label 2 == len(names): out of range once the ClassLabel is declared
    data, cache = tmp_path / "train", tmp_path / "cache"
    _split(data, labels, {"dtype": "int64", "_type": "Value"})
    first = datacheck.audit(str(data), config={}, cache_dir=str(cache))
    assert skipped_reason(first, "labels.out_of_range") is not None and first.label_facts is None
    _split(data, labels, {"names": names, "_type": "ClassLabel"})  # the same arrow bytes, a new declaration
    second = datacheck.audit(str(data), config={}, cache_dir=str(cache))
    assert second.label_facts is not None and second.label_facts["num_classes"] == len(names)
    f = one(second, "labels.out_of_range", "label")
    assert f.rows == tuple(i for i, v in enumerate(labels) if v >= len(names))


def test_parts_carry_label_facts_into_the_merge(tmp_path):
    """audit_part / merge_parts: the merged report says where num_classes came from, as a single job's."""
    names = ["a", "b", "c"]
    data = tmp_path / "train"
    _split(data, [0, 1, 2, 3], {"names": names, "_type": "ClassLabel"})
    single = datacheck.audit(str(data), config={})
    out = tmp_path / "out" / "part-0.json"
    write_part(audit_part([str(data)], config_from_dict({}), AuditOptions(), 1, 0), out)
    merged = merge_parts([out])
    assert merged.label_facts == single.label_facts and merged.label_facts["num_classes"] == len(names)
    assert one(merged, "labels.out_of_range", "label").rows == (3,)
