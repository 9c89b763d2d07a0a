"""Benchmark: time and peak RSS of auditing one large ``.jsonl.gz`` (issue 15 item 8).

Generates (seeded, cached under ``benchmarks/_work``) a gzip JSONL file of ``--mib`` MiB inflated,
records ``{"text": ..., "label": int, "input_ids": [ints]}``, in two variants:

- ``clean``: every line parses (every 32 MiB chunk takes polars' fast path);
- ``bad_line``: the same file with one line that does not parse in the middle (before issue 15
  item 8a the whole file then took the per-line Python path: 10 GB RSS measured on 1.8 GB).

Each audit runs in a child process (``python -m datacheck audit FILE --no-cache``) with
``PYTHONPATH`` set to each tree given by ``--tree`` (e.g. the main checkout and a branch), and the
child's wall seconds and peak RSS (``ru_maxrss`` of the audit and its worker processes, MiB) are printed, one row per
(tree, variant), all in one run.

Usage: python benchmarks/bench_jsonl_stream.py [--mib 1024] [--tree /work/main --tree .]
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORK = Path(__file__).resolve().parent / "_work"


def _make(mib: int, bad: bool) -> Path:
    path = WORK / f"stream_{mib}mib_{'bad' if bad else 'clean'}" / "shard.jsonl.gz"
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    words = ["data", "model", "train", "loss", "token", "batch", "eval", "shard", "gate", "check"]
    target = mib * 2**20
    written = 0
    half = False
    tmp = path.with_suffix(".tmp")
    with gzip.open(tmp, "wb", compresslevel=1) as f:
        i = 0
        while written < target:
            lines = []
            for _ in range(1000):
                rec = {"text": " ".join(rng.choices(words, k=rng.randint(5, 60))), "label": i % 7,
                       "input_ids": [rng.randrange(50_000) for _ in range(rng.randint(8, 64))]}
                lines.append(json.dumps(rec))
                i += 1
            if bad and not half and written >= target // 2:
                lines.append('{"text": "broken')
                half = True
            blob = ("\n".join(lines) + "\n").encode()
            f.write(blob)
            written += len(blob)
    tmp.rename(path)
    return path


_CHILD = """
import resource, subprocess, sys
rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, rc)
"""


def _run(tree: Path, data: Path) -> tuple[float, float, int]:
    """(wall seconds, peak RSS in MiB of the audit and every process it waited for, exit code). A
    fresh wrapper process runs each audit, so RUSAGE_CHILDREN is that audit's alone (datacheck's
    worker processes included)."""
    out = Path(tempfile.mkdtemp(prefix="dc-bench-"))
    env = dict(os.environ, PYTHONPATH=str(tree), DATACHECK_DIR=str(out / "home"))
    cmd = [sys.executable, "-m", "datacheck", "audit", str(data), "--no-cache", "--no-progress",
           "--format", "json", "--output", str(out / "r.json"), "--report-dir", str(out / "reports")]
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", _CHILD, *cmd], env=env, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t0
    kib, rc = p.stdout.split()
    return wall, int(kib) / 1024, int(rc)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=1024, help="inflated size of the generated file (MiB)")
    ap.add_argument("--tree", action="append", type=Path, help="source tree(s) to run (default: this one)")
    args = ap.parse_args()
    trees = args.tree or [Path(__file__).resolve().parent.parent]
    files = {"clean": _make(args.mib, False), "bad_line": _make(args.mib, True)}
    print(f"{'tree':40} {'variant':9} {'wall_s':>8} {'peak_rss_mib':>13} rc")
    for variant, data in files.items():
        for tree in trees:
            wall, rss, rc = _run(tree, data)
            print(f"{str(tree):40} {variant:9} {wall:8.1f} {rss:13.0f} {rc}", flush=True)


if __name__ == "__main__":
    main()
