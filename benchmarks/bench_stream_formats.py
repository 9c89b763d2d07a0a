"""Benchmark: peak memory and time of auditing a large CSV and a large Arrow IPC shard, two source
trees in one run (issue 15 item 8 / issue 14 item 1: CSV and Arrow IPC read batch by batch).

Generates (seeded, kept under ``benchmarks/_work``) a CSV of about ``--gib`` GiB (``id`` int,
``text`` ~200 chars of words, ``label`` int 0-9, ``score`` float) and the same rows as an Arrow IPC
stream (Hugging Face ``save_to_disk`` layout: record batches of 1,000 rows); then, for each source
tree given (``--src``, e.g. a checkout of main and this branch), audits each file with
``datacheck.engine.shard.audit_shard`` in a child process (``PYTHONPATH`` = that tree; the config
names ``text`` and ``label``) and prints its peak RSS (``VmHWM`` of the child: its own peak, not
the parent's) and wall seconds, with the ratio to the first tree.

Usage: python benchmarks/bench_stream_formats.py --src /path/to/main --src . [--gib 1.0]
       [--formats csv,arrow] [--timeout 3600]
"""
from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pyarrow as pa

WORK = Path(__file__).resolve().parent / "_work"
WORDS = ("data model train loss token batch eval shard gate check the of and to in is was for on "
         "that with as by at from it an are were be this which or").split()
ROW_BYTES = 240  # about one CSV row of the generated data

CHILD = r"""
import sys, time
from pathlib import Path
from datacheck.engine.shard import audit_shard
from datacheck.io.discover import DiscoveredShard
from datacheck.model.config import config_from_dict
p = Path(sys.argv[1])
t = time.perf_counter()
r = audit_shard(DiscoveredShard(path=p, rel=p.name, format=sys.argv[2]),
                config_from_dict({"columns": {"text": "text", "label": "label"}}), "bench", p.stat().st_size)
wall = time.perf_counter() - t
hwm = next(int(ln.split()[1]) for ln in open("/proc/self/status") if ln.startswith("VmHWM:")) // 1024
print(r.rows, r.readable, hwm, round(wall, 2))
"""


def _frame(rows: int, seed: int) -> pl.DataFrame:
    rng = random.Random(seed)
    text = [" ".join(rng.choice(WORDS) for _ in range(40)) for _ in range(rows)]
    return pl.DataFrame({"id": range(seed * rows, (seed + 1) * rows), "text": text,
                         "label": [rng.randrange(10) for _ in range(rows)],
                         "score": [rng.random() for _ in range(rows)]})


def make(gib: float) -> tuple[Path, Path, int]:
    """(the CSV, the IPC stream, rows), written piece by piece (never whole in memory)."""
    WORK.mkdir(exist_ok=True)
    rows_total = int(gib * 2**30 / ROW_BYTES)
    piece = 200_000
    csv_path, ipc_path = WORK / f"stream_{gib}g.csv", WORK / f"stream_{gib}g.arrow"
    if not (csv_path.exists() and ipc_path.exists()):
        done = 0
        with open(csv_path, "wb") as fc, pa.OSFile(str(ipc_path), "wb") as sink:
            writer = None
            k = 0
            while done < rows_total:
                df = _frame(min(piece, rows_total - done), k)
                df.write_csv(fc, include_header=done == 0)
                table = df.to_arrow()
                if writer is None:
                    writer = pa.ipc.new_stream(sink, table.schema)
                writer.write_table(table, max_chunksize=1000)
                done += df.height
                k += 1
            assert writer is not None
            writer.close()
    return csv_path, ipc_path, rows_total


def run(src: Path, path: Path, fmt: str, timeout: int) -> tuple[int, float, str]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    env.pop("DATACHECK_BATCH_ROWS", None)
    t = time.perf_counter()
    try:
        p = subprocess.run([sys.executable, "-c", CHILD, str(path), fmt], capture_output=True, text=True,
                           env=env, cwd=WORK, timeout=timeout)
    except subprocess.TimeoutExpired:
        return -1, time.perf_counter() - t, "timeout"
    if p.returncode != 0:
        return -1, time.perf_counter() - t, f"exit {p.returncode}: {p.stderr.strip().splitlines()[-1:]}"
    rows, readable, hwm, wall = p.stdout.split()[-4:]
    return int(hwm), float(wall), f"rows={rows} readable={readable}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", action="append", required=True, help="a datacheck source tree (repeat)")
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--formats", default="csv,arrow")
    ap.add_argument("--timeout", type=int, default=3600)
    a = ap.parse_args()
    csv_path, ipc_path, rows = make(a.gib)
    print(f"{rows} rows; CSV {csv_path.stat().st_size / 2**20:.0f} MiB, IPC stream {ipc_path.stat().st_size / 2**20:.0f} MiB")
    print(f"{'format':8} {'source':40} {'peak RSS MiB':>12} {'seconds':>8} {'RSS x':>6} {'time x':>6}  check")
    for fmt, path in (("csv", csv_path), ("arrow", ipc_path)):
        if fmt not in a.formats.split(","):
            continue
        base: tuple[int, float] | None = None
        for src in a.src:
            hwm, wall, note = run(Path(src).resolve(), path, fmt, a.timeout)
            if base is None and hwm > 0:
                base = (hwm, wall)
            rx = f"{hwm / base[0]:.2f}" if base and hwm > 0 else "-"
            tx = f"{wall / base[1]:.2f}" if base and hwm > 0 else "-"
            print(f"{fmt:8} {str(src)[-40:]:40} {hwm:12d} {wall:8.1f} {rx:>6} {tx:>6}  {note}", flush=True)


if __name__ == "__main__":
    main()
