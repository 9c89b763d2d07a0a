"""Profile of one token-shard audit: CPU seconds per engine phase and per check (issue 14).

Uses the shard of ``bench_audit.py`` (same generator, same config) and, in one process:

- phases: ``pl.read_parquet``; opening (``open_for_checks`` + the registry's plan); materializing
  the needed columns (the one-batch read); the fused query (every row check, stat and payload
  together, as the engine runs it); the second pass (gathering failing rows: none on a clean shard);
  the whole ``datacheck.audit`` (adds file hashing, the dataset stage, the report and cache writes);
- per item: each row check, stat and payload alone over the materialized frame (its own select, or
  its flat view's), so the cost of each check ID is visible. The sum of the items exceeds the fused
  query's time: a view built for several items is counted once per item here.

Prints a table of CPU seconds (process user + system, min of ``--repeat``) sorted by cost.
With ``--sft`` the shard and config of ``bench_sft.py`` instead (packed ChatML rows, every ``sft.*``
and ``packing.*`` rule on; ``--rows 12207 --seq-len 4096`` is its 50M-token figure).

The plan is the one ``datacheck.audit`` of this one shard runs (no cross-shard row hashes; add them
with ``--cross-shard``).
Usage: python benchmarks/profile_audit.py [--rows 100000] [--seq-len 128] [--repeat 2] [--top 25] [--sft] [--cross-shard]
"""
from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_audit import config_for, make_shard  # noqa: E402


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def timed(fn, repeat: int) -> tuple[float, float, object]:
    """(min CPU seconds, min wall seconds, last result) of ``fn()`` over ``repeat`` runs."""
    cpus, walls, out = [], [], None
    for _ in range(repeat):
        c0, t0 = _cpu(), time.perf_counter()
        out = fn()
        cpus.append(_cpu() - c0)
        walls.append(time.perf_counter() - t0)
    return min(cpus), min(walls), out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--sft", action="store_true", help="the packed SFT shard and config of bench_sft.py")
    ap.add_argument("--cross-shard", action="store_true",
                    help="plan the row-hash payload too (an audit of several shards or with splits does; "
                         "the audit of this one shard does not)")
    a = ap.parse_args()
    os.environ.setdefault("DATACHECK_DIR", tempfile.mkdtemp(prefix="dc-prof-"))
    import polars as pl

    import datacheck
    from datacheck.checks.registry import Payload, ShardContext, Stat, shard_plan
    from datacheck.derive.read import open_for_checks
    from datacheck.engine import shard as eng
    from datacheck.formats.discovery import discover
    from datacheck.model.config import Config

    if a.sft:
        import bench_sft

        config = bench_sft.config(a.seq_len)
        path = bench_sft.make_shard(a.rows, a.seq_len)
    else:
        config = config_for(a.seq_len)
        path = make_shard(a.rows, a.seq_len, False)
    cfg = Config.model_validate(config)
    rows: list[tuple[str, float, float]] = []

    c, w, _ = timed(lambda: pl.read_parquet(path), a.repeat)
    read_cpu = c
    rows.append(("phase: pl.read_parquet (reference)", c, w))
    ds = discover([str(path)]).shards[0]

    def opened():
        data = open_for_checks(ds, cfg)
        ctx = ShardContext(cfg=cfg, roles=data.roles, schema=dict(data.schema), shard=ds.rel,
                           cross_shard=a.cross_shard)
        return data, shard_plan(ctx)

    c, w, (data, plan) = timed(opened, a.repeat)
    rows.append(("phase: open_for_checks + plan", c, w))
    schema = dict(data.schema)
    measures = [*plan.stats, *plan.payloads]
    needed = eng._needed_columns(plan.row_checks, measures, schema)
    c, w, lf = timed(lambda: eng._read_all(data.lf, needed), a.repeat)
    rows.append(("phase: materialize needed columns", c, w))
    in_query = [i for i, rc in enumerate(plan.row_checks) if rc.from_payload is None]
    c, w, b = timed(lambda: eng._run_batch(lf, plan.row_checks, measures, in_query), a.repeat)
    rows.append(("phase: fused query (all items)", c, w))
    c, w, _ = timed(lambda: eng._run_batches(data, plan.row_checks, measures, schema, cfg.report.max_examples),
                    a.repeat)
    rows.append(("phase: _run_batches (materialize+fused+second pass)", c, w))
    c, w, _ = timed(lambda: datacheck.audit(str(path), config), a.repeat)
    rows.append(("phase: datacheck.audit (everything, cache warm after run 1)", c, w))

    items: list[tuple[str, float, float]] = []
    for i in in_query:
        rc = plan.row_checks[i]
        c, w, _ = timed(lambda: eng._collect(eng._queries(lf, plan.row_checks, measures, [i], [], with_len=False)),
                        a.repeat)
        items.append((f"check {rc.check} ({rc.column})", c, w))
    for j, m in enumerate(measures):
        c, w, _ = timed(lambda: eng._collect(eng._queries(lf, plan.row_checks, measures, [], [j], with_len=False)),
                        a.repeat)
        kind = "payload" if isinstance(m, Payload) else "stat" if isinstance(m, Stat) else "?"
        items.append((f"{kind} {m.key}", c, w))
    print(f"shard {path.name}: {a.rows} x {a.seq_len}; CPU s (min of {a.repeat}); ratio = CPU / read_parquet CPU")
    print(f"{'what':70s} {'cpu s':>7s} {'wall s':>7s} {'ratio':>6s}")
    for name, c, w in rows:
        print(f"{name:70s} {c:7.3f} {w:7.3f} {c / read_cpu:6.2f}")
    print(f"items alone ({len(items)}; top {a.top}), sum {sum(x[1] for x in items):.3f} s CPU:")
    for name, c, w in sorted(items, key=lambda x: -x[1])[: a.top]:
        print(f"  {name:68s} {c:7.3f} {w:7.3f} {c / read_cpu:6.2f}")


if __name__ == "__main__":
    main()
