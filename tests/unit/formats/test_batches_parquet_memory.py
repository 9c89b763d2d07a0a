"""The parquet batch source's memory does not grow with the shard.

pyarrow's ``ParquetFile`` pre-buffers column chunks by default and keeps them allocated until the
file is closed: reading a shard batch by batch then held every row group's bytes (672 MiB of
``pyarrow.total_allocated_bytes`` after a 4 GiB shard, peak RSS 2.3 GB at 8 GiB). Measured here by
pyarrow's own allocation counter, not by time or RSS.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from datacheck.formats.parquet import _parquet_batches


def _write(path: Path, groups: int, rows: int, seq_len: int) -> int:
    rng = np.random.default_rng(0)
    writer = None
    for _ in range(groups):
        ids = rng.integers(0, 50_000, size=rows * seq_len, dtype=np.int32)
        offsets = pa.array(np.arange(0, rows * seq_len + 1, seq_len, dtype=np.int32))
        t = pa.table({"input_ids": pa.ListArray.from_arrays(offsets, pa.array(ids))})
        writer = writer or pq.ParquetWriter(path, t.schema)
        writer.write_table(t, row_group_size=rows)
    assert writer is not None
    writer.close()
    return rows * seq_len * 4  # decoded bytes of one row group's values


def test_arrow_memory_stays_bounded_over_many_row_groups(tmp_path: Path) -> None:
    path = tmp_path / "lm.parquet"
    group_bytes = _write(path, groups=24, rows=2000, seq_len=64)  # 24 row groups of 500 KiB decoded
    base = pa.total_allocated_bytes()
    peak = 0
    total = 0
    for df in _parquet_batches(path, ["input_ids"], 1000, {"input_ids": pl.List(pl.Int32)}):
        total += df.height
        peak = max(peak, pa.total_allocated_bytes() - base)
    assert total == 48_000
    # a few batches in flight (the one checked, the one decoded ahead, the row group being cut),
    # never the 24 row groups (12 MiB) the pre-buffered reader kept
    assert peak < 6 * group_bytes, f"{peak >> 10} KiB allocated by pyarrow while reading {24 * group_bytes >> 10} KiB"
