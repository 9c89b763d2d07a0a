"""The row-hash payload on the compiled kernel against the numpy path: CPU milliseconds of
``io.rowhash.row_hash_series`` on the three columns of ``f100`` shards (5,000 x 256: ``input_ids``
int32, ``attention_mask`` int8, ``labels`` int64; ``bench_table.py``'s folder, made if missing),
the kernel (``datacheck._rowhash``) and the numpy path (``native.rowhash`` set to None) alternated
in one process, medians of ``--repeat``:

- fresh: each call on a shard decoded just before it (``pl.read_parquet``: the values not yet in
  cache, as in the audit, where the row hashes follow the decode), the shards taken in turn;
- warm: the same decoded shard hashed again and again.

The two paths' hashes are compared on every fresh shard (they must be equal). The process has one
polars thread (a pool worker's ``POLARS_MAX_THREADS`` on 2 cores).

Usage: python benchmarks/bench_rowhash_kernel.py [--repeat 30]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("POLARS_MAX_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_table import files_of, make_data  # noqa: E402

COLUMNS = ["input_ids", "attention_mask", "labels"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=30)
    a = ap.parse_args()
    import polars as pl

    from datacheck.io import native
    from datacheck.io.rowhash import row_hash_series

    kernel = native.rowhash
    if kernel is None:
        sys.exit("datacheck._rowhash is not built (or DATACHECK_NATIVE=0): see datacheck/io/native.py")
    folder, _, _ = make_data("f100", 1.0)
    files = files_of(folder)
    spent: dict[str, list[float]] = {}

    def timed(name: str, cols: list[pl.Series], on: bool) -> pl.Series:
        native.rowhash = kernel if on else None
        t = time.process_time()
        out = row_hash_series(cols)
        spent.setdefault(name, []).append((time.process_time() - t) * 1e3)
        native.rowhash = kernel
        return out

    row_hash_series([pl.read_parquet(files[0])[c] for c in COLUMNS])  # first-call costs out of the runs
    for i in range(a.repeat):
        got = {}
        for on in ((True, False) if i % 2 == 0 else (False, True)):
            frame = pl.read_parquet(files[i % len(files)])
            got[on] = timed(f"fresh, {'kernel' if on else 'numpy path'}", [frame[c] for c in COLUMNS], on)
        if not got[True].equals(got[False]):
            sys.exit(f"the two paths' row hashes differ on {files[i % len(files)]}")
    frame = pl.read_parquet(files[0])
    cols = [frame[c] for c in COLUMNS]
    for _ in range(3):
        row_hash_series(cols)
    for i in range(a.repeat):
        for on in ((True, False) if i % 2 == 0 else (False, True)):
            timed(f"warm, {'kernel' if on else 'numpy path'}", cols, on)
    print(f"row_hash_series on one f100 shard (5,000 x 256, 3 columns), CPU ms, median of {a.repeat} "
          f"[min-max]:")
    for name, ms in spent.items():
        print(f"  {name:<22} {statistics.median(ms):6.2f}  [{min(ms):.2f}-{max(ms):.2f}]")


if __name__ == "__main__":
    main()
