"""Profile of one shard of a folder: CPU milliseconds per phase of ``audit_shard`` on the shards of
``bench_table.py``'s ``f100`` row (100 clean causal-LM shards of 5,000 x 256 tokens, its config), in
one process, warm, median over the shards (the first two left out).

Phases: the content hash of the file; ``open_for_checks``; the layout's sample (with the one read of
the sampled columns when they fit in one batch: ``engine.shard._Sampler``); the layout recognizer on
it; the check plan (memoized per schema and config); the decode of the needed columns (0 when the
sample's read holds them); the fused query without the row-hash payload; the row-hash payload alone
(``io.rowhash.row_hash_series``); and the whole ``audit_shard``.

With ``--src DIR`` the datacheck package in DIR is profiled instead (``git archive COMMIT datacheck |
tar -x -C DIR``: an earlier commit, whose engine has no ``_Sampler``: its sample is its own read).

Usage: python benchmarks/profile_folder.py [--shards 14] [--src DIR]
"""
from __future__ import annotations

import argparse
import resource
import sys
import tomllib
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_table import config_toml, files_of, make_data  # noqa: E402

COLUMNS = ["input_ids", "attention_mask", "labels"]


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shards", type=int, default=14)
    ap.add_argument("--src", default=None, help="a folder holding another datacheck package")
    a = ap.parse_args()
    sys.path.insert(0, a.src or str(Path(__file__).resolve().parent.parent))
    from datacheck.checks.registry import needed_derivations
    from datacheck.derive import layout
    from datacheck.derive.read import open_for_checks
    from datacheck.engine import shard as eng
    from datacheck.formats.discovery import discover
    from datacheck.formats.registry import hash_shard
    from datacheck.io.rowhash import row_hash_series
    from datacheck.model.config import Config

    folder, seq, _ = make_data("f100", 1.0)
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
        held = getattr(sampler, "held", None)
        whole = timed("decode of the needed columns (0 when the sample's read holds them)",
                      lambda: held.select(needed) if held is not None
                      else data.stream.read_all(needed, {c: schema[c] for c in needed}))
        in_query = [i for i, rc in enumerate(plan.row_checks) if rc.from_payload is None]
        others = [m for m in measures if not m.key.startswith("crossdup")]
        timed("fused query without the row-hash payload",
              lambda: eng._run_batch(whole.lazy(), plan.row_checks, others, in_query))
        timed("row-hash payload alone", lambda: row_hash_series([whole[c] for c in COLUMNS]))
        timed("audit_shard (all of it)", lambda: eng.audit_shard(ds, cfg, "x", 0))
    print(f"{a.src or 'this tree'}: CPU ms a shard (median of {max(1, len(shards) - 2)} shards of 5,000 x 256)")
    print("| phase | CPU ms |")
    print("|---|---|")
    for name, v in spent.items():
        w = sorted(v[2:] or v)
        print(f"| {name} | {1000 * w[len(w) // 2]:.1f} |")


if __name__ == "__main__":
    main()
