"""The pyarrow side of a parquet shard's batched read (formats/parquetdecode.py): the columns are
decoded largest first and handed out in the order asked, the same values as pyarrow's own read; the
reads decode into jemalloc where the process's default pool is an unchosen mimalloc."""
from __future__ import annotations

import itertools
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fdhelp import open_fds

from datacheck.formats import parquetdecode as pdec
from datacheck.formats.parquetdecode import decode_order, decoded


def _shard(tmp_path, n: int = 300):
    ids = [[(i * 5 + j) % 91 for j in range(i % 17 + 1)] for i in range(n)]
    table = pa.table({
        "input_ids": pa.array(ids, pa.list_(pa.int32())),
        "attention_mask": pa.array([[1] * len(r) for r in ids], pa.list_(pa.int8())),
        "labels": pa.array([[-100] + r[1:] for r in ids], pa.list_(pa.int64())),
        "text": [None if i % 7 == 0 else "x" * (i % 40) for i in range(n)],
        "score": pa.array([float(i) for i in range(n)], pa.float32()),
    })
    path = tmp_path / "s.parquet"
    pq.write_table(table, path, row_group_size=70)
    return path, table


def test_the_largest_column_is_decoded_first(tmp_path):
    path, _ = _shard(tmp_path)
    pf = pq.ParquetFile(path)
    assert decode_order(pf, ["input_ids", "attention_mask", "labels"]) == ["labels", "input_ids", "attention_mask"]
    assert decode_order(pf, ["score", "attention_mask"]) == ["attention_mask", "score"]
    assert decode_order(pf, ["labels"]) == ["labels"]
    assert decode_order(pf, ["score", "missing", "labels"]) == ["score", "missing", "labels"]  # the read says why
    assert decode_order(pf, ["score", "score", "labels"]) == ["score", "score", "labels"]
    assert set(decode_order(pf, pf.schema_arrow.names)) == set(pf.schema_arrow.names)


@pytest.mark.parametrize("first,last", [(None, None), (13, 13), (1, 7)])
def test_decoded_tables_hold_the_columns_in_the_order_asked(tmp_path, first, last):
    path, table = _shard(tmp_path)
    n = table.num_rows
    for columns in ([*itertools.permutations(["input_ids", "attention_mask", "labels"])]
                    + [["text", "score", "labels"], ["score"]]):
        columns = list(columns)
        got = list(decoded(path, columns, 40, first, n, last, pq.ParquetFile(path)))
        assert all(t.column_names == columns for t in got)
        assert sum(t.num_rows for t in got) == n
        assert pa.concat_tables(got).equals(pq.read_table(path, columns=columns))
        if first:
            assert got[0].num_rows == first and got[-1].num_rows <= last


# ------------------------------------------------------------------ the pool the reads decode into

def _jemalloc():
    try:
        return pa.jemalloc_memory_pool()
    except NotImplementedError:
        pytest.skip("this pyarrow is built without jemalloc")


@pytest.fixture
def fresh_pool(monkeypatch):
    """decode_pool asked anew (its answer is kept once a process)."""
    monkeypatch.setattr(pdec, "_pool", [])
    monkeypatch.delenv(pdec.ARROW_POOL_VAR, raising=False)
    return monkeypatch


def test_jemalloc_is_chosen_only_over_an_unchosen_mimalloc_default(fresh_pool):
    jemalloc = _jemalloc()
    fresh_pool.setattr(pa, "default_memory_pool", pa.mimalloc_memory_pool)
    assert pdec.decode_pool().backend_name == jemalloc.backend_name == "jemalloc"
    for chosen in ("mimalloc", "system"):  # the user named the default pool: it is kept
        fresh_pool.setattr(pdec, "_pool", [])
        fresh_pool.setenv(pdec.ARROW_POOL_VAR, chosen)
        assert pdec.decode_pool() is None
    fresh_pool.delenv(pdec.ARROW_POOL_VAR)
    for default in (pa.system_memory_pool, pa.jemalloc_memory_pool):  # the CLI's jemalloc, a system default
        fresh_pool.setattr(pdec, "_pool", [])
        fresh_pool.setattr(pa, "default_memory_pool", default)
        assert pdec.decode_pool() is None


@pytest.mark.parametrize("partial", [False, True])
def test_reads_decode_into_the_chosen_pool_with_the_same_values(tmp_path, fresh_pool, partial):
    path, table = _shard(tmp_path)
    jemalloc = _jemalloc()
    fresh_pool.setattr(pa, "default_memory_pool", pa.mimalloc_memory_pool)
    before = jemalloc.bytes_allocated()
    footer = SimpleNamespace(metadata=pq.read_metadata(path))  # what Footer holds; no file left open
    with pdec.parquet_file(path, footer, partial=partial) as pf:
        got = pa.Table.from_batches(list(pf.iter_batches(batch_size=40, columns=["labels", "text"])))
        assert pf.metadata.num_rows == table.num_rows
        # the decoded buffers are held in jemalloc: at least the labels' values (int64) and offsets
        labels = got.column("labels")
        assert jemalloc.bytes_allocated() - before >= sum(len(c.values) * 8 + (len(c) + 1) * 4 for c in labels.chunks)
    # checked before any read of pyarrow's dataset API (pq.read_table), whose file handle may be let go
    # on one of pyarrow's I/O threads just after it returns
    assert open_fds(path) == 0  # the reader ParquetFile opened first is closed, and the pooled one with the file
    assert got.equals(pq.read_table(path, columns=["labels", "text"]))
    del got, labels
    assert jemalloc.bytes_allocated() == before


def test_reads_keep_the_default_pool_when_none_is_chosen(tmp_path, fresh_pool):
    path, table = _shard(tmp_path)
    fresh_pool.setenv(pdec.ARROW_POOL_VAR, "system")
    fresh_pool.setattr(pa, "default_memory_pool", pa.system_memory_pool)
    with pdec.parquet_file(path) as pf:
        assert pf.read().equals(table)
    assert open_fds(path) == 0




def test_the_pooled_reader_decodes_the_types_parquetfile_decodes(tmp_path, fresh_pool):
    """UUID and JSON logical types without a stored Arrow schema: ``ParquetFile`` (extensions on)
    gives ``arrow.uuid``/``arrow.json``; the reader opened with its own defaults would give
    ``fixed_size_binary[16]``/``string``."""
    if not hasattr(pa, "uuid") or not hasattr(pa, "json_"):
        pytest.skip("this pyarrow has no uuid/json extension types")
    _jemalloc()
    fresh_pool.setattr(pa, "default_memory_pool", pa.mimalloc_memory_pool)
    path = tmp_path / "ext.parquet"
    table = pa.table({"u": pa.array([bytes(range(16)), bytes(16)], pa.uuid()), "j": pa.array(["{}", "[1]"], pa.json_())})
    pq.write_table(table, path, store_schema=False)
    with pdec.parquet_file(path) as pf:
        got = pf.read()
    assert got.schema == pq.ParquetFile(path).schema_arrow and got.equals(pq.read_table(path))
    assert isinstance(got.schema.field("u").type, pa.BaseExtensionType)
