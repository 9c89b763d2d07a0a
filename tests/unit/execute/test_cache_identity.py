"""The cache answered in the parent process: file identities (``trust_mtime``: no bytes read for a file
whose recorded state is unchanged; any write, even one that puts the old size and mtime back, is
hashed again), no worker pool when every shard is a hit, small shards grouped into worker tasks, and
one process below ``LOCAL_BYTES`` of work."""
from __future__ import annotations

import os
import time
import types
from pathlib import Path

import polars as pl
import pytest
from gatehelp import normalized, write_dataset

import datacheck.execute.audit as api
import datacheck.execute.cache as cache_module
import datacheck.execute.executors as executors
from datacheck.execute.cache import SETTLE_NS, ShardCache
from datacheck.execute.executors import LOCAL_BYTES, LocalExecutor, ProcessExecutor, make_executor
from datacheck.formats.discovery import discover
from datacheck.model.config import config_from_dict

CFG = config_from_dict({"labels": {"num_classes": 3}})


def _settled(root: Path) -> None:
    """Every file's modification time an hour back (older than SETTLE_NS: its identity may be recorded)."""
    old = time.time() - 3600
    for p in root.rglob("*"):
        os.utime(p, (old, old))


def _counting_hash(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    real = api.hash_shard

    def spy(path, fmt, **kw):
        seen.append(Path(path).name)
        return real(path, fmt, **kw)

    monkeypatch.setattr(api, "hash_shard", spy)
    return seen


def _audit(root: Path, cache: Path, trust: bool, **kw):
    return api.audit([root], CFG, cache_dir=cache, trust_mtime=trust, config_path=None, workers=1, **kw)


def test_trusted_rerun_reads_no_bytes_and_gives_the_same_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = write_dataset(tmp_path / "data", n_shards=4, rows=6)
    _settled(root)
    cache = tmp_path / "cache"
    first = _audit(root, cache, trust=False)  # hashes every shard and records the identities
    n = first.summary["shards"]
    assert len(list((cache / "v1" / "ids").rglob("*.json"))) == n
    seen = _counting_hash(monkeypatch)
    again = _audit(root, cache, trust=True)
    assert seen == []  # no shard's bytes were read
    assert normalized(again.to_json()) == normalized(first.to_json())
    plain = _audit(root, cache, trust=False)  # without the permission every shard is hashed
    assert len(seen) == n and normalized(plain.to_json()) == normalized(first.to_json())


def test_a_write_that_keeps_size_and_mtime_is_still_seen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = write_dataset(tmp_path / "data", n_shards=3, rows=6)
    _settled(root)
    cache = tmp_path / "cache"
    _audit(root, cache, trust=True)
    victim = sorted(root.glob("*.parquet"))[1]
    st = victim.stat()
    df = pl.read_parquet(victim)
    data = bytearray(victim.read_bytes())
    other = df.with_columns(pl.lit("changed text").alias("text"))
    other.write_parquet(victim)
    if victim.stat().st_size != st.st_size:  # same size wanted: flip one byte of the data instead
        victim.write_bytes(bytes(data))
        data[len(data) // 2] ^= 0x01
        victim.write_bytes(bytes(data))
    os.utime(victim, ns=(st.st_atime_ns, st.st_mtime_ns))  # the old modification time put back
    assert (victim.stat().st_size, victim.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    seen = _counting_hash(monkeypatch)
    rep = _audit(root, cache, trust=True)
    assert seen == [victim.name]  # the status-change time moved: hashed again
    (sh,) = [s for s in rep.shards if s.path == victim.name]
    assert sh.content_hash != "" and sh.content_hash == api.hash_shard(victim, "parquet")[0]


def test_a_fresh_file_gets_no_identity(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = write_dataset(tmp_path / "data", n_shards=2, rows=4)
    now = time.time_ns()
    for p in root.rglob("*"):
        os.utime(p, ns=(now, now - SETTLE_NS // 2))  # modified a second ago
    # the cache's clock held at `now`: the files stay a second old however long the audit takes to
    # reach the cache (on a loaded machine a real second passed, and they looked settled)
    monkeypatch.setattr(cache_module, "time", types.SimpleNamespace(time_ns=lambda: now, time=lambda: now / 1e9))
    cache = tmp_path / "cache"
    _audit(root, cache, trust=True)
    assert not list((cache / "v1" / "ids").rglob("*.json")) if (cache / "v1" / "ids").exists() else True


def test_prune_keeps_the_used_identities(tmp_path: Path) -> None:
    root = write_dataset(tmp_path / "data", n_shards=3, rows=4)
    _settled(root)
    cache = tmp_path / "cache"
    _audit(root, cache, trust=True)
    stale = cache / "v1" / "ids" / "ff" / ("f" * 32 + ".json")
    stale.parent.mkdir(parents=True, exist_ok=True)
    stale.write_text("{}")
    kept = len(list((cache / "v1" / "ids").rglob("*.json"))) - 1
    _audit(root, cache, trust=True, prune_cache=True)
    assert not stale.exists() and len(list((cache / "v1" / "ids").rglob("*.json"))) == kept


def test_no_pool_when_the_cache_answers_every_shard(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = write_dataset(tmp_path / "data", n_shards=4, rows=6)
    cache = tmp_path / "cache"
    first = _audit(root, cache, trust=False)

    def no_pool(*a, **k):
        raise AssertionError("a process pool was started")

    monkeypatch.setattr(executors, "ProcessPoolExecutor", no_pool)
    sc = ShardCache(cache, CFG)
    disc = discover([str(root)], CFG.dataset.format)
    got = api.audit_shards(disc, CFG, cache=sc, workers=2, executor="process")
    assert sc.stats.hits == len(disc.shards) and sc.stats.misses == 0
    assert [r.path for r in got] == [s.rel for s in disc.shards]
    again = api.audit([root], CFG, cache_dir=cache, config_path=None, workers=2, executor="process")
    assert normalized(again.to_json()) == normalized(first.to_json())


def test_tasks_group_small_shards() -> None:
    mib = 1 << 20
    sizes = [mib] * 40 + [64 * mib] + [mib] * 3
    tasks = api.tasks_of(list(range(len(sizes))), sizes, workers=2)
    assert [k for t in tasks for k in t] == list(range(len(sizes)))  # every shard once, in order
    most = len(sizes) // 8
    assert all(len(t) <= most for t in tasks)
    assert [40] in tasks  # a big shard is a task of its own once the one before it closed
    at = 0
    for t in tasks[:-1]:  # a task closes at TASK_BYTES, at `most` shards or at the tail's bound
        left = len(sizes) - at
        assert sum(sizes[k] for k in t) >= api.TASK_BYTES or len(t) == min(most, max(1, left // 4))
        at += len(t)
    assert api.tasks_of([0, 1, 2], [mib] * 3, workers=4) == [[0], [1], [2]]


def test_last_tasks_are_single_shards() -> None:
    """100 shards of 3 MiB on 2 workers: tasks of 6 shards (16 MiB) while many are left, then
    smaller ones, the last ones single shards (a worker that runs out waits about one shard)."""
    mib = 1 << 20
    tasks = api.tasks_of(list(range(100)), [3 * mib] * 100, workers=2)
    assert [k for t in tasks for k in t] == list(range(100))
    assert len(tasks[0]) == 6  # 18 MiB >= TASK_BYTES
    lens = [len(t) for t in tasks]
    assert lens == sorted(lens, reverse=True)
    assert lens[-4:] == [1, 1, 1, 1]
    assert len(tasks) <= 30  # a task costs about a millisecond: the tail adds a few, not one per shard


def test_small_work_runs_in_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(executors.ENV_WORKERS, raising=False)
    monkeypatch.setattr(executors, "default_workers", lambda: 2)
    assert isinstance(make_executor(None, None, 10, work_bytes=LOCAL_BYTES - 1), LocalExecutor)
    assert isinstance(make_executor(None, None, 10, work_bytes=LOCAL_BYTES), ProcessExecutor)
    assert isinstance(make_executor(None, 2, 10, work_bytes=1), ProcessExecutor)  # asked for: kept
    assert isinstance(make_executor("process", None, 10, work_bytes=1), ProcessExecutor)
    monkeypatch.setenv(executors.ENV_WORKERS, "2")
    assert isinstance(make_executor(None, None, 10, work_bytes=1), ProcessExecutor)
