"""``datacheck plan --step N --export FILE.parquet`` keeps the column types and schema metadata the
shards' files declare (``int16`` and ``string``, not polars' ``int64``/``large_string``; ``datasets``'
``huggingface`` features), as ``inspect --export`` does: the exported step replays as its shards read."""
from __future__ import annotations

import contextlib
import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("torch")
from datacheck.cli.main import main  # noqa: E402

FEATURES = {"gid": {"dtype": "int32", "_type": "Value"}, "text": {"dtype": "string", "_type": "Value"},
            "label": {"names": ["a", "b", "c"], "_type": "ClassLabel"}}


def test_step_export_keeps_the_shards_types_and_metadata(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    g = 0
    tables = []
    for i, n in enumerate((9, 7)):
        t = pa.table({"gid": pa.array(range(g, g + n), pa.int32()), "text": [f"row {j}" for j in range(g, g + n)],
                      "label": pa.array([j % 3 for j in range(g, g + n)], pa.int64())})
        t = t.replace_schema_metadata({b"huggingface": json.dumps({"info": {"features": FEATURES}}).encode()})
        pq.write_table(t, data / f"train-{i:05d}-of-00002.parquet")
        tables.append(t)
        g += n
    cfg = tmp_path / "dc.toml"
    cfg.write_text("[batch]\nbatch_size = 4\nseed = 3\n")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(["plan", str(data), "--config", str(cfg), "--step", "0", "--export", str(tmp_path / "s0.parquet"),
                   "--format", "json"])
    assert rc == 0
    rows = json.loads(out.getvalue())["result"]["step"]["rows"]
    got = pq.read_table(tmp_path / "s0.parquet")
    for name in ("gid", "text", "label"):
        assert got.schema.field(name).type == tables[0].schema.field(name).type
    assert json.loads(got.schema.metadata[b"huggingface"])["info"]["features"] == FEATURES
    assert got.column("gid").to_pylist() == [r["global_index"] for r in rows]
    assert got.column("text").to_pylist() == [f"row {r['global_index']}" for r in rows]
