"""A finding's ``rows``/``lines``/``examples`` hold the first ``[report] max_examples``;
when more rows fail, the JSON says so (``"rows_truncated": true``), never a silently cut list."""
from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import polars as pl
import pytest

import datacheck
from datacheck.engine.shard import audit_frame
from datacheck.model.config import config_from_dict
from datacheck.model.findings import Finding

SCHEMA = json.loads((Path(__file__).resolve().parents[3] / "schemas" / "report.schema.json").read_text())


@pytest.mark.parametrize(("n_bad", "max_ex", "truncated"), [(5, 5, False), (6, 5, True), (1, 1, False), (30, 20, True)])
def test_row_check_flags_a_cut_list(n_bad, max_ex, truncated):
    x = [float("nan")] * n_bad + [1.0] * 3
    cfg = config_from_dict({"columns": {"features": ["x"]}, "report": {"max_examples": max_ex}})
    (f,) = [f for f in audit_frame(pl.DataFrame({"x": x}), cfg).findings if f.check == "finite.nan"]
    assert f.count == n_bad and list(f.rows) == list(range(min(n_bad, max_ex)))
    assert f.rows_truncated is truncated
    d = f.to_dict()
    assert d.get("rows_truncated", False) is truncated and ("rows_truncated" in d) is truncated
    assert Finding.from_dict(d) == f


def test_jsonl_bad_lines_and_dataset_findings_in_the_report(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    (d / "a.jsonl").write_text('{"text": "ok"}\n' + "{broken\n" * 4)
    pl.DataFrame({"text": [f"t{i}" for i in range(4)]}).write_parquet(d / "b.parquet")
    pl.DataFrame({"text": [f"t{i}" for i in range(4)]}).write_parquet(d / "c.parquet")
    rep = datacheck.audit([str(d)], config={"report": {"max_examples": 3}}, fail_on="never")
    doc = json.loads(rep.to_json())
    jsonschema.Draft202012Validator(SCHEMA).validate(doc)
    (bad,) = [f for s in doc["shards"] for f in s["findings"] if f["check"] == "decode.bad_record"]
    assert bad["count"] == 4 and bad["lines"] == [2, 3, 4] and bad["rows_truncated"] is True
    (across,) = [f for f in doc["findings"] if f["check"] == "dup.exact_across_shards"]
    assert across["count"] == 4 and len(across["examples"]) == 3 and across["rows_truncated"] is True
    # a complete list has no key at all
    rep2 = datacheck.audit([str(d)], config={"report": {"max_examples": 4}}, fail_on="never")
    doc2 = json.loads(rep2.to_json())
    assert not [f for s in doc2["shards"] for f in s["findings"] if "rows_truncated" in f]
    assert not [f for f in doc2["findings"] if "rows_truncated" in f]
