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
