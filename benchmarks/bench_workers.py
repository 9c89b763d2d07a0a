"""Benchmark: shards audited in parallel (``datacheck audit --workers N``), issue 14 item 2.

Generates (seeded, once, under benchmarks/_work/) SHARDS tokenized shards of ROWS rows each
(default 200 x 20,000 = 4M rows): ``input_ids`` list<int32> of 16..128 tokens (vocab 50,257),
``attention_mask`` list<int8>, ``labels`` list<int64> (the input ids, ignore_index -100 on padding),
with 0.1 % of the rows repeating a row of another shard (so the cross-shard duplicate payload is
computed and used). Then, in one run and in this order, for each N of ``--workers`` (default 1 2):
a fresh ``python -m datacheck audit DATA --no-cache --workers N --format json`` subprocess, timed
end to end (interpreter start, imports, worker start-up, every shard, the dataset stage, the
report). CPU time is the subprocess's user+sys time including its worker processes
(``RUSAGE_CHILDREN`` growth); CPU/wall near N means N cores were busy. The reports of every N are
compared byte for byte (``created_at`` aside) and the script exits 1 when they differ.

``--repeat R`` runs the N sequence R times and prints every run plus the median per N. The load
average at the start is printed: on a shared machine other processes take cores from the audit.

Usage: python benchmarks/bench_workers.py [--shards 200] [--rows 20000] [--workers 1 2] [--repeat 1]
"""
from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

WORK = Path(__file__).resolve().parent / "_work"
REPO = Path(__file__).resolve().parents[1]
CONFIG_TOML = """[tokens]
vocab_size = 50257
pad_token_id = 50256
eos_token_id = 50256
max_seq_len = 128
[labels]
ignore_index = -100
"""


def generate(shards: int, rows: int, seed: int = 0) -> Path:
    import numpy as np
    import polars as pl

    root = WORK / f"workers_{shards}x{rows}"
    done = root / "_complete"
    if done.exists():
        return root
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    prev = None
    for i in range(shards):
        lens = rng.integers(16, 129, size=rows)
        offsets = np.concatenate([[0], np.cumsum(lens)])
        flat = rng.integers(0, 50256, size=int(offsets[-1]), dtype=np.int32)
        ids = pl.Series("input_ids", [flat[offsets[j]:offsets[j + 1]] for j in range(rows)],
                        dtype=pl.List(pl.Int32))
        df = pl.DataFrame({"input_ids": ids})
        if prev is not None:  # 0.1 %: rows of the previous shard repeated here
            k = rows // 1000
            df = pl.concat([df.head(rows - k), prev.head(k)])
        df = df.with_columns(
            pl.col("input_ids").list.eval(pl.lit(1, dtype=pl.Int8)).alias("attention_mask"),
            pl.col("input_ids").cast(pl.List(pl.Int64)).alias("labels"),
        )
        df.write_parquet(root / f"shard-{i:05d}.parquet")
        prev = df.select("input_ids")
    (root / "datacheck.toml").write_text(CONFIG_TOML)
    done.write_text("ok\n")
    return root


def run_audit(root: Path, workers: int, out: Path) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (the subprocess and its workers) and exit code of one audit."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("DATACHECK_WORKERS", None)
    cmd = [sys.executable, "-m", "datacheck", "audit", str(root), "--no-cache", "--no-progress", "--workers",
           str(workers), "--format", "json", "--report-dir", str(out.parent / "reports"), "--output", str(out)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode not in (0, 1):
        sys.exit(f"audit --workers {workers} failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    return wall, cpu, proc.returncode


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shards", type=int, default=200)
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    t0 = time.perf_counter()
    root = generate(args.shards, args.rows)
    size = sum(p.stat().st_size for p in root.glob("*.parquet"))
    print(f"data: {root} ({args.shards} shards x {args.rows} rows, {size / 2**20:.0f} MiB; "
          f"ready in {time.perf_counter() - t0:.1f} s)")
    print(f"cores: {len(os.sched_getaffinity(0))}; load average at start: {os.getloadavg()[0]:.1f}")
    outs = WORK / "workers_out"
    outs.mkdir(parents=True, exist_ok=True)
    runs: dict[int, list[tuple[float, float]]] = {n: [] for n in args.workers}
    texts: dict[int, str] = {}
    for rep in range(args.repeat):
        for n in args.workers:
            out = outs / f"report-w{n}.json"
            wall, cpu, rc = run_audit(root, n, out)
            runs[n].append((wall, cpu))
            texts[n] = re.sub(r'"created_at": "[^"]*"', '"created_at": ""', out.read_text())
            print(f"run {rep + 1}  --workers {n}: wall {wall:6.1f} s  cpu {cpu:6.1f} s  cpu/wall {cpu / wall:4.2f}  "
                  f"exit {rc}")
    base = statistics.median(w for w, _ in runs[args.workers[0]])
    print("\n| --workers | wall (median) | CPU s | CPU / wall | speed-up vs first |")
    print("|---|---|---|---|---|")
    for n in args.workers:
        wall = statistics.median(w for w, _ in runs[n])
        cpu = statistics.median(c for _, c in runs[n])
        print(f"| {n} | {wall:.1f} s | {cpu:.1f} | {cpu / wall:.2f} | {base / wall:.2f}x |")
    same = len(set(texts.values())) == 1
    print(f"\nreports identical (created_at aside) across --workers {' '.join(map(str, args.workers))}: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
