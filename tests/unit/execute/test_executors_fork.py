"""The process pool forks its workers from a process that has only imported modules (the CLI's,
before any shard is read); from one whose polars thread pool, or a thread of its own, runs, it
forks them from a fork server that imported the mapped function's module. A forked worker keeps
the parent's modules (no second import), a worker of the server has the module imported afresh;
both size their polars pool ``cores // workers``, and a worker that dies is still
:class:`WorkerDied` with the items left. Each case runs in a fresh Python process, as the CLI
does (this test process has run polars)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import polars as pl
import pytest
from conftest import ROOT, run_cli_subprocess
from gatehelp import normalized, write_dataset

WORK = '''
import os

MARK = "imported"


def probe(x):
    import polars as pl
    return [MARK, pl.thread_pool_size(), x * x, os.getppid(), os.environ.get("FORKWORK_VAR"), os.getcwd()]


def handlers(x):
    import signal
    term, intr = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    return [term == signal.SIG_DFL, intr is signal.default_int_handler, x]


def hold(x):
    import time
    with open(f"held-{x}.pid", "w") as f:
        f.write(str(os.getpid()))
    time.sleep(600)  # the caller is killed meanwhile
    return x


def preloaded(x):
    import sys
    mod = sys.modules.get("forkpre")  # imported by the worker's parent (preloaded), not by the worker
    return [mod is not None and mod.PID == os.getppid(), x]


def square_or_die(x):
    if x == 3:
        os._exit(9)  # a worker killed mid-task (as by the OOM killer)
    return x * x
'''

SCRIPT = '''
import json, os, threading
import datacheck.execute.audit  # polars, pyarrow and numpy, imported as an audit imports them
from datacheck.execute.executors import ProcessExecutor, WorkerDied, cpu_cores, fork_is_safe, start_method
import forkwork

forkwork.MARK = "set in the parent"
out = {"cores": cpu_cores(), "fresh": [fork_is_safe(), start_method()]}

# a training script's handlers (note a preemption, save on Ctrl-C): a forked worker must not keep them
import signal
signal.signal(signal.SIGTERM, lambda *a: None)
signal.signal(signal.SIGINT, lambda *a: None)
out["handlers"] = list(ProcessExecutor(2).map(forkwork.handlers, [0, 1]))
signal.signal(signal.SIGTERM, signal.SIG_DFL)
signal.signal(signal.SIGINT, signal.default_int_handler)

def died(items=tuple(range(6))):
    got = []
    try:
        for v in ProcessExecutor(2).map(forkwork.square_or_die, list(items)):
            got.append(v)
    except WorkerDied as exc:
        return [got, exc.pending]


def probes(workers):
    return [r[:3] + [r[3] == os.getpid(), r[4], r[5] == os.getcwd()]
            for r in ProcessExecutor(workers).map(forkwork.probe, [0, 1, 2])]


out["forked"] = probes(2)
import sys
# the pools above leave their manager threads ending; fork_is_safe looks again for at most 0.1 s, which a
# loaded CI machine (pytest -n auto) can outlast: the pool then (rightly) uses the fork server and forkpre
# is imported there, not here. This part holds the fork path's preload, so it waits for that path's
# condition first (a thread still ending after 30 s fails the fork_is_safe assertion below).
import time
_t0 = time.monotonic()
while not fork_is_safe() and time.monotonic() - _t0 < 30:
    time.sleep(0.05)
out["preloaded"] = list(ProcessExecutor(2).map(forkwork.preloaded, [0, 1], preload=["forkpre", "no_such_module_x"]))
out["preloaded_here"] = [sys.modules["forkpre"].PID == os.getpid(), fork_is_safe()]
out["died"] = died()
# the first item kills its worker before the rest are submitted: the pool breaks mid-submit (the
# submit of item 0 returns once the pool knows its worker died, so the next submit raises)
import time
from concurrent.futures import ProcessPoolExecutor
submit = ProcessPoolExecutor.submit
def submit_then_wait(pool, fn, *args):
    fut = submit(pool, fn, *args)
    if args == (3,):
        deadline = time.monotonic() + 60
        while not pool._broken and time.monotonic() < deadline:
            time.sleep(0.01)
    return fut
ProcessPoolExecutor.submit = submit_then_wait
out["died_early"] = died([3] + [1] * 5)
ProcessPoolExecutor.submit = submit
stop = threading.Event()
t = threading.Thread(target=stop.wait)
t.start()
out["with_a_thread"] = [fork_is_safe(), start_method()]
stop.set()
t.join()
import polars as pl
pl.DataFrame({"a": [1, 2, 3]}).lazy().select(pl.col("a").sum()).collect()
out["after_a_query"] = [fork_is_safe(), start_method()]
out["served"] = probes(2)
# the same server, started above: each worker takes the caller's pool size, environment and folder
os.environ["FORKWORK_VAR"] = "set later"
os.mkdir("elsewhere")
os.chdir("elsewhere")
out["served_one"] = probes(1)
out["served_died"] = died()
print(json.dumps(out))
'''


def _run(tmp_path: Path) -> dict:
    (tmp_path / "forkwork.py").write_text(WORK)
    (tmp_path / "forkpre.py").write_text("import os\n\nPID = os.getpid()\n")
    (tmp_path / "case.py").write_text(textwrap.dedent(SCRIPT))
    env = {k: v for k, v in os.environ.items() if k not in ("POLARS_MAX_THREADS", "FORKWORK_VAR")}
    # the CLI process's settings (cli/main.py): one BLAS thread, pyarrow's jemalloc pool
    env.update(PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT)]), OPENBLAS_NUM_THREADS="1",
               ARROW_DEFAULT_MEMORY_POOL="jemalloc")
    p = subprocess.run([sys.executable, str(tmp_path / "case.py")], capture_output=True, text=True, cwd=tmp_path,
                       env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="workers are forked on Linux only")
@pytest.mark.slow
def test_workers_fork_from_a_fresh_process_and_from_a_server_after_a_query(tmp_path: Path) -> None:
    out = _run(tmp_path)
    threads = max(1, out["cores"] // 2)
    assert out["fresh"] == [True, "fork"]
    # a forked worker handles SIGTERM and SIGINT as a fresh interpreter does, not with the caller's handlers
    assert out["handlers"] == [[True, True, 0], [True, True, 1]]
    # a forked worker, a child of this process, has the parent's modules as they were (the mark set
    # after import), and its polars pool has cores // workers threads although polars was imported
    # before the fork
    assert out["forked"] == [["set in the parent", threads, x * x, True, None, True] for x in range(3)]
    # modules preloaded for a forked pool are imported once, by the caller, before the fork (a missing
    # one is left to the worker), and the caller still forks afterwards
    assert out["preloaded"] == [[True, 0], [True, 1]] and out["preloaded_here"] == [True, True]
    for got, pending in (out["died"], out["served_died"]):
        assert 3 in pending and got == [0, 1, 4, 9, 16, 25][:len(got)] and pending[0] == len(got)
    # a pool that breaks while items are still being submitted: every item has a result or is pending
    got, pending = out["died_early"]
    assert got == [] and pending == sorted(set(pending)) and pending == list(range(6))
    assert out["with_a_thread"] == [False, "forkserver"]
    assert out["after_a_query"] == [False, "forkserver"]
    # a worker of the fork server (not a child of this process) has the module as imported there
    assert out["served"] == [["imported", threads, x * x, False, None, True] for x in range(3)]
    assert out["served_one"] == [["imported", out["cores"], x * x, False, "set later", True] for x in range(3)]


@pytest.mark.slow
def test_cli_forked_pool_same_report_as_one_process(tmp_path: Path) -> None:
    root = tmp_path / "data"
    write_dataset(root, n_shards=5, rows=8)
    src = pl.read_parquet(root / "shard-00001-of-00006.parquet")
    pl.concat([src.reverse().head(3), pl.DataFrame({"text": ["only here"], "label": [2]})]).write_parquet(
        root / "mixed.parquet")
    (root / "broken.parquet").write_bytes(b"PAR1 this is not a parquet file")
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text("[labels]\nnum_classes = 3\n")
    reports = []
    for workers in ("1", "2"):
        out = tmp_path / f"r{workers}.json"
        r = run_cli_subprocess("audit", str(root), "--config", str(cfg), "--no-cache", "--no-progress",
                               "--workers", workers, "--executor", "local" if workers == "1" else "process",
                               "--output", str(out), "--report-dir", str(tmp_path / f"rep{workers}"),
                               "--format", "json", cwd=tmp_path)
        assert r.returncode == 1, r.stderr[-2000:]
        reports.append(normalized(out.read_text()))
    assert reports[0] == reports[1]
    checks = {f["check"] for f in json.loads(reports[1])["findings"]}
    assert {"dup.exact_across_shards", "dup.shard"} <= checks


HOLD = '''
import os, sys
import datacheck.execute.audit
from datacheck.execute.executors import ProcessExecutor, start_method
import forkwork

if sys.argv[1] == "forkserver":  # a process that has run a polars query forks from the server
    import polars as pl
    pl.DataFrame({"a": [1, 2]}).select(pl.col("a").sum())
print(start_method(), flush=True)
list(ProcessExecutor(2).map(forkwork.hold, [0, 1]))
'''


def _running(pid: int) -> bool:
    """The process exists and is not a zombie (a container's init may never reap it)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc, and workers forked on Linux only")
@pytest.mark.parametrize("method", ["fork", "forkserver"])
def test_workers_end_when_the_caller_is_killed(tmp_path: Path, method: str) -> None:
    (tmp_path / "forkwork.py").write_text(WORK)
    (tmp_path / "hold.py").write_text(textwrap.dedent(HOLD))
    env = {k: v for k, v in os.environ.items() if k != "POLARS_MAX_THREADS"}
    env.update(PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT)]), OPENBLAS_NUM_THREADS="1")
    p = subprocess.Popen([sys.executable, str(tmp_path / "hold.py"), method], cwd=tmp_path, env=env,
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == method
        files = [tmp_path / f"held-{x}.pid" for x in (0, 1)]
        deadline = time.monotonic() + 120
        while not all(f.exists() and f.read_text() for f in files):
            assert time.monotonic() < deadline and p.poll() is None, "the workers never started"
            time.sleep(0.05)
        workers = [int(f.read_text()) for f in files]
        assert all(_running(w) for w in workers) and p.pid not in workers
        os.kill(p.pid, signal.SIGKILL)  # as the OOM killer, or `kill -9`, ends the audit's process
        p.wait(30)
        deadline = time.monotonic() + 20
        while any(_running(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert [w for w in workers if _running(w)] == []
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        for f in tmp_path.glob("held-*.pid"):
            pid = int(f.read_text() or 0)
            if pid and _running(pid):
                os.kill(pid, signal.SIGKILL)


AGAINST = '''
import json, sys
import datacheck
import datacheck.execute.executors as ex

methods = []
real = ex.start_method


def recorded():
    methods.append(real())
    return methods[-1]


ex.start_method = recorded
report = datacheck.audit(sys.argv[1], config={}, against=sys.argv[2], workers=2, executor="process")
overlap = [f for f in report.findings if f.check == "dup.split_overlap"]
print(json.dumps({"methods": methods, "overlap": [f.count for f in overlap]}))
'''


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="workers are forked on Linux only")
def test_an_audit_against_another_dataset_still_forks_its_workers(tmp_path: Path) -> None:
    """The other dataset's rows are hashed (polars queries, polars' thread pool started) after the
    audited shards, so the pool is forked from a process with no thread pool running."""
    data, other = tmp_path / "data", tmp_path / "other"
    data.mkdir()
    other.mkdir()
    for k in range(3):
        pl.DataFrame({"text": [f"shard {k} row {i}" for i in range(50)]}).write_parquet(data / f"s{k}.parquet")
    shared = pl.DataFrame({"text": ["shard 1 row 7", "shard 2 row 30", "only in the other dataset"]})
    shared.write_parquet(other / "eval.parquet")
    (tmp_path / "case.py").write_text(AGAINST)
    env = {k: v for k, v in os.environ.items() if k != "POLARS_MAX_THREADS"}
    env.update(PYTHONPATH=str(ROOT), OPENBLAS_NUM_THREADS="1")  # as cli/main.py sets it
    p = subprocess.run([sys.executable, str(tmp_path / "case.py"), str(data), str(other)], capture_output=True,
                       text=True, cwd=tmp_path, env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["methods"] == ["fork"]
    assert sum(out["overlap"]) == 2  # the audited rows also found in the other dataset


WATCHED = '''
import os, sys, time
del os.pidfd_open  # as on Linux < 5.3: the watch looks every WATCH_EVERY_S seconds
from datacheck.execute import executors
executors.WATCH_EVERY_S = 0.05
executors._watch(int(sys.argv[1]))
print("watching", flush=True)
time.sleep(120)
'''


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")
def test_the_watch_without_pidfd_kills_its_process_when_the_caller_ends(tmp_path: Path) -> None:
    caller = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    watched = subprocess.Popen([sys.executable, "-c", WATCHED, str(caller.pid)], stdout=subprocess.PIPE, text=True,
                               env=env)
    try:
        assert watched.stdout is not None and watched.stdout.readline().strip() == "watching"
        assert watched.poll() is None
        caller.kill()
        caller.wait()
        assert watched.wait(20) == -signal.SIGKILL
    finally:
        for p in (caller, watched):
            if p.poll() is None:
                p.kill()
                p.wait()


def test_a_temporary_folder_too_long_for_the_fork_servers_socket_spawns(tmp_path, monkeypatch):
    """The fork server listens on a Unix socket under $TMPDIR (``pymp-*/listener-*``), whose path
    holds at most 107 bytes: under a longer temporary folder the pool spawns its workers instead of
    failing with "AF_UNIX path too long", and they still run."""
    from datacheck.execute import executors

    monkeypatch.setattr(executors, "fork_is_safe", lambda: False)  # as after a polars query
    short = tmp_path / "t"
    short.mkdir()
    monkeypatch.setattr(executors.tempfile, "tempdir", str(short))
    assert len(str(short)) + 32 <= 107, short  # pytest's tmp_path leaves room for the suffix
    assert executors.start_method() == "forkserver"
    deep = tmp_path / ("d" * (108 - 32 - len(str(tmp_path)) - 1))  # one byte past the limit
    deep.mkdir()
    monkeypatch.setattr(executors.tempfile, "tempdir", str(deep))
    assert len(str(deep)) + 32 == 108
    assert executors.start_method() == "spawn"


def test_a_thread_not_named_yet_is_looked_at_again(monkeypatch):
    """A native thread polars starts at import carries the process's own name until it names itself
    (the spill-file cleaner, seen under load): fork_is_safe looks again and forks once it is named;
    a thread of another name answers False at once, one that never names itself False in the end."""
    import io

    from datacheck.execute import executors

    looks = {"n": 0}

    def fake(second):
        def listdir(path):
            assert path == "/proc/self/task"
            looks["n"] += 1
            return ["1", "2"]

        def opener(path, *a, **k):
            if path == "/proc/self/comm" or path == "/proc/self/task/1/comm":
                return io.StringIO("python\n")
            assert path == "/proc/self/task/2/comm"
            return io.StringIO(second(looks["n"]) + "\n")
        monkeypatch.setattr(executors.os, "listdir", listdir)
        monkeypatch.setattr(executors, "open", opener, raising=False)
        monkeypatch.setattr(executors.threading, "active_count", lambda: 1)
        monkeypatch.setattr(executors, "NAME_WAIT_S", 0)
        looks["n"] = 0

    fake(lambda n: "python" if n < 3 else "polars-ooc-clea")
    assert executors.fork_is_safe() is True and looks["n"] == 3
    fake(lambda n: "tokio-runtime-w")
    assert executors.fork_is_safe() is False and looks["n"] == 1
    fake(lambda n: "python")
    assert executors.fork_is_safe() is False and looks["n"] == executors.NAME_LOOKS


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="workers are forked on Linux only")
def test_a_python_thread_that_is_ending_is_waited_for():
    """Right after a pool closed its manager thread may still be ending: fork_is_safe waits for it
    (a fresh process, as the CLI's; this test process has pytest's threads). The thread ends while
    fork_is_safe waits between two looks (at its first pause), however slowly the machine runs it."""
    code = ("import threading, time\n"
            "from datacheck.execute import executors\n"
            "stop = threading.Event()\n"
            "t = threading.Thread(target=stop.wait)\n"
            "t.start()\n"
            "real = time.sleep\n"
            "def pause(s):\n"
            "    stop.set()\n"
            "    t.join()\n"
            "    real(s)\n"
            "executors.time.sleep = pause\n"
            "print(executors.fork_is_safe(), executors.threading.active_count())\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert p.stdout.strip() == "True 1", p.stderr
