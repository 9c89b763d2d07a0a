"""Benchmark: full `datacheck.audit` of one tokenized parquet shard vs `polars.read_parquet` of it.

Generates (once, seeded) a causal-LM shard of ROWS x SEQ_LEN tokens (default 400,000 x 128 =
51.2M tokens) with input_ids (list<int32>), attention_mask (list<int8>) and labels (list<int64>),
right-padded, then measures in the same run, each in a fresh subprocess so peak RSS is per task:

- read:  ``polars.read_parquet(path)`` (all columns),
- audit: ``datacheck.audit(path, config)`` with every check that applies (vocab, pad/eos, ignore_index,
  max_seq_len = the row length, :func:`config_for`: the generated shard is clean unless ``--defects``),
  in a process with the settings of the CLI process: pyarrow's memory pool
  (``datacheck.cli.main.choose_arrow_pool``: jemalloc on Linux unless ``ARROW_DEFAULT_MEMORY_POOL`` is
  set) and glibc's reuse of freed blocks (``keep_freed_memory``).

Prints wall seconds (median of --repeat runs), CPU seconds (user + system), peak RSS (MiB) and the
ratios audit/read. Wall time is what the goal is about; CPU time shows the work when the machine is shared.
With ``--baseline-src DIR`` (a checkout of an earlier datacheck, e.g. ``git worktree add /tmp/base
<commit>``), the audit is also run from that source tree, interleaved in the same run, and the
ratio new/old is printed: "before and after, same run".
Usage: python benchmarks/bench_audit.py [--rows 400000] [--seq-len 128] [--repeat 3] [--defects]
       [--baseline-src DIR]

Bounded memory (issue 14): ``--sizes 1,2,4,8`` generates, per size S (GiB of decoded token data:
13 bytes a token, int32 ids + int8 mask + int64 labels) and per ``--seq-lens`` (default 128,1024),
a shard written row group by row group (about 128 MiB decoded each, so generating it never holds
the shard), then measures in one run, each in a fresh process: ``polars.read_parquet`` (skipped
above ``--max-read-gib``, default 4: the plain read holds the whole shard) and ``datacheck.audit``;
prints wall seconds, the ratio audit/read and the peak RSS (ru_maxrss of the child) per size.
``--keep`` keeps the generated shards under benchmarks/_work (they are deleted after measuring).
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


def config_for(seq_len: int) -> dict:
    """:data:`CONFIG` with ``max_seq_len`` = the shard's row length: the generated rows are exactly
    ``seq_len`` tokens long (right-padded), so a clean shard has no ``length.over_max`` finding (with
    the fixed 128 of :data:`CONFIG`, every row of a 1024-token shard failed it and the audit paid for
    gathering 20,000 failing rows, which no clean shard does)."""
    return {**CONFIG, "tokens": {**CONFIG["tokens"], "max_seq_len": seq_len}}


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


def make_sized_shard(gib: float, seq_len: int, seed: int = 0) -> Path:
    """A clean causal-LM shard of about ``gib`` GiB of decoded tokens (13 bytes a token), written by
    pyarrow row group by row group (about 128 MiB decoded each) so that it is never held whole."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = int(gib * 2**30 / (13 * seq_len))
    path = WORK / f"lm_{gib:g}gib_{seq_len}.parquet"
    if path.exists():
        return path
    WORK.mkdir(parents=True, exist_ok=True)
    per_group = max(1, 2**27 // (13 * seq_len))
    rng = np.random.default_rng(seed)
    tmp = path.with_suffix(".tmp")
    writer = None
    pos = np.arange(seq_len)[None, :]
    done = 0
    while done < rows:
        k = min(per_group, rows - done)
        ids = rng.integers(0, 50256, size=(k, seq_len), dtype=np.int32)
        lengths = rng.integers(8, seq_len + 1, size=k)
        real = pos < lengths[:, None]
        ids[np.arange(k), lengths - 1] = 50256
        ids[~real] = 50256
        labels = ids.astype(np.int64)
        labels[pos < rng.integers(1, 6, size=k)[:, None]] = -100
        labels[~real] = -100

        def lst(a: "np.ndarray") -> pa.Array:
            return pa.ListArray.from_arrays(pa.array(np.arange(0, k * seq_len + 1, seq_len, dtype=np.int32)),
                                            pa.array(a.ravel()))

        t = pa.table({"input_ids": lst(ids), "attention_mask": lst(real.astype(np.int8)), "labels": lst(labels)})
        if writer is None:
            writer = pq.ParquetWriter(tmp, t.schema)
        writer.write_table(t, row_group_size=k)
        done += k
    assert writer is not None
    writer.close()
    tmp.replace(path)
    return path


def sizes_table(a: argparse.Namespace) -> None:
    """The --sizes run: audit/read time and peak RSS per shard size (see the module docstring)."""
    print("| tokens/row | size (GiB decoded) | rows | file MiB | read s (CPU s) | read RSS MiB | audit s (CPU s) "
          "| audit RSS MiB | audit/read wall (CPU) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for seq_len in [int(x) for x in a.seq_lens.split(",")]:
        for gib in [float(x) for x in a.sizes.split(",")]:
            path = make_sized_shard(gib, seq_len)
            mib = path.stat().st_size / 2**20
            reads, audits = [], []
            for _ in range(a.repeat):
                if gib <= a.max_read_gib:
                    reads.append(run("read", path, seq_len))
                audits.append(run("audit", path, seq_len))
            au = statistics.median(x["seconds"] for x in audits)
            ac = statistics.median(x["cpu_seconds"] for x in audits)
            arss = max(x["peak_rss_mib"] for x in audits)
            rows = audits[0]["rows"]
            if reads:
                r = statistics.median(x["seconds"] for x in reads)
                rc = statistics.median(x["cpu_seconds"] for x in reads)
                rrss = max(x["peak_rss_mib"] for x in reads)
                print(f"| {seq_len} | {gib:g} | {rows} | {mib:.0f} | {r:.2f} ({rc:.2f}) | {rrss:.0f} | {au:.2f} ({ac:.2f}) "
                      f"| {arss:.0f} | {au / r:.2f} ({ac / rc:.2f}) |", flush=True)
            else:
                print(f"| {seq_len} | {gib:g} | {rows} | {mib:.0f} | not run (> --max-read-gib) | - | {au:.2f} ({ac:.2f}) | "
                      f"{arss:.0f} | - |", flush=True)
            if audits[0]["findings"]:
                print(f"  (findings: {audits[0]['findings']})")
            if not a.keep:
                path.unlink()


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def child(task: str, path: str, seq_len: int) -> None:
    import polars as pl

    if task == "read":
        c0, t0 = _cpu(), time.perf_counter()
        df = pl.read_parquet(path)
        dt, cpu = time.perf_counter() - t0, _cpu() - c0
        extra = {"rows": df.height}
    else:
        import importlib

        try:  # the process settings of the CLI (pyarrow's pool, glibc's reuse of freed memory), where they exist
            from datacheck.cli.main import choose_arrow_pool
            choose_arrow_pool()
            from datacheck.cli.main import keep_freed_memory
            keep_freed_memory()
        except ImportError:
            pass
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
        rep = datacheck.audit(path, config_for(seq_len))
        dt, cpu = time.perf_counter() - t0, _cpu() - c0
        extra = {"rows": rep.summary["rows"], "findings": sorted({f.check for f in rep.findings})}
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB -> MiB on Linux
    print(json.dumps({"seconds": dt, "cpu_seconds": cpu, "peak_rss_mib": rss, **extra}))


def warm_page_cache(path: Path) -> None:
    """Read ``path``'s bytes once, so the timed task finds them in the OS page cache. On this VM the
    disk reads ~35 MB/s and cached pages get reclaimed between tasks (the 713 MiB 4 GiB shard: 20.4 s
    uncached, 0.10 s cached, `cat` twice): without this, whichever task found the file evicted
    measured the disk, not the decode and the checks (the 4 GiB x 128 audit waited 4.4 s for reads)."""
    with open(path, "rb") as f:
        while f.read(16 << 20):
            pass


def run(task: str, path: Path, seq_len: int, src: str | None = None) -> dict:
    warm_page_cache(path)
    env = None
    if src is not None:  # the audit of another source tree (PYTHONPATH first on sys.path)
        env = {**os.environ, "PYTHONPATH": src}
    out = subprocess.run([sys.executable, __file__, "--child", task, str(path), "--child-seq-len", str(seq_len)],
                         capture_output=True, text=True, check=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=400_000)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--defects", action="store_true", help="plant 0.1%% bad rows (examples pass runs too)")
    ap.add_argument("--baseline-src", default=None, help="also audit with this source tree (before/after, same run)")
    ap.add_argument("--sizes", default=None, help="GiB of decoded tokens per shard, e.g. 1,2,4,8 (bounded-memory table)")
    ap.add_argument("--seq-lens", default="128,1024", help="with --sizes: tokens a row")
    ap.add_argument("--max-read-gib", type=float, default=4.0, help="with --sizes: largest shard also read plainly")
    ap.add_argument("--keep", action="store_true", help="with --sizes: keep the generated shards")
    ap.add_argument("--child", nargs=2, metavar=("TASK", "PATH"), help=argparse.SUPPRESS)
    ap.add_argument("--child-seq-len", type=int, default=128, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(*a.child, a.child_seq_len)
        return
    if a.sizes:
        sizes_table(a)
        return
    path = make_shard(a.rows, a.seq_len, a.defects)
    tokens = a.rows * a.seq_len
    print(f"shard {path.name}: {a.rows} rows, {tokens / 1e6:.1f}M tokens, {path.stat().st_size / 2**20:.0f} MiB")
    reads, audits, base = [], [], []
    for _ in range(a.repeat):  # interleaved so that all see the same machine state
        reads.append(run("read", path, a.seq_len))
        audits.append(run("audit", path, a.seq_len))
        if a.baseline_src:
            base.append(run("audit", path, a.seq_len, a.baseline_src))
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
