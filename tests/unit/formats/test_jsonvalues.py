"""JSON values polars' NDJSON parser does not take as they are.

- ``NaN``/``Infinity``/``-Infinity`` (what Python's ``json.dumps`` writes by default) are
  ``finite.nan``/``finite.inf`` at their lines, and the good records are audited;
- a token id or label above int64 (uint64 -1) is a number: reported by the role's range check at
  its line (read at Int64's nearest bound), never as null;
- a column mixing JSON types (``"1"``, 1.5, ``[1]``, ``{"a": 1}``) is ``schema.dtype`` with the
  lines of each type, not stringified.
"""
from __future__ import annotations

import json
import math

import polars as pl
import pytest
from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st

import datacheck
from datacheck.derive.read import open_for_checks
from datacheck.io.discover import DiscoveredShard
from datacheck.model.config import config_from_dict


def _jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _by(rep, check, column=None):
    return [f for f in rep.findings if f.check == check and (column is None or f.column == column)]


def test_nan_and_infinity_are_findings_at_their_lines(tmp_path):
    recs = [{"text": "a", "x": 1.5}, {"text": "b", "x": float("nan")}, {"text": "", "x": float("inf")},
            {"text": "d", "x": -float("inf")}, {"text": "e", "x": 2.0}]
    path = _jsonl(tmp_path / "s.jsonl", recs)
    assert "NaN" in path.read_text() and "-Infinity" in path.read_text()
    rep = datacheck.audit(str(path), config={"columns": {"features": "x"}}, fail_on="never")
    assert not _by(rep, "decode.unreadable"), [f.message for f in rep.findings]
    assert rep.summary["rows"] == 5
    (nan,) = _by(rep, "finite.nan", "x")
    assert (nan.rows, nan.lines) == ((1,), (2,))
    (inf,) = _by(rep, "finite.inf", "x")
    assert (inf.rows, inf.lines) == ((2, 3), (3, 4))
    (empty,) = _by(rep, "empty.text", "text")  # the other records are audited too
    assert empty.lines == (3,)


def test_token_id_above_int64_is_reported_with_value_and_line(tmp_path):
    big = 2**64 - 1
    path = tmp_path / "ids.jsonl"
    path.write_text('{"input_ids": [1, 2]}\n{"input_ids": [%d, 3]}\n{"input_ids": [4]}\n' % big)
    rep = datacheck.audit(str(path), config={"tokens": {"vocab_size": 50257}}, fail_on="never")
    assert not any("string" in f.message for f in _by(rep, "schema.dtype")), [f.message for f in rep.findings]
    (oov,) = _by(rep, "tokens.out_of_vocab", "input_ids")
    assert (oov.rows, oov.lines) == ((1,), (2,))
    # an id beyond int64 is read at Int64's largest value (model/roles.cast_expr: numpy has no
    # 128-bit integers), never as a null id; the example names its position, the line the record
    assert oov.examples[0].value == f"'first at position 0 of 2: {2**63 - 1}'" and oov.examples[0].line == 2
    assert "null" not in oov.message


_INT64_MAX = 2**63 - 1


@pytest.mark.parametrize("value", [2**63, 2**64 - 1, 2**64, 2**100])
def test_class_label_beyond_int64_is_out_of_range_not_null(tmp_path, value):
    """A class label beyond Int64 in JSONL (polars reads the column as Int128) is a label outside
    ``[0, num_classes)`` at its line, never ``labels.null``: the value is there."""
    path = _jsonl(tmp_path / "cls.jsonl", [{"text": "a", "label": 0}, {"text": "b", "label": 1},
                                           {"text": "c", "label": value}])
    rep = datacheck.audit(str(path), config={"labels": {"num_classes": 2}}, fail_on="never")
    assert not _by(rep, "labels.null"), [f.message for f in rep.findings]
    (f,) = _by(rep, "labels.out_of_range", "label")
    assert (f.rows, f.lines) == ((2,), (3,))
    assert f.examples[0].value == str(min(value, _INT64_MAX))


def test_class_label_below_int64_is_an_unexpected_sentinel_not_null(tmp_path):
    """A negative label beyond Int64 is a negative label that is not the ignore index."""
    path = _jsonl(tmp_path / "neg.jsonl", [{"text": "a", "label": 0}, {"text": "b", "label": -(2**64)}])
    rep = datacheck.audit(str(path), config={"labels": {"num_classes": 2}}, fail_on="never")
    assert not _by(rep, "labels.null"), [f.message for f in rep.findings]
    (f,) = _by(rep, "labels.unexpected_sentinel", "label")
    assert (f.rows, f.lines) == ((1,), (2,))
    assert f.examples[0].value == str(-(2**63))


def test_token_label_beyond_int64_is_out_of_range_not_a_silent_pass(tmp_path):
    """A token label beyond Int64 (uint64 -1 written as a number) beside -100: read as a null
    element it failed no rule; it is a token label >= vocab_size at its position."""
    path = _jsonl(tmp_path / "tl.jsonl", [{"input_ids": [1, 2, 3], "labels": [-100, 2, 3]},
                                          {"input_ids": [1, 2, 3], "labels": [-100, 2**64 - 1, 3]}])
    rep = datacheck.audit(str(path), config={"tokens": {"vocab_size": 100}}, fail_on="never")
    (f,) = _by(rep, "labels.out_of_range", "labels")
    assert (f.rows, f.lines) == ((1,), (2,))
    assert f.examples[0].value == f"'first at position 1 of 3: {_INT64_MAX}'"


def test_csv_label_beyond_int64_is_out_of_range_not_null(tmp_path):
    """The CSV reader infers Int128 for a cell beyond Int64 (polars' rule): the same reading."""
    path = tmp_path / "cls.csv"
    path.write_text("text,label\na,0\nb,99999999999999999999\nc,1\n")
    rep = datacheck.audit(str(path), config={"labels": {"num_classes": 2}}, fail_on="never")
    assert not _by(rep, "labels.null"), [f.message for f in rep.findings]
    (f,) = _by(rep, "labels.out_of_range", "label")
    assert f.rows == (1,) and f.examples[0].value == str(_INT64_MAX)


def test_mixed_json_types_in_one_column_are_schema_dtype_with_lines(tmp_path):
    path = tmp_path / "mixed.jsonl"
    path.write_text('{"text": "a", "v": "1"}\n{"text": "b", "v": 1.5}\n{"text": "c", "v": [1]}\n'
                    '{"text": "d", "v": {"a": 1}}\n{"text": "e", "v": 2}\n')
    rep = datacheck.audit(str(path), config={}, fail_on="never")
    (f,) = _by(rep, "schema.dtype", "v")
    assert f.severity == "error"
    # numbers are the most common JSON type (lines 2 and 5); the string, array and object lines differ
    assert f.lines == (1, 3, 4)
    assert f.details["json_types"] == {"number": [2, 5], "string": [1], "array<number>": [3], "object": [4]}
    assert "line 1" in f.message and "number" in f.message
    assert rep.summary["rows"] == 5


def test_mixed_types_inside_lists_and_a_text_column(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text('{"text": "a", "ids": [1, 2]}\n{"text": 7, "ids": [3, "x"]}\n{"text": "c", "ids": [5]}\n')
    src = DiscoveredShard(path=path, rel="m.jsonl", format="jsonl")
    got = open_for_checks(src, config_from_dict({}))
    assert got.schema["text"] == pl.String and got.schema["ids"] == pl.List(pl.Int64)
    # the values of another JSON type are read as null (and reported), the rest as they are
    assert got.lf.collect().rows() == [("a", [1, 2]), (None, None), ("c", [5])]
    bad = {f.column: f.lines for f in got.decode_findings if f.check == "schema.dtype"}
    assert bad == {"text": (2,), "ids": (2,)}


def test_clean_jsonl_takes_the_fast_path_unchanged(tmp_path):
    recs = [{"text": "x", "input_ids": [1, 2], "label": 1, "score": 0.5}, {"text": "y", "input_ids": [], "label": 0, "score": 1}]
    got = open_for_checks(DiscoveredShard(path=_jsonl(tmp_path / "c.jsonl", recs), rel="c.jsonl", format="jsonl"),
                          config_from_dict({}))
    assert got.line_of_row is None and not got.decode_findings
    assert got.schema == {"text": pl.String, "input_ids": pl.List(pl.Int64), "label": pl.Int64, "score": pl.Float64}


_scalar = st.one_of(st.none(), st.integers(-2**63, 2**64 - 1), st.floats(allow_nan=True, allow_infinity=True),
                    st.text(max_size=3))


@pytest.mark.slow
@settings(max_examples=examples(60), deadline=None)
@given(st.lists(_scalar, min_size=1, max_size=12))
def test_property_each_line_is_read_as_written_or_reported(tmp_path_factory, values):
    """Reference: the column is read as its most common JSON type (ties: the first seen); a value
    of that type is read as written (numbers compared as floats, NaN as NaN); every other non-null
    value is read as null and its line reported."""
    path = tmp_path_factory.mktemp("p") / "p.jsonl"
    path.write_text("".join(json.dumps({"i": i, "v": v}) + "\n" for i, v in enumerate(values)))
    got = open_for_checks(DiscoveredShard(path=path, rel="p.jsonl", format="jsonl"), config_from_dict({}))
    col = got.lf.collect()["v"].to_list()
    kinds = [None if v is None else "string" if isinstance(v, str) else "number" for v in values]
    seen = [k for k in kinds if k is not None]
    major = max(dict.fromkeys(seen), key=seen.count) if seen else None
    expect_bad = [i + 1 for i, k in enumerate(kinds) if k is not None and k != major]
    found = [f for f in got.decode_findings if f.check == "schema.dtype"]
    assert [list(f.lines) for f in found] == ([expect_bad] if expect_bad else [])
    for v, k, out in zip(values, kinds, col):
        if k is None or k != major:
            assert out is None
        elif isinstance(v, str):
            assert out == v
        elif isinstance(v, float) and math.isnan(v):
            assert out is not None and math.isnan(out)
        else:
            assert float(out) == float(v)


def test_objects_whose_fields_change_type_are_reported_not_fatal(tmp_path):
    path = tmp_path / "o.jsonl"
    path.write_text('{"text": "a", "meta": {"k": 1}}\n{"text": "", "meta": {"k": "x"}}\n{"text": "c", "meta": {"k": NaN}}\n')
    rep = datacheck.audit(str(path), config={}, fail_on="never")
    assert not _by(rep, "decode.unreadable")
    (f,) = _by(rep, "schema.dtype", "meta")
    assert f.count == 3 and "meta" in f.message
    assert _by(rep, "empty.text", "text")[0].lines == (2,)


def test_objects_with_different_fields_keep_every_field(tmp_path):
    """Polars' Series builder takes a struct's fields from the first object only: row 2's ``b`` was
    silently dropped on the per-line path (a blank line sends the chunk there), where the streamed
    path kept it (found by tests/unit/engine/test_shard_batched.py's JSONL property test)."""
    path = tmp_path / "o.jsonl"
    path.write_text('\n{"extra": {"a": 1}}\n{"extra": {"b": "t"}}\n{"extra": [{"q": 1}]}\n'
                    '{"nested": [{"a": 1}]}\n{"nested": [{"b": 2}, null]}\n')
    got = open_for_checks(DiscoveredShard(path=path, rel="o.jsonl", format="jsonl"), config_from_dict({}))
    df = got.lf.collect()
    assert df.schema["extra"] == pl.Struct({"a": pl.Int64, "b": pl.String})
    assert df["extra"].to_list()[:2] == [{"a": 1, "b": None}, {"a": None, "b": "t"}]
    assert df["nested"].to_list()[3:] == [[{"a": 1, "b": None}], [{"a": None, "b": 2}, None]]
    (f,) = [f for f in got.decode_findings if f.check == "schema.dtype" and f.column == "extra"]
    assert f.lines == (4,)  # the array among objects: read as null, its line named


def test_a_field_that_changes_from_list_to_objects_is_reported_not_cast(tmp_path):
    """``from_dicts`` would read ``[1]`` next to ``[{"q": 1}]`` as ``{q: 1}``: no build that changes a
    value is kept; the column is read as null with a schema.dtype finding."""
    path = tmp_path / "o.jsonl"
    path.write_text('\n{"meta": {"a": [1]}}\n{"meta": {"a": [{"q": 1}]}}\n')
    got = open_for_checks(DiscoveredShard(path=path, rel="o.jsonl", format="jsonl"), config_from_dict({}))
    assert got.lf.collect()["meta"].to_list() == [None, None]
    (f,) = [f for f in got.decode_findings if f.check == "schema.dtype" and f.column == "meta"]
    assert f.count == 2 and "do not form one column" in f.message


def test_struct_fields_are_sorted_by_name_whatever_the_chunks(tmp_path, monkeypatch):
    """A JSON object's keys have no order: polars orders a struct's fields as it meets them, which
    depended on how the file was cut into chunks ({b, a} in chunks of one line, {a, b} whole). Both
    paths now sort every struct's fields by name, nested ones and those in lists included, and a
    null object stays null."""
    from datacheck.formats import jsonvalues as readers

    path = tmp_path / "o.jsonl"
    path.write_text('{"m": {"z": 1}, "l": [{"y": {"q": 1, "p": 2}}]}\n{"m": {"b": "t", "a": 2}, "l": null}\n'
                    '{"m": null, "l": [{"x": 3}, null]}\n')
    want_m = pl.Struct({"a": pl.Int64, "b": pl.String, "z": pl.Int64})
    want_l = pl.List(pl.Struct({"x": pl.Int64, "y": pl.Struct({"p": pl.Int64, "q": pl.Int64})}))
    frames = []
    for chunk in (None, 1):
        if chunk is not None:
            monkeypatch.setattr(readers, "JSONL_CHUNK_BYTES", chunk)
        got = open_for_checks(DiscoveredShard(path=path, rel="o.jsonl", format="jsonl"), config_from_dict({}))
        df = got.lf.collect()
        assert df.schema["m"] == want_m and df.schema["l"] == want_l
        frames.append(df)
    assert frames[0].equals(frames[1])
    assert frames[0]["m"].to_list() == [{"a": None, "b": None, "z": 1}, {"a": 2, "b": "t", "z": None}, None]
    assert frames[0]["l"].to_list() == [[{"x": None, "y": {"p": 2, "q": 1}}], None, [{"x": 3, "y": None}, None]]


# JSON numbers whose polars dtype depends on which values a chunk holds: ints within Int64, ints
# beyond it (Int128), floats; the decoded values must be the JSON values whatever the chunking.
_NUMBER_COLUMNS = [
    [[1], [2.5]],                                   # polars' Series builder took List(Int64): 2.5 became 2
    [None, [-99999999999999999999, 2], [1.5, 2]],   # List(Int128) from the first list: 1.5 became 1
    [1, None, 18446744073709551615],                # UInt64 from the builder, Int128 from read_ndjson
    [[1, 18446744073709551615]],
    [[1], [18446744073709551615], [-1]],
    [1, 2.5, 99999999999999999999],
]


@pytest.mark.parametrize("values", _NUMBER_COLUMNS)
@pytest.mark.parametrize("chunk", [None, 1])
def test_json_numbers_decode_to_their_values_in_any_chunks(tmp_path, monkeypatch, values, chunk):
    """A number column read by the exact per-line path or by polars' parser, in one chunk or one
    line a chunk: the same dtype (ints within Int64: Int64; an int beyond it: Int128; a float
    anywhere: Float64; lists alike), and every value as written."""
    from datacheck.formats import jsonl as jsonl_stream
    from datacheck.formats import jsonvalues as readers

    path = tmp_path / "s.jsonl"
    # a blank line sends the one-chunk read down the per-line path (Python values)
    path.write_text("\n".join(json.dumps({"v": v}) for v in values) + "\n\n")
    if chunk is not None:
        monkeypatch.setattr(readers, "JSONL_CHUNK_BYTES", chunk)
        monkeypatch.setattr(jsonl_stream, "KEEP_BYTES", 0)
    got = jsonl_stream.open_jsonl(path, 5).lf.collect()["v"]
    leaves = [x for v in values if v is not None for x in (v if isinstance(v, list) else [v]) if x is not None]
    leaf = pl.Float64 if any(isinstance(x, float) for x in leaves) else \
        pl.Int64 if all(-2**63 <= x < 2**63 for x in leaves) else pl.Int128
    assert got.dtype == (pl.List(leaf) if any(isinstance(v, list) for v in values) else leaf)
    # ints beside floats are Float64 (polars' rule for JSON and CSV numbers): each int as that float
    as_leaf = float if leaf == pl.Float64 else int
    want = [None if v is None else [None if x is None else as_leaf(x) for x in v] if isinstance(v, list)
            else as_leaf(v) for v in values]
    assert got.to_list() == want
