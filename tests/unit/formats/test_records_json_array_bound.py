"""A JSON array file (``.json``) is read whole and parsed element by element: an element of more than
``[dataset] max_row_bytes`` (or as many bytes outside any object: a huge string element) refuses the file
before anything is decoded or parsed (formats/records.py ``json_array_records``; the spans from
io/safejson.py ``element_spans``), naming the element, its line, byte offset and bytes. The expected
values are computed here from the text written (``json`` and ``str.find``)."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import datacheck
from datacheck.formats.records import RecordLayoutError, json_array_records
from datacheck.io.safejson import element_spans


def _array(records: list[dict], indent: int | None = None) -> bytes:
    return json.dumps(records, indent=indent).encode()


def test_an_element_over_the_bound_is_named_before_parsing():
    records = [{"text": "a"}, {"text": "b" * 5_000, "k": [1, 2]}, {"text": "c"}]
    raw = _array(records, indent=2)
    text = raw.decode()
    start = text.index("{", text.index("}") + 1)  # the second element's opening brace
    end = text.index("}", text.index("]", start)) + 1
    size = end - start
    with pytest.raises(RecordLayoutError) as exc:
        json_array_records(raw, size - 1)
    line = text.count("\n", 0, start) + 1
    assert str(exc.value).startswith(f"element 1 of the JSON array (line {line}, byte offset {start:,}) holds "
                                     f"{size:,} bytes, more than the {size - 1:,} bytes a record datacheck reads "
                                     "([dataset] max_row_bytes)")
    values, _ = json_array_records(raw, size)  # at the bound: read
    assert values == records
    values, _ = json_array_records(raw)  # no bound: read
    assert values == records


def test_a_huge_element_that_is_no_record_is_refused_too():
    raw = b'[{"a": 1}, "' + b"z" * 10_000 + b'", {"a": 2}]'
    with pytest.raises(RecordLayoutError) as exc:
        json_array_records(raw, 5_000)
    start = raw.index(b"}") + 1
    gap = raw.index(b"{", start) - start
    assert f"holds {gap:,} bytes outside any object from line 1 (byte offset {start:,})" in str(exc.value)


def test_the_audit_names_the_file(tmp_path):
    path = tmp_path / "data.json"
    path.write_bytes(_array([{"text": "x" * 3_000}, {"text": "y"}]))
    rep = datacheck.audit([str(path)], config={"dataset": {"max_row_bytes": 2_000}}, workers=1)
    found = [f for s in rep.shards for f in s.findings if f.check == "decode.unreadable"]
    assert len(found) == 1 and "data.json: element 0 of the JSON array (line 1, byte offset 1)" in found[0].message
    rep = datacheck.audit([str(path)], config={}, workers=1)
    assert rep.summary["rows"] == 2


_scalar = st.one_of(st.integers(), st.text(alphabet='ab"\\[]{},\n é', max_size=6), st.booleans(), st.none())
_value = st.recursive(_scalar, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(alphabet='k"\\[{', max_size=3), c,
                                                                              max_size=3), max_leaves=10)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.dictionaries(st.text(alphabet='k"\\]}', max_size=3), _value, max_size=3),
                          st.lists(_value, max_size=3)), max_size=5), st.sampled_from([None, 1]))
def test_spans_are_the_elements_json_finds(elements, indent):
    """Each object or array element's span is the text ``json`` decodes it from (strings holding brackets,
    quotes and backslashes included)."""
    raw = json.dumps(elements, indent=indent, ensure_ascii=False).encode()
    starts, ends = element_spans(raw)
    assert len(starts) == len(elements)
    for s, e, want in zip(starts, ends, elements):
        assert json.loads(raw[s:e]) == want
