"""``trace --export rows.parquet`` keeps what the shard's file declares (as ``plan --export`` and
``inspect --export`` do): the field types of the parquet file (``string``, ``int16``, ``int32``; not
polars' ``large_string``/``int64``) and its schema metadata, ``datasets``' ``huggingface`` features among
it, so the export audited alone replays the finding (a ``ClassLabel``'s names are the only class count
an audit of the export has). The step's rows come from torch's own DistributedSampler (the plan's
loader), computed here."""
from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import run_cli

import datacheck

torch = pytest.importorskip("torch")
from torch.utils.data import DistributedSampler  # noqa: E402

NAMES = ["neg", "pos", "neu"]
FEATURES = {"text": {"dtype": "string", "_type": "Value"}, "label": {"names": NAMES, "_type": "ClassLabel"},
            "score": {"dtype": "int16", "_type": "Value"}}
ROWS, BATCH, SEED, BAD = 40, 8, 3, 17


def test_trace_parquet_export_keeps_types_and_classlabel_metadata(tmp_path):
    labels = [i % len(NAMES) for i in range(ROWS)]
    labels[BAD] = len(NAMES) + 1  # outside the declared classes
    t = pa.table({"text": [f"row {i} of the shard" for i in range(ROWS)], "label": pa.array(labels, pa.int32()),
                  "score": pa.array(range(ROWS), pa.int16())})
    meta = {b"huggingface": json.dumps({"info": {"features": FEATURES}}).encode(), b"owner": b"team-x"}
    (tmp_path / "data").mkdir()
    pq.write_table(t.replace_schema_metadata(meta), tmp_path / "data" / "train.parquet")
    (tmp_path / "datacheck.toml").write_text(f"[batch]\nbatch_size = {BATCH}\nseed = {SEED}\n")
    order = list(DistributedSampler(range(ROWS), num_replicas=1, rank=0, shuffle=True, seed=SEED))
    step = order.index(BAD) // BATCH  # the 0-based optimizer step that loads the bad row
    log = tmp_path / "metrics.jsonl"
    log.write_text("".join(json.dumps({"step": s, "loss": 1.0}) + "\n" for s in range(ROWS // BATCH)))
    out = tmp_path / "rows.parquet"
    r = run_cli("trace", str(log), "--data", str(tmp_path / "data"), "--config", str(tmp_path / "datacheck.toml"),
                "--first-step", "0", "--step", str(step), "--export", str(out))
    assert r.returncode in (0, 1), r.stderr
    got = pq.read_table(out)
    want = order[step * BATCH:(step + 1) * BATCH]
    assert got.column("_datacheck_row").to_pylist() == want
    for name in t.column_names:  # the file's own types, and the step's values in batch order
        assert got.schema.field(name).type == t.schema.field(name).type
        assert got.column(name).to_pylist() == [t.column(name)[i].as_py() for i in want]
    assert json.loads(got.schema.metadata[b"huggingface"])["info"]["features"] == FEATURES
    assert got.schema.metadata[b"owner"] == b"team-x"
    report = datacheck.audit([str(out)], workers=1)  # the export alone replays the finding
    (f,) = [f for f in report.findings if f.check == "labels.out_of_range"]
    assert list(f.rows) == [want.index(BAD)]
