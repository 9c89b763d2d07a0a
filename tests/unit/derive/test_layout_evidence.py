"""The layout recognizer's label evidence (``derive/layout._label_evidence``), vectorized over the
flattened sample, against a plain-Python reference on random rows: null rows, null elements, empty
lists, rows whose labels or mask have another length, position ids that reset, any ignore index;
and rows of one length (the padded rows of most token data, counted by another path)."""
from __future__ import annotations

import polars as pl
from conftest import examples
from hypothesis import example, given, settings
from hypothesis import strategies as st

from datacheck.derive.layout import _label_evidence


def reference(rows: list[dict], ignore: int | None, with_mask: bool, with_starts: bool,
              pad: int | None = None) -> dict[str, int]:
    """The evidence counted position by position, as its docstring defines it: only attended
    positions (the row's mask of its length not 0 there, else an id other than ``pad``) count."""
    ev = {"sup": 0, "same": 0, "next": 0, "max": -1, "hidden": 0, "ragged": 0, "inner_ignored": 0, "rows": 0}
    for r in rows:
        a, b = r["input_ids"], r["labels"]
        m = r["attention_mask"] if with_mask else None
        s = r["position_ids"] if with_starts else None
        if a is None or b is None:
            continue
        if len(a) != len(b):
            ev["ragged"] += 1
            continue
        ev["rows"] += 1

        def attended(i: int) -> bool:
            if m is not None and len(m) == len(a):
                return bool(m[i])
            return pad is None or a[i] != pad

        sup = [i for i, v in enumerate(b) if v is not None and v != ignore and v >= 0 and attended(i)]
        if s is not None and len(s) == len(b):
            ev["inner_ignored"] += sum(1 for i in range(len(b)) if i not in sup and s[i] != 0 and attended(i))
        if sup and any(a[i] is not None and attended(i) for i in range(sup[0])):
            ev["hidden"] += 1
        for i in sup:
            ev["sup"] += 1
            ev["same"] += int(b[i] == a[i])
            ev["next"] += int(i + 1 < len(a) and b[i] == a[i + 1])
            ev["max"] = max(ev["max"], b[i])
    return ev


def _frame(rows: list[dict]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema={"input_ids": pl.List(pl.Int32), "labels": pl.List(pl.Int64),
                                      "attention_mask": pl.List(pl.Int8), "position_ids": pl.List(pl.Int64)})


_val = st.one_of(st.none(), st.integers(-101, 6))
_lst = st.one_of(st.none(), st.lists(_val, max_size=6))


@settings(max_examples=examples(300), deadline=None)
@given(rows=st.lists(st.fixed_dictionaries({
    "input_ids": _lst, "labels": _lst,
    "attention_mask": st.one_of(st.none(), st.lists(st.one_of(st.none(), st.integers(0, 2)), max_size=6)),
    "position_ids": st.one_of(st.none(), st.lists(st.one_of(st.none(), st.integers(0, 2)), max_size=6))}),
    max_size=8),
    ignore=st.sampled_from([-100, None, 0, 3]), with_mask=st.booleans(), with_starts=st.booleans(),
    pad=st.sampled_from([None, 0, 2]))
def test_vectorized_evidence_equals_the_reference(rows, ignore, with_mask, with_starts, pad):
    got = _label_evidence(_frame(rows), "input_ids", "labels", "attention_mask" if with_mask else None, ignore,
                          "position_ids" if with_starts else None, pad)
    assert got == reference(rows, ignore, with_mask, with_starts, pad)


@st.composite
def _rows_of_one_length(draw: st.DrawFn) -> list[dict]:
    """Rows whose ids, labels, mask and position ids all have one length (padded token rows), some
    of them null or of another length."""
    width = draw(st.integers(0, 7))
    exact = st.lists(_val, min_size=width, max_size=width)
    small = st.lists(st.one_of(st.none(), st.integers(0, 2)), min_size=width, max_size=width)
    return draw(st.lists(st.fixed_dictionaries({
        "input_ids": exact, "labels": st.one_of(exact, exact, _lst),
        "attention_mask": st.one_of(small, small, st.none(), st.lists(st.integers(0, 1), max_size=3)),
        "position_ids": st.one_of(small, st.none())}), min_size=1, max_size=12))


@settings(max_examples=examples(300), deadline=None)
@given(rows=_rows_of_one_length(), ignore=st.sampled_from([-100, None, 0, 3]), with_mask=st.booleans(),
       with_starts=st.booleans(), pad=st.sampled_from([None, 0, 2]))
def test_vectorized_evidence_on_rows_of_one_length_equals_the_reference(rows, ignore, with_mask, with_starts, pad):
    got = _label_evidence(_frame(rows), "input_ids", "labels", "attention_mask" if with_mask else None, ignore,
                          "position_ids" if with_starts else None, pad)
    assert got == reference(rows, ignore, with_mask, with_starts, pad)


@settings(max_examples=examples(200), deadline=None)
@given(rows=_rows_of_one_length(), lead=_rows_of_one_length(), ignore=st.sampled_from([-100, None, 0, 3]),
       with_mask=st.booleans())
def test_evidence_of_rows_sliced_out_of_a_frame_equals_the_reference(rows, lead, ignore, with_mask):
    """A sample that is a slice of a larger frame (its Arrow offsets start past 0: the row lengths
    read from the exported offsets) counts as its own rows do."""
    df = _frame(lead + rows).slice(len(lead))
    got = _label_evidence(df, "input_ids", "labels", "attention_mask" if with_mask else None, ignore)
    assert got == reference(rows, ignore, with_mask, False)


def test_aligned_rows_give_the_counts_of_the_data():
    # row 1: prompt of 2 attended tokens hidden, labels = ids after it; row 2: every label the next id
    rows = [{"input_ids": [5, 6, 7, 8], "labels": [-100, -100, 7, 8], "attention_mask": [1, 1, 1, 1],
             "position_ids": [0, 1, 2, 3]},
            {"input_ids": [1, 2, 3], "labels": [2, 3, -100], "attention_mask": [1, 1, 0], "position_ids": [0, 1, 2]},
            {"input_ids": [1, 2], "labels": [1], "attention_mask": None, "position_ids": None}]
    ev = _label_evidence(_frame(rows), "input_ids", "labels", "attention_mask", -100, "position_ids")
    assert ev == {"sup": 4, "same": 2, "next": 2, "max": 8, "hidden": 1, "ragged": 1,
                  "inner_ignored": 1, "rows": 2}  # inner: row 1's position 1 (position 0 starts a document)


def test_unsigned_64_bit_labels_past_int64_are_counted_exactly():
    big = 2**63 + 5
    df = pl.DataFrame({"input_ids": [[big, 1]], "labels": [[big, 1]]},
                      schema={"input_ids": pl.List(pl.UInt64), "labels": pl.List(pl.UInt64)})
    ev = _label_evidence(df, "input_ids", "labels", None, -100)
    assert (ev["sup"], ev["same"], ev["max"]) == (2, 2, big)


_UNSIGNED = [pl.UInt8, pl.UInt16, pl.UInt32, pl.UInt64]


@settings(max_examples=examples(100), deadline=None)
@given(rows=st.lists(st.fixed_dictionaries({
    "input_ids": st.one_of(st.none(), st.lists(st.one_of(st.none(), st.integers(0, 6)), max_size=6)),
    "labels": st.one_of(st.none(), st.lists(st.one_of(st.none(), st.integers(0, 255)), max_size=6))}),
    max_size=8), dtype=st.sampled_from(_UNSIGNED),
    ignore=st.sampled_from([-100, None, 0, 3]), pad=st.sampled_from([None, 0, 2]))
@example(rows=[{"input_ids": [1, 2], "labels": [1, 255]}], dtype=pl.UInt8, ignore=-100, pad=None)
@example(rows=[{"input_ids": [1, 2], "labels": [0, 0]}], dtype=pl.UInt16, ignore=None, pad=None)
@example(rows=[{"input_ids": [0, 2], "labels": [0, 0]}], dtype=pl.UInt64, ignore=None, pad=0)
def test_unsigned_labels_of_every_width_equal_the_reference(rows, dtype, ignore, pad):
    """Token labels stored unsigned (uint8 to uint64: no ignore index below 0 can be written) are
    counted as signed ones are; the largest supervised label starts from 0, which every width holds."""
    df = pl.DataFrame(rows, schema={"input_ids": pl.List(pl.Int64), "labels": pl.List(dtype)})
    got = _label_evidence(df, "input_ids", "labels", None, ignore, pad=pad)
    assert got == reference([{**r, "attention_mask": None, "position_ids": None} for r in rows], ignore, False, False,
                            pad)


def test_an_audit_of_unsigned_token_labels_reports_their_range(tmp_path):
    """A shard whose token labels are uint8 (255 among them) is audited, never an internal error:
    255 is a token label outside [0, vocab_size)."""
    import datacheck

    for dtype in _UNSIGNED:
        path = tmp_path / f"{dtype}.parquet"
        pl.DataFrame({"input_ids": [[1, 2, 3], [1, 2, 3]], "labels": [[1, 2, 3], [1, 255, 3]]},
                     schema={"input_ids": pl.List(pl.Int32), "labels": pl.List(dtype)}).write_parquet(path)
        rep = datacheck.audit(str(path), config={"tokens": {"vocab_size": 100}}, fail_on="never")
        (f,) = [f for f in rep.findings if f.check == "labels.out_of_range"]
        assert f.rows == (1,) and f.examples[0].value == "'first at position 1 of 3: 255'", dtype
