"""Benchmark: the CLI's fixed costs (issue 14 item 6), like for like, in one run.

Every task is a fresh process started the same way (``python -c ...`` or ``python -m datacheck``),
measured from the outside: wall seconds, CPU seconds (user + system, from ``os.wait4``) and peak RSS.
Tasks are interleaved (one round runs each task once, in a shuffled order) and the medians over
``--repeat`` rounds are printed, with the ratios:

- small shard (1,000 x 128 tokens): ``datacheck audit`` vs a process that starts Python, imports
  polars and reads the shard (``polars.read_parquet``): the fixed cost dominates;
- the issue's like-for-like (200,000 x 256 tokens = 51.2M tokens, goal <= 1.3): the same two
  commands on the large shard;
- the import costs alone: ``python -c pass``, ``import polars``, ``import datacheck``, and
  ``datacheck --version``;
- with ``--baseline-src DIR`` (an earlier checkout, e.g. ``git archive <commit> | tar -x -C DIR``)
  the two audits also run from that tree, interleaved: before and after in the same run.

Shards are the seeded causal-LM shards of ``bench_audit.py`` (input_ids list<int32>,
attention_mask list<int8>, labels list<int64>, right-padded, pad == eos == 50256), audited with
every check that applies (vocab, pad/eos, max_seq_len = the row length, ignore_index), ``--no-cache``
so each run does the work. Bytecode: the interpreter writes its ``.pyc`` files under a temporary
``PYTHONPYCACHEPREFIX`` (``PYTHONDONTWRITEBYTECODE`` is dropped for the children) and one warm-up
round runs first, as an installed package has its ``.pyc`` files; ``--no-bytecode`` measures with
compilation on every start instead.

Also printed: the idle CPU of numpy's OpenBLAS pool after one small matrix product (a process that
imports numpy, multiplies two 200 x 200 matrices, then sleeps 2 s; CPU seconds during the sleep)
with and without the CLI's ``OPENBLAS_NUM_THREADS=1`` default (:func:`datacheck.cli.main.limit_blas_threads`).

Usage: python benchmarks/bench_cli_startup.py [--repeat 7] [--baseline-src DIR] [--no-bytecode]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

SMALL = (1_000, 128)
LARGE = (200_000, 256)


def _make_shard(rows: int, seq_len: int) -> Path:
    """``bench_audit.make_shard`` run in a child process: generating the shard in this one would raise
    this process's peak RSS, which every child then reports as its own (``ru_maxrss`` survives fork)."""
    code = (f"import sys; sys.path.insert(0, {str(HERE)!r}); from bench_audit import make_shard; "
            f"print(make_shard({rows}, {seq_len}, defects=False))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return Path(out.stdout.strip().splitlines()[-1])


def _config(folder: Path, seq_len: int) -> Path:
    path = folder / f"datacheck_{seq_len}.toml"
    path.write_text("[tokens]\nvocab_size = 50257\npad_token_id = 50256\neos_token_id = 50256\n"
                    f"max_seq_len = {seq_len}\n\n[labels]\nignore_index = -100\n", encoding="utf-8")
    return path


def _run(cmd: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MiB) of one child process; raises when it fails."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    err = p.stderr.read().decode() if p.stderr else ""
    if p.stderr:
        p.stderr.close()
    if p.returncode not in (0, 1):  # 1: the policy failed (a finding), still a full audit
        raise SystemExit(f"failed ({p.returncode}): {' '.join(cmd)}\n{err}")
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024


def _blas_idle(env: dict[str, str], limit: bool) -> tuple[float, int]:
    """(CPU % during 2 s of sleep after one small matmul, threads of the process), in a child."""
    code = ("import os, sys, time, json\n"
            "from datacheck.cli.main import limit_blas_threads\n"
            + ("limit_blas_threads()\n" if limit else "")
            + "import numpy as np\n"
            "a = np.ones((200, 200)); (a @ a).sum()\n"
            "t = time.process_time(); time.sleep(2); d = time.process_time() - t\n"
            "print(json.dumps([d / 2 * 100, len(os.listdir('/proc/self/task'))]))")
    e = {k: v for k, v in env.items() if k != "OPENBLAS_NUM_THREADS"}
    out = subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True, check=True)
    pct, threads = json.loads(out.stdout)
    return pct, threads


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--baseline-src", help="an earlier source tree to run the same audits from, interleaved")
    ap.add_argument("--no-bytecode", action="store_true", help="compile on every start (no .pyc files)")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="dc-startup-"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "DATACHECK_WORKERS")}
    if args.no_bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    else:
        env["PYTHONPYCACHEPREFIX"] = str(tmp / "pyc")
    env["DATACHECK_DIR"] = str(tmp / "state")
    env["PYTHONPATH"] = str(ROOT)
    base_env = dict(env, PYTHONPATH=str(Path(args.baseline_src).resolve())) if args.baseline_src else None

    py = sys.executable
    tasks: dict[str, tuple[list[str], dict[str, str]]] = {
        "python -c pass": ([py, "-c", "pass"], env),
        "import polars": ([py, "-c", "import polars"], env),
        "import datacheck": ([py, "-c", "import datacheck"], env),
        "datacheck --version": ([py, "-m", "datacheck", "--version"], env),
    }
    groups = []
    for label, (rows, seq) in (("small", SMALL), ("large", LARGE)):
        shard = _make_shard(rows, seq)
        cfg = _config(tmp, seq)
        read = [py, "-c", f"import polars as pl; pl.read_parquet({str(shard)!r})"]
        audit = [py, "-m", "datacheck", "audit", str(shard), "--config", str(cfg), "--no-cache",
                 "--report-dir", str(tmp / "reports"), "--format", "json"]
        tasks[f"{label}: read"] = (read, env)
        tasks[f"{label}: audit"] = (audit, env)
        names = [f"{label}: read", f"{label}: audit"]
        if base_env:
            tasks[f"{label}: audit (baseline)"] = (audit, base_env)
            names.append(f"{label}: audit (baseline)")
        groups.append((label, rows, seq, shard, names))

    for cmd, e in tasks.values():  # warm-up round: bytecode written, files in the page cache
        _run(cmd, e)
    res: dict[str, list[tuple[float, float, float]]] = {k: [] for k in tasks}
    rng = random.Random(0)
    for _ in range(args.repeat):
        order = list(tasks)
        rng.shuffle(order)
        for k in order:
            res[k].append(_run(*tasks[k]))

    def med(k: str, i: int) -> float:
        return statistics.median(r[i] for r in res[k])

    try:
        load = os.getloadavg()[0]
    except OSError:
        load = float("nan")
    print(f"{os.cpu_count()} cores, load average {load:.1f}, {args.repeat} interleaved rounds, medians; "
          f"bytecode {'off' if args.no_bytecode else 'cached'}; python {sys.version.split()[0]}")
    print(f"{'task':32} {'wall s':>8} {'CPU s':>8} {'RSS MiB':>8}")
    for k in tasks:
        print(f"{k:32} {med(k, 0):8.3f} {med(k, 1):8.3f} {med(k, 2):8.0f}")
    for label, rows, seq, shard, names in groups:
        mb = shard.stat().st_size / 2**20
        r, a = names[0], names[1]
        line = (f"{label} ({rows:,} x {seq} tokens, {mb:.1f} MiB parquet): audit / read = "
                f"{med(a, 0) / med(r, 0):.2f} wall, {med(a, 1) / med(r, 1):.2f} CPU")
        if len(names) > 2:
            b = names[2]
            line += f"; baseline / read = {med(b, 0) / med(r, 0):.2f} wall, {med(b, 1) / med(r, 1):.2f} CPU"
        print(line)
    if os.path.isdir("/proc/self/task"):
        for limit in (False, True):
            pct, threads = _blas_idle(env, limit)
            print(f"numpy idle after one matmul, {'with' if limit else 'without'} the CLI's OPENBLAS_NUM_THREADS=1: "
                  f"{pct:.2f}% CPU over 2 s, {threads} threads")
    return 0


if __name__ == "__main__":
    sys.exit(main())
