"""Would a compiled kernel from a library (numba) pay for itself in an audit? (issue 28)

Measures, in fresh processes, on the decoded buffers of one ``bench_table.py`` ``f100`` shard (5,000
x 256 tokens: ``input_ids`` int32, ``labels`` int64, ``attention_mask`` int8, flat):

- the import of numba (CPU s of ``import numba`` after numpy);
- the first call of a kernel compiled with ``cache=True`` in an earlier process (its load from the
  on-disk cache: what every audit process would pay once);
- the kernel itself (the dense comparisons of the shared token pass, ``checks/_flat._dense_scan``,
  reduced to three counts, branch-free: supervised labels, rare positions, pad ids of real content;
  labels unshifted, as the shard holds them),
  min of 7 calls, ms;
- datacheck's own ``_dense_scan`` over the same buffers (min of 7 calls, ms), which also lists the
  positions the rules read.

numba is not a dependency: install it apart and name the folder (``pip install --target DIR numba
llvmlite --no-deps``, then ``--numba-path DIR``). Prints one line per process and a summary.

Usage: python benchmarks/compiled_kernel_probe.py --numba-path DIR [--runs 3]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

CHILD = r'''
import json, resource, sys, time
sys.path.insert(0, sys.argv[2])
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
import numpy as np
import pyarrow.parquet as pq
from datacheck.checks._flat import _dense_scan
t = pq.read_table(sys.argv[1], columns=["input_ids", "labels", "attention_mask"])
flat = {c: t.column(c).combine_chunks().values.to_numpy() for c in t.column_names}
ids, lab, att = flat["input_ids"], flat["labels"], flat["attention_mask"]
c0 = cpu()
import numba
c1 = cpu()

@numba.njit(cache=True, nogil=True)
def scan(ids, lab, att, ign, pad):
    sup = 0
    rare = 0
    hits = 0
    for k in range(ids.shape[0] - 1):
        s = np.int64(lab[k] != ign)
        m = np.int64(att[k])
        sup += s
        rare += s & np.int64(lab[k] != ids[k])
        rare += (1 - m) & (np.int64(ids[k] != pad) | s)
        hits += m & np.int64(ids[k] == pad)
    return sup, rare, hits

scan(ids, lab, att, -100, 50256)
c2 = cpu()
mine = []
for _ in range(7):
    a = time.perf_counter()
    scan(ids, lab, att, -100, 50256)
    mine.append(time.perf_counter() - a)
best = min(mine)
ours = []
for _ in range(7):
    a = time.perf_counter()
    _dense_scan(ids, None, lab, None, att, None, -100, False, (50256,), 50256, 50257)
    ours.append(time.perf_counter() - a)
print(json.dumps({"import_cpu_s": c1 - c0, "first_call_cpu_s": c2 - c1, "kernel_ms": best * 1e3,
                  "dense_scan_ms": min(ours) * 1e3}))
'''


def main() -> None:
    from bench_table import files_of, make_data

    ap = argparse.ArgumentParser()
    ap.add_argument("--numba-path", required=True, help="a folder holding numba and llvmlite (pip install --target)")
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    folder, _, _ = make_data("f100", 1.0)
    shard = files_of(folder)[0]
    root = str(Path(__file__).resolve().parent.parent)
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "probe_child.py"  # numba caches a kernel beside its file: a file of its own
        script.write_text(CHILD)
        env = {**os.environ, "PYTHONPATH": a.numba_path, "NUMBA_CACHE_DIR": str(Path(tmp) / "cache")}
        # the first process compiles and fills the cache; the later ones load from it
        runs = []
        for k in range(a.runs + 1):
            out = subprocess.run([sys.executable, str(script), str(shard), root], env=env, check=True,
                                 capture_output=True, text=True).stdout
            got = json.loads(out.strip().splitlines()[-1])
            print(("compile " if k == 0 else "cached  ") + json.dumps({k2: round(v, 3) for k2, v in got.items()}))
            if k:
                runs.append(got)
    med = {k: sorted(r[k] for r in runs)[len(runs) // 2] for k in runs[0]}
    print("median of the cached runs: " + ", ".join(f"{k} {v:.3f}" for k, v in med.items()))


if __name__ == "__main__":
    main()
