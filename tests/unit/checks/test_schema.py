"""Dataset-level: schema.inconsistent across shards, and tokens.dtype_overflow from the contract."""
from __future__ import annotations

import polars as pl
from schemahelp import audit, found, write

L = pl.List


def test_inconsistent_shards(tmp_path):
    base = {"input_ids": pl.Series([[1, 2]], dtype=L(pl.Int32)), "label": [0]}
    for k in range(3):
        write(tmp_path, base, f"train-0000{k}-of-00005.parquet")
    write(tmp_path, {"input_ids": pl.Series([[1, 2]], dtype=L(pl.Int64)), "label": [0]}, "train-00003-of-00005.parquet")
    write(tmp_path, {"input_ids": pl.Series([[1, 2]], dtype=L(pl.Int32))}, "train-00004-of-00005.parquet")
    fs = found(audit(tmp_path, None))
    assert [(f.check, f.shards, f.count) for f in fs] == [
        ("schema.inconsistent", ("train-00003-of-00005.parquet",), 1),
        ("schema.inconsistent", ("train-00004-of-00005.parquet",), 1),
    ]
    assert fs[0].details["dtypes"] == {"input_ids": {"expected": "List(Int32)", "actual": "List(Int64)"}}
    assert fs[1].details["missing"] == ["label"]


def test_consistent_shards_no_finding(tmp_path):
    for k in range(2):
        write(tmp_path, {"a": [k]}, f"s{k}.parquet")
    assert found(audit(tmp_path, None)) == []


CONTRACT = "columns:\n  input_ids:\n    dtype: List({t})\n"


def test_dtype_overflow_from_the_contract_once(tmp_path):
    (tmp_path / "u16.yaml").write_text(CONTRACT.format(t="UInt16"))
    d = tmp_path / "d"
    for k in range(2):
        write(d, {"input_ids": pl.Series([[1, 70000]], dtype=L(pl.Int32))}, f"s{k}.parquet")
    report = audit(d, tmp_path / "u16.yaml", tokens={"vocab_size": 119547})
    ov = [f for f in report.findings if f.check == "tokens.dtype_overflow"]
    assert len(ov) == 1 and ov[0].shards == ("s0.parquet", "s1.parquet")
    assert "declares 'input_ids' as List(UInt16)" in ov[0].message


def test_dtype_overflow_of_the_data_not_reported_twice(tmp_path):
    (tmp_path / "u16.yaml").write_text(CONTRACT.format(t="UInt16"))
    write(tmp_path / "d", {"input_ids": pl.Series([[1, 60000]], dtype=L(pl.UInt16))})
    report = audit(tmp_path / "d", tmp_path / "u16.yaml", tokens={"vocab_size": 119547})
    ov = [f for f in report.findings if f.check == "tokens.dtype_overflow"]
    assert len(ov) == 1 and ov[0].message.startswith("'input_ids' stores ids as UInt16")  # from the storage type


def test_wide_enough_contract_no_overflow(tmp_path):
    (tmp_path / "i32.yaml").write_text(CONTRACT.format(t="Int32"))
    write(tmp_path / "d", {"input_ids": pl.Series([[1, 2]], dtype=L(pl.Int32))})
    report = audit(tmp_path / "d", tmp_path / "i32.yaml", tokens={"vocab_size": 119547})
    assert [f for f in report.findings if f.check == "tokens.dtype_overflow"] == []


def test_header_only_csv_is_compared_by_its_column_names(tmp_path):
    # a CSV with a header and no row reads every column as String (no value to infer from): its dtypes
    # say nothing of its preprocessing, so it is not "mixed preprocessing"; a renamed column still is
    (tmp_path / "a.csv").write_text("text,label\nhello,0\nworld,1\n")
    (tmp_path / "b.csv").write_text("text,label\nfoo,1\nbar,0\n")
    (tmp_path / "c.csv").write_text("text,label\n")
    rep = audit(tmp_path, None)
    assert [s.rows for s in rep.shards] == [2, 2, 0]
    assert pl.read_csv(tmp_path / "c.csv").schema["label"] == pl.String  # what the reader sees: no evidence
    assert found(rep) == []
    assert [(f.check, f.shards) for f in rep.findings if f.check == "index.empty_shard"] == [
        ("index.empty_shard", ("c.csv",))]
    (tmp_path / "c.csv").write_text("text,labl\n")
    fs = found(audit(tmp_path, None))
    assert [(f.check, f.shards, f.details["missing"], f.details["extra"], f.details["dtypes"]) for f in fs] == [
        ("schema.inconsistent", ("c.csv",), ["label"], ["labl"], {})]
    # a shard with rows whose column holds other values is compared by dtype as before
    (tmp_path / "c.csv").write_text("text,label\nbaz,x\n")
    fs = found(audit(tmp_path, None))
    assert [(f.shards, f.details["dtypes"]) for f in fs] == [
        (("c.csv",), {"label": {"expected": "Int64", "actual": "String"}})]
