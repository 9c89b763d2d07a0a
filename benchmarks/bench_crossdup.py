"""Benchmark: cross-shard duplicate detection in the merge (dup.exact_across_shards,
dup.conflicting_labels, dup.split_overlap) over SHARDS x ROWS rows (default 100 x 100,000 = 10M).

Steps (generated data and payloads are kept in benchmarks/_work/ and reused):

1. generate SHARDS parquet shards ``text`` (string) + ``label`` (0/1), seeded, with planted faults:
   0.5% of the rows repeat a row of another shard, 0.1% repeat a text with the other label, and
   the last 10 shards are split ``test`` of which 1% of rows come from ``train``;
2. compute each shard's row-hash payload with the same code the audit runs
   (:func:`datacheck.checks.dup.cross.hash_shards`), store it as Arrow IPC (``UInt128`` hash + label);
3. in a fresh process: load the payloads, then time the merge (the three dataset checks on a
   ``DatasetContext``) and measure its peak RSS above the loaded payloads (``ru_maxrss`` growth).

Also measures (``--hash-cost``) the payload's added cost on the tokenized benchmark shard of
bench_audit.py (400,000 x 128 tokens, three list columns): the fused query with and without it.

With ``--verify`` the three counts are recomputed on the raw text/label values with polars
(no hashes) and compared.

Usage: python benchmarks/bench_crossdup.py [--shards 100] [--rows 100000] [--hash-cost] [--verify]
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

WORK = Path(__file__).resolve().parent / "_work"


def _rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def generate(shards: int, rows: int, seed: int = 0) -> Path:
    import numpy as np
    import polars as pl

    root = WORK / f"crossdup_{shards}x{rows}"
    done = root / "_complete"
    if done.exists():
        return root
    rng = np.random.default_rng(seed)
    n_test = max(1, shards // 10)
    for i in range(shards):
        split = "test" if i >= shards - n_test else "train"
        ids = np.arange(i * rows, (i + 1) * rows)
        labels = rng.integers(0, 2, size=rows)
        if i > 0:
            k = rows // 200  # 0.5%: exact repeats of rows of earlier shards
            pos = rng.choice(rows, size=k, replace=False)
            src = rng.integers(0, i * rows, size=k)
            ids[pos] = src
            labels[pos] = src % 2  # the label of the source row (see below)
            k2 = rows // 1000  # 0.1%: the text of an earlier row with the other label
            pos2 = rng.choice(np.setdiff1d(np.arange(rows), pos), size=k2, replace=False)
            src2 = rng.integers(0, i * rows, size=k2)
            ids[pos2] = src2
            labels[pos2] = 1 - src2 % 2
        # a row's label is id % 2 unless planted: make the base rows consistent
        base = np.ones(rows, dtype=bool)
        if i > 0:
            base[pos] = False
            base[pos2] = False
        labels[base] = ids[base] % 2
        if split == "test":
            k3 = rows // 100  # 1% of test rows are train rows
            pos3 = rng.choice(rows, size=k3, replace=False)
            ids[pos3] = rng.integers(0, (shards - n_test) * rows, size=k3)
            labels[pos3] = ids[pos3] % 2
        df = pl.DataFrame({"id": ids, "label": labels}).select(
            pl.concat_str([pl.lit("sample "), pl.col("id").cast(pl.String).str.zfill(12)]).alias("text"), "label")
        (root / split).mkdir(parents=True, exist_ok=True)
        df.write_parquet(root / split / f"part-{i:05d}-of-{shards:05d}.parquet")
    done.write_text("ok")
    return root


def payloads(root: Path) -> Path:
    """Hash every shard (payload-only query) and store the payloads; returns their folder."""

    from datacheck.checks.dup.cross import CONTENT_KEY, ROWS_KEY
    from datacheck.execute.audit import hash_shards
    from datacheck.formats.discovery import discover
    from datacheck.model.config import Config

    out = root.with_name(root.name + "_payloads")
    done = out / "_complete"
    if done.exists():
        return out
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    results = hash_shards(discover([str(root)]), Config())
    dt = time.perf_counter() - t0
    meta = []
    for k, r in enumerate(results):
        r.payload[ROWS_KEY].write_ipc(out / f"{k:05d}.arrow")
        meta.append({"path": r.path, "rows": r.rows, "content": r.payload[CONTENT_KEY]})
    (out / "meta.json").write_text(json.dumps({"shards": meta, "hash_seconds": dt}))
    done.write_text("ok")
    print(f"hashed {sum(m['rows'] for m in meta):,} rows in {len(meta)} shards: {dt:.1f} s "
          f"(payload-only queries, incl. parquet reads)")
    return out


def child_merge(pdir: str) -> None:
    import polars as pl

    from datacheck.checks.dup.cross import (
        CONTENT_KEY,
        ROWS_KEY,
        assign_splits,
        conflicting_labels,
        exact_across_shards,
        split_overlap,
    )
    from datacheck.model.config import config_from_dict
    from datacheck.model.results import DatasetContext, ShardResult

    pdir_p = Path(pdir)
    meta = json.loads((pdir_p / "meta.json").read_text())["shards"]
    results = []
    for k, m in enumerate(meta):
        df = pl.read_ipc(pdir_p / f"{k:05d}.arrow")
        results.append(ShardResult(path=m["path"], format="parquet", content_hash=f"h{k}", bytes=1, rows=m["rows"],
                                   payload={ROWS_KEY: df, CONTENT_KEY: m["content"]}))
    payload_bytes = sum(r.payload[ROWS_KEY].estimated_size() for r in results)
    cfg = config_from_dict({"splits": {"train": "train/*", "test": "test/*"}})
    before = _rss_mib()
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0 = time.perf_counter()
    dctx = DatasetContext(cfg=cfg, shards=results, splits=assign_splits([r.path for r in results], dict(cfg.splits)))
    found = {}
    for fn in (exact_across_shards, conflicting_labels, split_overlap):
        for f in fn(dctx):
            if hasattr(f, "count"):
                found[f.check] = f.count
    dt = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rows = sum(r.rows for r in results)
    print(json.dumps({"rows": rows, "shards": len(results), "merge_seconds": dt,
                      "payload_mib": payload_bytes / 2**20, "payload_bytes_per_row": payload_bytes / rows,
                      "rss_before_merge_mib": before, "peak_rss_mib": peak,
                      "merge_peak_above_payloads_mib": max(0.0, peak - max(before, peak_before)) if peak > peak_before
                      else 0.0, "peak_before_merge_mib": peak_before, "findings": found}))


def verify(root: Path) -> dict:
    """Reference counts computed directly on the raw text/label values with polars (no hashes)."""
    import polars as pl

    files = sorted(root.glob("*/*.parquet"), key=lambda p: p.relative_to(root).as_posix())
    df = pl.concat([pl.scan_parquet(f).with_columns(pl.lit(i, dtype=pl.UInt32).alias("shard"),
                                                    pl.lit(f.parent.name).alias("split"))
                    for i, f in enumerate(files)]).collect()
    exact = (df.with_columns(pl.col("shard").min().over(["split", "text", "label"]).alias("first"))
             .filter(pl.col("shard") != pl.col("first")).height)
    conflicting = df.group_by("text").agg(pl.col("label").n_unique().alias("k")).filter(pl.col("k") > 1).height
    train = df.filter(pl.col("split") == "train")["text"].unique()
    overlap = df.filter((pl.col("split") == "test") & pl.col("text").is_in(train.implode())).height
    return {"dup.exact_across_shards": exact, "dup.conflicting_labels": conflicting, "dup.split_overlap": overlap}


def hash_cost() -> None:
    """Fused-query seconds on the bench_audit shard with and without the row-hash payload."""
    import polars as pl

    from datacheck.io.rowhash import row_hash_expr

    shard = WORK / "lm_400000x128.parquet"
    if not shard.exists():
        sys.path.insert(0, str(Path(__file__).parent))
        from bench_audit import make_shard

        shard = make_shard(400_000, 128, False)
    cols = ["input_ids", "attention_mask", "labels"]
    base = [pl.len(), *(pl.col(c).list.len().sum().alias(f"n_{c}") for c in cols)]
    times = {"read_parquet": [], "query": [], "query+hash": []}
    for _ in range(3):
        t0 = time.perf_counter()
        pl.read_parquet(shard)
        times["read_parquet"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        pl.scan_parquet(shard).select(base).collect()
        times["query"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        pl.scan_parquet(shard).select([*base, row_hash_expr(cols).implode().alias("h")]).collect()
        times["query+hash"].append(time.perf_counter() - t0)
    med = {k: sorted(v)[1] for k, v in times.items()}
    print(f"tokenized shard 400,000 x 128 (3 list columns): read_parquet {med['read_parquet']:.2f} s, "
          f"query {med['query']:.2f} s, query + row hashes {med['query+hash']:.2f} s: hash payload adds "
          f"{med['query+hash'] - med['query']:.2f} s = {(med['query+hash'] - med['query']) / med['read_parquet']:.2f} x "
          f"read_parquet (medians of 3; runs {json.dumps({k: [round(x, 2) for x in v] for k, v in times.items()})})")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shards", type=int, default=100)
    ap.add_argument("--rows", type=int, default=100_000, help="rows per shard")
    ap.add_argument("--hash-cost", action="store_true", help="also measure the payload's cost on the tokenized shard")
    ap.add_argument("--verify", action="store_true", help="also count the planted faults on the raw values (slow)")
    ap.add_argument("--child-merge", metavar="DIR", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child_merge:
        child_merge(a.child_merge)
        return
    root = generate(a.shards, a.rows)
    pdir = payloads(root)
    out = subprocess.run([sys.executable, __file__, "--child-merge", str(pdir)], capture_output=True, text=True,
                         check=True)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"merge over {r['rows']:,} rows in {r['shards']} shards: {r['merge_seconds']:.1f} s; payloads "
          f"{r['payload_mib']:.0f} MiB ({r['payload_bytes_per_row']:.0f} B/row: 16 B hash + 8 B label); "
          f"process RSS {r['rss_before_merge_mib']:.0f} MiB before the merge, peak {r['peak_rss_mib']:.0f} MiB "
          f"(+{r['merge_peak_above_payloads_mib']:.0f} MiB during the merge); findings {r['findings']}")
    if a.verify:
        ref = verify(root)
        print(f"reference counts on the raw values: {ref}: {'match' if ref == r['findings'] else 'MISMATCH'}")
    if a.hash_cost:
        hash_cost()


if __name__ == "__main__":
    main()
