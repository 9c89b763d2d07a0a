"""Benchmark: full `datacheck.audit` of one tokenized parquet shard vs `polars.read_parquet` of it.

Generates (once, seeded) a causal-LM shard of ROWS x SEQ_LEN tokens (default 400,000 x 128 =
51.2M tokens) with input_ids (list<int32>), attention_mask (list<int8>) and labels (list<int64>),
right-padded, then measures in the same run, each in a fresh subprocess so peak RSS is per task:

- read:  ``polars.read_parquet(path)`` (all columns),
- audit: ``datacheck.audit(path, config)`` with every check that applies (vocab, pad/eos, max_seq_len).

Prints wall seconds (median of --repeat runs), CPU seconds (user + system), peak RSS (MiB) and the
ratios audit/read. Wall time is what the goal is about; CPU time shows the work when the machine is shared.
With ``--baseline-src DIR`` (a checkout of an earlier datacheck, e.g. ``git worktree add /tmp/base
<commit>``), the audit is also run from that source tree, interleaved in the same run, and the
ratio new/old is printed: "before and after, same run".
Usage: python benchmarks/bench_audit.py [--rows 400000] [--seq-len 128] [--repeat 3] [--defects]
       [--baseline-src DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

WORK = Path(__file__).resolve().parent / "_work"
CONFIG = {
    "tokens": {"vocab_size": 50257, "pad_token_id": 50256, "eos_token_id": 50256, "max_seq_len": 128},
    "labels": {"ignore_index": -100},
}


def make_shard(rows: int, seq_len: int, defects: bool, seed: int = 0) -> Path:
    import numpy as np
    import polars as pl

    name = f"lm_{rows}x{seq_len}{'_defects' if defects else ''}.parquet"
    path = WORK / name
    if path.exists():
        return path
    WORK.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 50256, size=(rows, seq_len), dtype=np.int32)
    lengths = rng.integers(8, seq_len + 1, size=rows)
    pos = np.arange(seq_len)[None, :]
    real = pos < lengths[:, None]
    eos_pos = np.minimum(lengths - 1, seq_len - 1)
    ids[np.arange(rows), eos_pos] = 50256  # content ends with eos
    ids[~real] = 50256  # padding (pad == eos, as in GPT-2)
    mask = real.astype(np.int8)
    labels = ids.astype(np.int64)
    prompt = rng.integers(1, 6, size=rows)
    labels[pos < prompt[:, None]] = -100
    labels[~real] = -100
    if defects:
        bad = rng.choice(rows, size=rows // 1000, replace=False)
        ids[bad, 3] = 60000  # out of vocab
        mask[bad[: len(bad) // 2], 1] = 0  # holes
    def lst(a, dt):
        return pl.Series(a.ravel()).reshape((rows, seq_len)).cast(pl.List(dt))
    df = pl.DataFrame({"input_ids": lst(ids, pl.Int32), "attention_mask": lst(mask, pl.Int8),
                       "labels": lst(labels, pl.Int64)})
    tmp = path.with_suffix(".tmp")
    df.write_parquet(tmp)
    tmp.replace(path)
    return path


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def child(task: str, path: str) -> None:
    import polars as pl

    if task == "read":
        c0, t0 = _cpu(), time.perf_counter()
        df = pl.read_parquet(path)
        dt, cpu = time.perf_counter() - t0, _cpu() - c0
        extra = {"rows": df.height}
    else:
        import importlib

        import datacheck

        # imports of the check modules are not audit work (their module moved between versions)
        for mod in ("datacheck.checks.all", "datacheck.checks.registry", "datacheck.checks"):  # newest first
            try:
                m = importlib.import_module(mod)
            except ImportError:
                continue
            if hasattr(m, "load_families"):
                m.load_families()
            break
        c0, t0 = _cpu(), time.perf_counter()
        rep = datacheck.audit(path, CONFIG)
        dt, cpu = time.perf_counter() - t0, _cpu() - c0
        extra = {"rows": rep.summary["rows"], "findings": sorted({f.check for f in rep.findings})}
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB -> MiB on Linux
    print(json.dumps({"seconds": dt, "cpu_seconds": cpu, "peak_rss_mib": rss, **extra}))


def run(task: str, path: Path, src: str | None = None) -> dict:
    env = None
    if src is not None:  # the audit of another source tree (PYTHONPATH first on sys.path)
        env = {**os.environ, "PYTHONPATH": src}
    out = subprocess.run([sys.executable, __file__, "--child", task, str(path)], capture_output=True, text=True,
                         check=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=400_000)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--defects", action="store_true", help="plant 0.1%% bad rows (examples pass runs too)")
    ap.add_argument("--baseline-src", default=None, help="also audit with this source tree (before/after, same run)")
    ap.add_argument("--child", nargs=2, metavar=("TASK", "PATH"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(*a.child)
        return
    path = make_shard(a.rows, a.seq_len, a.defects)
    tokens = a.rows * a.seq_len
    print(f"shard {path.name}: {a.rows} rows, {tokens / 1e6:.1f}M tokens, {path.stat().st_size / 2**20:.0f} MiB")
    reads, audits, base = [], [], []
    for _ in range(a.repeat):  # interleaved so that all see the same machine state
        reads.append(run("read", path))
        audits.append(run("audit", path))
        if a.baseline_src:
            base.append(run("audit", path, a.baseline_src))
    r = statistics.median(x["seconds"] for x in reads)
    au = statistics.median(x["seconds"] for x in audits)
    print(f"polars.read_parquet: {r:.2f} s (runs {[round(x['seconds'], 2) for x in reads]}), "
          f"peak RSS {max(x['peak_rss_mib'] for x in reads):.0f} MiB")
    print(f"datacheck.audit:     {au:.2f} s (runs {[round(x['seconds'], 2) for x in audits]}), "
          f"peak RSS {max(x['peak_rss_mib'] for x in audits):.0f} MiB; findings {audits[0]['findings']}")
    rc = statistics.median(x["cpu_seconds"] for x in reads)
    ac = statistics.median(x["cpu_seconds"] for x in audits)
    print(f"ratio audit/read: {au / r:.2f} wall (goal <= 1.3, issue 14); CPU seconds {ac:.2f} / {rc:.2f} = {ac / rc:.2f}")
    if base:
        b = statistics.median(x["seconds"] for x in base)
        bc = statistics.median(x["cpu_seconds"] for x in base)
        print(f"baseline audit ({a.baseline_src}): {b:.2f} s (runs {[round(x['seconds'], 2) for x in base]}), "
              f"peak RSS {max(x['peak_rss_mib'] for x in base):.0f} MiB; findings {base[0]['findings']}")
        print(f"after/before: {au / b:.2f} wall, {ac / bc:.2f} CPU (baseline audit/read {b / r:.2f})")


if __name__ == "__main__":
    main()
