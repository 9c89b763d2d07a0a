"""``datacheck merge`` takes parts audited from different checkouts of the same data (two
CI jobs, two paths): the parts are matched by relative shard paths, sizes and config, never by
the absolute root; data that differs between the checkouts is still refused."""
from __future__ import annotations

import json
import shutil

import pytest
from conftest import run_cli
from dshelp import write

from datacheck.execute.merge import merge_parts
from datacheck.execute.parts import audit_part, write_part
from datacheck.execute.setup import AuditOptions
from datacheck.model.config import config_from_dict
from datacheck.model.errors import UsageError


def _data(root):
    for i in range(4):
        write(root, f"train-{i:05d}-of-00004.parquet", {"text": [f"r{i}-{k}" for k in range(5)] + ["same"],
                                                          "label": [0, 1, 0, 1, 0, i % 2]})
    write(root, "index-src.parquet", {"text": ["z"], "label": [1]})
    return root


def _parts(tmp_path, roots, cfg):
    files = []
    for k, root in enumerate(roots):
        out = tmp_path / f"out{k}" / f"part-{k}.json"
        write_part(audit_part([str(root)], cfg, AuditOptions(), len(roots), k), out)
        files.append(out)
    return files


def test_merge_parts_from_two_checkouts_equals_a_single_job(tmp_path):
    a = _data(tmp_path / "ci-a" / "data")
    b = tmp_path / "elsewhere" / "job2" / "data"
    shutil.copytree(a, b)
    cfg = config_from_dict({"labels": {"num_classes": 2}})
    merged = merge_parts(_parts(tmp_path, [a, b], cfg))
    single = run_cli("audit", str(a), "--format", "json", "--no-cache", "--no-progress", "--fail-on", "error",
                     "--config", str(_toml(tmp_path)), "--report-dir", str(tmp_path / "r"))
    doc = json.loads(single.stdout)
    got = merged.to_dict()
    for d in (doc, got):
        for k in ("created_at", "config_path"):
            d.pop(k)
    assert got == doc
    assert {f.check for f in merged.findings} >= {"dup.conflicting_labels"}


def _toml(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text("[labels]\nnum_classes = 2\n")
    return p


def test_merge_refuses_checkouts_whose_data_differs(tmp_path):
    a = _data(tmp_path / "a")
    b = tmp_path / "b"
    shutil.copytree(a, b)
    write(b, "index-src.parquet", {"text": ["z", "longer now"], "label": [1, 0]})  # same name, other bytes
    cfg = config_from_dict({})
    with pytest.raises(UsageError, match="shard sizes"):
        merge_parts(_parts(tmp_path, [a, b], cfg))


def test_merge_with_committed_index_from_two_checkouts(tmp_path):
    a = _data(tmp_path / "a")
    assert run_cli("index", "build", str(a), "-o", str(a / "index.json")).returncode == 0
    b = tmp_path / "b"
    shutil.copytree(a, b)
    cfg = config_from_dict({"dataset": {"index": "index.json"}})
    merged = merge_parts(_parts(tmp_path, [a, b], cfg))
    assert not [f for f in merged.findings if f.check.startswith("index.") and f.check != "index.numbering_gap"]
