"""Hostile records in line formats: deep nesting is a bad record with its
line, never a crash; a long CSV field is a field, not an unreadable file."""
from __future__ import annotations

import json

import pytest
from conftest import run_cli

from datacheck.derive.read import open_for_checks
from datacheck.formats.discovery import discover
from datacheck.formats.records import jsonl_records
from datacheck.io.safejson import MAX_JSON_DEPTH
from datacheck.model.config import Config


def _open(path):
    shard = discover([str(path)], "auto").shards[0]
    return open_for_checks(shard, Config())


DEEP = {
    "list_5000": '{"text": "x", "v": ' + "[" * 5000 + "]" * 5000 + "}",
    "object_600": '{"text": "x", "v": ' + '{"a":' * 600 + "1" + "}" * 600 + "}",
    "object_400": '{"text": "x", "v": ' + '{"a":' * 400 + "1" + "}" * 400 + "}",
    "huge_int": '{"text": "x", "v": ' + "9" * 5000 + "}",
}


@pytest.mark.parametrize("name", sorted(DEEP))
def test_deep_or_huge_record_is_a_bad_record_with_its_line(tmp_path, name):
    f = tmp_path / "a.jsonl"
    f.write_text('{"text": "ok", "v": 1}\n' + DEEP[name] + '\n{"text": "ok2", "v": 2}\n')
    p = run_cli("audit", str(f), "--report-dir", str(tmp_path / ".r"), "--format", "json", cwd=tmp_path)
    assert "Traceback" not in p.stderr and p.returncode == 1, (p.returncode, p.stderr[-2000:])
    rep = json.loads(p.stdout)
    sh = rep["shards"][0]
    assert sh["rows"] == 2
    bad = [x for x in sh["findings"] if x["check"] == "decode.bad_record" and x["severity"] == "error"]
    assert bad and bad[0]["lines"] == [2], sh["findings"]


def test_depth_limit_is_inclusive():
    ok = '{"v": ' + "[" * (MAX_JSON_DEPTH - 1) + "]" * (MAX_JSON_DEPTH - 1) + "}"
    deep = '{"v": ' + "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH + "}"
    split = jsonl_records((ok + "\n" + deep + "\n").encode())
    assert [r.error is None for r in split.records] == [True, False]
    assert f"nested {MAX_JSON_DEPTH + 1} levels deep" in split.records[1].error


def test_csv_field_over_131072_chars_is_read(tmp_path):
    f = tmp_path / "a.csv"
    long = "x" * 200_000
    f.write_text(f'text,label\n"{long}",1\nshort,0\n')
    sd = _open(f)
    df = sd.lf.collect()
    assert df.height == 2 and len(df["text"][0]) == 200_000
    assert not [x for x in sd.decode_findings if x.check == "decode.unreadable"]
