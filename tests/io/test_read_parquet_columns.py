"""The one-batch read of a parquet shard by pyarrow (``io/batches.py read_parquet_columns``) gives
exactly the frame polars' own reader gives: values, nulls (null lists, null elements), row order
across row groups and pieces, and the dtypes of the checked schema."""
from __future__ import annotations

import polars as pl
import pytest

from datacheck.io.batches import read_parquet_columns


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
    assert got.height == n and got["input_ids"].n_chunks() == 1  # pieces of n // RAMP_DIVISOR rows, combined
