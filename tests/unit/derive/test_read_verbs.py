"""The one read path for every verb: every verb must read a shard as the audit does (same reader, same
text-column and null-role casts). Each test here failed before the one read path (``datacheck.derive.read``) existed."""
from __future__ import annotations

from pathlib import Path

import polars as pl
import yaml

import datacheck
from datacheck.model.config import config_from_dict
from datacheck.tools.infer import infer_contract
from datacheck.tools.inspect import export_rows, inspect_shards

#: ``review`` is the text column only by config (not one of the inferred text names)
CFG = {"columns": {"text": "review", "label": "label"}, "labels": {"num_classes": 2}}


def _csv(path: Path, rows: list[tuple[str, int]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("review,label\n" + "".join(f"{r},{lab}\n" for r, lab in rows), encoding="utf-8")
    return path


def test_against_finds_overlap_of_a_csv_text_column_holding_digits(tmp_path):
    # TRAIN's reviews are all digits (a reader without the text casts infers Int64), EVAL's are mixed
    # (String): the two rows "123",0 and "456",1 occur on both sides.
    train = _csv(tmp_path / "train" / "train.csv", [("123", 0), ("456", 1), ("789", 0)])
    ev = _csv(tmp_path / "eval" / "eval.csv", [("123", 0), ("456", 1), ("a fine film", 1)])
    rep = datacheck.audit([str(ev)], CFG, fail_on="never", against=[str(train)])
    got = [f for f in rep.findings if f.check == "dup.split_overlap"]
    assert len(got) == 1, [(f.check, f.message) for f in rep.findings]
    assert got[0].count == 2


def test_schema_infer_keeps_a_csv_text_column_of_digits_as_string(tmp_path):
    data = _csv(tmp_path / "d" / "train.csv", [("123", 0), ("4567", 1), ("89", 0)])
    cfg = config_from_dict(CFG)
    contract, _notes = infer_contract([str(data)], cfg)
    assert contract["columns"]["review"]["dtype"] == "String"
    out = tmp_path / "inferred.yaml"
    out.write_text(yaml.safe_dump(contract, sort_keys=False), encoding="utf-8")
    rep = datacheck.audit([str(data)], {**CFG, "dataset": {"schema": str(out)}}, fail_on="never")
    assert [f.check for s in rep.shards for f in s.findings if f.check.startswith("schema.")] == []


def test_inspect_export_writes_rows_with_the_audited_schema(tmp_path):
    # label 2 is out of range for num_classes 2; review holds digits only
    data = _csv(tmp_path / "d" / "train.csv", [("123", 0), ("456", 2), ("789", 1)])
    cfg = config_from_dict(CFG)
    ins = inspect_shards([str(data)], cfg)
    assert ins[0].failing == {"labels.out_of_range:label": [1]}
    out, n = export_rows(ins, tmp_path / "rows.parquet", cfg)
    assert n == 1
    got = pl.read_parquet(out)
    assert got.schema["review"] == pl.String
    assert got["review"].to_list() == ["456"]
    assert got["_datacheck_row"].to_list() == [1]
    assert got["_datacheck_line"].to_list() == [3]
