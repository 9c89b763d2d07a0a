"""Executors: map a function over work items and give back the results, in the items' order.

An executor knows nothing of shards, checks, caches or reports; :mod:`datacheck.execute.audit`
hands it one picklable job per shard and receives one picklable outcome per job. The order of the
results is the order of the items whatever finishes first, so a report built from them is the
same for any number of workers.

- ``local`` (:class:`LocalExecutor`): in this process, one item after the other (``--workers 1``).
- ``process`` (:class:`ProcessExecutor`): a :class:`concurrent.futures.ProcessPoolExecutor` of
  ``workers`` processes started with the ``spawn`` method (polars' thread pool is not fork-safe,
  and spawn is what macOS and Windows use anyway), so the mapped function and its items must be
  module-level and picklable. Each worker's polars thread pool is sized ``cores // workers``
  (at least 1) through ``POLARS_MAX_THREADS``, set for the children only while they start,
  unless the caller already set that variable: N workers with a full pool each would run
  N x cores threads on cores cores.

The default number of workers is the number of cores this process may run on
(``os.process_cpu_count()`` on Python >= 3.13, else ``len(os.sched_getaffinity(0))``, else
``os.cpu_count()``), or the value of the environment variable ``DATACHECK_WORKERS`` when set.
"""
from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Protocol, Sequence, TypeVar

from datacheck.model.errors import UsageError

__all__ = ["ENV_WORKERS", "EXECUTORS", "Executor", "LocalExecutor", "ProcessExecutor", "WorkerDied",
           "cpu_cores", "default_workers", "make_executor"]

#: Environment variable giving the default number of workers (``--workers`` and ``workers=`` win).
ENV_WORKERS = "DATACHECK_WORKERS"
#: The executor names ``--executor`` accepts.
EXECUTORS = ("local", "process")

T = TypeVar("T")
R = TypeVar("R")


class WorkerDied(RuntimeError):
    """A worker process ended without returning a result (killed for memory, a crash in native code).

    ``pending`` lists the positions of the items left without a result when the pool broke (the
    one the dead worker held is among them; a process pool cannot tell which).
    """

    def __init__(self, pending: list[int], message: str):
        super().__init__(message)
        self.pending = pending


class Executor(Protocol):
    """``map(fn, items)`` yields ``fn(item)`` for every item, in the items' order."""

    name: str
    workers: int

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> Iterator[R]: ...


def cpu_cores() -> int:
    """The number of cores this process may run on (affinity-aware; at least 1)."""
    count = getattr(os, "process_cpu_count", None)
    if count is not None:
        n = count()
    elif hasattr(os, "sched_getaffinity"):
        n = len(os.sched_getaffinity(0))
    else:
        n = os.cpu_count()
    return max(1, n or 1)


def default_workers() -> int:
    """``$DATACHECK_WORKERS`` when set (a positive integer), else :func:`cpu_cores`.

    Raises:
        UsageError: ``DATACHECK_WORKERS`` is set to something other than a positive integer.
    """
    raw = os.environ.get(ENV_WORKERS, "").strip()
    if not raw:
        return cpu_cores()
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n < 1:
        raise UsageError(f"{ENV_WORKERS}={raw!r}: expected a positive integer (the number of worker processes); "
                         f"unset it to use one worker per core ({cpu_cores()} here)")
    return n


class LocalExecutor:
    """Runs every item in this process, in order (no pickling, no start-up cost)."""

    name = "local"
    workers = 1

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> Iterator[R]:
        for item in items:
            yield fn(item)


@contextmanager
def _child_env(name: str, value: str) -> Iterator[None]:
    """Set ``name`` in ``os.environ`` for the children started inside the block (kept when the
    caller set it already)."""
    if name in os.environ:
        yield
        return
    os.environ[name] = value
    try:
        yield
    finally:
        os.environ.pop(name, None)


class ProcessExecutor:
    """A pool of ``workers`` spawned processes (see the module docstring).

    Args:
        workers: number of processes (>= 1).

    Raises:
        UsageError: ``workers`` < 1.
    """

    name = "process"

    def __init__(self, workers: int):
        if workers < 1:
            raise UsageError(f"workers={workers}: expected at least 1 worker process")
        self.workers = workers

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> Iterator[R]:
        """Yield ``fn(item)`` in the items' order; every item is submitted at once (one item per
        task, so a large shard does not hold back a batch of small ones).

        Raises:
            WorkerDied: a worker process died (``pending``: the items left without a result).
            Exception: whatever ``fn`` raised in the worker, re-raised here for that item.
        """
        items = list(items)
        if not items:
            return
        threads = str(max(1, cpu_cores() // self.workers))
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=min(self.workers, len(items)), mp_context=ctx) as pool:
            with _child_env("POLARS_MAX_THREADS", threads):  # spawned children start during the submits
                futures: list[Future[Any]] = [pool.submit(fn, item) for item in items]
            try:
                for fut in futures:
                    try:
                        result = fut.result()
                    except BrokenProcessPool:
                        pending = [j for j, f in enumerate(futures) if f.exception() is not None
                                   and isinstance(f.exception(), BrokenProcessPool)]
                        raise WorkerDied(pending, "a worker process ended without a result (killed for memory, "
                                                  "or a crash in native code)") from None
                    yield result
            finally:
                for fut in futures:
                    fut.cancel()


def make_executor(executor: str | None, workers: int | None, units: int) -> Executor:
    """The executor for ``units`` items of work.

    Args:
        executor: ``"local"``, ``"process"`` or None (``process`` when more than one worker would
            have work, else ``local``).
        workers: the requested number of workers, or None for :func:`default_workers`. Never more
            workers than ``units`` are started.
        units: the number of items to map (e.g. shards).

    Raises:
        UsageError: an unknown executor, ``workers`` < 1, or ``executor="local"`` with ``workers`` > 1.
    """
    if executor is not None and executor not in EXECUTORS:
        raise UsageError(f"executor {executor!r}: expected one of {', '.join(EXECUTORS)}")
    if workers is not None and workers < 1:
        raise UsageError(f"--workers {workers}: expected a positive number of worker processes (1: in this process)")
    if executor == "local":
        if workers is not None and workers > 1:
            raise UsageError(f"--executor local runs in this process: --workers {workers} needs --executor process")
        return LocalExecutor()
    n = min(workers if workers is not None else default_workers(), max(1, units))
    if executor == "process":
        return ProcessExecutor(n)
    return ProcessExecutor(n) if n > 1 else LocalExecutor()

