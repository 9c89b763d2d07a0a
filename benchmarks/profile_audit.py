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

With ``--table NAME`` (a one-shard row of ``bench_table.py``, e.g. ``big256``: its shard and config)
the shard is checked batch by batch as the engine reads it, and the phases are those of that
pipeline: the layout recognizer (with its sample read), the decode alone (the reader's batches:
pyarrow, then polars, then casts; no check), the fused query over the decoded batches one after
the other (no decode), the engine's whole batch loop (decode one batch ahead in a thread, and how
long the engine thread waited for its next batch), and the items alone over one full batch.
Usage: python benchmarks/profile_audit.py [--rows 100000] [--seq-len 128] [--repeat 2] [--top 25] [--sft] [--cross-shard]
       python benchmarks/profile_audit.py --table big256 [--repeat 2] [--top 25]
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
# the checkout's datacheck (not an installed copy): this file's repository root comes first
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

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
    ap.add_argument("--table", default=None, help="a row of bench_table.py (big256, big128; a folder row f10/f9/f100: its first shard), or peers (bench_peers.py's 200,000 x 256 shard with planted defects): its shard, "
                    "its config, the batched pipeline's phases")
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

    if a.table:
        table(a)
        return
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


def table(a: argparse.Namespace) -> None:
    """The ``--table`` profile: the batched pipeline of one big shard (see the module docstring)."""
    import tomllib

    import bench_table
    import polars as pl

    from datacheck.checks.registry import Payload, Stat, clear_shared_passes, needed_derivations
    from datacheck.derive.layout import shard_layout
    from datacheck.derive.read import open_for_checks
    from datacheck.engine import shard as eng
    from datacheck.formats import stream_source
    from datacheck.formats.batches import batch_rows, shard_reader
    from datacheck.formats.discovery import discover
    from datacheck.model.config import Config

    if a.table == "peers":  # bench_peers.py's shard (planted defects: the second pass runs) and config
        import bench_peers

        seq = 256
        paths = [bench_peers.make_shard(200_000, seq)[0]]
        cfg = Config.model_validate(bench_peers.CONFIG)
    else:
        folder, seq, _ = bench_table.make_data(a.table, 1.0)
        paths = bench_table.files_of(folder)
        paths = paths[:1]  # a folder row (f10, f9, f100): its first shard
        cfg = Config.model_validate(tomllib.loads(bench_table.config_toml(seq)))
    ds = discover([str(paths[0])]).shards[0]
    data = open_for_checks(ds, cfg, derive=needed_derivations())
    schema = dict(data.schema)
    rows: list[tuple[str, float, float]] = []

    def recognized():
        return shard_layout(cfg.dataset.layout, cfg.dataset.schema_, schema, data.roles, eng._Sampler(data),
                            cfg.labels.ignore, spans=cfg.sft.response_template_ids is not None)

    c, w, layout = timed(recognized, a.repeat)
    rows.append((f"layout recognizer ({layout.name}), its sample read included", c, w))
    plan, _ = eng._plan_for(cfg, data.roles, schema, ds.rel, a.cross_shard, data.unrendered_pairs, layout.name,
                            data.chat_template)
    measures = [*plan.stats, *plan.payloads]
    needed = eng._needed_columns(plan.row_checks, measures, schema)
    want = {k: schema[k] for k in needed}
    n, per = batch_rows(data.lf, needed, data.stream)
    reader = shard_reader(data.stream, data.lf, needed, n)
    c, w, frames = timed(lambda: list(reader.batches(needed, per or n, want, ramp=True)), a.repeat)
    rows.append((f"decode alone: {len(frames)} batches of <= {per} rows (pyarrow, polars, casts)", c, w))
    in_query = [i for i, rc in enumerate(plan.row_checks) if rc.from_payload is None]
    def fused_all() -> None:
        for f in frames:  # each batch's shared passes forgotten after it, as the engine does
            eng._run_batch(f.lazy(), plan.row_checks, measures, in_query)
            clear_shared_passes()

    c, w, _ = timed(fused_all, a.repeat)
    rows.append(("fused query over the decoded batches, one after the other", c, w))
    waited = [0.0]
    real_ahead = stream_source.ahead

    def ahead(it, name, wrap=None):  # the engine thread's wait for each next batch
        got = real_ahead(it, name, wrap)
        while True:
            t0 = time.perf_counter()
            try:
                item = next(got)
            except StopIteration:
                return
            waited[0] += time.perf_counter() - t0
            yield item

    import datacheck.formats.parquet as parquet_mod

    parquet_mod.ahead = ahead
    try:
        c, w, _ = timed(lambda: eng._run_batches(data, plan.row_checks, measures, schema, cfg.report.max_examples),
                        a.repeat)
    finally:
        parquet_mod.ahead = real_ahead
    rows.append((f"engine batch loop (decode ahead in a thread; the engine waited {waited[0] / a.repeat:.2f} s)", c, w))
    full = max(frames, key=lambda f: f.height)
    items: list[tuple[str, float, float]] = []
    for i in in_query:
        rc = plan.row_checks[i]

        def one(i=i):
            eng._collect(eng._queries(full.lazy(), plan.row_checks, measures, [i], [], with_len=False, probe=True))
            clear_shared_passes()

        c, w, _ = timed(one, a.repeat)
        items.append((f"check {rc.check} ({rc.column})", c, w))
    for j, m in enumerate(measures):
        def stat(j=j):
            eng._collect(eng._queries(full.lazy(), plan.row_checks, measures, [], [j], with_len=False))
            clear_shared_passes()

        c, w, _ = timed(stat, a.repeat)
        kind = "payload" if isinstance(m, Payload) else "stat" if isinstance(m, Stat) else "?"
        items.append((f"{kind} {m.key}", c, w))
    def fused_one() -> None:
        eng._run_batch(full.lazy(), plan.row_checks, measures, in_query)
        clear_shared_passes()

    c, w, _ = timed(fused_one, a.repeat)
    print(f"shard {paths[0].name}: {n} rows x {seq} tokens; CPU s (min of {a.repeat}), {pl.__version__=}")
    print(f"{'what':84s} {'cpu s':>7s} {'wall s':>7s}")
    for name, c2, w2 in rows:
        print(f"{name:84s} {c2:7.3f} {w2:7.3f}")
    print(f"one full batch ({full.height} rows): fused query {c * 1000:.1f} ms CPU; items alone (probes; a pass "
          f"shared by several items is counted in each), top {a.top}:")
    for name, c2, w2 in sorted(items, key=lambda x: -x[1])[: a.top]:
        print(f"  {name:82s} {c2 * 1000:7.1f} ms")


if __name__ == "__main__":
    main()
