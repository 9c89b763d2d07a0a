"""The shared token pass's scan (``checks/_flat._dense_scan``) by numpy against the compiled kernel
(``datacheck._scan.dense_scan``, ``datacheck/csrc/scan.c``) on the flat buffers of one
``bench_table.py`` ``f100`` shard (5,000 x 256 tokens: ``input_ids`` int32, ``labels`` int64,
``attention_mask`` int8; its config: ignore_index -100, pad = eos = 50256 the only wanted id, labels
below vocab_size 50257, unshifted), in one process: CPU ms of each call (``time.process_time``),
the two paths interleaved, medians of ``--runs`` calls (and the quartiles), under the CLI's malloc
settings (``cli.main.keep_freed_memory``). The two results are checked equal first.

Usage: python benchmarks/bench_scan_kernel.py [--runs 30] [--shard N]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_table import EOS, files_of, make_data  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--shard", type=int, default=0, help="which shard of the folder")
    a = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import numpy as np
    import pyarrow.parquet as pq

    from datacheck.checks import _flat
    from datacheck.cli.main import keep_freed_memory
    from datacheck.io import native

    keep_freed_memory()  # the CLI's (and a pool worker's) malloc settings: freed blocks are reused

    if getattr(native.scan, "dense_scan", None) is None:
        sys.exit("datacheck._scan is not built (or DATACHECK_NATIVE=0): see datacheck/io/native.py")
    folder, _, _ = make_data("f100", 1.0)
    t = pq.read_table(files_of(folder)[a.shard], columns=["input_ids", "labels", "attention_mask"])
    flat = {c: t.column(c).combine_chunks().values.to_numpy() for c in t.column_names}
    args = (flat["input_ids"], None, flat["labels"], None, flat["attention_mask"], None, -100, False, (EOS,), EOS,
            EOS + 1)
    want, got = _flat._dense_scan_numpy(*args), _flat._dense_scan_native(*args)
    assert np.array_equal(want[0], got[0]) and np.array_equal(want[1], got[1])
    assert all(np.array_equal(want[2][k], got[2][k]) for k in want[2])
    times: dict[str, list[float]] = {"numpy": [], "native": []}
    for _ in range(a.runs):
        for name, fn in (("numpy", _flat._dense_scan_numpy), ("native", _flat._dense_scan_native)):
            c = time.process_time()
            fn(*args)
            times[name].append((time.process_time() - c) * 1e3)
    print(f"{len(args[0]):,} positions, {len(got[2]['hits']):,} hits; CPU ms a call, median (quartiles) of {a.runs}:")
    for name, ts in times.items():
        q = statistics.quantiles(ts, n=4)
        print(f"  {name:6s} {statistics.median(ts):6.2f} ({q[0]:.2f}-{q[2]:.2f})")


if __name__ == "__main__":
    main()
