"""A parquet row group whose rows hold more bytes than a row the audit decodes (``[dataset] max_row_bytes``)
is decided from the footer before any decode (formats/parquetdecode.py ``wide_row_group``) and refused at
open as ``decode.unreadable`` naming the row group, its rows, bytes and largest column; the first rows
sampled to size string columns are bounded by the footer too (``sample_rows``). Every expected value is
computed here from the footer pyarrow wrote (``total_uncompressed_size`` of each column chunk, row
counts), never read back from datacheck."""
from __future__ import annotations

import math

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import datacheck
from datacheck.formats.base import ReadOptions
from datacheck.formats.parquet import open_parquet
from datacheck.formats.parquetdecode import SAMPLE_ROWS, sample_rows, wide_row_group
from datacheck.io.shardbytes import Unreadable
from datacheck.model.config import config_from_dict
from datacheck.model.constants import BATCH_TARGET_BYTES

#: the default of [dataset] max_row_bytes: 128 MiB (2 x the 64 MiB batch target), written out here
DEFAULT_ROW_BYTES = 128 << 20


def _groups(path):
    """Per row group, from the footer: (rows, uncompressed bytes of all its column chunks, bytes per
    top-level column). A leaf belongs to the top-level field its path starts with (names here hold
    no dot but ``a.b``, whose leaf path is ``a.b`` itself)."""
    md = pq.ParquetFile(path).metadata
    top = pq.read_schema(path).names
    out = []
    for g in range(md.num_row_groups):
        rg = md.row_group(g)
        per: dict[str, int] = {}
        for j in range(rg.num_columns):
            leaf = rg.column(j).path_in_schema
            owner = leaf if leaf in top else leaf.split(".")[0]
            per[owner] = per.get(owner, 0) + rg.column(j).total_uncompressed_size
        out.append((rg.num_rows, sum(per.values()), per))
    return md, out


def _random_text(rng, n: int, size: int) -> list[str]:
    """``n`` distinct strings of ``size`` random lowercase letters (no dictionary can fold them)."""
    codes = rng.integers(97, 123, size=(n, size), dtype=np.uint8)
    return [row.tobytes().decode() for row in codes]


def _mixed(tmp_path):
    """Four row groups of 10 rows: group 2 holds strings of 20,000 bytes, the others of 50."""
    rng = np.random.default_rng(7)
    parts = []
    for g in range(4):
        size = 20_000 if g == 2 else 50
        parts.append(pa.table({
            "text": _random_text(rng, 10, size),
            "a.b": pa.array(rng.integers(0, 100, 10), pa.int64()),
            "ids": pa.array([[int(v) for v in rng.integers(0, 50, 4)] for _ in range(10)], pa.list_(pa.int32())),
        }))
    path = tmp_path / "mixed.parquet"
    with pq.ParquetWriter(path, parts[0].schema) as w:
        for t in parts:
            w.write_table(t)
    return path


def test_the_first_group_over_the_bound_is_named_from_the_footer(tmp_path):
    path = _mixed(tmp_path)
    md, groups = _groups(path)
    assert len(groups) == 4
    normal = max(math.ceil(b / n) for g, (n, b, _) in enumerate(groups) if g != 2)
    n2, b2, per2 = groups[2]
    assert b2 > normal * n2  # the bound below sits between the normal groups and group 2
    wide = wide_row_group(md, normal)
    assert wide is not None
    assert (wide.group, wide.first_row, wide.rows, wide.nbytes) == (2, groups[0][0] + groups[1][0], n2, b2)
    assert (wide.column, wide.column_bytes) == (max(per2, key=per2.__getitem__), max(per2.values()))
    assert wide.column == "text" and wide.limit == normal
    # the reason names the group, its rows, bytes, average, column and the key that raises the bound
    first, last = groups[0][0] + groups[1][0], groups[0][0] + groups[1][0] + n2 - 1
    assert wide.reason.startswith(
        f"row group 2 (rows {first}-{last}) holds {b2:,} bytes uncompressed for {n2} rows ({b2 // n2:,} bytes a row "
        f"on average; column 'text': {per2['text']:,} bytes), more than the {normal:,} bytes a row datacheck decodes "
        "([dataset] max_row_bytes)")


@pytest.mark.parametrize("slack, wide", [(-1, True), (0, True), (1, False)])
def test_the_bound_is_the_average_row(tmp_path, slack, wide):
    """A group of n rows and B bytes fails when B > limit * n: at floor(B / n) it fails (B is not a multiple
    of n here), at ceil(B / n) it passes."""
    path = _mixed(tmp_path)
    md, groups = _groups(path)
    n, b, _ = groups[2]
    assert b % n, "the boundary needs a remainder"
    limit = b // n + slack  # floor - 1, floor, ceil
    got = wide_row_group(md, limit)
    if wide:
        assert got is not None and got.group == 2
    else:  # group 2 passes at ceil(B / n); the normal groups average far less
        assert all(bb <= limit * nn for nn, bb, _ in groups)
        assert got is None


def test_a_big_normal_shard_passes_at_the_default(tmp_path):
    """100,000 rows x 128 int32 tokens in one row group (512 bytes of values a row): nowhere near 128 MiB
    a row. The average is per row group, so a 1,000,000-row shard of such groups is the same."""
    rows, width = 100_000, 128
    values = pa.array(np.arange(rows * width, dtype=np.int32) % 50_000)
    ids = pa.ListArray.from_arrays(pa.array(np.arange(0, rows * width + 1, width, dtype=np.int32)), values)
    path = tmp_path / "big.parquet"
    pq.write_table(pa.table({"input_ids": ids}), path, row_group_size=rows)
    md, groups = _groups(path)
    assert [n for n, _, _ in groups] == [rows]
    assert groups[0][1] < DEFAULT_ROW_BYTES * rows
    assert wide_row_group(md) is None
    assert wide_row_group(md, DEFAULT_ROW_BYTES) is None


def test_a_file_without_rows_is_never_wide(tmp_path):
    path = tmp_path / "empty.parquet"
    pq.write_table(pa.table({"text": pa.array([], pa.string())}), path)
    assert wide_row_group(pq.ParquetFile(path).metadata, 1) is None


def test_the_open_refuses_before_decoding_and_the_key_raises_the_bound(tmp_path):
    path = _mixed(tmp_path)
    _, groups = _groups(path)
    n2, b2, _ = groups[2]
    limit = math.ceil(b2 / n2) - 1
    cfg = config_from_dict({"dataset": {"max_row_bytes": limit}})
    with pytest.raises(Unreadable) as exc:
        open_parquet(path, "parquet", ReadOptions(dataset=cfg.dataset))
    assert exc.value.reason.startswith(f"row group 2 (rows 20-29) holds {b2:,} bytes uncompressed")
    raised = config_from_dict({"dataset": {"max_row_bytes": limit + 1}})
    data = open_parquet(path, "parquet", ReadOptions(dataset=raised.dataset))
    assert data.lf.select(pl.len()).collect().item() == sum(n for n, _, _ in groups)


def test_the_audit_says_it_out_loud(tmp_path):
    """The audit of such a shard fails on ``decode.unreadable`` naming the group; raised, it passes."""
    path = _mixed(tmp_path)
    _, groups = _groups(path)
    n2, b2, _ = groups[2]
    limit = math.ceil(b2 / n2) - 1
    rep = datacheck.audit([str(path)], config={"dataset": {"max_row_bytes": limit}})
    found = [f for s in rep.shards for f in s.findings if f.check == "decode.unreadable"]
    assert len(found) == 1 and not rep.passed
    assert f"row group 2 (rows 20-29) holds {b2:,} bytes uncompressed for {n2} rows" in found[0].message
    assert "[dataset] max_row_bytes" in found[0].message
    rep = datacheck.audit([str(path)], config={"dataset": {"max_row_bytes": limit + 1}})
    assert not [f for s in rep.shards for f in s.findings if f.check.startswith("decode.")]


def test_the_size_sample_is_bounded_by_the_footer(tmp_path):
    """Rows of 100,000 distinct bytes: 1,024 of them would decode to about 98 MiB, past the 64 MiB batch
    target, so the sample is 64 MiB over the footer's bytes a row; small rows keep 1,024."""
    rng = np.random.default_rng(3)
    blobs = [rng.integers(0, 256, 100_000, dtype=np.uint8).tobytes() for _ in range(40)]
    path = tmp_path / "blobs.parquet"
    pq.write_table(pa.table({"blob": blobs, "k": list(range(40))}), path)
    md, groups = _groups(path)
    n, _, per = groups[0]
    per_row = per["blob"] / n
    assert per_row * SAMPLE_ROWS > BATCH_TARGET_BYTES
    want = max(1, int(BATCH_TARGET_BYTES // per_row))
    assert want < SAMPLE_ROWS
    assert sample_rows(md, ["blob"]) == want
    assert sample_rows(md, ["k"]) == SAMPLE_ROWS  # the small column alone is sampled as before
    small = _mixed(tmp_path)
    assert sample_rows(pq.ParquetFile(small).metadata, ["text"]) == SAMPLE_ROWS
