"""A prefetch of a parquet shard's batched read (formats/parquetdecode.py): it hands over exactly the
tables the plain read gives, only to the read it was started for, and leaves no thread, memory or
open file behind, whether it was taken, refused or never asked for."""
from __future__ import annotations

import os
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fdhelp import open_fds

from datacheck.formats import parquetdecode as pd
from datacheck.formats.parquetdecode import Prefetch, batch_plan, claim, decoded, prefetch

N = 700


def _shard(tmp_path: Path, n: int = N, name: str = "s.parquet") -> Path:
    ids = [[(i * 7 + j) % 97 for j in range(i % 9 + 1)] for i in range(n)]
    table = pa.table({
        "input_ids": pa.array(ids, pa.list_(pa.int32())),
        "labels": pa.array([[-100] + r[1:] for r in ids], pa.list_(pa.int64())),
        "score": pa.array([float(i % 13) for i in range(n)], pa.float64()),
    })
    path = tmp_path / name
    pq.write_table(table, path, row_group_size=150)
    return path


@pytest.fixture
def small_batches(monkeypatch):
    """A batch target of 3,000 decoded bytes: the 700-row shard is read in about 25 batches."""
    monkeypatch.setattr(pd, "BATCH_TARGET_BYTES", 3000)
    monkeypatch.delenv("DATACHECK_BATCH_ROWS", raising=False)


def _threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "datacheck-parquet-prefetch"]




def _plain(path: Path) -> tuple[list[str], int, int | None, int, list[pa.Table]]:
    plan = batch_plan(path)
    assert plan is not None
    columns, rows, first, total, _ = plan
    return columns, rows, first, total, list(decoded(path, columns, rows, first, total, first))


def _same(got: list[pa.Table], want: list[pa.Table]) -> None:
    assert [t.num_rows for t in got] == [t.num_rows for t in want]
    assert all(a.equals(b) for a, b in zip(got, want))


def test_batch_plan_is_the_engines_ramped_read(tmp_path, small_batches):
    """Every column in file order; rows a batch from the footer's sizes; a first batch of 1/8."""
    path = _shard(tmp_path)
    columns, rows, first, total, meta = batch_plan(path)
    n, per_row = pd.rows_bytes(path, columns)
    assert columns == ["input_ids", "labels", "score"] and total == N == n
    assert rows == int(3000 // per_row) and first == max(1, rows // pd.RAMP_DIVISOR)
    assert meta.metadata.num_rows == N


@pytest.mark.parametrize("pieces", [1, 2, 100])
def test_a_taken_prefetch_gives_the_plain_reads_tables(tmp_path, small_batches, pieces):
    path = _shard(tmp_path)
    columns, rows, first, total, want = _plain(path)
    with prefetch(path, pieces=pieces) as p:
        assert p is not None
        got = claim(path, columns, rows, first, total, first)
        assert got is not None
        _same(list(got), want)
        assert p.taken
    assert not _threads() and open_fds(path) == 0


def test_a_claim_of_another_read_is_refused_and_stops_the_prefetch(tmp_path, small_batches):
    path = _shard(tmp_path)
    columns, rows, first, total, _ = _plain(path)
    with prefetch(path) as p:
        assert claim(path, columns[:2], rows, first, total, first) is None  # other columns
        assert not p._thread.is_alive() and not p.taken and p._read is None
        assert claim(path, columns, rows, first, total, first) is None  # a prefetch is asked once
    with prefetch(path):
        assert claim(path, columns, rows + 1, first, total, first) is None  # other batch sizes
    other = _shard(tmp_path, name="t.parquet")
    with prefetch(path):
        assert claim(other, columns, rows, first, total, first) is None  # another file
    assert not _threads() and open_fds(path) == 0


def test_a_changed_file_is_not_served_from_the_prefetch(tmp_path, small_batches):
    path = _shard(tmp_path)
    columns, rows, first, total, _ = _plain(path)
    with prefetch(path):
        st = path.stat()
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
        assert claim(path, columns, rows, first, total, first) is None


def test_no_prefetch_where_the_engine_reads_one_batch_or_batches_are_forced(tmp_path, monkeypatch):
    path = _shard(tmp_path)
    assert batch_plan(path) is None  # about 40 KB decoded: one batch
    monkeypatch.setattr(pd, "BATCH_TARGET_BYTES", 3000)
    assert batch_plan(path) is not None
    monkeypatch.setenv("DATACHECK_BATCH_ROWS", "50")
    assert batch_plan(path) is None
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1 not a parquet file PAR1")
    monkeypatch.delenv("DATACHECK_BATCH_ROWS")
    assert batch_plan(bad) is None
    with prefetch(bad) as p:
        assert p is not None
        assert claim(bad, ["x"], 10, 1, 10, 1) is None and p.key is None
    with prefetch(tmp_path / "missing.parquet") as p:
        assert p is None
    assert not _threads()


def test_an_error_ends_the_block_without_a_thread_or_an_open_file(tmp_path, small_batches):
    """The audit fails before it asks for the batches (a bad config, an interrupt): the prefetch is
    stopped, its thread joined, its read closed."""
    path = _shard(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        with prefetch(path) as p:
            assert p is not None
            p._planned.wait()
            raise KeyboardInterrupt
    assert not _threads() and open_fds(path) == 0
    assert p._read is None and not pd._started


def test_an_untaken_read_is_dropped_with_its_open_file(tmp_path, small_batches):
    """A prefetch stopped after it decoded its pieces: the read it holds (its file open) is closed."""
    path = _shard(tmp_path)
    p = Prefetch(path).start()
    p._thread.join()
    assert p._read is not None and p._q.qsize() == pd.PREFETCH_PIECES + 1
    p.close()
    assert p._read is None and p._q.empty() and open_fds(path) == 0


def test_a_decode_error_is_raised_where_the_plain_read_raises_it(tmp_path, small_batches, monkeypatch):
    """The tables before the error are handed over, then the read's own error (the engine turns it
    into ``decode.unreadable`` as without a prefetch), whether the prefetch or the consumer met it."""
    path = _shard(tmp_path)
    real = pd.decoded

    def failing_after(k):
        def read(*args, **kwargs):
            for i, t in enumerate(real(*args, **kwargs)):
                if i == k:
                    raise OSError("bad page")
                yield t
        return read

    columns, rows, first, total, want = _plain(path)
    for k in (0, 1, 3):
        monkeypatch.setattr(pd, "decoded", failing_after(k))
        with prefetch(path):
            got = claim(path, columns, rows, first, total, first)
            assert got is not None
            tables = []
            with pytest.raises(OSError, match="bad page"):
                for t in got:
                    tables.append(t)
            _same(tables, want[:k])
        assert not _threads()


def test_a_released_prefetch_stops_and_serves_no_read(tmp_path, small_batches, monkeypatch):
    """The cache answered the shard: the prefetch stops after the table it is decoding, drops what
    it decoded, and no later claim takes it; the block's end joins its thread."""
    path = _shard(tmp_path)
    columns, rows, first, total, _ = _plain(path)
    gate = threading.Event()
    real = pd.decoded

    def slow(*args, **kwargs):
        for t in real(*args, **kwargs):
            gate.wait()
            yield t

    monkeypatch.setattr(pd, "decoded", slow)
    with prefetch(path, pieces=50) as p:
        p._planned.wait()
        pd.release(path)
        gate.set()
        p._thread.join()
        assert p._q.qsize() <= 2  # at most the table in progress, then the hand-over mark
        assert claim(path, columns, rows, first, total, first) is None and not p.taken
    assert not _threads() and open_fds(path) == 0 and p._read is None
    pd.release(path)  # nothing started: nothing happens
