"""``datacheck diff OLD NEW``: shards, findings and stats that changed between two reports."""
from __future__ import annotations

import argparse
import sys

from datacheck.cli.defaults import default_report_dir
from datacheck.cli.envelope import write_envelope
from datacheck.model.constants import EXIT_OK, EXIT_POLICY_FAILED
from datacheck.model.errors import UsageError
from datacheck.render.text import terminal_safe
from datacheck.tools.diff import (
    DEFAULT_SHARE_THRESHOLD,
    diff_reports,
    render_diff_markdown,
    render_diff_text,
    resolve_report,
)

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    a = sub.add_parser(
        "diff", help="compare two reports: shards added/removed/changed, findings new/resolved/grown, stats moved",
        description="Compare two reports. Exit 0 when NEW has no new policy failure, 1 when it has, 2 on bad "
                    "input (e.g. reports of different report_version).")
    a.add_argument("old", metavar="OLD", help="report file, index hash (prefix) in --report-dir (the latest audit of that "
                   "data), or INDEX/CONFIG[.fail-on-X][.against-K][.allow-check-errors][.part-K-of-N] hash prefixes "
                   "(that config's copy)")
    a.add_argument("new", metavar="NEW", help="report file, index hash (prefix) in --report-dir (the latest audit of that "
                   "data), or INDEX/CONFIG[.fail-on-X][.against-K][.allow-check-errors][.part-K-of-N] hash prefixes "
                   "(that config's copy)")
    a.add_argument("--report-dir", default=default_report_dir(),
                   help=f"where index hashes are looked up (default {default_report_dir()})")
    a.add_argument("--format", choices=["text", "markdown", "json"], default="text", help="output (default text)")
    a.add_argument("--share-threshold", type=float, default=DEFAULT_SHARE_THRESHOLD, metavar="X",
                   help=f"smallest change of a label's share reported as moved (default {DEFAULT_SHARE_THRESHOLD})")
    return a


def run(args: argparse.Namespace) -> int:
    if not 0 <= args.share_threshold <= 1:
        raise UsageError(f"--share-threshold must be in [0, 1], got {args.share_threshold}")
    old = resolve_report(args.old, args.report_dir)
    new = resolve_report(args.new, args.report_dir)
    d = diff_reports(old, new, share_threshold=args.share_threshold)
    if args.format == "json":
        write_envelope("datacheck.diff", d.to_dict())
    elif args.format == "markdown":
        sys.stdout.write(render_diff_markdown(d))
    else:
        sys.stdout.write(terminal_safe(render_diff_text(d)))  # names from the data: no control sequence runs
    return EXIT_POLICY_FAILED if d.has_new_failures else EXIT_OK
