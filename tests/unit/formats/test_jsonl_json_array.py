"""JSON array files (``[{...}, {...}]``, as LLaMA-Factory and FastChat ship their data): discovered
as format ``json``, one row per element, each row's line the line its element starts on."""
from __future__ import annotations

import json

import pytest
from conftest import SHARED

import datacheck
from datacheck.derive.read import open_for_checks
from datacheck.formats.discovery import discover
from datacheck.formats.jsonl import sniff_json_array
from datacheck.formats.records import RecordLayoutError, json_array_records
from datacheck.model.config import Config

CHAT = (SHARED / "chat")


@pytest.mark.parametrize("text, expect", [
    ('[{"a": 1},\n{"a": 2}]\n', True),
    ('\ufeff  [\n  {\n "a": 1}]', True),
    ("[1, 2]", False),  # an array of numbers is not records
    ('{"a": 1}\n', False),
    ("", False),
])
def test_sniff_json_array(tmp_path, text, expect):
    p = tmp_path / "x.json"
    p.write_text(text, encoding="utf-8")
    assert sniff_json_array(p) is expect


def test_records_and_their_lines():
    raw = b'[\n  {"a": 1},\n  {"a": 2,\n   "b": "x"}\n  ,{"a": 3}\n]\n'
    values, lines = json_array_records(raw)
    assert values == [{"a": 1}, {"a": 2, "b": "x"}, {"a": 3}]
    assert lines == [2, 3, 5]
    assert json_array_records(b"[]") == ([], [])


@pytest.mark.parametrize("raw, words", [
    (b'[{"a": 1}, 2]', "element 1 of the JSON array (line 1) is int"),
    (b'[{"a": 1}\n{"a": 2}]', "not closed after element 0 (line 2)"),
    (b'[{"a": 1}] x', "text after the JSON array"),
    (b'[{"a": tru}]', "not valid JSON at line 1"),
    (b'{"a": 1}', "not a JSON array"),
    (b"[" * 100 + b"]" * 100, "nested 100 levels"),
])
def test_bad_arrays_say_where(raw, words):
    with pytest.raises(RecordLayoutError, match=words.replace("(", r"\(").replace(")", r"\)")):
        json_array_records(raw)


def test_audit_reads_a_json_array_file_with_lines(tmp_path):
    rows = [{"text": "hello", "label": 0}, {"text": "", "label": 1}, {"text": "x", "label": 1}]
    (tmp_path / "d.json").write_text(json.dumps(rows, indent=2))
    disc = discover([str(tmp_path)])
    assert [(s.rel, s.format) for s in disc.shards] == [("d.json", "json")]
    rep = datacheck.audit(str(tmp_path), {})
    assert rep.shards[0].rows == 3
    empty = next(f for f in rep.shards[0].findings if f.check == "empty.text")
    assert [e.row for e in empty.examples] == [1] and list(empty.lines) == [6]


def test_broken_json_array_is_unreadable_with_the_reason(tmp_path):
    (tmp_path / "d.json").write_text('[{"text": "a"},\n {"text": "b"}, 3]')
    rep = datacheck.audit(str(tmp_path), {})
    f = next(f for f in rep.shards[0].findings if f.check == "decode.unreadable")
    assert "element 2 of the JSON array (line 2) is int" in f.details["reason"]


@pytest.mark.parametrize("rel, rows, columns", [
    ("fastchat/dummy_conversation.json", 500, ["id", "conversations"]),
    ("llamafactory/glaive_toolcall_en_demo.json", 300, ["conversations", "tools"]),
    ("llamafactory/identity.json", 91, ["instruction", "input", "output"]),
])
def test_real_json_array_files_are_read(rel, rows, columns):
    if not (CHAT / rel).exists():
        pytest.skip("shared chat material not present")
    (ds,) = discover([str(CHAT / rel)]).shards
    assert ds.format == "json"
    inp = open_for_checks(ds, Config())
    df = inp.lf.collect()
    assert df.height == rows and df.columns[:len(columns)] == columns and not inp.decode_findings
    # an Alpaca file also gets the derived conversation (datacheck.derive.alpaca.alpaca_messages)
    assert df.columns[len(columns):] == (["messages"] if "instruction" in columns else [])


def test_an_array_written_on_one_line_names_rows_not_line_1(tmp_path):
    """``json.dump(rows, f)`` (no indent) writes FastChat's whole array on line 1: every finding said
    "line 1", the table's first column "lines 1,1". Records that share a line are named by row only."""
    rows = json.loads((CHAT / "fastchat/dummy_conversation.json").read_text(encoding="utf-8"))[:40]
    empty, mixed = 4, 9
    rows[empty]["conversations"][1]["value"] = ""
    rows[mixed]["id"] = 5  # a number among string ids: schema.dtype
    p = tmp_path / "train.json"
    p.write_text(json.dumps(rows), encoding="utf-8")
    assert p.read_text(encoding="utf-8").count("\n") == 0
    rep = datacheck.audit([str(p)], workers=1)
    by = {f.check: f for f in rep.findings}
    assert by["sft.empty_turn"].rows == (empty,) and by["sft.empty_turn"].lines == ()
    assert by["schema.dtype"].rows == (mixed,) and by["schema.dtype"].lines == ()
    assert f"number at row {mixed}" in by["schema.dtype"].message
    assert all(e.line is None for f in rep.findings for e in f.examples)
    # the same rows one element per line keep their lines: element k starts on line k + 2
    p.write_text("[\n" + ",\n".join(json.dumps(r) for r in rows) + "\n]\n", encoding="utf-8")
    rep = datacheck.audit([str(p)], workers=1)
    by = {f.check: f for f in rep.findings}
    assert by["sft.empty_turn"].lines == (empty + 2,) and by["schema.dtype"].lines == (mixed + 2,)
