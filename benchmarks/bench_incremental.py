"""Benchmark: incremental re-audit through the per-shard result cache (``datacheck.execute.cache``).

Generates (seeded, once) SHARDS tokenized causal-LM parquet shards of ROWS rows each (default
100 x 24,000 rows, input_ids list<int32> of 16..128 tokens, attention_mask list<int8>, labels
list<int64>; about 1.7M tokens and 7.5 MB per shard), then times, in this order:

1. ``first``:     the audit with an empty cache (every shard read; results written to the cache);
2. ``unchanged``: the same audit again (every shard hashed, none read);
3. ``one_change``: the audit after one shard was rewritten with one row changed (that shard re-read).

Each step is timed end to end: in-process ``datacheck.audit(...)`` with ``--mode api`` (default),
or a fresh ``python -m datacheck audit ...`` subprocess with ``--mode cli`` (adds interpreter and
import start-up to every step). The dataset-level (cross-shard) checks and the report build run in
every step. Goals (issue 5): unchanged <= 10% and one_change <= 15% of first. The script checks that
the three reports agree with what changed (same report for the rerun; the changed shard's new hash)
and exits 1 when a goal is missed.

Usage: python benchmarks/bench_incremental.py [--shards 100] [--rows 24000] [--mode api|cli]
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORK = Path(__file__).resolve().parent / "_work"
CONFIG = {"tokens": {"vocab_size": 50257, "pad_token_id": 50256, "eos_token_id": 50256, "max_seq_len": 128},
          "labels": {"ignore_index": -100}}
CONFIG_TOML = """[tokens]
vocab_size = 50257
pad_token_id = 50256
eos_token_id = 50256
max_seq_len = 128
[labels]
ignore_index = -100
"""
GOAL_UNCHANGED = 0.10
GOAL_ONE_CHANGE = 0.15


def _base_frame(rows: int, seed: int = 0):
    import numpy as np
    import polars as pl

    rng = np.random.default_rng(seed)
    lengths = rng.integers(16, 129, size=rows)
    flat = rng.integers(0, 50256, size=int(lengths.sum()), dtype=np.int32)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    ends = offsets[1:] - 1
    flat[ends] = 50256  # every sample ends with eos
    ids = pl.Series("input_ids", [flat[a:b] for a, b in zip(offsets[:-1], offsets[1:])], dtype=pl.List(pl.Int32))
    return pl.DataFrame([ids])


def make_shards(n: int, rows: int) -> Path:
    """``WORK/incremental_<n>x<rows>/train-0000k-of-0000n.parquet``; shard k's ids are shifted by k."""
    import polars as pl

    folder = WORK / f"incremental_{n}x{rows}"
    done = folder / ".complete"
    if done.exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    base = _base_frame(rows)
    for k in range(n):
        ids = pl.col("input_ids").list.eval(pl.when(pl.element() == 50256).then(50256)
                                            .otherwise((pl.element() + k) % 50256)).cast(pl.List(pl.Int32))
        df = base.select(ids.alias("input_ids")).with_columns(
            pl.col("input_ids").list.eval(pl.lit(1, dtype=pl.Int8)).alias("attention_mask"),
            pl.col("input_ids").cast(pl.List(pl.Int64)).alias("labels"))
        df.write_parquet(folder / f"train-{k:05d}-of-{n:05d}.parquet")
    done.write_text("ok\n")
    return folder


def change_one_shard(folder: Path, data: Path) -> str:
    """Copy ``folder`` to ``data`` (once) and rewrite its middle shard with row 0's first id changed."""
    import polars as pl

    shards = sorted(folder.glob("*.parquet"))
    victim = shards[len(shards) // 2]
    df = pl.read_parquet(victim)
    first = df["input_ids"][0].to_list()
    first[0] = (first[0] + 1) % 50256
    df = pl.concat([df.slice(0, 0), pl.DataFrame({"input_ids": [first], "attention_mask": [df["attention_mask"][0]],
                                                  "labels": [df["labels"][0]]}, schema=df.schema), df.slice(1)])
    df.write_parquet(data / victim.name)
    return victim.name


def timed_api(data: Path, cache: Path) -> tuple[float, dict]:
    import datacheck

    t = time.perf_counter()
    rep = datacheck.audit(data, CONFIG, cache_dir=cache)
    return time.perf_counter() - t, rep.to_dict()


def timed_cli(data: Path, cache: Path, work: Path) -> tuple[float, dict]:
    out = work / "report.json"
    cfg = work / "datacheck.toml"
    cfg.write_text(CONFIG_TOML)
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "datacheck", "audit", str(data), "--config", str(cfg), "--cache-dir",
                        str(cache), "--report-dir", str(work / "reports"), "-o", str(out), "--format", "json",
                        "--no-progress"], capture_output=True, text=True)
    dt = time.perf_counter() - t
    if r.returncode not in (0, 1):
        raise SystemExit(f"datacheck failed ({r.returncode}): {r.stderr}")
    return dt, json.loads(out.read_text())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shards", type=int, default=100)
    ap.add_argument("--rows", type=int, default=24000, help="rows per shard")
    ap.add_argument("--mode", choices=["api", "cli"], default="api")
    args = ap.parse_args()

    t = time.perf_counter()
    folder = make_shards(args.shards, args.rows)
    print(f"data: {args.shards} shards x {args.rows} rows in {folder} (ready in {time.perf_counter() - t:.1f} s)")
    with tempfile.TemporaryDirectory(prefix="bench_incremental_", dir=WORK) as tmp:
        work = Path(tmp)
        data = work / "data"
        shutil.copytree(folder, data, ignore=shutil.ignore_patterns(".complete"))
        cache = work / "cache"

        from datacheck.execute.cache import code_fingerprint

        def run():
            return timed_api(data, cache) if args.mode == "api" else timed_cli(data, cache, work)

        fp_start = code_fingerprint.__wrapped__()
        t_first, rep_first = run()
        t_same, rep_same = run()
        victim = change_one_shard(folder, data)
        t_one, rep_one = run()
        code_changed = code_fingerprint.__wrapped__() != fp_start

    def norm(d: dict) -> str:
        return re.sub(r'"created_at": "[^"]*"', "", json.dumps(d, sort_keys=True))

    ok = norm(rep_first) == norm(rep_same)
    changed = [s["path"] for s, o in zip(rep_one["shards"], rep_first["shards"]) if s["content_hash"] != o["content_hash"]]
    ok = ok and changed == [victim]
    r_same, r_one = t_same / t_first, t_one / t_first
    print(f"mode {args.mode}: tokens per shard ~{rep_first['stats'].get('lengths', {}).get('mean', 0) * args.rows:,.0f}")
    print(f"first audit (empty cache):   {t_first:8.2f} s")
    print(f"unchanged rerun:             {t_same:8.2f} s  = {100 * r_same:5.1f}% of first (goal <= {100 * GOAL_UNCHANGED:.0f}%)")
    print(f"one shard changed ({victim}): {t_one:8.2f} s  = {100 * r_one:5.1f}% of first (goal <= {100 * GOAL_ONE_CHANGE:.0f}%)")
    print(f"reports consistent: {ok} (rerun identical; changed shards {changed})")
    if args.mode == "cli":
        # each CLI process fingerprints datacheck's source (part of every cache key): an edit of the
        # package between two steps rightly turns the next step into a full re-audit
        print("datacheck's source changed during the run: the figures are void, rerun" if code_changed
              else "datacheck's source did not change during the run")
    met = ok and r_same <= GOAL_UNCHANGED and r_one <= GOAL_ONE_CHANGE
    print("goals met" if met else "GOALS MISSED")
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
