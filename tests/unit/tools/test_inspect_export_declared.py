"""``inspect --export rows.parquet`` keeps what the shard's file declares, so the export audited alone
replays the finding: the field types of the parquet or Arrow file (``string``, ``int16``; not polars'
``large_string``/``int64``) and its schema metadata, ``datasets``' ``huggingface`` features among it (a
``ClassLabel``'s names are the only class count an audit of the export has). A ``save_to_disk`` split
whose Arrow file holds no features gets those of its ``dataset_info.json``."""
from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
from conftest import run_cli

import datacheck
from datacheck.model.config import config_from_dict
from datacheck.tools.inspect import export_rows, inspect_shards

NAMES = ["neg", "pos", "neu"]
FEATURES = {"text": {"dtype": "string", "_type": "Value"}, "label": {"names": NAMES, "_type": "ClassLabel"},
            "score": {"dtype": "int16", "_type": "Value"}}


def _table() -> pa.Table:
    labels = [i % len(NAMES) for i in range(40)]
    labels[9] = len(NAMES) + 2  # out of the declared range
    labels[30] = len(NAMES)
    return pa.table({"text": [f"row {i} of the shard" for i in range(40)],
                     "label": pa.array(labels, pa.int64()), "score": pa.array(range(40), pa.int16())})


def _replays(export, t: pa.Table) -> None:
    bad = [i for i, v in enumerate(t.column("label").to_pylist()) if v >= len(NAMES)]
    got = pq.read_table(export)
    for name in t.column_names:  # the file's own types, and the same values
        assert got.schema.field(name).type == t.schema.field(name).type
        assert got.column(name).to_pylist() == [t.column(name)[r].as_py() for r in bad]
    assert json.loads(got.schema.metadata[b"huggingface"])["info"]["features"] == FEATURES
    report = datacheck.audit([str(export)], workers=1)
    (f,) = [f for f in report.findings if f.check == "labels.out_of_range"]
    assert f.count == len(bad) and list(f.rows) == list(range(len(bad)))


def test_parquet_export_keeps_types_and_classlabel_metadata(tmp_path):
    t = _table()
    meta = {b"huggingface": json.dumps({"info": {"features": FEATURES}}).encode(), b"owner": b"team-x"}
    (tmp_path / "in").mkdir()
    pq.write_table(t.replace_schema_metadata(meta), tmp_path / "in" / "train.parquet")
    ins = inspect_shards([str(tmp_path / "in")], config_from_dict({}))
    path, n = export_rows(ins, tmp_path / "rows.parquet", config_from_dict({}))
    assert n == 2
    _replays(path, t)
    assert pq.read_table(path).schema.metadata[b"owner"] == b"team-x"


def test_save_to_disk_split_exports_the_features_of_its_dataset_info(tmp_path):
    t = _table()
    split = tmp_path / "train"
    split.mkdir()
    with pa.OSFile(str(split / "data-00000-of-00001.arrow"), "wb") as f, pa.ipc.new_stream(f, t.schema) as w:
        w.write_table(t)  # no schema metadata in the file
    (split / "dataset_info.json").write_text(json.dumps({"features": FEATURES}))
    (split / "state.json").write_text(json.dumps({"_data_files": [{"filename": "data-00000-of-00001.arrow"}],
                                                  "_split": "train"}))
    ins = inspect_shards([str(split)], config_from_dict({}))
    path, n = export_rows(ins, tmp_path / "rows.parquet", config_from_dict({}))
    assert n == 2
    _replays(path, t)


def test_exported_duplicate_goes_with_the_row_it_repeats(realdata, tmp_path):
    """DKHate's ``save_to_disk`` train split (realdata #6): its repeated (text, label) rows computed with
    pyarrow; the export holds every copy and each copy's first row, and replays every copy."""
    folder = realdata / "dkhate_danish_offensive" / "dkhate_processed_hf" / "train"
    with pa.OSFile(str(folder / "data-00000-of-00001.arrow"), "rb") as f:
        t = pa.ipc.open_stream(f).read_all()
    first: dict[tuple, int] = {}
    copies = []
    for i, r in enumerate(zip(t.column("text").to_pylist(), t.column("label").to_pylist())):
        if first.setdefault(r, i) != i:
            copies.append((i, first[r]))
    assert len(copies) > 20  # more than inspect shows per check by default
    cfg = config_from_dict({})
    ins = inspect_shards([str(folder)], cfg, checks=["dup.exact_in_shard"], export=True)
    assert ins[0].repeats["dup.exact_in_shard"] == dict(copies)
    path, n = export_rows(ins, tmp_path / "dups.parquet", cfg)
    wanted = sorted({c for c, _ in copies} | {f for _, f in copies})
    assert n == len(wanted)
    assert pq.read_table(path).column("_datacheck_row").to_pylist() == wanted
    report = datacheck.audit([str(path)], workers=1)
    (f,) = [f for f in report.findings if f.check == "dup.exact_in_shard"]
    assert f.count == len(copies)


def test_cli_export_of_duplicates_replays_them(tmp_path):
    rows = [f"sentence {i} of the shard" for i in range(30)]
    rows[21], rows[25], rows[27] = rows[4], rows[4], rows[10]
    t = pa.table({"text": rows, "label": pa.array([0 if r in (rows[4], rows[10]) else i % 2
                                                   for i, r in enumerate(rows)], pa.int64())})
    (tmp_path / "in").mkdir()
    pq.write_table(t, tmp_path / "in" / "train.parquet")
    pairs = list(zip(t.column("text").to_pylist(), t.column("label").to_pylist()))
    first: dict[tuple, int] = {}
    copies = [i for i, r in enumerate(pairs) if first.setdefault(r, i) != i]
    wanted = sorted(set(copies) | {first[pairs[i]] for i in copies})
    out = run_cli("inspect", str(tmp_path / "in"), "--export", str(tmp_path / "rows.parquet"))
    assert out.returncode == 1, out.stderr
    got = pq.read_table(tmp_path / "rows.parquet")
    assert got.column("_datacheck_row").to_pylist() == wanted
    assert got.column("_datacheck_checks").to_pylist() == [
        ["dup.exact_in_shard"] if r in copies else [] for r in wanted]
    report = datacheck.audit([str(tmp_path / "rows.parquet")], workers=1)
    (f,) = [f for f in report.findings if f.check == "dup.exact_in_shard"]
    assert f.count == len(copies)
