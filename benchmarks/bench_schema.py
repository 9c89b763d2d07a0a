"""Benchmark: the cost of the schema step (``[dataset] schema``) on one tokenized parquet shard.

Shard: the one ``bench_audit.py`` generates (seeded; default 400,000 x 128 = 51.2M tokens:
input_ids list<int32>, attention_mask list<int8>, labels list<int64>), in benchmarks/_work/.
Contract: inferred from the shard itself (``datacheck schema infer``: dtypes, nullability, list
length bounds, element ranges), so every check runs and none fails. Each task runs in a fresh
subprocess (peak RSS per task):

- ``audit``:          ``datacheck.audit`` without a schema (baseline);
- ``audit+schema``:   the same with the inferred contract: structure from the shard's schema,
  data checks fused into the audit's one query (what datacheck does);
- ``audit+layout``:   the same with the built-in ``causal_lm`` layout;
- ``pandera-full``:   Pandera itself validating the same contract (SCHEMA_AND_DATA depth,
  ``lazy=True``; the list rules as Pandera custom checks selecting the same expressions);
- ``pandera-schema``: Pandera at its default LazyFrame depth (SCHEMA_ONLY: no data read).

Prints the median wall seconds of --repeat runs, peak RSS, and the schema step's cost
(audit+schema - audit) next to Pandera's full validation.
Usage: python benchmarks/bench_schema.py [--rows 400000] [--seq-len 128] [--repeat 3]
"""
from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_audit import CONFIG, WORK, make_shard  # noqa: E402

TASKS = ("audit", "audit+schema", "audit+layout", "pandera-full", "pandera-schema")


def contract_path(shard: Path) -> Path:
    """The contract inferred from ``shard`` (written once, atomically, next to it)."""
    out = WORK / (shard.stem + ".schema.yaml")
    if not out.exists():
        from datacheck.io.outputs import write_json_atomic
        from datacheck.tools.infer import infer_contract, infer_yaml

        data, _ = infer_contract([str(shard)])
        write_json_atomic(out, infer_yaml(data, [shard.name]))
    return out


def _pandera_equivalent(contract_file: Path):
    """The contract as one Pandera schema: its columns and checks, plus every datacheck list rule
    as a Pandera custom check selecting the very expression datacheck fuses."""
    import pandera.polars as pa
    import polars as pl

    from datacheck.checks.registry import RowCheck
    from datacheck.contracts import data_items, load_contract
    from datacheck.model.roles import Roles

    contract = load_contract(str(contract_file))
    lf = pl.scan_parquet(contract_file.parent / (contract_file.name.replace(".schema.yaml", ".parquet")))
    schema = dict(lf.collect_schema())
    extra: dict[str, list] = {}
    for item in data_items(contract, schema, Roles(), set()):
        if isinstance(item, RowCheck) and item.check == "schema.check" and item.column is not None:
            ok = item.fails.not_()
            extra.setdefault(item.column, []).append(
                pa.Check(lambda d, ok=ok: d.lazyframe.select(ok), name="list_rule"))
    s = contract.schema
    for col, checks in extra.items():
        if not any(getattr(c, "name", None) == "list_rule" for c in s.columns[col].checks):
            # the Pandera checks already in the contract are kept; the list rules are added
            s = s.update_column(col, checks=[*s.columns[col].checks, *checks[len(s.columns[col].checks):]])
    return s, lf


def child(task: str, shard: str, contract: str) -> None:
    t0 = time.perf_counter()
    extra: dict = {}
    if task.startswith("audit"):
        import datacheck

        cfg = json.loads(json.dumps(CONFIG))
        if task == "audit+schema":
            cfg["dataset"] = {"schema": contract}
        elif task == "audit+layout":
            cfg["dataset"] = {"schema": "causal_lm"}
        t0 = time.perf_counter()
        rep = datacheck.audit(shard, cfg)
        extra = {"findings": sorted({f.check for f in rep.findings})}
    else:
        import pandera.polars as pa
        from pandera.config import ValidationDepth, config_context

        schema, lf = _pandera_equivalent(Path(contract))
        depth = ValidationDepth.SCHEMA_AND_DATA if task == "pandera-full" else ValidationDepth.SCHEMA_ONLY
        t0 = time.perf_counter()
        with config_context(validation_depth=depth):
            try:
                schema.validate(lf, lazy=True)
                extra = {"failures": 0}
            except pa.errors.SchemaErrors as exc:
                extra = {"failures": exc.failure_cases.height}
    dt = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": dt, "peak_rss_mib": rss, **extra}))


def run(task: str, shard: Path, contract: Path) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", task, str(shard), str(contract)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=400_000)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--child", nargs=3, metavar=("TASK", "SHARD", "CONTRACT"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(*a.child)
        return
    shard = make_shard(a.rows, a.seq_len, False)
    contract = contract_path(shard)
    print(f"shard {shard.name}: {a.rows} rows, {a.rows * a.seq_len / 1e6:.1f}M tokens, "
          f"{shard.stat().st_size / 2**20:.0f} MiB; contract {contract.name}")
    results: dict[str, list[dict]] = {t: [] for t in TASKS}
    for _ in range(a.repeat):  # interleaved: every task sees the same machine state
        for t in TASKS:
            results[t].append(run(t, shard, contract))
    med = {t: statistics.median(x["seconds"] for x in rs) for t, rs in results.items()}
    for t, rs in results.items():
        info = {k: v for k, v in rs[0].items() if k not in ("seconds", "peak_rss_mib")}
        print(f"{t:15s} {med[t]:7.2f} s  runs {[round(x['seconds'], 2) for x in rs]}  "
              f"peak RSS {max(x['peak_rss_mib'] for x in rs):.0f} MiB  {info}")
    print(f"schema step in the fused audit: +{med['audit+schema'] - med['audit']:.2f} s (inferred contract), "
          f"+{med['audit+layout'] - med['audit']:.2f} s (causal_lm layout); "
          f"Pandera validating the same contract alone: {med['pandera-full']:.2f} s")


if __name__ == "__main__":
    main()
