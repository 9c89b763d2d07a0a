"""Benchmark: ``datacheck audit`` as users run it, against pyarrow's and polars' plain read of the same
files, in one run.

Generates (seeded, once, under ``benchmarks/_work/table/``) clean causal-LM token shards
(``input_ids`` list<int32>, ``attention_mask`` list<int8>, ``labels`` list<int64>, right-padded with
id 50256 = eos, labels -100 over a 1-5 token prompt and the padding) for each row of the table:

=========  ====================================
name       shards x rows x tokens a row
=========  ====================================
big256     1 x 200,000 x 256
big128     1 x 1,000,000 x 128
f10        10 x 25,000 x 1,024
f9         9 x 7,800 x 1,024
f100       100 x 5,000 x 256
chat       a JSONL chat folder: 10 files x 2,000 conversations (``messages``: 2-6 turns of text)
=========  ====================================

and measures, each task in a fresh process, rounds interleaved (every task once per round, the
rounds' orders those of a Williams design (:func:`balanced_orders`): over a whole design, ``n``
rounds for ``n`` tasks, ``2n`` when ``n`` is odd, every task follows every other task equally often),
medians of ``--repeat`` rounds, the files' bytes read once before every task (page cache), then a
settle process run right before it (``--settle-mib``, below), so that every measured task has the
same predecessor:

- ``pyarrow``: ``pyarrow.parquet.read_table`` of every file (its default threads); for the chat
  folder ``pyarrow.json.read_json`` of every file;
- ``polars``: ``polars.read_parquet`` / ``polars.read_ndjson`` of every file;
- ``audit``: ``python -m datacheck audit FOLDER --no-cache --config C`` (the CLI, its defaults:
  workers one per core), every check that applies (vocab, pad/eos, ignore_index, ``max_seq_len`` =
  the row length: clean shards, no finding);
- ``rerun``: the same audit with ``--cache-dir`` after one audit filled a fresh cache (an unchanged
  folder: every shard hashed, answered from the cache); ``rerun_mtime``: the same rerun with
  ``--trust-mtime`` (files identified by size, modification and status-change times and inode, as
  recorded by the filling audit; no shard byte read).

Wall seconds, CPU seconds of the process and its children (user + system), peak RSS of the largest
process (``ru_maxrss``), tokens per second per core (tokens / CPU seconds), and the ratios audit/read
(wall and CPU) against pyarrow, and rerun/audit. The load average (``os.getloadavg``) is printed at the
start and end of every row.

The settle process touches ``--settle-mib`` MiB (default 3072: more than any task's peak RSS) and
exits. On a virtual machine whose balloon driver reports free pages to the host, the first touch of a
page reported there costs several times the system time of one freed a moment ago (a process touching
2 GiB: 0.7-1.7 s of system time right after another one freed as much, 5-12 s after 3-8 s idle); without
the settle a task's CPU depended on the memory its predecessor had just freed (the task after a
pyarrow read paid less than the one after a cached rerun), and rounds rotated by one task gave
``audit`` a pyarrow read as predecessor in two of three rounds and ``audit_base`` in none.
``--settle-mib 0`` turns it off. Give ``--repeat`` a multiple of the design's rounds for a full
balance (4 tasks: 4 rounds; 3 tasks: 6).

With ``--baseline-src DIR`` the tasks ``audit_base`` and ``rerun_base`` run the datacheck package in
DIR (an earlier commit) the same way, interleaved: before and after in one run.

With ``--pyc`` datacheck's sources (this tree's and the baseline's) are compiled to ``.pyc`` first, as
``pip install`` does; without it, where ``PYTHONDONTWRITEBYTECODE=1`` is set every datacheck process
compiles them again (0.25-0.3 CPU s a process, workers included).

Usage: python benchmarks/bench_table.py [--rows big256,f10,f100,...] [--repeat 3] [--scale 1.0] [--pyc]
       [--settle-mib 3072]
       [--tasks pyarrow,polars,audit,rerun,rerun_mtime,audit_base,rerun_base --baseline-src DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORK = Path(__file__).resolve().parent / "_work" / "table"
ROOT = Path(__file__).resolve().parent.parent
EOS = 50256
#: name -> (shards, rows a shard, tokens a row)
TABLE = {"big256": (1, 200_000, 256), "big128": (1, 1_000_000, 128), "f10": (10, 25_000, 1024),
         "f9": (9, 7_800, 1024), "f100": (100, 5_000, 256)}
CHAT = (10, 2_000)


def config_toml(seq_len: int | None) -> str:
    if seq_len is None:
        return ""
    return (f"[tokens]\nvocab_size = 50257\npad_token_id = {EOS}\neos_token_id = {EOS}\nmax_seq_len = {seq_len}\n"
            "[labels]\nignore_index = -100\n")


def write_token_shard(path: Path, rows: int, seq_len: int, seed: int) -> None:
    """One clean shard of ``rows`` x ``seq_len`` tokens, written by pyarrow in row groups of at most
    100,000 rows (about what writers use)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    pos = np.arange(seq_len)[None, :]
    tmp = path.with_suffix(".tmp")
    writer = None
    done = 0
    while done < rows:
        k = min(100_000, rows - done)
        ids = rng.integers(0, EOS, size=(k, seq_len), dtype=np.int32)
        lengths = rng.integers(8, seq_len + 1, size=k)
        real = pos < lengths[:, None]
        ids[np.arange(k), lengths - 1] = EOS
        ids[~real] = EOS
        labels = ids.astype(np.int64)
        labels[pos < rng.integers(1, 6, size=k)[:, None]] = -100
        labels[~real] = -100

        def lst(a: "np.ndarray") -> "pa.Array":
            offsets = pa.array(np.arange(0, k * seq_len + 1, seq_len, dtype=np.int32))
            return pa.ListArray.from_arrays(offsets, pa.array(a.ravel()))

        t = pa.table({"input_ids": lst(ids), "attention_mask": lst(real.astype(np.int8)), "labels": lst(labels)})
        if writer is None:
            writer = pq.ParquetWriter(tmp, t.schema)
        writer.write_table(t, row_group_size=k)
        done += k
    assert writer is not None
    writer.close()
    tmp.replace(path)


def write_chat_file(path: Path, rows: int, seed: int) -> None:
    import random

    rnd = random.Random(seed)
    words = ["alpha", "beta", "gamma", "delta", "data", "model", "token", "train", "check", "shard", "the", "a"]
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(rows):
            msgs = [{"role": "system", "content": "You are helpful."}]
            for t in range(rnd.randint(1, 3)):
                msgs.append({"role": "user", "content": " ".join(rnd.choices(words, k=rnd.randint(5, 40)))})
                msgs.append({"role": "assistant", "content": " ".join(rnd.choices(words, k=rnd.randint(5, 80)))})
            f.write(json.dumps({"messages": msgs}) + "\n")


def make_data(name: str, scale: float) -> tuple[Path, int | None, int]:
    """(folder, tokens a row or None for chat, total tokens or rows) of table row ``name``."""
    if name == "chat":
        n, rows = CHAT
        rows = max(1, int(rows * scale))
        folder = WORK / f"chat_{n}x{rows}"
        if not (folder / ".complete").exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            for k in range(n):
                write_chat_file(folder / f"chat-{k:05d}.jsonl", rows, k)
            (folder / ".complete").write_text("ok\n")
        return folder, None, n * rows
    n, rows, seq = TABLE[name]
    rows = max(1, int(rows * scale))
    folder = WORK / f"{name}_{n}x{rows}x{seq}"
    if not (folder / ".complete").exists():
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        for k in range(n):
            write_token_shard(folder / f"train-{k:05d}-of-{n:05d}.parquet", rows, seq, seed=k)
        (folder / ".complete").write_text("ok\n")
    return folder, seq, n * rows * seq


def files_of(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.suffix in (".parquet", ".jsonl"))


def warm(folder: Path) -> None:
    for p in files_of(folder):
        with open(p, "rb") as f:
            while f.read(16 << 20):
                pass


def child_read(tool: str, folder: str) -> None:
    """The plain read of every file of ``folder`` (the child process of a ``pyarrow``/``polars`` task)."""
    paths = files_of(Path(folder))
    rows = 0
    if tool == "pyarrow":
        import pyarrow.json as pj
        import pyarrow.parquet as pq

        for p in paths:
            t = pj.read_json(p) if p.suffix == ".jsonl" else pq.read_table(p)
            rows += t.num_rows
            del t
    else:
        import polars as pl

        for p in paths:
            df = pl.read_ndjson(p) if p.suffix == ".jsonl" else pl.read_parquet(p)
            rows += df.height
            del df
    print(json.dumps({"rows": rows}))


def child_settle(mib: int) -> None:
    """Touch ``mib`` MiB of fresh memory (every byte written) and exit: the settle process."""
    buf = bytearray(mib << 20)  # calloc: pages mapped but not touched yet
    step = 1 << 20
    one = b"\x01" * step
    for k in range(0, len(buf), step):
        buf[k:k + step] = one


#: MiB the settle process touches before every measured task (0: none); set by ``--settle-mib``
SETTLE_MIB = 3072


def settle() -> None:
    """The fixed predecessor of every measured task (see the module's docstring)."""
    if SETTLE_MIB > 0:
        subprocess.run([sys.executable, __file__, "--settle", str(SETTLE_MIB)], check=True)


def run(task: str, folder: Path, seq: int | None, work: Path, extra: list[str] = (), src: str | None = None,
        measured: bool = True) -> dict:
    """One task in a fresh process: wall, CPU (the process and its children), peak RSS (MiB). A measured
    task runs right after the settle process."""
    warm(folder)
    if measured:
        settle()
    if task in ("pyarrow", "polars"):
        cmd = [sys.executable, __file__, "--child", task, str(folder)]
    else:
        cfg = work / "datacheck.toml"
        cfg.write_text(config_toml(seq))
        cmd = [sys.executable, "-m", "datacheck", "audit", str(folder), "--config", str(cfg), "--format", "json",
               "-o", str(work / "report.json"), "--report-dir", str(work / "reports"), "--no-progress", *extra]
    # os.wait4 gives this one child's CPU and peak RSS (with those of the children it waited for: workers)
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True, cwd=src or str(ROOT))
        _, status, ru = os.wait4(proc.pid, 0)
        dt = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{task} failed ({proc.returncode}): {stderr[-2000:]}")
    return {"seconds": dt, "cpu": ru.ru_utime + ru.ru_stime, "rss_mib": ru.ru_maxrss / 1024, "stdout": stdout}


def balanced_orders(tasks: list[str]) -> list[list[str]]:
    """The rounds' task orders: a Williams design (a Latin square whose rows also balance first-order
    carry-over: over all its rows each task directly follows each other task equally often, once
    for an even number of tasks, twice over the ``2n`` rows for an odd number ``n``). Row ``r`` is
    ``r, r+1, r-1, r+2, r-2, ...`` (mod ``n``), then for odd ``n`` the same rows reversed."""
    n = len(tasks)
    first = [0]
    for j in range(1, n):
        first.append((j + 1) // 2 if j % 2 else n - j // 2)
    rows = [[(x + r) % n for x in first] for r in range(n)]
    if n % 2:
        rows += [row[::-1] for row in rows]
    return [[tasks[x] for x in row] for row in rows]


def report_of(work: Path) -> str:
    import re

    return re.sub(r'"created_at": "[^"]*"', "", (work / "report.json").read_text())


def measure(name: str, a: argparse.Namespace) -> None:
    # generated in a child process: this process stays small (a child's peak RSS as the kernel reports
    # it starts from the RSS of the process that forked it)
    subprocess.run([sys.executable, __file__, "--gen", name, str(a.scale)], check=True)
    folder, seq, amount = make_data(name, a.scale)
    n = len(files_of(folder))
    print(f"\n## {name}: {folder.name} ({n} files, {'%.1fM tokens' % (amount / 1e6) if seq else '%d rows' % amount}, "
          f"{sum(p.stat().st_size for p in files_of(folder)) / 2**20:.0f} MiB); load {os.getloadavg()}", flush=True)
    tasks = a.tasks.split(",")
    orders = balanced_orders(tasks)
    got: dict[str, list[dict]] = {t: [] for t in tasks}
    with tempfile.TemporaryDirectory(prefix="bench_table_", dir=WORK) as tmp:
        work = Path(tmp)
        cache = work / "cache"
        reports: dict[str, str] = {}
        for k in range(a.repeat):
            for t in orders[k % len(orders)]:
                if t in ("audit", "audit_base"):
                    r = run("audit", folder, seq, work, ["--no-cache"], a.baseline_src if t == "audit_base" else None)
                elif t == "rerun_base":
                    shutil.rmtree(cache, ignore_errors=True)
                    run("audit", folder, seq, work, ["--cache-dir", str(cache)], a.baseline_src, measured=False)
                    r = run("audit", folder, seq, work, ["--cache-dir", str(cache)], a.baseline_src)
                    shutil.rmtree(cache, ignore_errors=True)
                elif t in ("rerun", "rerun_mtime"):
                    if t == "rerun" or not cache.exists():  # a fresh cache, filled by one audit
                        shutil.rmtree(cache, ignore_errors=True)
                        run("audit", folder, seq, work, ["--cache-dir", str(cache)], measured=False)
                    flags = ["--cache-dir", str(cache)] + (["--trust-mtime"] if t == "rerun_mtime" else [])
                    r = run("audit", folder, seq, work, flags)
                else:
                    r = run(t, folder, seq, work)
                got[t].append(r)
                if t.startswith(("audit", "rerun")) and not t.endswith("_base"):
                    rep = report_of(work)
                    reports.setdefault(t, rep)
                    if rep != reports[t]:
                        raise SystemExit(f"{t}: the report differs between rounds")
        if len({*reports.values()}) > 1:
            raise SystemExit("the cached rerun's report differs from the audit's")
    med = {t: (statistics.median(x["seconds"] for x in v), statistics.median(x["cpu"] for x in v),
               max(x["rss_mib"] for x in v)) for t, v in got.items()}
    print("| task | wall s (runs) | CPU s (runs) | peak RSS MiB (max) |")
    print("|---|---|---|---|")
    for t, v in got.items():
        runs = ", ".join(f"{x['seconds']:.2f}" for x in v)
        cpus = ", ".join(f"{x['cpu']:.2f}" for x in v)
        print(f"| {t} | {med[t][0]:.2f} ({runs}) | {med[t][1]:.2f} ({cpus}) | {med[t][2]:.0f} |")
    if "audit" in med:
        au = med["audit"]
        if seq:
            print(f"audit: {amount / au[1] / 1e6:.1f}M tokens/s per core (CPU), {amount / au[0] / 1e6:.1f}M tokens/s wall")
        for ref in ("pyarrow", "polars"):
            if ref in med:
                print(f"audit / {ref}: {au[0] / med[ref][0]:.2f} wall, {au[1] / med[ref][1]:.2f} CPU")
        for t in ("rerun", "rerun_mtime"):
            if t in med:
                print(f"{t} / audit: {100 * med[t][0] / au[0]:.1f}% wall, {100 * med[t][1] / au[1]:.1f}% CPU")
        if "audit_base" in med:
            b = med["audit_base"]
            print(f"audit now / baseline: {au[0] / b[0]:.2f} wall, {au[1] / b[1]:.2f} CPU; baseline / pyarrow: "
                  f"{b[0] / med['pyarrow'][0]:.2f} wall" if "pyarrow" in med else "")
        if "rerun_base" in med and "rerun" in med:
            b = med["rerun_base"]
            print(f"baseline rerun: {b[0]:.2f} s wall, {b[1]:.2f} CPU s ({100 * b[0] / med['audit_base'][0]:.1f}% of the "
                  "baseline audit)" if "audit_base" in med else f"baseline rerun: {b[0]:.2f} s wall")
    print(f"load at the end {os.getloadavg()}", flush=True)


def main() -> None:
    global SETTLE_MIB
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="big256,big128,f10,f9,f100,chat", help="table rows to run (names above)")
    ap.add_argument("--tasks", default="pyarrow,polars,audit,rerun,rerun_mtime")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the rows a shard (quick runs: 0.1)")
    ap.add_argument("--baseline-src", default=None,
                    help="a folder holding an earlier datacheck package (git archive COMMIT datacheck | tar -x -C DIR): "
                         "tasks audit_base and rerun_base run it, interleaved")
    ap.add_argument("--pyc", action="store_true",
                    help="compile datacheck's sources (this tree's and --baseline-src's) to .pyc first, as pip does "
                         "when it installs the package; without it, under PYTHONDONTWRITEBYTECODE=1 every datacheck "
                         "process (and each worker) compiles them again")
    ap.add_argument("--settle-mib", type=int, default=SETTLE_MIB,
                    help="MiB a settle process touches right before every measured task, so that each has the same "
                         "predecessor (0: no settle process)")
    ap.add_argument("--settle", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--child", nargs=2, metavar=("TOOL", "FOLDER"), help=argparse.SUPPRESS)
    ap.add_argument("--gen", nargs=2, metavar=("NAME", "SCALE"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.settle is not None:
        child_settle(a.settle)
        return
    if a.child:
        child_read(*a.child)
        return
    SETTLE_MIB = a.settle_mib
    if a.gen:
        make_data(a.gen[0], float(a.gen[1]))
        return
    WORK.mkdir(parents=True, exist_ok=True)
    if a.pyc:  # as installed packages run: byte code compiled once and kept
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        for src in [ROOT, *([Path(a.baseline_src)] if a.baseline_src else [])]:
            subprocess.run([sys.executable, "-m", "compileall", "-q", str(src / "datacheck")], check=True,
                           stdout=subprocess.DEVNULL)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores; load {os.getloadavg()}; "
          f".pyc {'compiled first' if a.pyc else 'as the environment leaves them'} "
          f"(PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')}); settle process "
          f"{f'{SETTLE_MIB} MiB' if SETTLE_MIB else 'off'}")
    for name in a.rows.split(","):
        measure(name, a)


if __name__ == "__main__":
    main()
