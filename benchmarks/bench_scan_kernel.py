"""The shared token pass's scan (``checks/_flat._dense_scan``) and ``content.periodic_tokens``'
candidate rows (``checks/_flat.periodic_flat``) by numpy against the compiled kernels
(``datacheck._scan.dense_scan`` and ``periodic_rows``, ``datacheck/csrc/scan.c``) on the flat buffers of one
``bench_table.py`` ``f100`` shard (5,000 x 256 tokens: ``input_ids`` int32, ``labels`` int64,
``attention_mask`` int8; its config: ignore_index -100, pad = eos = 50256 the only wanted id, labels
below vocab_size 50257, unshifted), in one process: CPU ms of each call (``time.process_time``),
the four calls interleaved, medians of ``--runs`` calls (and the quartiles), under the CLI's malloc
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
    lens = np.diff(t.column("input_ids").combine_chunks().offsets.to_numpy()).astype(np.int64)
    offsets = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    pargs = (args[0], got[1], offsets)  # the ids, real content (the mask 1), as _chunk_pass calls it
    assert np.array_equal(_flat._periodic_flat_numpy(*pargs), _flat.periodic_flat(*pargs))
    calls = {"_dense_scan numpy": (_flat._dense_scan_numpy, args), "_dense_scan native": (_flat._dense_scan_native, args),
             "periodic_flat numpy": (_flat._periodic_flat_numpy, pargs), "periodic_flat native": (_flat.periodic_flat, pargs)}
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(a.runs):
        for name, (fn, fargs) in calls.items():
            c = time.process_time()
            fn(*fargs)
            times[name].append((time.process_time() - c) * 1e3)
    print(f"{len(args[0]):,} positions, {len(got[2]['hits']):,} hits; CPU ms a call, median (quartiles) of {a.runs}:")
    for name, ts in times.items():
        q = statistics.quantiles(ts, n=4)
        print(f"  {name:21s} {statistics.median(ts):6.2f} ({q[0]:.2f}-{q[2]:.2f})")


if __name__ == "__main__":
    main()
