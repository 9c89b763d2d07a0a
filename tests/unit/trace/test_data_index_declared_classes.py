"""trace's row audit judges a step's rows against the classes the data declares, as the audit does
(the dataset index holds the config :func:`datacheck.derive.classlabel.with_declared_classes` fills):
a ``ClassLabel`` label one past its names, a ``Sequence(ClassLabel)`` POS tag one past its own names.
The data is ``datasets``' own parquet output; expected values are read from its metadata with json."""
from __future__ import annotations

import json
from pathlib import Path

import datasets as hf
import pyarrow as pa
import pyarrow.parquet as pq
from conftest import run_cli

import datacheck
from datacheck.model.config import config_from_dict
from datacheck.trace.data import DatasetIndex

BATCH = 2


def _plant(src: Path, out: Path, col: str, row: int, value: int, pos: int | None = None) -> None:
    t = pq.read_table(src)
    vals = t.column(col).to_pylist()
    if pos is None:
        vals[row] = value
    else:
        vals[row][pos] = value
    i = t.schema.get_field_index(col)
    t = t.set_column(i, t.schema.field(i), pa.array(vals, t.schema.field(i).type))
    assert t.schema.metadata[b"huggingface"]
    out.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(t, out)


def _meta(path: Path) -> dict:
    return json.loads(pq.read_schema(path).metadata[b"huggingface"])["info"]["features"]


def _trace_step(tmp_path: Path, data: Path, step: int) -> dict:
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps({"step": s, "loss": 1.0 / s}) + "\n" for s in range(1, 5)))
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text(f"[batch]\nbatch_size = {BATCH}\nshuffle = false\n")
    r = run_cli("trace", str(log), "--data", str(data), "--config", str(cfg), "--step", str(step), "--format", "json")
    assert r.returncode in (0, 1), r.stderr
    return json.loads(r.stdout)["result"]["data"]["rows"]


def test_step_row_with_label_past_the_class_names_fails(tmp_path):
    """Row 3 (log step 2 with batches of 2, in order) holds label len(names): labels.out_of_range in
    the step's audit, which was skipped for want of num_classes."""
    feats = hf.Features({"text": hf.Value("string"), "label": hf.ClassLabel(names=["neg", "neu", "pos"])})
    src = tmp_path / "src.parquet"
    hf.Dataset.from_dict({"text": [f"t{i}" for i in range(8)], "label": [0, 1, 2, 0, 1, 2, 0, 1]},
                         features=feats).to_parquet(str(src))
    names = _meta(src)["label"]["names"]
    bad = 3
    _plant(src, tmp_path / "data" / "train.parquet", "label", bad, len(names))
    index = DatasetIndex.build([str(tmp_path / "data")], config_from_dict({"batch": {"batch_size": BATCH}}))
    assert index.cfg.labels.classes == names
    rows = _trace_step(tmp_path, tmp_path / "data", bad // BATCH + 1)
    assert [(r["row"], r["checks"]) for r in rows["failing_rows"]] == [(bad, ["labels.out_of_range:label"])]


def test_step_row_with_pos_tag_past_its_own_names_fails(tmp_path):
    """CoNLL-style tags beside 'labels': a POS tag len(pos names) (in range for no bound before) in
    row 2 is labels.out_of_range on 'pos_tags' in the audit of log step 2."""
    ner = ["O", "B-PER", "I-PER"]
    pos = [f"P{i}" for i in range(12)]
    feats = hf.Features({"tokens": hf.List(hf.Value("string")), "pos_tags": hf.List(hf.ClassLabel(names=pos)),
                         "ner_tags": hf.List(hf.ClassLabel(names=ner)), "labels": hf.List(hf.Value("int64"))})
    tags = [[0, 1, 2], [1, 2, 0], [0, 0, 1], [2, 1, 0]] * 2
    src = tmp_path / "src.parquet"
    hf.Dataset.from_dict({"tokens": [["a", "b", "c"]] * 8, "pos_tags": [[11, 3, 5]] * 8, "ner_tags": tags,
                          "labels": tags}, features=feats).to_parquet(str(src))
    k = len(_meta(src)["pos_tags"]["feature"]["names"])
    bad = 2
    _plant(src, tmp_path / "data" / "train.parquet", "pos_tags", bad, k, pos=0)
    rows = _trace_step(tmp_path, tmp_path / "data", bad // BATCH + 1)
    assert [(r["row"], r["checks"]) for r in rows["failing_rows"]] == [(bad, ["labels.out_of_range:pos_tags"])]


def test_gate_identity_of_class_label_data_matches_the_trace(tmp_path):
    """The gate's report hashes the config with the classes it took from the data; the trace audits the
    rows under that same config, so a run that logged the gate's identity gets no config warning (it
    got one: the trace compared the config before the data's classes were filled). Another config
    ([labels] num_classes given) is still told apart."""
    feats = hf.Features({"text": hf.Value("string"), "label": hf.ClassLabel(names=["neg", "neu", "pos"])})
    (tmp_path / "data").mkdir()
    hf.Dataset.from_dict({"text": [f"t{i}" for i in range(8)], "label": [0, 1, 2, 0, 1, 2, 0, 1]},
                         features=feats).to_parquet(str(tmp_path / "data" / "train.parquet"))
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text(f"[batch]\nbatch_size = {BATCH}\nshuffle = false\n")
    other = tmp_path / "other.toml"
    other.write_text(f"[batch]\nbatch_size = {BATCH}\nshuffle = false\n[labels]\nnum_classes = 3\n")

    def warning(gate_cfg: Path) -> str | None:
        rep = datacheck.audit(str(tmp_path / "data"), config=str(gate_cfg))
        log = tmp_path / "log.jsonl"
        log.write_text(json.dumps({"datacheck_index_hash": rep.index_hash, "datacheck_config_hash": rep.config_hash})
                       + "\n" + "".join(json.dumps({"step": s, "loss": 1.0 / s}) + "\n" for s in range(1, 5)))
        r = run_cli("trace", str(log), "--data", str(tmp_path / "data"), "--config", str(cfg), "--step", "2",
                    "--format", "json")
        assert r.returncode in (0, 1), r.stderr
        return json.loads(r.stdout)["result"]["data"]["warning"]

    assert warning(cfg) is None
    assert "audited them under config_hash" in (warning(other) or "")
