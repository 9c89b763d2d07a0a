"""The one-batch read of a parquet shard by pyarrow (``formats/batches.py read_parquet_columns``) gives
exactly the frame polars' own reader gives: values, nulls (null lists, null elements), row order
across row groups and pieces, and the dtypes of the checked schema; so does the read of chosen rows
again (``read_parquet_rows``), decoding only the row groups that hold them."""
from __future__ import annotations

import polars as pl
import pyarrow.parquet as pq
import pytest

import datacheck.formats.parquet as parquet_mod
from datacheck.formats.parquet import read_parquet_columns, read_parquet_rows
from datacheck.io.shardbytes import Unreadable


@pytest.mark.parametrize("n,row_group", [(1, 1), (7, 3), (53, 10), (200, 64)])
def test_equals_polars_read(tmp_path, n, row_group):
    ids = [None if i % 11 == 5 else [(i * 3 + j) % 17 - 2 if (i + j) % 13 else None for j in range(i % 6)]
           for i in range(n)]
    df = pl.DataFrame({
        "input_ids": pl.Series(ids, dtype=pl.List(pl.Int32)),
        "text": pl.Series([None if i % 7 == 0 else f"t{i % 4}" for i in range(n)], dtype=pl.String),
        "other": pl.Series(range(n), dtype=pl.Int64),
    })
    path = tmp_path / "shard.parquet"
    df.write_parquet(path, row_group_size=row_group)
    want = pl.read_parquet(path, columns=["input_ids", "text"])
    schema = {"input_ids": pl.List(pl.Int64), "text": pl.String, "other": pl.Int64}
    got = read_parquet_columns(path, ["input_ids", "text"], n, schema)
    assert got.schema == pl.Schema({"input_ids": pl.List(pl.Int64), "text": pl.String})
    assert got.equals(want.cast({"input_ids": pl.List(pl.Int64)}))
    assert got.height == n and got["input_ids"].n_chunks() == 1  # one record batch


@pytest.mark.parametrize("n,row_group,wanted", [(53, 10, [0, 52]), (53, 10, [11, 11, 3, 29]), (200, 64, []),
                                                (7, 3, [6, 5, 4, 3, 2, 1, 0])])
def test_rows_equal_polars_filter(tmp_path, n, row_group, wanted):
    """``read_parquet_rows``: the wanted rows in row order (repeats once), ``__row`` first, the
    dtypes of the checked schema, as polars' own read filtered by row index gives them."""
    df = pl.DataFrame({
        "input_ids": pl.Series([None if i % 11 == 5 else [i, None, i + 1][: i % 4] for i in range(n)],
                               dtype=pl.List(pl.Int32)),
        "text": pl.Series([None if i % 7 == 0 else f"t{i}" for i in range(n)], dtype=pl.String),
    })
    path = tmp_path / "shard.parquet"
    df.write_parquet(path, row_group_size=row_group)
    schema = {"input_ids": pl.List(pl.Int64), "text": pl.String}
    got = read_parquet_rows(path, ["input_ids", "text"], wanted, schema)
    want = (pl.read_parquet(path).with_row_index("__row").filter(pl.col("__row").is_in(wanted))
            .cast({"input_ids": pl.List(pl.Int64)}))
    assert got.schema == pl.Schema({"__row": pl.UInt32, "input_ids": pl.List(pl.Int64), "text": pl.String})
    assert got.equals(want)
    assert got["__row"].to_list() == sorted(set(wanted))


def test_rows_decode_only_the_row_groups_holding_them(tmp_path, monkeypatch):
    path = tmp_path / "shard.parquet"
    pl.DataFrame({"x": list(range(100))}).write_parquet(path, row_group_size=10)
    groups: list[int] = []
    decoded: list[int] = []
    real = pq.ParquetFile.iter_batches

    def spy(self, *a, row_groups=None, **k):
        groups.extend(row_groups)
        for b in real(self, *a, row_groups=row_groups, **k):
            decoded.append(b.num_rows)
            yield b

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", spy)
    monkeypatch.setattr(parquet_mod, "REREAD_BATCH_ROWS", 4)
    got = read_parquet_rows(path, ["x"], [95, 12, 17, 10], {"x": pl.Int64})
    assert got["x"].to_list() == [10, 12, 17, 95]
    assert groups == [1, 9]
    # group 1: rows 10-17 are in its first two batches of 4 (its last 2 rows are not decoded);
    # group 9: row 95 is in its second batch
    assert decoded == [4, 4, 4, 4]


def test_a_row_past_the_end_is_unreadable_naming_it(tmp_path):
    path = tmp_path / "shard.parquet"
    pl.DataFrame({"x": list(range(5))}).write_parquet(path)
    with pytest.raises(Unreadable, match="row 5 is past the file's 5 rows"):
        read_parquet_rows(path, ["x"], [1, 5], {"x": pl.Int64})


@pytest.mark.parametrize("n,row_group,rows", [(1, 1, 5), (53, 10, 12), (200, 64, 100), (200, 200, 1)])
def test_first_rows_equal_polars_head(tmp_path, n, row_group, rows):
    """``ParquetReader.first_rows`` (the layout recognizer's sample): the first rows, across row
    groups, with the checked schema's dtypes, as the head of polars' own read gives them; None for
    a column the file does not hold."""
    ids = [None if i % 11 == 5 else [(i * 3 + j) % 17 - 2 if (i + j) % 13 else None for j in range(i % 6)]
           for i in range(n)]
    df = pl.DataFrame({"input_ids": pl.Series(ids, dtype=pl.List(pl.Int32)),
                       "text": pl.Series([None if i % 7 == 0 else f"t{i % 4}" for i in range(n)], dtype=pl.String)})
    path = tmp_path / "shard.parquet"
    df.write_parquet(path, row_group_size=row_group)
    want = {"input_ids": pl.List(pl.Int64), "text": pl.String}
    got = parquet_mod.ParquetReader(path).first_rows(["input_ids", "text"], rows, want)
    assert got is not None and got.schema == pl.Schema(want)
    assert got.equals(pl.read_parquet(path).head(rows).cast(want))  # type: ignore[arg-type]
    assert parquet_mod.ParquetReader(path).first_rows(["input_ids", "missing"], rows, want) is None
