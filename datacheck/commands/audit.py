"""``datacheck audit PATH...``: the per-shard audit and the versioned report."""
from __future__ import annotations

import argparse
import os
import sys

from datacheck.constants import DEFAULT_REPORT_DIR, EXIT_OK, EXIT_POLICY_FAILED

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    a = sub.add_parser("audit", help="audit shards and write a versioned report")
    a.add_argument("paths", nargs="+", metavar="PATH", help="shard file, folder (recursive) or glob")
    a.add_argument("--config", help="datacheck.toml (default: ./datacheck.toml when present)")
    a.add_argument("--report-dir", default=DEFAULT_REPORT_DIR,
                   help=f"reports are stored as DIR/<index_hash>/report.json (default {DEFAULT_REPORT_DIR})")
    a.add_argument("--output", "-o", help="also write the JSON report to this file")
    a.add_argument("--format", choices=["text", "json", "markdown"], default="text", help="what to print (default text)")
    a.add_argument("--fail-on", choices=["error", "warn", "never"], default="error",
                   help="lowest severity that fails the gate (default error)")
    a.add_argument("--no-progress", action="store_true", help="never show a progress bar")
    return a


def _progress_enabled(args: argparse.Namespace) -> bool:
    return (not args.no_progress and sys.stderr.isatty() and not os.environ.get("CI")
            and os.environ.get("TERM") != "dumb")


def run(args: argparse.Namespace) -> int:
    from datacheck.api import audit
    from datacheck.config import load_config
    from datacheck.render import render_markdown, render_text
    from datacheck.report import report_path, write_json_atomic

    cfg = load_config(args.config)
    if _progress_enabled(args):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(TextColumn("auditing"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      TextColumn("{task.description}"), transient=True) as bar:
            task = bar.add_task("", total=None)

            def tick(path: str, done: int, total: int) -> None:
                bar.update(task, completed=done, total=total, description=path)

            report = audit(args.paths, cfg, fail_on=args.fail_on, progress=tick)
    else:
        report = audit(args.paths, cfg, fail_on=args.fail_on)
    text = report.to_json()
    stored = write_json_atomic(report_path(args.report_dir, report.index_hash), text)
    if args.output:
        write_json_atomic(args.output, text)
    if args.format == "json":
        sys.stdout.write(text)
    elif args.format == "markdown":
        sys.stdout.write(render_markdown(report))
    else:
        sys.stdout.write(render_text(report))
        sys.stdout.write(f"report: {stored}\n")
    return EXIT_OK if report.passed else EXIT_POLICY_FAILED


