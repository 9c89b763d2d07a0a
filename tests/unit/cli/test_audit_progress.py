"""Progress is over the bytes of the shard set (sizes from the file system, known before the first shard is read), with
the shard being read named."""
from __future__ import annotations

import multiprocessing
import os
import re
import shutil
import subprocess
import sys

import polars as pl
import pytest

import datacheck


def _data(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    pl.DataFrame({"text": [f"a{i}" for i in range(1000)]}).write_parquet(d / "a.parquet")
    (d / "b.jsonl").write_text("".join(f'{{"text": "b{i}"}}\n' for i in range(300)))
    return d


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2])
def test_byte_progress_knows_the_total_before_the_first_shard(tmp_path, workers):
    d = _data(tmp_path)
    sizes = {"a.parquet": (d / "a.parquet").stat().st_size, "b.jsonl": (d / "b.jsonl").stat().st_size}
    total = sum(sizes.values())
    calls: list[tuple[str, int, int]] = []
    datacheck.audit([str(d)], config={}, workers=workers, byte_progress=lambda *a: calls.append(a))
    assert {t for _, _, t in calls} == {total}
    if workers == 1:  # in this process: before and after each shard
        assert calls == [("a.parquet", 0, total), ("a.parquet", sizes["a.parquet"], total),
                         ("b.jsonl", sizes["a.parquet"], total), ("b.jsonl", total, total)]
    else:  # worker processes: after each shard, in discovery order
        assert calls == [("a.parquet", sizes["a.parquet"], total), ("b.jsonl", total, total)]


@pytest.mark.skipif(shutil.which("script") is None, reason="needs util-linux script(1) for a pseudo-terminal")
def test_bar_on_one_shard_shows_its_size_and_name(tmp_path):
    (tmp_path / "data").mkdir()
    shard = tmp_path / "data" / "big.parquet"  # the report folder must not sit beside an audited file
    pl.DataFrame({"text": [f"hello {i}" for i in range(50_000)]}).write_parquet(shard)
    kb = shard.stat().st_size / 1000
    cmd = f"{sys.executable} -m datacheck audit {shard} --no-cache --report-dir {tmp_path / 'r'}"
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["TERM"] = "xterm"
    p = subprocess.run(["script", "-qec", cmd, "/dev/null"], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stdout
    frames = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", p.stdout)
    assert "/?" not in frames
    assert re.search(rf"auditing \S* 0\.0/{kb:.1f} kB\s+\S+ big\.parquet", frames), frames[:500]
    assert re.search(rf"{kb:.1f}/{kb:.1f} kB 1/1 shards", frames)


def test_the_bar_runs_no_thread_before_its_first_call():
    """The display's refresh thread starts with the first byte count (after a process pool has
    started: its workers are forked from a process with no thread of its own). Threads are compared
    as sets: one that an earlier test left ending (rich's refresh thread is stopped, not joined) may
    end at any moment."""
    import threading

    from datacheck.cli.commands.audit import _bar

    before = set(threading.enumerate())
    with _bar() as (tick, tick_bytes):
        tick("a.parquet", 0, 2)  # a shard count alone shows nothing yet
        assert set(threading.enumerate()) - before == set()
        tick_bytes("a.parquet", 10, 20)
        started = set(threading.enumerate()) - before
        assert len(started) == 1
    with _bar():  # never called: nothing started, nothing to stop (the first display's thread may be ending)
        assert set(threading.enumerate()) - before <= started


def test_progress_comes_after_the_pool_started_when_the_cache_answers_the_first_shards(tmp_path):
    """A warm cache answers the first shards (new shards sort last): their progress is reported
    once the pool's workers run, not before, so a progress bar's display thread never runs in the
    process the workers are forked from."""
    d = tmp_path / "d"
    d.mkdir()
    for name in ("a", "b"):
        pl.DataFrame({"text": [f"{name}{i}" for i in range(200)]}).write_parquet(d / f"{name}.parquet")
    cache = tmp_path / "cache"
    datacheck.audit([str(d)], config={}, workers=1, cache_dir=cache)
    for name in ("c", "e"):  # two misses after two hits
        pl.DataFrame({"text": [f"{name}{i}" for i in range(200)]}).write_parquet(d / f"{name}.parquet")
    seen: list[tuple[str, int]] = []

    def note(path, done, total):
        seen.append((path, len(multiprocessing.active_children())))

    report = datacheck.audit([str(d)], config={}, workers=2, executor="process", cache_dir=cache,
                             byte_progress=note, progress=note)
    # byte_progress then progress, after each shard, in discovery order
    assert [p for p, _ in seen] == [p for name in "abce" for p in (f"{name}.parquet", f"{name}.parquet")]
    assert all(n > 0 for _, n in seen), seen  # the workers were running at every call
    assert [s.path for s in report.shards] == ["a.parquet", "b.parquet", "c.parquet", "e.parquet"]
