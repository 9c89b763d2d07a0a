"""The decoded size of a parquet shard's needed columns, from the footer (formats/batches.py): it sizes
the engine's batches without decoding any row (decoding the first rows of a one-row-group shard made
pyarrow decompress whole column chunks)."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from datacheck.formats.parquetdecode import footer_bytes, rows_bytes


def _write(tmp_path, table: pa.Table, row_group_size: int | None = None):
    path = tmp_path / "s.parquet"
    pq.write_table(table, path, row_group_size=row_group_size)
    return path


@pytest.mark.parametrize("row_group_size", [None, 7])
def test_footer_bytes_match_the_decoded_size(tmp_path, row_group_size):
    n = 50
    ids = [[(i * 31 + k) % 1000 for k in range(i % 13)] if i % 9 else None for i in range(n)]
    table = pa.table({
        "input_ids": pa.array(ids, pa.list_(pa.int32())),
        "labels": pa.array([None if r is None else [-100] + r[1:] for r in ids], pa.large_list(pa.int64())),
        "mask": pa.array([None if r is None else [1] * len(r) for r in ids], pa.list_(pa.int8())),
        "score": pa.array([float(i) if i % 5 else None for i in range(n)], pa.float64()),
        "keep": pa.array([i % 2 == 0 for i in range(n)], pa.bool_()),
    })
    path = _write(tmp_path, table, row_group_size)
    pf = pq.ParquetFile(path)
    cols = table.column_names
    got, rest = footer_bytes(pf, cols)
    decoded = pf.read(columns=cols).nbytes
    assert rest == []
    # the footer counts a null/empty list as one value slot and a validity bit per value: an
    # estimate a little above the decoded buffers, never far off
    assert decoded <= got <= 1.35 * decoded + 64
    rows, per_row = rows_bytes(path, cols)
    assert rows == n and per_row == pytest.approx(got / n)


def test_footer_bytes_leave_variable_width_to_the_first_rows(tmp_path):
    """Strings and nested lists are not sized by the footer: only those columns' first rows are
    decoded, and their bytes added to the footer's size of the others."""
    table = pa.table({"text": ["a", "bb", None], "ids": pa.array([[1], [2, 3], []], pa.list_(pa.int32())),
                      "nested": pa.array([[[1]], [[2]], []], pa.list_(pa.list_(pa.int32())))})
    path = _write(tmp_path, table)
    pf = pq.ParquetFile(path)
    ids_bytes, rest = footer_bytes(pf, ["ids"])
    assert ids_bytes > 0 and rest == []
    assert footer_bytes(pf, ["ids", "text"]) == (ids_bytes, ["text"])
    assert footer_bytes(pf, ["nested", "ids"]) == (ids_bytes, ["nested"])
    rows, per_row = rows_bytes(path, ["text"])
    assert rows == 3 and per_row == pytest.approx(pf.read(columns=["text"]).nbytes / 3)
    rows, per_row = rows_bytes(path, ["ids", "text", "nested"])
    assert rows == 3 and per_row == pytest.approx((ids_bytes + pf.read(columns=["text", "nested"]).nbytes) / 3)
