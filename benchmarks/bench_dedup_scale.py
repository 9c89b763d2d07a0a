"""Benchmark: the dataset stage's cross-shard duplicate pass (dup.exact_across_shards,
dup.conflicting_labels, dup.split_overlap) at scale, in memory (today's pass over payloads held
by the shard results) against the partitioned pass over spilled payloads (bounded memory,
:mod:`datacheck.io.hashspill`).

Synthetic row-hash payloads (no shard is read: the dataset stage never reads one either):
ROWS rows over SHARDS shards (default 1e7 over 1,000), each shard's ``crossdup.rows`` payload
(``hash`` ``UInt128``, no label) written as the audit spills it (Arrow IPC, one file per shard,
kept in ``benchmarks/_work/dedup_scale_<rows>x<shards>/`` and reused). A row's hash is made from
its id (high 64 bits: the id; low 64 bits: splitmix64 of the id, so the partition bits are
uniform). Planted, with numpy's seeded generator: 0.5% of the rows of every shard but the first
take the id of a row of an earlier shard (exact repeats across shards); the last 10% of the
shards are split ``test``, and 1% of their rows take the id of a ``train`` row (split overlap).

Each mode runs in a fresh child process that reports its own peak RSS (``ru_maxrss``) and the
dataset stage's wall time; the finding counts of both modes are printed and must be equal:

- ``memory``: every payload loaded into memory first (what the shard results of an audit hold
  today), then the three checks with the in-memory candidate pass;
- ``partitioned``: the shard results hold only :class:`~datacheck.io.hashspill.SpilledRows`
  references (``$DATACHECK_SPILL_ROWS=0``): one shard, then one of 64 hash partitions, in memory.

Near duplicates (``--near-rows``, default 1e6 documents over the same number of shards): synthetic
MinHash signatures (uint32 [rows, 128], 512 B a row; random, i.e. documents with nothing in
common) with 1% of the rows of every shard but the first planted as near copies of a row of an
earlier shard (a train row, for the test shards): its signature with 12 of 128 values redrawn (estimated
Jaccard ~0.9, above the 0.8 threshold). The ``dup.near_duplicate`` dataset stage in both modes:
``memory`` (signatures held in memory, as the shard results hold them without spilling) and
``partitioned`` (spilled column-major ``.npy`` files, as a long audit leaves them: one LSH band's
columns read at a time).

Usage: python benchmarks/bench_dedup_scale.py [--rows 10000000] [--shards 1000] [--near-rows 1000000]
       [--modes memory,partitioned] [--skip exact|near]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

WORK = Path(__file__).resolve().parent / "_work"


def _mix64(x):  # splitmix64 finalizer (numpy uint64 in and out)
    import numpy as np

    x = x.copy()
    with np.errstate(over="ignore"):
        x ^= x >> np.uint64(30)
        x *= np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(27)
        x *= np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(31)
    return x


def generate(rows: int, shards: int, seed: int = 0) -> Path:
    import numpy as np
    import polars as pl

    root = WORK / f"dedup_scale_{rows}x{shards}"
    if (root / "meta.json").exists():
        return root
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    per = rows // shards
    n_test = max(1, shards // 10)
    n_train_rows = (shards - n_test) * per
    meta = []
    t0 = time.perf_counter()
    for i in range(shards):
        split = "test" if i >= shards - n_test else "train"
        ids = np.arange(i * per, (i + 1) * per, dtype=np.uint64)
        if i > 0:
            k = per // 200  # 0.5%: repeats of rows of earlier shards
            ids[rng.choice(per, size=k, replace=False)] = rng.integers(0, i * per, size=k).astype(np.uint64)
        if split == "test":
            k = per // 100  # 1%: train rows in the test split
            ids[rng.choice(per, size=k, replace=False)] = rng.integers(0, n_train_rows, size=k).astype(np.uint64)
        df = pl.DataFrame({"hi": ids, "lo": _mix64(ids + np.uint64(0x9E3779B97F4A7C15))}).select(
            (pl.col("hi").cast(pl.UInt128) * pl.lit(2**64, dtype=pl.UInt128) + pl.col("lo").cast(pl.UInt128))
            .alias("hash"))
        df.write_ipc(root / f"{i:05d}.arrow")
        meta.append({"path": f"{split}/part-{i:05d}.parquet", "rows": per})
    (root / "meta.json").write_text(json.dumps({"shards": meta, "seconds": time.perf_counter() - t0}))
    return root


def child(mode: str, root: str) -> None:
    import polars as pl

    from datacheck.checks.dup.cross import (
        CONTENT_KEY,
        ROWS_KEY,
        assign_splits,
        conflicting_labels,
        exact_across_shards,
        split_overlap,
    )
    from datacheck.io.hashspill import ENV_SPILL_ROWS, SpilledRows
    from datacheck.model.config import config_from_dict
    from datacheck.model.results import DatasetContext, ShardResult

    rootp = Path(root)
    meta = json.loads((rootp / "meta.json").read_text())["shards"]
    content = {"columns": ["text"], "label": None, "encoding": "datacheck-row-v1"}
    if mode == "partitioned":
        os.environ[ENV_SPILL_ROWS] = "0"
    else:
        os.environ[ENV_SPILL_ROWS] = str(10**12)
    t0 = time.perf_counter()
    results = []
    for k, m in enumerate(meta):
        p = rootp / f"{k:05d}.arrow"
        rows = (pl.read_ipc(p) if mode == "memory"
                else SpilledRows(path=str(p), height=m["rows"], columns=("hash",)))
        results.append(ShardResult(path=m["path"], format="parquet", content_hash=f"h{k}", bytes=1, rows=m["rows"],
                                   payload={ROWS_KEY: rows, CONTENT_KEY: content}))
    load_s = time.perf_counter() - t0
    peak_loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    cfg = config_from_dict({"splits": {"train": "train/*", "test": "test/*"}})
    t0, c0 = time.perf_counter(), time.process_time()
    dctx = DatasetContext(cfg=cfg, shards=results, splits=assign_splits([r.path for r in results], dict(cfg.splits)))
    found = {}
    for fn in (exact_across_shards, conflicting_labels, split_overlap):
        for f in fn(dctx):
            if hasattr(f, "count"):
                found[f.check] = [f.count, f.details.get("examples", [])[:3]]
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"mode": mode, "rows": sum(m["rows"] for m in meta), "shards": len(meta),
                      "load_seconds": round(load_s, 2), "stage_seconds": round(dt, 2), "stage_cpu_seconds": round(cpu, 2),
                      "peak_rss_after_load_mib": round(peak_loaded), "peak_rss_mib": round(peak),
                      "findings": found}))


def generate_near(rows: int, shards: int, seed: int = 1) -> Path:
    import numpy as np
    import polars as pl

    root = WORK / f"near_scale_{rows}x{shards}"
    if (root / "meta.json").exists():
        return root
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    per = rows // shards
    n_test = max(1, shards // 10)
    meta, kept = [], []  # kept: a few rows of earlier shards to copy from
    for i in range(shards):
        split = "test" if i >= shards - n_test else "train"
        sig = rng.integers(0, 2**32, size=(per, 128), dtype=np.uint32)
        if i > 0:
            k = max(1, per // 100)
            pos = rng.choice(per, size=k, replace=False)
            pool = np.concatenate(kept[:shards - n_test] if split == "test" else kept)
            src = pool[rng.integers(0, len(pool), size=k)]
            noise = rng.integers(0, 2**32, size=(k, 12), dtype=np.uint32)
            cols = np.argsort(rng.random((k, 128)), axis=1)[:, :12]
            new = src.copy()
            np.put_along_axis(new, cols, noise, axis=1)
            sig[pos] = new
        kept.append(sig[rng.choice(per, size=min(per, 50), replace=False)])
        np.save(root / f"{i:05d}.npy", sig)
        np.save(root / f"{i:05d}.cols.npy", np.ascontiguousarray(sig.T))  # as the audit spills it
        ids = np.arange(i * per, (i + 1) * per, dtype=np.uint64)
        pl.DataFrame({"hi": ids, "lo": _mix64(ids)}).select(
            (pl.col("hi").cast(pl.UInt128) * pl.lit(2**64, dtype=pl.UInt128) + pl.col("lo").cast(pl.UInt128))
            .alias("text")).write_ipc(root / f"{i:05d}.arrow")
        meta.append({"path": f"{split}/part-{i:05d}.parquet", "rows": per})
    (root / "meta.json").write_text(json.dumps({"shards": meta}))
    return root


def child_near(mode: str, root: str) -> None:
    import numpy as np
    import polars as pl

    from datacheck.checks.dup.cross import assign_splits
    from datacheck.checks.dup.near import NEAR_KEY, TEXT_KEY, near_duplicate
    from datacheck.io.hashspill import SpilledColumns
    from datacheck.model.config import config_from_dict
    from datacheck.model.results import DatasetContext, ShardResult

    rootp = Path(root)
    meta = json.loads((rootp / "meta.json").read_text())["shards"]
    t0 = time.perf_counter()
    results = []
    for k, m in enumerate(meta):
        sig = (SpilledColumns(path=str(rootp / f"{k:05d}.cols.npy"), shape=(m["rows"], 128))
               if mode == "partitioned" else np.load(rootp / f"{k:05d}.npy"))
        payload = {NEAR_KEY: {"sig": sig, "shingles": np.full(m["rows"], 100, dtype=np.int32)},
                   TEXT_KEY: pl.read_ipc(rootp / f"{k:05d}.arrow").get_column("text")}
        results.append(ShardResult(path=m["path"], format="parquet", content_hash=f"h{k}", bytes=1, rows=m["rows"],
                                   payload=payload))
    load_s = time.perf_counter() - t0
    peak_loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    cfg = config_from_dict({"dup": {"near": True}, "splits": {"train": "train/*", "test": "test/*"}})
    t0, c0 = time.perf_counter(), time.process_time()
    dctx = DatasetContext(cfg=cfg, shards=results, splits=assign_splits([r.path for r in results], dict(cfg.splits)))
    found = {}
    for f in near_duplicate(dctx):
        if hasattr(f, "count"):
            found[f.check] = [f.count, f.details["cluster_count"], f.details["clusters_spanning_splits"],
                              f.details["clusters"][:2]]
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"mode": mode, "rows": sum(m["rows"] for m in meta), "shards": len(meta),
                      "load_seconds": round(load_s, 2), "stage_seconds": round(dt, 2), "stage_cpu_seconds": round(cpu, 2),
                      "peak_rss_after_load_mib": round(peak_loaded), "peak_rss_mib": round(peak),
                      "findings": found}))


def _run_modes(kind: str, modes: list[str], root: Path) -> None:
    got = {}
    for mode in modes:
        out = subprocess.run([sys.executable, __file__, "--child", f"{kind}:{mode}", str(root)], capture_output=True,
                             text=True)
        if out.returncode:
            print(f"{kind} {mode}: exit {out.returncode} (killed for memory?)\n{out.stderr[-2000:]}")
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        got[mode] = r["findings"]
        print(f"{kind:5s} {mode:12s} stage {r['stage_seconds']:7.2f} s (CPU {r['stage_cpu_seconds']:.2f} s)  peak RSS {r['peak_rss_mib']:6d} MiB "
              f"(after loading the shard results: {r['peak_rss_after_load_mib']} MiB)  counts "
              + ", ".join(f"{k} {v[0]:,}" for k, v in r["findings"].items()))
    if len(got) > 1:
        same = len({json.dumps(v, sort_keys=True) for v in got.values()}) == 1
        print(f"{kind}: same findings (counts and first examples) in every mode:", same)
        if not same:
            sys.exit(1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--shards", type=int, default=1000)
    ap.add_argument("--near-rows", type=int, default=1_000_000)
    ap.add_argument("--modes", default="memory,partitioned")
    ap.add_argument("--skip", choices=["exact", "near"])
    ap.add_argument("--child", nargs=2, metavar=("MODE", "ROOT"))
    a = ap.parse_args()
    if a.child:
        kind, _, mode = a.child[0].rpartition(":")
        (child_near if kind == "near" else child)(mode, a.child[1])
        return
    modes = a.modes.split(",")
    if a.skip != "exact":
        t0 = time.perf_counter()
        root = generate(a.rows, a.shards)
        print(f"row hashes: {a.rows:,} rows over {a.shards} shards in {root} ({time.perf_counter() - t0:.1f} s)")
        _run_modes("exact", modes, root)
    if a.skip != "near":
        t0 = time.perf_counter()
        root = generate_near(a.near_rows, a.shards)
        print(f"signatures: {a.near_rows:,} documents over {a.shards} shards in {root} "
              f"({time.perf_counter() - t0:.1f} s)")
        _run_modes("near", modes, root)

if __name__ == "__main__":
    main()
