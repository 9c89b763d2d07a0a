"""``datacheck audit PATH...``: the per-shard audit and the versioned report."""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
from typing import Any

from datacheck.cli.defaults import default_cache_dir, default_report_dir
from datacheck.cli.progress import progress_enabled, stderr_console
from datacheck.execute.audit import run_audit
from datacheck.execute.cache import CacheWarning
from datacheck.execute.executors import ENV_WORKERS, EXECUTORS
from datacheck.execute.parts import audit_part, check_part_args, write_part
from datacheck.execute.setup import AuditOptions
from datacheck.execute.setup import resolve_config_path as _resolve
from datacheck.formats.discovery import discover
from datacheck.io.outputs import check_output_folders, check_outputs, write_json_atomic
from datacheck.model.config import Config, load_config
from datacheck.model.constants import EXIT_INTERNAL, EXIT_OK, EXIT_POLICY_FAILED
from datacheck.render.annotations import emit_annotations, in_github_actions
from datacheck.render.html import render_html
from datacheck.render.junit import write_junit
from datacheck.render.text import render_markdown, render_text
from datacheck.report.model import report_path

__all__ = ["add_parser", "run"]


#: the exit codes, as ``datacheck audit --help`` lists them (DESIGN.md's CLI contract)
EXIT_CODES_HELP = """exit codes:
  0  pass: no finding fails the policy
  1  the policy failed (findings at or above --fail-on; an unreadable shard is a finding)
  2  usage or config error (the message names the flag or key); nothing was audited
  3  internal error, or a check that failed internally (see --allow-check-errors)"""


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    a = sub.add_parser("audit", help="audit shards and write a versioned report", epilog=EXIT_CODES_HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    a.add_argument("paths", nargs="+", metavar="PATH", help="shard file, folder (recursive) or glob")
    a.add_argument("--follow-symlinks", action="store_true",
                   help="read shards reached through symlinks that lead outside the audited folder (e.g. a "
                        "Hugging Face hub cache snapshot, whose files link into blobs/); by default they are "
                        "listed as ignored and not read")
    a.add_argument("--allow-python-schema", action="store_true",
                    help="let a datacheck.toml found by itself (next to the data) name a Python schema "
                         "file (file.py:Class); Python schema files EXECUTE CODE, so by default only one named "
                         "with --schema or in a --config file runs")
    a.add_argument("--config", help="datacheck.toml (default: ./datacheck.toml, else datacheck.toml in the one "
                                    "folder holding every PATH, else in its parent)")
    a.add_argument("--report-dir", default=default_report_dir(),
                   help=f"reports are stored as DIR/<index_hash>/report.json (default {default_report_dir()}; "
                        "$DATACHECK_DIR/reports when DATACHECK_DIR is set)")
    a.add_argument("--output", "-o", help="also write the JSON report to this file")
    a.add_argument("--format", choices=["text", "json", "markdown", "html"], default="text",
                   help="what to print (default text; html: a self-contained page)")
    a.add_argument("--html", metavar="FILE", help="also write the report as a self-contained HTML page to FILE")
    a.add_argument("--fail-on", choices=["error", "warn", "never"], default="error",
                   help="lowest severity that fails the gate (default error)")
    a.add_argument("--no-progress", action="store_true", help="never show a progress bar")
    add_view_arguments(a)
    a.add_argument("--against", action="append", metavar="PATH", default=None,
                   help="another dataset (file, folder or glob; repeatable) to compare with: audited rows whose "
                        "content also occurs there are dup.split_overlap (e.g. eval against train)")
    a.add_argument("--schema", metavar="NAME|PATH",
                   help="data contract: a built-in layout (causal_lm, seq2seq, text_classification, "
                        "token_classification, tabular, chat_sft, sft_tokenized, packed_lm, dpo, ctc), a Pandera YAML/JSON file or file.py:ClassName "
                        "(overrides [dataset] schema)")
    add_ci_arguments(a)
    w = a.add_argument_group("parallel work")
    w.add_argument("--workers", type=_positive_int, default=None, metavar="N",
                   help=f"audit shards in N worker processes (default: ${ENV_WORKERS}, else one per core; "
                        "1: in this process); the report is the same for any N")
    w.add_argument("--executor", choices=list(EXECUTORS), default=None,
                   help="local: in this process; process: a pool of --workers processes; ray: one Ray task per "
                        "shard, retried when its worker dies (the datacheck[ray] extra) (default: process when "
                        "more than one worker has a shard)")
    w.add_argument("--ray-address", default=None, metavar="ADDRESS",
                   help="with --executor ray: the Ray cluster to join (e.g. ray://HEAD:10001, or auto on a cluster "
                        "node; default: start Ray in this process with --workers CPUs)")
    g = a.add_argument_group("incremental audit and split jobs")
    g.add_argument("--cache-dir", default=None,
                   help="per-shard result cache: unchanged shards are hashed, not re-read (default .datacheck/cache, "
                        "or $DATACHECK_DIR/cache)")
    g.add_argument("--no-cache", action="store_true", help="neither read nor write the result cache")
    g.add_argument("--trust-mtime", action="store_true",
                   help="with the cache: a shard file whose size, modification time, status-change time and inode "
                        "are those recorded with its content hash is not hashed again (a rerun reads no shard bytes); "
                        "by default every shard is hashed")
    g.add_argument("--cache-prune", action="store_true",
                   help="after the audit, delete the cache entries it did not use (a cache folder kept for this "
                        "dataset, e.g. by actions/cache)")
    g.add_argument("--num-parts", type=int, default=None, metavar="N",
                   help="split the shards into N parts (by a hash of each shard's relative path)")
    g.add_argument("--part", type=int, default=None, metavar="K",
                   help="audit part K (0..N-1) only; combine the part reports with 'datacheck merge'")
    return a


def _positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return n


def add_view_arguments(a: argparse.ArgumentParser) -> None:
    """``--show-passing`` (shared by audit, merge and report)."""
    a.add_argument("--show-passing", action="store_true",
                   help="text/markdown: list every shard in the table; by default shards without any finding "
                        "are one line (\"2,998 shards passed with no findings\"); the JSON report always "
                        "lists every shard")


def add_ci_arguments(a: argparse.ArgumentParser) -> None:
    """``--junit FILE`` and ``--allow-check-errors`` (shared by audit and merge)."""
    a.add_argument("--junit", metavar="FILE", help="also write JUnit XML: a test case per shard and check")
    a.add_argument("--allow-check-errors", action="store_true",
                   help="a check that fails internally (its query raised) does not fail the gate: exit per "
                        "--fail-on; the errors are still listed in the report (default: status fail, exit 3)")


def emit_report(report, args: argparse.Namespace, stored, root=None, text: str | None = None) -> int:
    """Write ``--output``/``--junit``, print the report in ``--format``, emit GitHub Actions
    annotations when ``GITHUB_ACTIONS=true`` (on stderr, so stdout stays the report); return the exit code.
    ``text``: the report's JSON when the caller encoded it already (encoded here only for ``--format json``)."""
    if getattr(args, "junit", None):
        write_junit(report, args.junit)
    if getattr(args, "html", None):
        write_json_atomic(args.html, render_html(report))
    if args.format == "json":
        sys.stdout.write(text if text is not None else report.to_json())
    elif args.format == "markdown":
        sys.stdout.write(render_markdown(report, show_passing=getattr(args, "show_passing", False)))
    elif args.format == "html":
        sys.stdout.write(render_html(report))
    else:
        sys.stdout.write(render_text(report, show_passing=getattr(args, "show_passing", False)))
        sys.stdout.write(f"report: {stored}\n")
    if in_github_actions():
        emit_annotations(report, sys.stderr, root=root)
    return exit_code(report, getattr(args, "allow_check_errors", False))


def exit_code(report, allow_check_errors: bool) -> int:
    """0 pass; 3 when checks failed internally (``summary.check_errors``) and that is not allowed,
    with a message on stderr; else 1 when the policy failed."""
    if report.check_errors and not allow_check_errors:
        names = sorted({s["check"] for s in report.skipped if s.get("error")})
        print(f"datacheck: internal error: {report.check_errors} check error(s): datacheck failed to run "
              f"{', '.join(names[:5])} (see 'skipped' in the report); the data was NOT fully checked. "
              "Pass --allow-check-errors to gate on the findings only.", file=sys.stderr)
        return EXIT_INTERNAL
    return EXIT_OK if report.passed else EXIT_POLICY_FAILED


def _progress_enabled(args: argparse.Namespace) -> bool:
    return progress_enabled(args.no_progress)


@contextlib.contextmanager
def _bar():
    """A rich progress bar over the BYTES of the shard set (sizes from the file system), with the
    shard count and the shard being read: ``auditing ━━━━ 1.2/12.9 GB 3/40 shards 0:01:10 a.parquet``.
    Bytes, not shards, so one big shard shows its size and name at once instead of ``0/?``
    (progress inside one shard's query is not observable; the bar moves when a shard finishes).
    Yields ``(progress, byte_progress)`` callbacks for :func:`datacheck.api.audit`; the task is
    added at the first call, when the total is known, so no frame shows an unknown total."""
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("auditing"), BarColumn(), DownloadColumn(), TextColumn("{task.fields[shards]}"),
                  TimeElapsedColumn(), TextColumn("{task.description}"), transient=True,
                  console=stderr_console(), redirect_stdout=False) as bar:  # on stderr, whatever stdout is
        state: dict[str, Any] = {"task": None, "shards": ""}

        def tick_bytes(path: str, done: int, total: int) -> None:
            if state["task"] is None:
                state["task"] = bar.add_task(path, total=total, completed=done, shards=state["shards"])
            bar.update(state["task"], completed=done, total=total, description=path, shards=state["shards"])

        def tick(path: str, done: int, total: int) -> None:
            state["shards"] = f"{done:,}/{total:,} shards"
            if state["task"] is not None:
                bar.update(state["task"], shards=state["shards"])

        yield tick, tick_bytes


def resolve_config_path(given: str | None, paths: list[str]) -> str | None:
    """The config to use (one rule for every entry point): see :func:`datacheck.api.resolve_config_path`."""
    return _resolve(given, paths)


def run(args: argparse.Namespace) -> int:
    import warnings

    config_path = resolve_config_path(args.config, args.paths)
    cfg = (load_config(config_path, allow_python_schema=args.config is not None or args.allow_python_schema)
           if config_path is not None else Config())
    if getattr(args, "schema", None):
        cfg = cfg.with_schema(args.schema)
    split = check_part_args(args.num_parts, args.part)  # before any shard is read

    check_outputs({"--output": args.output, "--html": args.html, "--junit": args.junit},
                  [*args.paths, *(getattr(args, "against", None) or [])])
    cache_dir = None if args.no_cache else (args.cache_dir or default_cache_dir())
    check_output_folders({"--report-dir": args.report_dir, "--cache-dir": cache_dir},
                         [*args.paths, *(getattr(args, "against", None) or [])], probe=("--report-dir",))

    opts = AuditOptions(fail_on=args.fail_on, config_path=config_path, cache_dir=cache_dir,
                        prune_cache=args.cache_prune, trust_mtime=args.trust_mtime,
                        allow_check_errors=args.allow_check_errors,
                        workers=args.workers, executor=args.executor, ray_address=args.ray_address,
                        follow_symlinks=args.follow_symlinks, against=tuple(getattr(args, "against", None) or ()))

    def go(progress, byte_progress):
        if split is not None:
            return audit_part(args.paths, cfg, opts, split[0], split[1], progress=progress,
                              byte_progress=byte_progress)
        return run_audit(args.paths, cfg, opts, progress=progress, byte_progress=byte_progress)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CacheWarning)
        if _progress_enabled(args):
            with _bar() as (tick, tick_bytes):
                result = go(tick, tick_bytes)
        else:
            result = go(None, None)
    for w in caught:
        if issubclass(w.category, CacheWarning):
            print(f"datacheck: warning: {w.message}", file=sys.stderr)
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    text: str | None = None
    if split is not None:
        stored = report_path(args.report_dir, result.report.index_hash)
        report = write_part(result, stored)
        if args.output:
            write_part(result, args.output)
    else:
        report = result
        text = report.to_json()
        stored = write_json_atomic(report_path(args.report_dir, report.index_hash), text)
        if args.output:
            write_json_atomic(args.output, text)
    root = None
    if os.environ.get("GITHUB_ACTIONS") == "true":
        root = discover(list(args.paths), cfg.dataset.format).root
    return emit_report(report, args, stored, root, text)
