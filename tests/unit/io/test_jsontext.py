"""datacheck.io.jsontext: the same text as ``json.dumps(sort_keys=True, indent=2, ensure_ascii=False,
allow_nan=False)`` on random documents, and the same errors."""
from __future__ import annotations

import enum
import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from datacheck.io.jsontext import dumps_sorted_indented


def _stdlib(obj: object) -> str:
    return json.dumps(obj, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False)


_scalars = (st.none() | st.booleans() | st.integers(min_value=-2**70, max_value=2**70)
            | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8))
_docs = st.recursive(
    _scalars,
    lambda inner: (st.lists(inner, max_size=5) | st.tuples(inner, inner)
                   | st.dictionaries(st.text(max_size=5), inner, max_size=5)
                   | st.dictionaries(st.integers(-3, 3), inner, max_size=3)),
    max_leaves=40)


_numbers = st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False, allow_infinity=False)
#: lists of rows (histograms' [value, count] pairs), with now and then an empty row, a string, a
#: nested list or a dict among them: the shapes the one-call path must take or leave exactly
_rows = st.lists(st.lists(_numbers, max_size=3)
                 | st.lists(_numbers | st.text(alphabet="[],{}\"a", max_size=3) | st.lists(_numbers, max_size=2),
                            max_size=3)
                 | st.dictionaries(st.text(max_size=2), _numbers, max_size=2), min_size=1, max_size=5)


@given(_docs)
def test_same_text_as_the_standard_library(doc: object) -> None:
    assert dumps_sorted_indented(doc) == _stdlib(doc)


@given(_rows, st.integers(0, 3))
def test_lists_of_rows_same_text_at_any_depth(rows: list[object], depth: int) -> None:
    doc: object = rows
    for _ in range(depth):
        doc = {"k": doc, "other": [1]}
    assert dumps_sorted_indented(doc) == _stdlib(doc)


def test_subclasses_of_scalars() -> None:
    class Level(enum.IntEnum):
        ERROR = 2

    class Name(str):
        pass

    doc = {"a": [Level.ERROR, 1], "b": {"c": Name("x")}, "d": [[Level.ERROR, 3]]}
    assert dumps_sorted_indented(doc) == _stdlib(doc)


def test_a_report_like_document() -> None:
    doc = {"shards": [{"path": "a/ü.parquet", "stats": {"lengths": {"hist": [0, 3, 1e-05, 2.5e+16], "bins": []}},
                       "findings": [], "rows": 10, "ok": True, "note": None, "empty": {}}],
           "summary": {"status": "PASS", "counts": {"error": 0}}, "x": "line\nbreak \"quoted\""}
    assert dumps_sorted_indented(doc) == _stdlib(doc)
    assert '"hist": [\n            0,\n            3,\n            1e-05,\n            2.5e+16\n          ]' in dumps_sorted_indented(doc)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("where", ["flat", "nested", "top"])
def test_nan_and_infinity_refused_as_by_the_standard_library(bad: float, where: str) -> None:
    doc: object = {"flat": [1, bad], "nested": {"a": [{"b": bad}]}, "top": bad}[where]
    with pytest.raises(ValueError):
        _stdlib(doc)
    with pytest.raises(ValueError):
        dumps_sorted_indented(doc)


def test_unencodable_values_raise_type_error() -> None:
    for doc in ({"a": [{1, 2}]}, {"a": object()}, {1: [1], "b": [2]}):
        with pytest.raises(TypeError):
            _stdlib(doc)
        with pytest.raises(TypeError):
            dumps_sorted_indented(doc)
