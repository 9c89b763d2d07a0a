"""The helpers the streamed readers share (datacheck/formats/stream_source.py): re-cutting pieces into
batches of exact heights, and the IO-plugin LazyFrame over a reader's frames."""
from __future__ import annotations

import polars as pl
import pyarrow as pa
from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from datacheck.formats.stream_source import lazy_source, recut, recut_frames


def _reference(heights: list[int], rows: int, first: int | None) -> list[list[int]]:
    """Plain Python: the row ids 0..n-1 cut into consecutive lists (first, then rows each)."""
    ids = list(range(sum(heights)))
    out, at, size = [], 0, first or rows
    while at < len(ids):
        out.append(ids[at:at + size])
        at += size
        size = rows
    return out


def _pieces(heights: list[int]) -> list[pl.DataFrame]:
    out, at = [], 0
    for h in heights:
        out.append(pl.DataFrame({"id": list(range(at, at + h)), "text": [f"r{i}" for i in range(at, at + h)]},
                                schema={"id": pl.Int64, "text": pl.String}))
        at += h
    return out


@settings(max_examples=examples(200), deadline=None)
@given(heights=st.lists(st.integers(0, 40), max_size=12), rows=st.integers(1, 50))
def test_recut_frames_matches_plain_python(heights, rows):
    got = list(recut_frames(iter(_pieces(heights)), rows))
    assert [df["id"].to_list() for df in got] == _reference(heights, rows, None)
    assert all(df["text"].to_list() == [f"r{i}" for i in df["id"].to_list()] for df in got)
    assert all(df.n_chunks("all") == [1, 1] for df in got)  # every batch contiguous (rechunked)


@settings(max_examples=examples(200), deadline=None)
@given(heights=st.lists(st.integers(0, 40), max_size=12), rows=st.integers(1, 50),
       first=st.one_of(st.none(), st.integers(1, 50)))
def test_recut_arrow_tables_with_first_matches_plain_python(heights, rows, first):
    tables = [pa.table({"id": pa.array(df["id"].to_list(), pa.int64())}) for df in _pieces(heights)]
    got = list(recut(iter(tables), rows, join=lambda ts: pa.concat_tables(ts).combine_chunks(), first=first))
    assert [t.column("id").to_pylist() for t in got] == _reference(heights, rows, first)


def _reference_last(total: int, rows: int, first: int | None, last: int) -> list[int]:
    """Batch heights in plain Python: ``first`` (or ``rows``), then ``rows``; when the rows left fit
    in the next batch but exceed ``last``, that batch leaves exactly ``last`` rows for a final one."""
    out, left, size = [], total, first or rows
    while left > 0:
        if last < left <= size:
            size = left - last
        take = min(size, left)
        out.append(take)
        left -= take
        size = rows
    return out


@settings(max_examples=examples(200), deadline=None)
@given(heights=st.lists(st.integers(0, 40), max_size=12), rows=st.integers(1, 50),
       first=st.one_of(st.none(), st.integers(1, 50)), last=st.integers(1, 50))
def test_recut_with_a_short_final_batch_matches_plain_python(heights, rows, first, last):
    tables = [pa.table({"id": pa.array(df["id"].to_list(), pa.int64())}) for df in _pieces(heights)]
    total = sum(heights)
    got = list(recut(iter(tables), rows, join=lambda ts: pa.concat_tables(ts).combine_chunks(), first=first,
                     total=total, last=last))
    ids = [t.column("id").to_pylist() for t in got]
    assert [x for b in ids for x in b] == list(range(total))  # every row once, in order
    assert [len(b) for b in ids] == _reference_last(total, rows, first, last)
    if len(ids) > 1:
        assert len(ids[-1]) <= max(last, rows)


def test_recut_final_batch_of_the_ramp():
    """The 100,000-row shard of benchmarks/bench_audit.py in batches of 38,648 with the ramp of
    iter_batches (first and final batch 38,648 // 8 = 4,831 rows)."""
    tables = [pa.table({"id": pa.array(range(a, min(a + 4831, 100_000)), pa.int64())}) for a in range(0, 100_000, 4831)]
    got = list(recut(iter(tables), 38648, join=lambda ts: pa.concat_tables(ts).combine_chunks(), first=4831,
                     total=100_000, last=4831))
    assert [t.num_rows for t in got] == [4831, 38648, 38648, 13042, 4831]


def _reference_bytes(row_bytes: list[int], rows: int, first: int | None, max_bytes: int) -> list[list[int]]:
    """Plain Python: row ids cut greedily, each batch the longest run of the rows left that holds at most
    ``first`` (the first batch) or ``rows`` rows and at most ``max_bytes`` bytes, at least one row."""
    out, at, size = [], 0, first or rows
    while at < len(row_bytes):
        end, held = at, 0
        while end < len(row_bytes) and end - at < size and (end == at or held + row_bytes[end] <= max_bytes):
            held += row_bytes[end]
            end += 1
        out.append(list(range(at, end)))
        at, size = end, rows
    return out


@settings(max_examples=examples(300), deadline=None)
@given(pieces=st.lists(st.tuples(st.integers(0, 30), st.integers(0, 40)), max_size=12), rows=st.integers(1, 50),
       first=st.one_of(st.none(), st.integers(1, 50)), max_bytes=st.integers(1, 200))
def test_recut_with_a_byte_budget_matches_plain_python(pieces, rows, first, max_bytes):
    """Rows counted and bytes counted, whichever comes first: each piece's rows of one size (``w``
    bytes each, the even spread recut assumes), so the greedy cut in plain Python is exact."""
    frames, row_bytes, at = [], [], 0
    for h, w in pieces:
        frames.append(pl.DataFrame({"id": list(range(at, at + h)), "w": [w] * h}, schema={"id": pl.Int64, "w": pl.Int64}))
        row_bytes += [w] * h
        at += h
    got = list(recut(iter(frames), rows, join=lambda fs: pl.concat(fs), first=first,
                     weigh=lambda df: int(df["w"].sum()), max_bytes=max_bytes))
    assert [df["id"].to_list() for df in got] == _reference_bytes(row_bytes, rows, first, max_bytes)


def test_recut_frames_bounds_a_batch_of_big_rows_after_small_ones():
    """1,000 rows of 8 bytes, then 40 rows of 100,000: batches of 600 rows (sized by the small ones)
    hold at most 1 MB each by bytes, the rows in order; rows only, the second batch held them all."""
    small = [pl.DataFrame({"t": ["x" * 8] * 500}) for _ in range(2)]
    big = [pl.DataFrame({"t": ["y" * 100_000] * 10}) for _ in range(4)]
    budget = 10**6
    got = list(recut_frames(iter(small + big), 600, budget))
    texts = [t for df in got for t in df["t"].to_list()]
    assert texts == ["x" * 8] * 1000 + ["y" * 100_000] * 40
    assert max(df.estimated_size() for df in got) <= budget
    heights = [df.height for df in got]
    assert heights[0] == 600  # by rows
    assert 400 < heights[1] <= 400 + budget // 100_000  # by bytes: the small rows left and a few big ones
    unbounded = list(recut_frames(iter(small + big), 600))
    assert max(df.estimated_size() for df in unbounded) > 4 * budget


def test_recut_reads_pieces_lazily():
    asked = []

    def pieces():
        for h in (3, 3, 3, 3):
            asked.append(h)
            yield pl.DataFrame({"x": [0] * h})

    it = recut_frames(pieces(), 5)
    assert next(it).height == 5 and len(asked) == 2  # the second piece completes the first batch
    assert next(it).height == 5 and len(asked) == 4
    assert next(it).height == 2
    assert next(it, None) is None


def test_lazy_source_projection_predicate_and_head():
    calls: list[tuple[list[str] | None, int | None]] = []
    served = []
    schema = {"a": pl.Int64, "b": pl.String}

    def batches(columns, batch_size):
        calls.append((columns, batch_size))
        for start in range(0, 100, 10):
            df = pl.DataFrame({"a": list(range(start, start + 10)), "b": [str(i) for i in range(start, start + 10)]},
                              schema=schema)
            served.append(start)
            yield df if columns is None else df.select(columns)

    lf = lazy_source(batches, schema, "test-source", "detail")
    assert lf.collect_schema() == pl.Schema(schema)
    assert not calls  # the schema needs no read
    assert lf.select("a").filter(pl.col("a") % 7 == 0).collect()["a"].to_list() == list(range(0, 100, 7))
    assert calls[-1][0] == ["a"]
    served.clear()
    got = lf.filter(pl.col("a") >= 35).head(3).collect()
    assert got["a"].to_list() == [35, 36, 37] and got["b"].to_list() == ["35", "36", "37"]
    assert served[-1] < 90  # stopped once enough rows passed the predicate
    assert lf.collect().height == 100


def test_lazy_source_query_of_no_column_keeps_the_rows():
    """A query that needs only the rows (a row index, a count) gets frames of no column from polars'
    projection; they must keep their heights (a frame selected to no column has none)."""
    schema = {"text": pl.String, "n": pl.Int32}
    heights = [7, 0, 5, 9]
    asked: list[list[str] | None] = []

    def batches(columns, batch_size):
        asked.append(columns)
        at = 0
        for h in heights:
            df = pl.DataFrame({"text": [f"t{i}" for i in range(at, at + h)], "n": list(range(at, at + h))},
                              schema=schema)
            at += h
            yield df if columns is None else df.select(columns)

    lf = lazy_source(batches, schema, "test-source")
    total = sum(heights)
    assert lf.with_row_index("r").select("r").collect()["r"].to_list() == list(range(total))
    assert lf.with_row_index("r").filter(pl.col("r").is_in([total - 1])).select("r").collect()["r"].to_list() == [total - 1]
    assert lf.select(pl.len()).collect().item() == total
    assert ["n"] in asked  # the fixed-width column carried the heights, not the text
