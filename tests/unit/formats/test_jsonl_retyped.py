"""A JSON value of another type than its column's (a ``true`` among numeric labels, a number among
texts, a list holding a string among token ids) is one ``schema.dtype`` finding naming its row, line
and value; the checks of missing values (labels.null, empty.text, empty.sequence,
empty.no_supervised_tokens) do not count it again as missing, whichever JSON reader path read it
(one chunk in memory, chunks streamed, a JSON array file). A real null still counts."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import datacheck
from datacheck.formats import jsonl as jsonl_stream
from datacheck.formats import jsonvalues

# (label as written, a real null among them): row 2's `true` is the other JSON type
LABELS = [0, 1, True, 2, None, 1]
RETYPED = [i for i, v in enumerate(LABELS) if isinstance(v, bool)]
MISSING = [i for i, v in enumerate(LABELS) if v is None]


def _write(folder: Path, records: list[dict], how: str) -> Path:
    if how == "array":
        path = folder / "data.json"
        path.write_text("[\n" + ",\n".join(json.dumps(r) for r in records) + "\n]\n")
    else:
        path = folder / "data.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.fixture(params=["one_chunk", "streamed", "array"])
def how(request, monkeypatch):
    if request.param == "streamed":  # every line a chunk, pass 2 streaming the file again
        monkeypatch.setattr(jsonvalues, "JSONL_CHUNK_BYTES", 16)
        monkeypatch.setattr(jsonl_stream, "KEEP_BYTES", 0)
    return request.param


def _line(how: str, row: int) -> int:
    return row + (2 if how == "array" else 1)  # the array's "[" takes line 1


def test_a_boolean_among_numeric_labels_is_one_dtype_finding(tmp_path, how):
    path = _write(tmp_path, [{"text": f"t{i}", "label": v} for i, v in enumerate(LABELS)], how)
    rep = datacheck.audit(str(path), config={"labels": {"num_classes": 3}})
    (f,) = [f for f in rep.findings if f.check == "schema.dtype"]
    assert (f.column, f.count, list(f.rows)) == ("label", len(RETYPED), RETYPED)
    assert [(e.row, e.line, e.value) for e in f.examples] == [(r, _line(how, r), "boolean: True") for r in RETYPED]
    (null,) = [f for f in rep.findings if f.check == "labels.null"]
    assert list(null.rows) == MISSING  # the real null only, never the boolean


def test_a_number_among_texts_is_not_empty_text(tmp_path, how):
    texts = ["a", "b", 5, "", "c"]
    path = _write(tmp_path, [{"text": t, "label": 0} for t in texts], how)
    rep = datacheck.audit(str(path), config={"labels": {"num_classes": 1}})
    (f,) = [f for f in rep.findings if f.check == "schema.dtype"]
    assert (f.column, list(f.rows)) == ("text", [2])
    (empty,) = [f for f in rep.findings if f.check == "empty.text"]
    assert list(empty.rows) == [3] and empty.details == {"null": 0, "empty": 1, "whitespace_only": 0}


def test_token_lists_of_another_type_are_not_missing(tmp_path, how):
    ids = [[1, 2, 3], [4, 5, 6], [7, "x", 9], [1, 2, 3], None]
    labels = [[1, 2, 3], [4, 5, 6], [7, 8, 9], [1, True, 3], [1, 2]]
    path = _write(tmp_path, [{"input_ids": i, "labels": lab} for i, lab in zip(ids, labels)], how)
    rep = datacheck.audit(str(path), config={"labels": {"ignore_index": -100}, "tokens": {"vocab_size": 100}})
    dtype = {f.column: list(f.rows) for f in rep.findings if f.check == "schema.dtype"}
    assert dtype == {"input_ids": [2], "labels": [3]}
    got = {f.check: list(f.rows) for f in rep.findings}
    assert got.get("empty.sequence") == [4]           # the real null row only
    assert "labels.null" not in got                   # row 3's labels are a list with a boolean, not missing
    assert "empty.no_supervised_tokens" not in got
