"""Benchmark: the cost of reading a text JSONL shard with its JSON types checked (issue 10 item 11).

polars' NDJSON reader turns a column that mixes JSON types into strings silently; datacheck then
parses frames with a string-bearing column again with Arrow's strict JSON reader
(``datacheck.formats.jsonvalues._types_as_written``). This measures, in one run on one generated file
(ROWS records of ``{"text": ..., "label": int, "score": float}``, seeded):

- polars: ``pl.read_ndjson`` alone (the reader before the check),
- check:  Arrow's strict re-parse alone,
- read:   ``open_shard`` (polars + the check) and ``open_for_checks(...).lf.collect()``,

and prints the medians (wall seconds) and the ratio read/polars.
Usage: python benchmarks/bench_jsonl_read.py [--rows 500000] [--repeat 3]
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from pathlib import Path

import polars as pl

from datacheck.derive.read import open_for_checks
from datacheck.formats.jsonvalues import _types_as_written
from datacheck.io.discover import DiscoveredShard
from datacheck.model.config import config_from_dict

WORK = Path(__file__).resolve().parent / "_work"


def _make(rows: int) -> Path:
    path = WORK / f"text_{rows}.jsonl"
    if path.exists():
        return path
    WORK.mkdir(exist_ok=True)
    rng = random.Random(0)
    words = ["data", "model", "train", "loss", "token", "batch", "eval", "shard", "gate", "check"]
    with open(path, "w", encoding="utf-8") as f:
        for i in range(rows):
            text = " ".join(rng.choice(words) for _ in range(rng.randint(5, 60)))
            f.write(json.dumps({"text": text, "label": i % 3, "score": rng.random()}) + "\n")
    return path


def _median(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=500_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    path = _make(args.rows)
    data = path.read_bytes()
    cfg = config_from_dict({})
    shard = DiscoveredShard(path=path, rel=path.name, format="jsonl")
    df = pl.read_ndjson(data, infer_schema_length=None)
    t_polars = _median(lambda: pl.read_ndjson(data, infer_schema_length=None), args.repeat)
    t_check = _median(lambda: _types_as_written(df, data), args.repeat)
    t_read = _median(lambda: open_for_checks(shard, cfg).lf.collect(), args.repeat)
    print(f"{args.rows} records, {len(data) / 2**20:.1f} MiB")
    print(f"polars read_ndjson   {t_polars:8.3f} s")
    print(f"strict Arrow check   {t_check:8.3f} s")
    print(f"open_for_checks      {t_read:8.3f} s   ratio read/polars {t_read / t_polars:.2f}")


if __name__ == "__main__":
    main()
