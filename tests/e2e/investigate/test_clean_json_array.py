"""``datacheck clean`` of a JSON array file (``.json``: one top-level array of records, as
LLaMA-Factory and FastChat ship them), which the audit reads: the copy is a JSON array in the same
layout (the input's brackets, separators, indentation and kept elements' bytes; byte for byte when
nothing is dropped), the dropped elements go to ``.quarantine/<shard>`` as a JSON array with the
``_datacheck_*`` columns, numbered as the audit numbers the rows (element index; the line an element
starts on, none when elements share a line). The original is never touched. Expected rows and bytes
are computed here with ``json``."""
from __future__ import annotations

import gzip
import json

import pytest
from conftest import run_cli

from datacheck.formats.registry import refusal, rewrite_mode

ROWS = [{"instruction": "say hi", "output": "hi"}, {"instruction": "", "output": "x"},
        {"instruction": "add 1+1", "output": "2"}, {"instruction": "   ", "output": "y"},
        {"instruction": "name a colour", "output": "blue"}]


def _empty(rows: list[dict]) -> list[int]:
    return [i for i, r in enumerate(rows) if not r["instruction"].strip()]


def _clean(tmp_path, name: str, raw: bytes, *extra: str, forced: bool = False):
    data = tmp_path / "data"
    data.mkdir()
    (data / name).write_bytes(raw)
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text(('[dataset]\nformat = "json"\n' if forced else "") + '[columns]\ntext = ["instruction"]\n')
    r = run_cli("clean", str(data), "--out", str(tmp_path / "out"), "--config", str(cfg), "--drop", "empty.text",
                "--format", "json", *extra)
    return data, r


def test_json_array_files_are_rewritable():
    assert rewrite_mode("json") == "records" and refusal("json") is None


@pytest.mark.parametrize("indent", [2, None])
def test_clean_writes_a_json_array_without_the_dropped_rows(tmp_path, indent):
    raw = (json.dumps(ROWS, indent=indent, ensure_ascii=False) + "\n").encode("utf-8")
    data, r = _clean(tmp_path, "train.json", raw)
    assert r.returncode == 0, r.stderr
    assert (data / "train.json").read_bytes() == raw  # the original untouched
    bad = _empty(ROWS)
    (shard,) = json.loads(r.stdout)["result"]["shards"]
    assert (shard["input_rows"], shard["kept"], shard["quarantined"]) == (len(ROWS), len(ROWS) - len(bad), len(bad))
    copy = (tmp_path / "out" / "train.json").read_bytes()
    kept = [x for i, x in enumerate(ROWS) if i not in bad]
    assert json.loads(copy) == kept
    if indent is not None:  # the same layout: what json.dumps(kept, indent=2) writes, as the input was written
        assert copy == (json.dumps(kept, indent=indent, ensure_ascii=False) + "\n").encode("utf-8")
    q = json.loads((tmp_path / "out" / ".quarantine" / "train.json").read_text(encoding="utf-8"))
    assert [x["_datacheck_row"] for x in q] == bad
    # the line each dropped element starts on (json.dumps(indent=2): "[" then 4 lines an element), or none
    # when every element starts on line 1
    want_lines = [2 + 4 * i for i in bad] if indent is not None else [None] * len(bad)
    assert [x["_datacheck_line"] for x in q] == want_lines
    assert [{k: v for k, v in x.items() if not k.startswith("_datacheck_")} for x in q] == [ROWS[i] for i in bad]
    assert all(x["_datacheck_checks"] == ["empty.text:instruction"] and x["_datacheck_shard"] == "train.json" for x in q)
    again = run_cli("audit", str(tmp_path / "out"), "--config", str(tmp_path / "datacheck.toml"), "--format", "json")
    checks = {f["check"] for s in json.loads(again.stdout)["shards"] for f in s["findings"]}
    assert "empty.text" not in checks and "decode.unreadable" not in checks


def test_nothing_dropped_copies_the_file_byte_for_byte(tmp_path):
    rows = [r for i, r in enumerate(ROWS) if i not in _empty(ROWS)]
    raw = b"\xef\xbb\xbf" + json.dumps(rows, indent=4).encode("utf-8")  # a byte order mark, no final newline
    _data, r = _clean(tmp_path, "a.json", raw)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out" / "a.json").read_bytes() == raw
    assert not (tmp_path / "out" / ".quarantine").exists()


def test_every_row_dropped_leaves_an_empty_array(tmp_path):
    rows = [{"instruction": "", "output": str(i)} for i in range(3)]
    _data, r = _clean(tmp_path, "a.json", json.dumps(rows).encode())
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "out" / "a.json").read_bytes()) == []


def test_a_gzipped_json_array_is_written_gzipped(tmp_path):
    raw = gzip.compress(json.dumps(ROWS, indent=1).encode())
    _data, r = _clean(tmp_path, "a.json.gz", raw, forced=True)  # [dataset] format = "json" reads .json.gz
    assert r.returncode == 0, r.stderr
    bad = _empty(ROWS)
    assert json.loads(gzip.decompress((tmp_path / "out" / "a.json.gz").read_bytes())) == [
        x for i, x in enumerate(ROWS) if i not in bad]
    q = json.loads(gzip.decompress((tmp_path / "out" / ".quarantine" / "a.json.gz").read_bytes()))
    assert [x["_datacheck_row"] for x in q] == bad
