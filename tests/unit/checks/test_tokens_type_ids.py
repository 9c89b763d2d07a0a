"""tokens.type_id_out_of_range: a token_type_ids value outside [0, type_vocab_size)."""
from __future__ import annotations

import polars as pl
import pytest
from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from datacheck.engine.shard import audit_frame
from datacheck.model.config import config_from_dict

KEY = "tokens.type_id_out_of_range:token_type_ids"


def _audit(type_ids: list, k: int | None = 2, dtype: pl.DataType = pl.List(pl.Int64)):
    df = pl.DataFrame({"input_ids": [[5] * (len(t) if t else 0) for t in type_ids],
                       "token_type_ids": pl.Series(type_ids, dtype=dtype)})
    cfg = config_from_dict({"tokens": {"type_vocab_size": k}} if k is not None else {})
    return audit_frame(df, cfg)


@pytest.mark.parametrize("rows, k, expected", [
    ([[0, 0, 1, 1], [0, 1], [0, 0]], 2, []),                     # BERT segments A/B: clean
    ([[0, 0, 1], [0, 2], [0, 1, 1]], 2, [1]),                   # 2 with type_vocab_size 2 (off by one)
    ([[0, 0], [0, 1], [1, 1]], 1, [1, 2]),                      # RoBERTa: only type 0 exists
    ([[0, -1], [0, None], [], None], 2, [0, 1]),                # negative and null ids fail; empty/null lists do not
    ([[0, 7, 9], [0, 0], [3]], 4, [0]),
])
def test_rows_expected_to_fail(rows, k, expected):
    res = _audit(rows, k)
    assert res.failing_rows.get(KEY, []) == expected
    f = [f for f in res.findings if f.check == "tokens.type_id_out_of_range"]
    if not expected:
        assert f == []
    else:
        assert f[0].count == len(expected) and f[0].severity == "error"
        assert f[0].rows == tuple(expected)
        assert f"type_vocab_size={k}" in f[0].message


def test_message_lists_the_offending_values_and_example_names_the_position():
    res = _audit([[0, 2, 2], [0, 1], [0, 3]], 2)
    f = next(f for f in res.findings if f.check == "tokens.type_id_out_of_range")
    assert "2 x2" in f.message and "3 x1" in f.message
    assert f.examples[0].value == "'first at position 1 of 3: 2'"  # show_value quotes strings


def test_uint64_type_ids_beyond_int64_are_listed_with_their_values():
    """uint64 -1 among uint64 type ids: the message lists the value (its cast to Int64 raised, and
    the list came out empty)."""
    u = 2**64 - 1
    res = _audit([[0, 1], [0, u, u], [0, 3]], 2, dtype=pl.List(pl.UInt64))
    f = next(f for f in res.findings if f.check == "tokens.type_id_out_of_range")
    assert f.rows == (1, 2)
    assert f"outside [0, type_vocab_size=2): {u} x2, 3 x1;" in f.message


def test_skipped_without_the_fact_or_with_a_float_column():
    res = _audit([[0, 5]], None)
    assert ("tokens.type_id_out_of_range", "[tokens] type_vocab_size is not set") in {
        (s.check, s.reason) for s in res.skipped}
    res = _audit([[0.0, 5.0]], 2, dtype=pl.List(pl.Float64))
    reasons = {s.check: s.reason for s in res.skipped}
    assert "reported as schema.dtype" in reasons["tokens.type_id_out_of_range"]
    assert any(f.check == "schema.dtype" and f.column == "token_type_ids" for f in res.findings)


def ref_type_id_bad(v, k: int) -> bool:
    """Plain-Python reference: a list with any null, negative or >= k element fails."""
    return v is not None and any(x is None or x < 0 or x >= k for x in v)


@settings(max_examples=examples(60), deadline=None)
@given(rows=st.lists(st.one_of(st.none(), st.lists(st.one_of(st.none(), st.integers(-3, 6)), max_size=6)),
                     min_size=1, max_size=12),
       k=st.integers(1, 4))
def test_matches_a_plain_python_reference(rows, k):
    res = _audit(rows, k)
    want = sorted(i for i, v in enumerate(rows) if ref_type_id_bad(v, k))
    assert res.failing_rows.get(KEY, []) == want
