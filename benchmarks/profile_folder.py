"""Profile of one shard of a folder: CPU milliseconds per phase of ``audit_shard`` on the shards of a
``bench_table.py`` folder row (``--row``: ``f100``, 100 clean causal-LM shards of 5,000 x 256 tokens,
the default; ``f9``, 9 of 7,800 x 1024; ``f10``, 10 of 25,000 x 1024), its config, in one process,
warm, median over the shards (the first two left out when there are more than two), and each
phase's CPU per token (ns).

Phases: the content hash of the file; ``open_for_checks``; the layout's sample (with the one read of
the sampled columns when they fit in one batch: ``engine.shard._Sampler``); the layout recognizer on
it; the check plan (memoized per schema and config); the decode of the needed columns (0 when the
sample's read holds them; else the reader's batches, as the engine cuts them); the fused query
without the row-hash payload (over each batch, summed); the row-hash payload alone
(``io.rowhash.row_hash_series``, over each batch); and the whole ``audit_shard``.

With ``--src DIR`` the datacheck package in DIR is profiled instead (``git archive COMMIT datacheck |
tar -x -C DIR``: an earlier commit, whose engine has no ``_Sampler``: its sample is its own read).

The process takes the CLI's settings (``datacheck.cli.main``: one BLAS thread, pyarrow's jemalloc
pool, glibc keeping freed blocks) and a pool worker's ``POLARS_MAX_THREADS`` (``--polars-threads``,
1 by default: two workers on two cores), so the phases cost what they cost in a worker.

Usage: python benchmarks/profile_folder.py [--row f100] [--shards 14] [--src DIR] [--polars-threads 1]
"""
from __future__ import annotations

import argparse
import os
import resource
import sys
import tomllib
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_table import TABLE, config_toml, files_of, make_data  # noqa: E402

COLUMNS = ["input_ids", "attention_mask", "labels"]


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--row", default="f100", choices=[k for k, v in TABLE.items() if v[0] > 1],
                    help="the bench_table.py folder row whose shards are profiled")
    ap.add_argument("--shards", type=int, default=14)
    ap.add_argument("--src", default=None, help="a folder holding another datacheck package")
    ap.add_argument("--polars-threads", type=int, default=1,
                    help="POLARS_MAX_THREADS (default 1: a worker of the CLI's pool on 2 cores; 0: unset)")
    a = ap.parse_args()
    sys.path.insert(0, a.src or str(Path(__file__).resolve().parent.parent))
    if a.polars_threads:  # a pool worker's setting (POLARS_MAX_THREADS = cores // workers)
        os.environ["POLARS_MAX_THREADS"] = str(a.polars_threads)
    from datacheck.cli.main import choose_arrow_pool, keep_freed_memory, limit_blas_threads

    limit_blas_threads()  # the CLI process's settings: BLAS threads, pyarrow's pool, glibc's freed blocks
    choose_arrow_pool()
    keep_freed_memory()
    from datacheck.checks.registry import needed_derivations
    from datacheck.derive import layout
    from datacheck.derive.read import open_for_checks
    from datacheck.engine import shard as eng
    from datacheck.formats.batches import batch_rows, forced_batch_rows, shard_reader
    from datacheck.formats.discovery import discover
    from datacheck.formats.registry import hash_shard
    from datacheck.io.rowhash import row_hash_series
    from datacheck.model.config import Config

    folder, seq, _ = make_data(a.row, 1.0)
    _, rows, _ = TABLE[a.row]
    cfg = Config.model_validate(tomllib.loads(config_toml(seq)))
    shards = discover([str(p) for p in files_of(folder)[: a.shards]]).shards
    spent: dict[str, list[float]] = {}

    def timed(name: str, fn: Callable[[], Any]) -> Any:
        c = _cpu()
        out = fn()
        spent.setdefault(name, []).append(_cpu() - c)
        return out

    sampler_cls = getattr(eng, "_Sampler", None)
    for ds in shards:
        timed("content hash (xxh3-128 of the file)", lambda: hash_shard(ds.source, ds.format))
        data = timed("open_for_checks", lambda: open_for_checks(ds, cfg, derive=needed_derivations()))
        schema = dict(data.schema)
        sampler = sampler_cls(data) if sampler_cls is not None else eng._sampler(data)
        sample = timed("layout sample (its read)", lambda: sampler(["input_ids", "labels", "attention_mask"]))
        found = timed("layout recognizer (on the sample)",
                      lambda: layout.recognize(schema, data.roles, lambda cols: sample.select(cols), cfg.labels.ignore))
        plan, _ = timed("check plan (memoized)",
                        lambda: eng._plan_for(cfg, data.roles, schema, ds.rel, True, None, found.name, None))
        measures = [*plan.stats, *plan.payloads]
        needed = eng._needed_columns(plan.row_checks, measures, schema)
        want = {c: schema[c] for c in needed}
        held = getattr(sampler, "held", None)

        def batches() -> list[Any]:
            if held is not None:
                return [held.select(needed)]
            n_rows, per = batch_rows(data.lf, needed, data.stream)
            if per is None:
                return [data.stream.read_all(needed, want)]
            reader = shard_reader(data.stream, data.lf, needed, n_rows)
            return list(reader.batches(needed, per, want, ramp=forced_batch_rows() is None))

        frames = timed("decode of the needed columns (0 when the sample's read holds them)", batches)
        in_query = [i for i, rc in enumerate(plan.row_checks) if rc.from_payload is None]
        others = [m for m in measures if not m.key.startswith("crossdup")]
        timed("fused query without the row-hash payload",
              lambda: [eng._run_batch(f.lazy(), plan.row_checks, others, in_query) for f in frames])
        timed("row-hash payload alone", lambda: [row_hash_series([f[c] for c in COLUMNS]) for f in frames])
        frames = []
        timed("audit_shard (all of it)", lambda: eng.audit_shard(ds, cfg, "x", 0))
    tokens = rows * (seq or 0)
    print(f"{a.src or 'this tree'}: CPU ms a shard (median of {max(1, len(shards) - 2) if len(shards) > 2 else len(shards)} "
          f"shards of {rows:,} x {seq} of {a.row})")
    print("| phase | CPU ms | ns a token |")
    print("|---|---|---|")
    for name, v in spent.items():
        w = sorted(v[2:] if len(v) > 2 else v)
        med = w[len(w) // 2]
        print(f"| {name} | {1000 * med:.1f} | {1e9 * med / tokens:.2f} |")


if __name__ == "__main__":
    main()
