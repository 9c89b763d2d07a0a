"""Executors: map a function over work items and give back the results, in the items' order.

An executor knows nothing of shards, checks, caches or reports; :mod:`datacheck.execute.audit`
hands it one picklable job per shard and receives one picklable outcome per job. The order of the
results is the order of the items whatever finishes first, so a report built from them is the
same for any number of workers.

- ``local`` (:class:`LocalExecutor`): in this process, one item after the other (``--workers 1``).
- ``process`` (:class:`ProcessExecutor`): a :class:`concurrent.futures.ProcessPoolExecutor` of
  ``workers`` processes, so the mapped function and its items must be module-level and picklable.
  The workers are started with the ``fork`` method where that is safe (:func:`fork_is_safe`: on
  Linux, while this process runs no thread but its main one and the idle ones that importing
  polars and pyarrow starts, i.e. before any polars or pyarrow thread pool, Python thread or BLAS
  thread exists): a forked worker has every module this process imported and starts in a few
  milliseconds, where a spawned one imports datacheck, polars, pyarrow and numpy again (about
  0.7 CPU s a worker on the benchmark machine). A process that has run a polars query or holds a
  thread of its own (a notebook, a training script) is not forked (a thread pool's threads do not
  survive a fork and the locks they held stay held in the child): on Linux its workers are forked
  from Python's fork server (``forkserver``), a process started once, the first time, that imports
  the mapped function's module (one import in all, not one a worker) and stays, idle, for the
  rest of the caller's life; each worker takes the caller's environment as it is when the pool
  starts (:func:`_worker_start`), not the server's. Elsewhere (macOS,
  Windows) they are started with the ``spawn`` method. Each worker's polars thread
  pool is sized ``cores // workers`` (at least 1) through ``POLARS_MAX_THREADS``, set for the
  children only while they start, unless the caller already set that variable (a forked worker
  has polars imported already and reads its variables again, :func:`_worker_start`, before its
  pool is built): N workers with a full pool each would run N x cores threads on cores cores. The
  workers never import the caller's main script: while they start, ``sys.modules["__main__"]`` is
  a bare stand-in (:func:`_main_hidden`), so a spawned child has no main module to re-run (a
  forked one runs none). A launch script may call :func:`datacheck.audit` at its top level,
  without an ``if __name__ == "__main__":`` guard (a spawn pool's children otherwise re-run the
  script, which starts the audit again and breaks the pool). The mapped function and its items
  live in datacheck's modules, which spawned children import by name. Every worker ends when the
  caller's process ends, also when that process is killed (:func:`_die_with_caller`): no worker
  (or fork server) is left waiting for work that will never come.
- ``ray`` (:class:`RayExecutor`, the ``datacheck[ray]`` extra: ``ray>=2.9``): one Ray task per item,
  retried up to ``max_retries`` times when the worker running it dies (``ray.remote(max_retries=...)``:
  a system failure such as a node lost or a process killed for memory; an exception raised by the
  mapped function is not retried, and :func:`datacheck.execute.audit.run_job` raises none for a bad
  shard). Results are gathered in the items' order. Without an address Ray is started in this
  process with ``ray.init(num_cpus=workers)`` and shut down after the map; with ``address``
  (``--ray-address``, e.g. ``ray://head:10001`` or ``auto``) the map joins that cluster, whose nodes
  must have the same datacheck version installed (the cache's code fingerprint and the report depend
  on it) and must see the shards at the same paths (or read them from an object store URL).

The default number of workers is the number of cores this process may run on
(``os.process_cpu_count()`` on Python >= 3.13, else ``len(os.sched_getaffinity(0))``, else
``os.cpu_count()``), or the value of the environment variable ``DATACHECK_WORKERS`` when set.
"""
from __future__ import annotations

import importlib
import json
import multiprocessing
import os
import select
import signal
import sys
import tempfile
import threading
import time
import types
import warnings
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Protocol, Sequence, TypeVar

from datacheck.model.constants import ENV_WORKERS, EXECUTORS
from datacheck.model.errors import OptionalDependencyError, UsageError

__all__ = ["ENV_WORKERS", "EXECUTORS", "Executor", "LocalExecutor", "ProcessExecutor", "RayExecutor", "WorkerDied",
           "LOCAL_BYTES", "RAY_INSTALL_HINT", "cpu_cores", "default_workers", "fork_is_safe", "make_executor",
           "require_ray", "start_method"]

#: what to install for ``--executor ray``: the ``datacheck[ray]`` extra, named in words, and the commands that
#: work (the PyPI name ``datacheck`` is another project's: tests/contract/test_install_instructions.py).
RAY_INSTALL_HINT = ('the datacheck[ray] extra is not installed: pip install "ray>=2.9" '
                    '(or pip install -e ".[ray]" from datacheck\'s source folder)')
#: Ray task retries after the worker running a task died (``ray.remote(max_retries=...)``; Ray's default is 3).
RAY_MAX_RETRIES = 3

T = TypeVar("T")
R = TypeVar("R")


_DIED = "a worker process ended without a result (killed for memory, or a crash in native code)"


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


@contextmanager
def _main_hidden() -> Iterator[None]:
    """Within the block, ``sys.modules["__main__"]`` is a bare module with no file and no spec.

    A process started with the ``spawn`` (or ``forkserver``) method receives the parent's main
    module's file or module name (``multiprocessing.spawn.get_preparation_data``) and runs it again
    as ``__mp_main__`` before it unpickles its work; with the stand-in in place there is none to
    run. The real main module is restored on exit, also when the block raises. Only the calling
    thread's process starts happen inside the block (a ``ProcessPoolExecutor`` with the ``spawn``
    method starts its workers in ``submit``)."""
    real = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        if real is not None:
            sys.modules["__main__"] = real
        else:
            sys.modules.pop("__main__", None)


#: the names (``/proc/self/task/*/comm``, 15 characters at most) of the native threads that importing
#: polars and pyarrow starts and that wait idle, holding no lock a worker needs, until asked: jemalloc's
#: background purge threads (pyarrow's and polars' allocators; jemalloc takes and releases its own locks
#: around a fork) and polars' spill-file cleaner (it waits on a channel; a forked worker that spills
#: leaves its spill files to the next polars process's clean-up of dead processes' folders)
IDLE_THREADS = frozenset({"jemalloc_bg_thd", "polars-ooc-clea"})
#: how often :func:`fork_is_safe` looks again while another Python thread runs (one ending: a pool's
#: manager thread just after the pool closed) or a native thread still carries the process's own name
#: (one just started, not named yet), and the pause between two looks (seconds): at most 0.1 s
NAME_LOOKS = 10
NAME_WAIT_S = 0.01


def fork_is_safe() -> bool:
    """True when a worker forked from this process now starts in a sound state: on Linux, the
    calling thread is this process's only Python thread and every other native thread is one of
    :data:`IDLE_THREADS` (no polars or pyarrow thread pool has started, no BLAS thread, no thread
    of the caller's). A thread pool's threads are not copied by ``fork`` and a lock one of them
    held stays held in the child, which can then deadlock; a process that has run a polars query
    or a pyarrow read has such threads, so False there. False where ``/proc`` cannot be read.
    While another Python thread runs or a native thread still carries the process's own name, it
    looks again (:data:`NAME_LOOKS` times, :data:`NAME_WAIT_S` apart): a thread ending or starting
    settles within that; a thread of another name answers False at once."""
    if not sys.platform.startswith("linux"):
        return False
    for look in range(NAME_LOOKS):
        if threading.active_count() != 1:  # another Python thread; one that is ending (a pool's manager
            if look == NAME_LOOKS - 1:     # thread just after the pool closed) is gone at a next look
                return False
            time.sleep(NAME_WAIT_S)
            continue
        try:
            names = []
            for tid in os.listdir("/proc/self/task"):
                with open(f"/proc/self/task/{tid}/comm", encoding="utf-8", errors="replace") as f:
                    names.append(f.read().strip())
            with open("/proc/self/comm", encoding="utf-8", errors="replace") as f:
                own = f.read().strip()
        except OSError:
            return False
        others = [name for name in names if name not in IDLE_THREADS]
        if len(others) == 1:
            return True
        # a native thread that importing polars/pyarrow has just started carries this process's name
        # until it names itself: look again shortly; any other thread answers at once
        if any(name != own for name in others) or look == NAME_LOOKS - 1:
            return False
        time.sleep(NAME_WAIT_S)
    return False


#: the longest path a Unix socket's address holds (Linux ``<sys/un.h>``: ``sun_path[108]``, its NUL included)
UNIX_PATH_MAX = 107
#: what the fork server's listening socket adds to the temporary folder: ``/pymp-XXXXXXXX/listener-XXXXXXXX``
#: (``multiprocessing.util.get_temp_dir`` and ``multiprocessing.connection.arbitrary_address``, CPython 3.11)
_LISTENER_SUFFIX = len("/pymp-") + 8 + len("/listener-") + 8


def _forkserver_fits() -> bool:
    """The fork server can bind its socket under the temporary folder ($TMPDIR): a longer path
    makes it fail with ``OSError: AF_UNIX path too long`` when the pool starts."""
    return len(os.fsencode(tempfile.gettempdir())) + _LISTENER_SUFFIX <= UNIX_PATH_MAX


def start_method() -> str:
    """How :class:`ProcessExecutor` starts its workers: ``"fork"`` when :func:`fork_is_safe`; else,
    on Linux, ``"forkserver"``: a server process started once (the first time, for the rest of
    this process's life) imports the mapped function's module and forks each worker from itself,
    a process that has only imported modules (one import in all instead of one a worker), unless
    the temporary folder's path is too long for its socket (:func:`_forkserver_fits`); elsewhere
    ``"spawn"``."""
    if fork_is_safe():
        return "fork"
    if (sys.platform.startswith("linux") and "forkserver" in multiprocessing.get_all_start_methods()
            and _forkserver_fits()):
        return "forkserver"
    return "spawn"


#: ``prctl`` option that asks Linux to send this process a signal when its parent ends (``<linux/prctl.h>``)
PR_SET_PDEATHSIG = 1
#: seconds between two looks of a worker's watch thread at whether the caller still runs (where the
#: kernel cannot tell it: no ``pidfd_open``, Linux < 5.3 or not Linux)
WATCH_EVERY_S = 1.0


def _pdeathsig() -> bool:
    """Linux: ask the kernel to SIGKILL this process when its parent ends; True when that is set."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
    except (OSError, AttributeError):  # no C library to load, or no prctl in it
        return False


def _watch(caller: int) -> None:
    """A daemon thread that SIGKILLs this process once process ``caller`` has ended: it waits on the
    caller's pidfd (``os.pidfd_open``, Linux >= 5.3), else looks every :data:`WATCH_EVERY_S`
    seconds (``os.kill(caller, 0)``, and, for a child of the caller, whether it was handed to
    another parent: a caller ended but not yet reaped still answers ``kill``); a caller already
    gone is noticed at the first look."""
    child = os.getppid() == caller
    try:
        fd: int | None = os.pidfd_open(caller)  # type: ignore[attr-defined, unused-ignore]
    except (AttributeError, OSError):
        fd = None

    def watch() -> None:
        if fd is not None:
            select.select([fd], [], [])
        else:
            while not (child and os.getppid() != caller):
                try:
                    os.kill(caller, 0)
                except ProcessLookupError:
                    break
                except OSError:  # alive, owned by another user
                    pass
                time.sleep(WATCH_EVERY_S)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="datacheck-watch", daemon=True).start()


def _die_with_caller(caller: int) -> None:
    """Make this worker end when the audit's process ``caller`` ends. A pool worker otherwise waits
    for its next task forever once that process is killed (``kill PID``, the OOM killer, a
    scheduler's SIGTERM to the main process only), holding its memory; a worker of the fork server
    also keeps the server alive (it holds the server's liveness pipe). A worker whose parent is the
    caller (forked by it) gets the kernel's parent-death signal (``prctl(PR_SET_PDEATHSIG)``); any
    other (a worker of the fork server, or where ``prctl`` is missing) a watch thread
    (:func:`_watch`). SIGKILL, not SIGTERM: a forked worker inherits the caller's signal handlers,
    and a training script's SIGTERM handler would keep it alive. A worker whose parent ended before
    the signal was set is caught by the check after it."""
    if os.getppid() == caller and _pdeathsig() and os.getppid() == caller:
        return
    _watch(caller)


def _default_signals() -> None:
    """Give every signal this process handles in Python its interpreter default again: SIGINT
    raises KeyboardInterrupt, any other ends the process (``SIG_DFL``); ignored ones stay ignored.
    A forked worker inherits the caller's handlers (a training script's SIGTERM handler that only
    notes a preemption), and a pool whose worker died ends the others with SIGTERM: a worker that
    kept the caller's handler would go on auditing the shards queued to it first, and a SIGTERM
    sent to the whole process group would not end it. A spawned worker starts with the defaults."""
    for sig in signal.valid_signals():
        try:
            handler = signal.getsignal(sig)
        except (OSError, ValueError):
            continue
        if callable(handler) and handler is not signal.default_int_handler:
            signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)


def _worker_start(threads: str | None, environ: dict[str, str], caller: int | None = None) -> None:
    """The initializer of every pool worker: the worker handles signals as a fresh interpreter
    does (:func:`_default_signals`), ends when the caller's process ``caller`` ends
    (:func:`_die_with_caller`; None: not watched) and takes the caller's environment as it is
    now (a worker of the fork server would otherwise have the server's, that of the moment the server
    started; its working folder and ``sys.path`` multiprocessing sets from the caller's), with
    ``POLARS_MAX_THREADS`` set to ``threads`` (None: the caller set it, and the environment carries
    it). A worker forked from this process or from the fork server has polars imported already,
    its settings read from the environment then: polars reads them again here, before its thread
    pool is first built; a spawned worker reads them at import."""
    _default_signals()
    if caller is not None:
        _die_with_caller(caller)
    if os.environ != environ:
        os.environ.clear()
        os.environ.update(environ)
    if threads is not None:
        os.environ["POLARS_MAX_THREADS"] = threads
    if "polars" in sys.modules:
        try:  # reads every POLARS_* variable again
            sys.modules["polars"].Config.load(json.dumps({"environment": {}}))
        except Exception:  # noqa: BLE001, S110 - a polars without it keeps the pool size read at import
            pass


class ProcessExecutor:
    """A pool of ``workers`` processes, forked from this process where that is safe, else from a fork
    server (Linux) or spawned (see the module docstring and :func:`start_method`).

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

    def map(self, fn: Callable[[T], R], items: Sequence[T], preload: Sequence[str] = ()) -> Iterator[R]:
        """Yield ``fn(item)`` in the items' order; every item is submitted at once (one item per
        task, so a large shard does not hold back a batch of small ones). ``preload``: modules
        ``fn`` imports on first use (:func:`_preload`), imported here once before the workers are
        forked from this process (each worker would import them again), or by the fork server.

        Raises:
            WorkerDied: a worker process died (``pending``: the items left without a result).
            Exception: whatever ``fn`` raised in the worker, re-raised here for that item.
        """
        items = list(items)
        if not items:
            return
        threads = str(max(1, cpu_cores() // self.workers))
        method = start_method()
        if method == "fork" and preload:
            _preload(preload)
            if not fork_is_safe():  # an import that started a thread would make a fork unsound
                method = start_method()
        ctx = multiprocessing.get_context(method)
        if method == "forkserver":  # read when the server starts (once): it imports the function's module
            ctx.set_forkserver_preload([fn.__module__, *preload])
        given = "POLARS_MAX_THREADS" in os.environ
        with ProcessPoolExecutor(max_workers=min(self.workers, len(items)), mp_context=ctx, initializer=_worker_start,
                                 initargs=(None if given else threads, dict(os.environ), os.getpid())) as pool:
            with _child_env("POLARS_MAX_THREADS", threads), _main_hidden(), warnings.catch_warnings():
                # Python >= 3.12 warns of a fork in a process with other threads; those are IDLE_THREADS
                warnings.filterwarnings("ignore", message=".*multi-threaded.*fork", category=DeprecationWarning)
                futures: list[Future[Any]] = []
                try:
                    for item in items:
                        futures.append(pool.submit(fn, item))  # children start here
                except BrokenProcessPool:  # a worker died while the rest were still being submitted
                    pass
            unsubmitted = list(range(len(futures), len(items)))
            got = 0  # results taken: the pool's shutdown waits for nothing once all are
            try:
                for fut in futures:
                    try:
                        result = fut.result()
                    except BrokenProcessPool:
                        pending = [j for j, f in enumerate(futures) if isinstance(f.exception(), BrokenProcessPool)]
                        raise WorkerDied(pending + unsubmitted, _DIED) from None
                    got += 1
                    yield result
                if unsubmitted:  # every submitted item came back, and the pool broke before the rest
                    raise WorkerDied(unsubmitted, _DIED)
            finally:
                for fut in futures:
                    fut.cancel()
                if got < len(items):
                    _end_workers(pool)


def _preload(modules: Sequence[str]) -> None:
    """Import ``modules`` (one that is missing or fails to import is left to the worker that needs
    it: these are imports done ahead of time, never new requirements)."""
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001, S112 - the worker's own import says what is wrong
            continue


def _end_workers(pool: ProcessPoolExecutor) -> None:
    """End the workers of ``pool`` now (SIGTERM; a worker handles it with the default action,
    :func:`_default_signals`), when its map is left before every result came: Ctrl-C, SIGTERM in the
    CLI (:class:`datacheck.cli.main.Terminated`), an error of the caller. The pool's shutdown
    otherwise waits for the items the workers are running, a whole shard each, before the audit
    can end and remove its spill folder. ``terminate_workers`` on Python >= 3.14, else each of the
    pool's processes (``_processes``, the pool's own table, on every Python since 3.2)."""
    terminate = getattr(pool, "terminate_workers", None)
    if terminate is not None:
        terminate()
        return
    for proc in list((getattr(pool, "_processes", None) or {}).values()):
        try:
            proc.terminate()
        except (OSError, ValueError):  # already reaped
            pass


def require_ray() -> Any:
    """The ``ray`` module (imported here, lazily: ``import datacheck`` never imports it).

    Raises:
        OptionalDependencyError: ray is not installed or fails to import; the message names the
            ``datacheck[ray]`` extra and ``pip install "ray>=2.9"`` (:data:`RAY_INSTALL_HINT`).
    """
    try:
        import ray
    except ImportError as exc:
        raise OptionalDependencyError(f"--executor ray needs ray ({exc}); {RAY_INSTALL_HINT}") from None
    return ray


class RayExecutor:
    """One Ray task per item (see the module docstring).

    Args:
        workers: CPUs given to a Ray started here (``ray.init(num_cpus=workers)``); ignored when joining
            a cluster (its resources decide).
        address: a Ray cluster to join (``ray.init(address=...)``), or None to start Ray in this process
            (a Ray already initialised by the caller, e.g. a notebook or a test, is used as it is and left
            running).
        max_retries: retries of a task whose worker died (:data:`RAY_MAX_RETRIES` by default).

    Raises:
        OptionalDependencyError: ray is not installed (exit 2 at the CLI, naming the extra).
        UsageError: ``workers`` < 1 or ``max_retries`` < 0.
    """

    name = "ray"

    def __init__(self, workers: int, address: str | None = None, max_retries: int = RAY_MAX_RETRIES):
        if workers < 1:
            raise UsageError(f"workers={workers}: expected at least 1 worker")
        if max_retries < 0:
            raise UsageError(f"max_retries={max_retries}: expected 0 or more retries")
        self.ray = require_ray()
        self.workers = workers
        self.address = address
        self.max_retries = max_retries

    def _start(self) -> bool:
        """Initialise Ray unless it already is; True when this call started it (and must shut it down)."""
        ray = self.ray
        if ray.is_initialized():
            return False
        threads = str(max(1, cpu_cores() // self.workers))
        try:
            if self.address is None:
                env = {} if "POLARS_MAX_THREADS" in os.environ else {"POLARS_MAX_THREADS": threads}
                ray.init(num_cpus=self.workers, include_dashboard=False, logging_level="WARNING",
                         log_to_driver=False, runtime_env={"env_vars": env} if env else None)
            else:
                ray.init(address=self.address, logging_level="WARNING", log_to_driver=False)
        except Exception as exc:  # noqa: BLE001 - Ray raises plain Exception when its node fails to start
            where = f"the Ray cluster at {self.address}" if self.address else "a local Ray instance"
            raise UsageError(f"--executor ray: cannot start or join {where}: {str(exc).splitlines()[0] if str(exc) else exc}"
                             "; check --ray-address (e.g. ray://HEAD:10001, or auto inside a cluster) or run "
                             "--executor process") from None
        return True

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> Iterator[R]:
        """Yield ``fn(item)`` in the items' order; every item is submitted at once as one Ray task.

        When this process has not initialised Ray itself, the Ray driver runs in a child process
        (``spawn``) that sends each result back: Ray ends its driver process with exit 1 when the
        raylet or the dashboard agent dies, and that must end the child, not datacheck. A Ray the
        caller initialised (a notebook, a test) is used here, in this process.

        Raises:
            WorkerDied: a task's worker died ``max_retries + 1`` times, Ray itself failed (raylet,
                dashboard agent, object store), or the driver process ended without a result
                (``pending``: the items without a result at that point).
            Exception: whatever ``fn`` raised for that item (unwrapped from Ray's ``RayTaskError``).
        """
        items = list(items)
        if not items:
            return
        if self.ray.is_initialized():
            yield from self._map_here(fn, items)
        else:
            yield from self._map_isolated(fn, items)

    def _map_here(self, fn: Callable[[T], R], items: list[T]) -> Iterator[R]:
        ray = self.ray
        started = self._start()
        k = 0
        try:
            remote = ray.remote(max_retries=self.max_retries, retry_exceptions=False, num_cpus=1)(fn)
            refs = [remote.remote(item) for item in items]
            for k, ref in enumerate(refs):
                try:
                    result = ray.get(ref)
                except ray.exceptions.RayTaskError as exc:
                    cause = exc.as_instanceof_cause()
                    raise (cause.cause if getattr(cause, "cause", None) is not None else cause) from None
                except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError,
                        ray.exceptions.OutOfMemoryError, ray.exceptions.ObjectLostError) as exc:
                    raise WorkerDied(list(range(k, len(items))),
                                     f"a Ray worker ended without a result after {self.max_retries} retries "
                                     f"({type(exc).__name__})") from None
                yield result
        except (WorkerDied, UsageError, GeneratorExit):
            raise
        except Exception as exc:  # noqa: BLE001 - Ray's own failure (raylet gone, RPC error, object store)
            if _raised_by_fn(exc, ray):
                raise
            raise WorkerDied(list(range(k, len(items))),
                             f"Ray failed while the shards were audited ({type(exc).__name__}: "
                             f"{(str(exc).splitlines() or [''])[0][:200]})") from None
        finally:
            if started:
                try:
                    ray.shutdown()
                except Exception:  # noqa: BLE001, S110 - a Ray already broken cannot shut down cleanly
                    pass

    def _map_isolated(self, fn: Callable[[T], R], items: list[T]) -> Iterator[R]:
        ctx = multiprocessing.get_context("spawn")
        recv, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_ray_driver, args=(send, self.workers, self.address, self.max_retries, fn, items),
                           name="datacheck-ray-driver")
        proc.start()
        send.close()
        k = 0
        try:
            while k < len(items):
                try:
                    kind, payload = recv.recv()
                except EOFError:  # the driver process ended without sending everything
                    break
                if kind == "result":
                    k += 1
                    yield payload
                elif kind == "raise":
                    raise payload
                elif kind == "usage":
                    raise UsageError(payload)
                else:  # "died"
                    raise WorkerDied(list(range(k, len(items))), payload)
            if k < len(items):
                proc.join(30)
                code = proc.exitcode
                raise WorkerDied(list(range(k, len(items))),
                                 f"the Ray driver process ended without a result (exit code {code}; Ray ends its "
                                 "driver when the raylet or the dashboard agent dies)")
        finally:
            recv.close()
            proc.join(120 if k == len(items) else 5)  # the driver shuts Ray down before it ends
            if proc.is_alive():
                proc.terminate()
                proc.join(30)


def _raised_by_fn(exc: BaseException, ray: Any) -> bool:
    """True for an exception of the mapped function itself (unwrapped from ``RayTaskError``): not one
    of Ray's own exception types, nor a connection or RPC error."""
    errors = getattr(getattr(ray, "exceptions", None), "RayError", ())
    if errors and isinstance(exc, errors):
        return False
    return not isinstance(exc, (ConnectionError, OSError)) and type(exc).__module__.split(".")[0] not in ("ray", "grpc")


def _ray_driver(conn: Any, workers: int, address: str | None, max_retries: int, fn: Callable[[Any], Any],
                items: list[Any]) -> None:
    """The child process of :meth:`RayExecutor._map_isolated`: the Ray driver, sending
    ``("result", value)`` per item in order, or ``("raise", exception)`` / ``("died", message)`` /
    ``("usage", message)`` once."""
    import pickle

    try:
        ex = RayExecutor(workers, address, max_retries)
        for result in ex._map_here(fn, items):
            conn.send(("result", result))
    except WorkerDied as exc:
        conn.send(("died", str(exc)))
    except (UsageError, OptionalDependencyError) as exc:
        conn.send(("usage", str(exc)))
    except Exception as exc:  # noqa: BLE001 - the mapped function's own exception, re-raised by the caller
        try:
            pickle.dumps(exc)
            conn.send(("raise", exc))
        except Exception:  # noqa: BLE001 - an exception that does not pickle: its text
            conn.send(("raise", RuntimeError(f"{type(exc).__name__}: {exc}")))
    finally:
        conn.close()


#: With the default workers, work of fewer bytes than this (the files of the shards to audit) is
#: audited in this process: a spawned worker costs about 0.5 s to start (it imports datacheck,
#: polars and numpy) and the audit reads about 25 MB of parquet a CPU second, so a second worker
#: saves less than its start below about 32 MiB (measured on 2 cores: 2 small shards 1.99 s with
#: a pool vs 1.17 s without; 100 shards of 3 MB, 300 MB, 6.95 s vs 9.04 s). A forked worker starts
#: in milliseconds but still pays its first shard's warm-up (the readers' lazy imports, polars'
#: first query: a 5,000 x 256 shard took 0.24-0.28 CPU s first, 0.08-0.11 s after, measured on the
#: same machine), and with the machine shared the pool did not pay below this either (12 such
#: shards, 36 MB: 1.8 CPU s and 1.8 s in this process, 2.7 and 2.7 s with two forked workers).
LOCAL_BYTES = 32 << 20


def make_executor(executor: str | None, workers: int | None, units: int, *,
                  ray_address: str | None = None, work_bytes: int | None = None) -> Executor:
    """The executor for ``units`` items of work.

    Args:
        executor: ``"local"``, ``"process"``, ``"ray"`` or None (``process`` when more than one worker
            would have work, else ``local``).
        workers: the requested number of workers, or None for :func:`default_workers`. Never more
            workers than ``units`` are started.
        units: the number of items to map (e.g. shards).
        ray_address: the Ray cluster to join (``executor="ray"`` only; None: start Ray here).
        work_bytes: the bytes of the files to audit, when known: with ``executor`` and ``workers``
            both None and ``$DATACHECK_WORKERS`` unset, less than :data:`LOCAL_BYTES` is audited
            in this process (one process is faster than starting workers).

    Raises:
        UsageError: an unknown executor, ``workers`` < 1, ``executor="local"`` with ``workers`` > 1, or
            ``ray_address`` without ``executor="ray"``.
        OptionalDependencyError: ``executor="ray"`` without ray installed.
    """
    if executor is not None and executor not in EXECUTORS:
        raise UsageError(f"executor {executor!r}: expected one of {', '.join(EXECUTORS)}")
    if workers is not None and workers < 1:
        raise UsageError(f"--workers {workers}: expected a positive number of worker processes (1: in this process)")
    if executor == "local":
        if workers is not None and workers > 1:
            raise UsageError(f"--executor local runs in this process: --workers {workers} needs --executor process")
        return LocalExecutor()
    if ray_address is not None and executor != "ray":
        raise UsageError("--ray-address joins a Ray cluster: it needs --executor ray")
    n = min(workers if workers is not None else default_workers(), max(1, units))
    if (executor is None and workers is None and work_bytes is not None and work_bytes < LOCAL_BYTES
            and not os.environ.get(ENV_WORKERS, "").strip()):
        return LocalExecutor()
    if executor == "ray":
        return RayExecutor(n, address=ray_address)
    if executor == "process":
        return ProcessExecutor(n)
    return ProcessExecutor(n) if n > 1 else LocalExecutor()

