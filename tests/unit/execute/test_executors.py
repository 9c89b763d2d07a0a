"""Executors (``--workers``/``--executor``): the report is byte-identical (``created_at`` aside)
for one worker in this process and a pool of two spawned processes, over a multi-shard dataset
with cross-shard duplicates, cache hits and a miss, and an unreadable shard; progress fires in
discovery order; the cache is written by the workers and its counters reach the parent."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import polars as pl
import pytest
from gatehelp import cli, normalized, write_dataset  # noqa: E402

from datacheck.execute.audit import audit  # noqa: E402
from datacheck.execute.cache import ShardCache  # noqa: E402
from datacheck.execute.executors import (  # noqa: E402
    ENV_WORKERS,
    LocalExecutor,
    ProcessExecutor,
    WorkerDied,
    default_workers,
    make_executor,
)
from datacheck.model.config import config_from_dict  # noqa: E402
from datacheck.model.errors import UsageError  # noqa: E402

CFG = config_from_dict({"labels": {"num_classes": 3}})


def _dataset(root: Path) -> Path:
    """write_dataset's folder (byte-identical shards, an empty text per shard, a bad JSONL line,
    a temp file) plus rows repeated across shards in another order and an unreadable parquet file."""
    write_dataset(root, n_shards=5, rows=8)
    src = pl.read_parquet(root / "shard-00001-of-00006.parquet")
    pl.concat([src.reverse().head(3), pl.DataFrame({"text": ["only here"], "label": [2]})]).write_parquet(
        root / "mixed.parquet")
    (root / "broken.parquet").write_bytes(b"PAR1 this is not a parquet file")
    return root


def _audit(root: Path, cache: Path, workers: int, progress: list | None = None):
    calls = progress if progress is not None else []
    report = audit([root], CFG, cache_dir=cache, workers=workers, config_path=None,
                   progress=lambda rel, done, total: calls.append((rel, done, total)))
    return report


@pytest.mark.slow
def test_same_report_for_one_and_two_workers(tmp_path: Path) -> None:
    root = _dataset(tmp_path / "data")
    warm = tmp_path / "cache-warm"
    first = _audit(root, warm, workers=1)
    assert first.summary["shards"] == 9
    # one shard changes: it misses, the others hit
    pl.DataFrame({"text": ["changed", "s0 row 1"], "label": [0, 1]}).write_parquet(root / "shard-00004-of-00006.parquet")
    c1, c2 = tmp_path / "c1", tmp_path / "c2"
    shutil.copytree(warm, c1)
    shutil.copytree(warm, c2)
    p1: list = []
    p2: list = []
    r1 = _audit(root, c1, workers=1, progress=p1)
    r2 = _audit(root, c2, workers=2, progress=p2)
    assert normalized(r1.to_json()) == normalized(r2.to_json())
    assert p1 == p2 and [c[1] for c in p2] == list(range(1, 10)) and {c[2] for c in p2} == {9}
    checks = {f["check"] for f in r2.to_dict()["findings"]}
    assert {"dup.exact_across_shards", "dup.shard"} <= checks
    shard_checks = {s["path"]: {f["check"] for f in s["findings"]} for s in r2.to_dict()["shards"]}
    assert "decode.unreadable" in shard_checks["broken.parquet"]
    # the workers wrote the changed shard's entry: both caches hold the same entry names
    names1 = sorted(p.name for p in c1.rglob("*.dcr"))
    names2 = sorted(p.name for p in c2.rglob("*.dcr"))
    assert names1 == names2 and len(names1) == len(list(warm.rglob("*.dcr"))) + 1
    # a third run over the pool's cache is answered from it entirely
    cache = ShardCache(c2, CFG)
    from datacheck.execute.audit import audit_shards
    from datacheck.formats.discovery import discover

    disc = discover([str(root)], CFG.dataset.format)
    again = audit_shards(disc, CFG, cache=cache, workers=2, executor="process")
    assert cache.stats.hits == 9 and cache.stats.misses == 0 and cache.stats.writes == 0
    assert len(cache.used) == 9 and [r.path for r in again] == [s.rel for s in disc.shards]


@pytest.mark.slow
def test_cli_workers_flag_same_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _dataset(tmp_path / "data")
    out1, out2 = tmp_path / "r1.json", tmp_path / "r2.json"
    a = cli("audit", str(root), "--no-cache", "--workers", "1", "--output", str(out1),
            "--report-dir", str(tmp_path / "rep"), "--format", "json", monkeypatch=monkeypatch)
    b = cli("audit", str(root), "--no-cache", "--workers", "2", "--executor", "process", "--output", str(out2),
            "--report-dir", str(tmp_path / "rep2"), "--format", "json", monkeypatch=monkeypatch)
    assert a.returncode == b.returncode == 1
    assert normalized(out1.read_text()) == normalized(out2.read_text())


@pytest.mark.parametrize("argv", [["--workers", "0"], ["--workers", "two"], ["--executor", "slurm"],
                                  ["--executor", "local", "--workers", "2"]])
def test_cli_bad_worker_flags_are_usage_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv) -> None:
    root = _dataset(tmp_path / "data")
    r = cli("audit", str(root), "--no-cache", "--report-dir", str(tmp_path / "rep"), *argv, monkeypatch=monkeypatch)
    assert r.returncode == 2
    assert ("--workers" in r.stderr) or ("--executor" in r.stderr)


def test_make_executor_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_WORKERS, raising=False)
    cores = len(os.sched_getaffinity(0))
    assert default_workers() == cores
    assert isinstance(make_executor(None, None, 1), LocalExecutor)  # one shard: no pool
    assert isinstance(make_executor(None, 1, 50), LocalExecutor)
    ex = make_executor(None, 4, 3)
    assert isinstance(ex, ProcessExecutor) and ex.workers == 3  # never more workers than shards
    assert make_executor("process", 1, 5).workers == 1
    monkeypatch.setenv(ENV_WORKERS, "3")
    assert default_workers() == 3 and make_executor(None, None, 10).workers == 3
    monkeypatch.setenv(ENV_WORKERS, "zero")
    with pytest.raises(UsageError, match=ENV_WORKERS):
        default_workers()
    with pytest.raises(UsageError, match="--executor process"):
        make_executor("local", 2, 5)
    with pytest.raises(UsageError, match="expected one of"):
        make_executor("slurm", None, 5)


def _square_or_die(x: int) -> int:
    if x == 3:
        os._exit(9)  # a worker killed mid-task (as by the OOM killer)
    return x * x


def _square(x: int) -> int:
    return x * x


@pytest.mark.slow
def test_process_executor_order_and_dead_worker() -> None:
    assert list(ProcessExecutor(2).map(_square, list(range(7)))) == [0, 1, 4, 9, 16, 25, 36]
    got = []
    with pytest.raises(WorkerDied) as exc:
        for v in ProcessExecutor(2).map(_square_or_die, list(range(6))):
            got.append(v)
    assert 3 in exc.value.pending and got == [0, 1, 4, 9, 16, 25][:len(got)]
    assert exc.value.pending[0] == len(got) and all(len(got) <= j < 6 for j in exc.value.pending)
