"""engine/shard.py: duplicate candidates of more than one read (``REREAD_BYTES``) are verified key group
by key group, a chunk of rows at a time beside each group's distinct rows (``_refine_in_groups``), with
the rows and earlier rows of the one read of every candidate; example values of lists are cut to what a
report shows before they become Python lists (``_shown_prefix``), the text shown unchanged. Expected rows
are computed here with plain Python over the values written."""
from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st
from refs import FRAME_SETTINGS as SETTINGS

import datacheck
from datacheck.checks.dup import in_shard
from datacheck.checks.dup.in_shard import _refine
from datacheck.checks.spec import Repeats
from datacheck.engine import shard
from datacheck.engine.shard import _refine_in_groups, _shown_prefix
from datacheck.model.constants import EXAMPLE_VALUE_MAX_CHARS
from datacheck.model.findings import show_value


def _expected(values: list) -> tuple[list[int], list[int]]:
    """(rows that repeat an earlier row, the first row of each), by a dict of first occurrences."""
    first: dict = {}
    rows, firsts = [], []
    for r, v in enumerate(values):
        k = repr(v)
        if k in first:
            rows.append(r)
            firsts.append(first[k])
        else:
            first[k] = r
    return rows, firsts


@SETTINGS
@given(values=st.lists(st.lists(st.integers(0, 3), max_size=3), min_size=1, max_size=25),
       buckets=st.integers(1, 4), chunk=st.integers(1, 5))
def test_groups_and_chunks_find_the_rows_of_one_read(values, buckets, chunk):
    """Keys coarser than the content (the list's length modulo ``buckets``: equal rows share a key, and
    unequal rows do too), any chunk size: every repeat with its first row, as one refine of all rows."""
    df = pl.DataFrame({"ids": values}, schema={"ids": pl.List(pl.Int64)}).with_row_index("__row")
    key = pl.Series([len(v) % buckets for v in values], dtype=pl.UInt64)
    counts = key.value_counts()
    shared_keys = set(counts.filter(pl.col("count") > 1)[""].to_list() if "" in counts.columns
                      else counts.filter(pl.col("count") > 1)[key.name].to_list())
    shared = np.array([r for r, k in enumerate(key.to_list()) if k in shared_keys], dtype=np.int64)

    def read(rows: np.ndarray) -> pl.DataFrame:
        return df.filter(pl.col("__row").is_in(pl.Series(rows.astype(np.uint32)).implode())).sort("__row")

    got = _refine_in_groups(_refine(["ids"]), key, shared, read, chunk)
    assert isinstance(got, Repeats)
    order = np.argsort(got.rows)
    want_rows, want_first = _expected(values)
    assert got.rows[order].tolist() == want_rows and got.earlier[order].tolist() == want_first


def test_a_refine_of_plain_rows_is_joined():
    df = pl.DataFrame({"x": [1, 1, 2, 1]}).with_row_index("__row")

    def refine(sub: pl.DataFrame):  # rows whose x repeats an earlier one's: plain row numbers
        return sub.filter(pl.col("x").is_first_distinct().not_())["__row"].cast(pl.Int64)

    got = _refine_in_groups(refine, pl.Series([0, 0, 5, 0], dtype=pl.UInt64), np.array([0, 1, 3]),
                            lambda r: df.filter(pl.col("__row").is_in(pl.Series(r.astype(np.uint32)).implode())), 1)
    assert sorted(np.asarray(got).tolist()) == [1, 3]


@pytest.mark.parametrize("n", [0, 3, EXAMPLE_VALUE_MAX_CHARS - 1, EXAMPLE_VALUE_MAX_CHARS, 10_000])
def test_an_example_list_is_shown_the_same_from_its_prefix(n):
    values = pl.Series([list(range(n)), [[i, i] for i in range(n)]], dtype=pl.Object).to_list()
    for v, dtype in zip(values, [pl.List(pl.Int64), pl.List(pl.List(pl.Int64))]):
        s = pl.Series([v], dtype=dtype)
        assert show_value(_shown_prefix(s).to_list()[0]) == show_value(v)
    text = pl.Series(["x" * 500])
    assert _shown_prefix(text).to_list() == ["x" * 500]


def test_the_audit_verifies_candidates_in_groups_as_in_one_read(tmp_path, monkeypatch):
    """A shard of 60 rows, 12 distinct token lists (each repeated 5 times), read in batches of 7 rows: the
    grouped verification (forced here: any candidates are more than ``REREAD_BYTES``) names the same rows
    and first rows as the one read of every candidate."""
    rows = [[k, k + 1, k * 3] for k in range(12)] * 5
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"input_ids": pa.array(rows, pa.list_(pa.int64()))}), path, row_group_size=10)
    monkeypatch.setenv("DATACHECK_BATCH_ROWS", "7")

    def findings():
        rep = datacheck.audit([str(path)], workers=1, cache_dir=None)
        return [(f.check, f.count, tuple(f.rows), f.to_dict().get("details")) for s in rep.shards for f in s.findings
                if f.check == "dup.exact_in_shard"]

    whole = findings()
    calls = []
    real = shard._refine_in_groups
    monkeypatch.setattr(shard, "_refine_in_groups", lambda *a: calls.append(a[4]) or real(*a))
    monkeypatch.setattr(shard, "REREAD_BYTES", 1)
    grouped = findings()
    assert calls  # the grouped verification ran
    assert whole == grouped and whole[0][1] == 48


def test_rows_far_over_a_read_are_compared_in_slices_and_shown_from_clipped_reads(tmp_path, monkeypatch):
    """Rows of 400 tokens (more than an example shows: ``EXAMPLE_VALUE_MAX_CHARS`` elements), 4 distinct
    lists each twice, one differing from another only in its last token and one a prefix of another: with
    every read forced over ``REREAD_BYTES`` (candidates verified in groups, the example rows read one at a
    time and cut to what is shown, ``_clipped_rows``) and lists compared 7 elements at a time, the findings,
    their example values and details are those of the one read of whole rows."""
    base = list(range(400))
    distinct = [base, base[:-1] + [7], base[:-1], [5] * 400]
    rows = distinct + distinct[::-1]
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"input_ids": pa.array(rows, pa.list_(pa.int64()))}), path, row_group_size=2)
    monkeypatch.setenv("DATACHECK_BATCH_ROWS", "3")

    def findings():
        rep = datacheck.audit([str(path)], workers=1, cache_dir=None)
        return [f.to_dict() for s in rep.shards for f in s.findings if f.check == "dup.exact_in_shard"]

    whole = findings()
    assert whole[0]["count"] == 4 and sorted(e["row"] for e in whole[0]["examples"]) == [4, 5, 6, 7]
    reads = []
    real = shard._clipped_rows
    monkeypatch.setattr(shard, "_clipped_rows", lambda *a: reads.append(a[1].tolist()) or real(*a))
    monkeypatch.setattr(shard, "REREAD_BYTES", 1)
    monkeypatch.setattr(in_shard, "SLICE_ELEMENTS", 7)
    monkeypatch.setattr(in_shard, "SLICED_ABOVE_BYTES", 0)
    assert findings() == whole and reads == [[4, 5, 6, 7]]


def test_rows_of_a_frame_are_a_slice_when_consecutive():
    sub = pl.DataFrame({"__row": pl.Series([2, 5, 6, 9], dtype=pl.UInt32), "v": [[1], [2], [3], None]})
    for rows in ([5, 6, 9], [9, 5], [2, 9], [2], [6, 5, 2, 9], [3, 5]):
        want = sub.filter(pl.col("__row").is_in(rows))
        assert shard._rows_of(sub, np.array(rows, dtype=np.int64)).equals(want)
