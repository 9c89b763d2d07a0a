"""``--executor ray``: one Ray task per shard gives the same report (``created_at`` aside) as the
local and process executors over a multi-shard dataset with cross-shard duplicates and an
unreadable shard; without ray the flag is exit 2 naming the ``datacheck[ray]`` extra.

Ray is started locally once for the module (``ray.init(num_cpus=2, include_dashboard=False)``); the
tests are skipped, with the reason, only when ray is not installed or cannot start here."""
from __future__ import annotations

import builtins
import os
import signal
import sys
import warnings
from pathlib import Path

import polars as pl
import pytest
from gatehelp import cli, normalized, write_dataset  # noqa: E402

from datacheck.execute.audit import audit, audit_shards  # noqa: E402
from datacheck.execute.cache import ShardCache  # noqa: E402
from datacheck.execute.executors import RayExecutor, make_executor  # noqa: E402
from datacheck.formats.discovery import discover  # noqa: E402
from datacheck.model.config import config_from_dict  # noqa: E402
from datacheck.model.errors import OptionalDependencyError, UsageError  # noqa: E402

CFG = config_from_dict({"labels": {"num_classes": 3}})


def _dataset(root: Path) -> Path:
    write_dataset(root, n_shards=4, rows=8)
    src = pl.read_parquet(root / "shard-00001-of-00005.parquet")
    pl.concat([src.reverse().head(3), pl.DataFrame({"text": ["only here"], "label": [2]})]).write_parquet(
        root / "mixed.parquet")
    (root / "broken.parquet").write_bytes(b"PAR1 this is not a parquet file")
    return root


def _process_state() -> tuple[dict, dict[str, str], list[str], list]:
    """What ``ray.init`` changes in the calling process and ``ray.shutdown`` leaves changed: the signal
    handlers (SIGTERM: Ray's handler, which calls ``sys.exit``), ``os.environ`` (``RAY_*``,
    ``PYTHONBREAKPOINT``), ``sys.path`` and the warning filters."""
    handlers = {}
    for sig in signal.valid_signals():
        try:
            handlers[sig] = signal.getsignal(sig)
        except (OSError, ValueError):
            continue
    return handlers, dict(os.environ), list(sys.path), list(warnings.filters)


def _restore(state: tuple[dict, dict[str, str], list[str], list]) -> None:
    handlers, environ, path, filters = state
    for sig, handler in handlers.items():
        if handler is not None and signal.getsignal(sig) != handler:
            signal.signal(sig, handler)
    os.environ.clear()
    os.environ.update(environ)
    sys.path[:] = path
    warnings.filters[:] = filters


@pytest.fixture(scope="module")
def ray_local():
    """Ray started in this (pytest's) process for the module, and this process as it was afterwards: a
    later test of this worker sees the SIGTERM handler, environment and ``sys.path`` it had before
    (left with Ray's SIGTERM handler, the in-process SIGTERM tests of the CLI ended the worker)."""
    ray = pytest.importorskip("ray", reason="ray is not installed (the datacheck[ray] extra)")
    before = _process_state()
    try:
        ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING", log_to_driver=False)
    except Exception as exc:  # noqa: BLE001 - any failure to start ray here skips with the reason
        _restore(before)
        pytest.skip(f"ray cannot start on this machine: {exc}")
    yield ray
    ray.shutdown()
    _restore(before)


@pytest.mark.slow
def test_ray_report_equals_local_and_process(tmp_path: Path, ray_local) -> None:
    root = _dataset(tmp_path / "data")
    local = audit([root], CFG, workers=1, executor="local", config_path=None)
    proc = audit([root], CFG, workers=2, executor="process", config_path=None)
    progress: list = []
    viaray = audit([root], CFG, workers=2, executor="ray", config_path=None,
                   progress=lambda rel, done, total: progress.append((rel, done)))
    assert local.summary["shards"] == 8
    assert normalized(local.to_json()) == normalized(proc.to_json()) == normalized(viaray.to_json())
    assert [p[1] for p in progress] == list(range(1, 9))  # discovery order
    assert [p[0] for p in progress] == [s["path"] for s in viaray.to_dict()["shards"]]
    checks = {f["check"] for f in viaray.to_dict()["findings"]}
    assert {"dup.exact_across_shards", "dup.shard"} <= checks
    shard_checks = {s["path"]: {f["check"] for f in s["findings"]} for s in viaray.to_dict()["shards"]}
    assert "decode.unreadable" in shard_checks["broken.parquet"]
    assert ray_local.is_initialized()  # a Ray the caller started is left running


@pytest.mark.slow  # its module fixture takes 2 s or more
def test_ray_cache_written_by_tasks(tmp_path: Path, ray_local) -> None:
    root = _dataset(tmp_path / "data")
    cache = tmp_path / "cache"
    first = audit([root], CFG, workers=2, executor="ray", cache_dir=cache, config_path=None)
    assert len(list(cache.rglob("*.dcr"))) == first.summary["shards"] == 8  # written by the Ray tasks
    again = audit([root], CFG, workers=1, executor="local", cache_dir=cache, config_path=None)
    assert normalized(first.to_json()) == normalized(again.to_json())
    sc = ShardCache(cache, CFG)
    results = audit_shards(discover([str(root)], CFG.dataset.format), CFG, cache=sc, workers=2, executor="ray")
    assert sc.stats.hits == 8 and sc.stats.misses == 0 and len(results) == 8  # counters came back from the tasks


@pytest.mark.slow  # its module fixture takes 2 s or more
def test_ray_task_exception_reaches_caller(ray_local) -> None:
    ex = RayExecutor(2)
    inverse = lambda x: 1 / x  # noqa: E731 - a lambda travels to the Ray workers by value
    assert list(ex.map(inverse, [4, 2, 1])) == [0.25, 0.5, 1.0]  # in the items' order
    with pytest.raises(ZeroDivisionError):
        list(ex.map(inverse, [1, 0]))


def test_ray_address_needs_ray_executor() -> None:
    with pytest.raises(UsageError, match="--executor ray"):
        make_executor("process", 2, 4, ray_address="auto")


def test_without_ray_exit_2_names_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def no_ray(name, *args, **kwargs):
        if name == "ray" or name.startswith("ray."):
            raise ImportError("No module named 'ray'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    with pytest.raises(OptionalDependencyError) as info:
        make_executor("ray", 2, 4)
    msg = str(info.value)
    assert "datacheck[ray]" in msg and 'pip install "ray>=2.9"' in msg
    root = _dataset(tmp_path / "data")
    r = cli("audit", str(root), "--no-cache", "--report-dir", str(tmp_path / "rep"), "--executor", "ray",
            monkeypatch=monkeypatch)
    assert r.returncode == 2 and "datacheck[ray]" in r.stderr and 'pip install "ray>=2.9"' in r.stderr
