"""A JSON key ``""`` is a column named ``""`` on every JSONL path: the fast parse, and the exact
per-line path a line that does not parse sends the chunk to (where the frame was once built from a
list of Series, which renamed it ``column_<i>`` and crashed the read)."""
from __future__ import annotations

import json

import pytest

import datacheck


@pytest.mark.parametrize("bad_line", [False, True])
def test_an_empty_key_is_a_column_of_that_name(tmp_path, bad_line):
    rows = [{"text": "a", "label": 0}, {"text": "b", "label": 1, "": 5}, {"text": "c", "label": 0, "": 7}]
    lines = [json.dumps(r) for r in rows] + (["{not json"] if bad_line else [])
    (tmp_path / "a.jsonl").write_text("\n".join(lines) + "\n")
    rep = datacheck.audit([str(tmp_path / "a.jsonl")], {})
    shard = rep.shards[0]
    assert shard.rows == 3 and "" in shard.columns
    checks = {f.check for f in shard.findings}
    assert ("decode.bad_record" in checks) == bad_line
