"""``datacheck merge PART_REPORTS... -o report.json``: part reports of a split audit -> one report."""
from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from datacheck.cli.commands.audit import add_ci_arguments, add_view_arguments, emit_report
from datacheck.cli.defaults import default_report_dir
from datacheck.execute.cache import CacheWarning
from datacheck.execute.merge import expand_part_paths, load_part, merge_part_inputs, store_part_results
from datacheck.io.outputs import check_outputs, write_json_atomic
from datacheck.model.errors import UsageError
from datacheck.report.model import store_report

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    a = sub.add_parser(
        "merge", help="merge the part reports of 'audit --num-parts N --part k' into the single-job report",
        description="Merge part reports (each with its .results.dcr file beside it) into the report a single "
                    "audit job would write, running the dataset-level (cross-shard) checks. Exit codes as audit.")
    a.add_argument("parts", nargs="+", metavar="PART_REPORT",
                   help="part report files, or folders holding them (e.g. downloaded CI artifacts)")
    a.add_argument("--output", "-o", help="also write the merged JSON report to this file")
    a.add_argument("--report-dir", default=default_report_dir(),
                   help="the merged report is stored as DIR/<index_hash>/report.json and as its config's copy "
                        "DIR/<index_hash>/<config hash>[.fail-on-X][.allow-check-errors]/report.json (default "
                        f"{default_report_dir()})")
    a.add_argument("--cache-dir", metavar="DIR",
                   help="also store every part's shard results in this result cache folder, under the keys the parts' "
                        "audits use: restored by every part job of the next run, it answers each unchanged shard "
                        "whichever part it lands in (renamed or renumbered shards too)")
    a.add_argument("--cache-prune", action="store_true",
                   help="with --cache-dir: then delete the entries of that folder that this merge did not write")
    a.add_argument("--format", choices=["text", "json", "markdown"], default="text", help="what to print (default text)")
    a.add_argument("--fail-on", choices=["error", "warn", "never"], default=None,
                   help="lowest severity that fails the gate (default: the parts' --fail-on)")
    add_ci_arguments(a)
    add_view_arguments(a)
    a.add_argument("--no-progress", action="store_true",
                   help="accepted for symmetry with audit (scripts pass it to every command); "
                        "merge shows no progress bar")
    return a


def run(args: argparse.Namespace) -> int:
    if args.cache_prune and not args.cache_dir:
        raise UsageError("--cache-prune goes with --cache-dir (the folder the merge stores the parts' results in)")
    paths = expand_part_paths(args.parts)
    check_outputs({"--output": args.output, "--junit": args.junit}, [str(p) for p in paths], data=False)  # not over a part
    parts = [load_part(p) for p in paths]
    report = merge_part_inputs(parts, fail_on=args.fail_on, allow_check_errors=args.allow_check_errors)
    if args.cache_dir:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", CacheWarning)
            _, without = store_part_results(parts, args.cache_dir, prune=args.cache_prune)
        for w in caught:
            print(f"datacheck: warning: {w.message}", file=sys.stderr)
        if without:
            print(f"datacheck: warning: {', '.join(map(str, without))}: written by a datacheck that records no "
                  "cache keys: their shards' results are not stored in --cache-dir", file=sys.stderr)
    text = report.to_json()
    stored, copy = store_report(args.report_dir, report, text, allow_check_errors=args.allow_check_errors)
    if args.output:
        write_json_atomic(args.output, text)
    return emit_report(report, args, stored, root=Path(parts[0].meta["root"]), copy=copy)
