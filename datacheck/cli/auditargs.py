"""The ``datacheck audit`` arguments (the parser of the verb; stdlib and light modules only, so the
whole-audit memo can read a command line before anything heavy is imported: :mod:`datacheck.cli.rerun`)."""
from __future__ import annotations

import argparse

from datacheck.cli.defaults import config_help, default_report_dir
from datacheck.model.constants import ENV_WORKERS, EXECUTORS

__all__ = ["EXIT_CODES_HELP", "add_parser", "add_view_arguments", "add_ci_arguments"]


#: the exit codes, as ``datacheck audit --help`` lists them (DESIGN.md's CLI contract)
EXIT_CODES_HELP = """exit codes:
  0  pass: no finding fails the policy
  1  the policy failed (findings at or above --fail-on; an unreadable shard is a finding)
  2  usage or config error (the message names the flag or key); nothing was audited;
     or an output that cannot be written (disk full, no permission; the message names it)
  3  internal error, or a check that failed internally (see --allow-check-errors)
130  interrupted (Ctrl-C);  143  terminated (SIGTERM); temporary files removed"""


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
    a.add_argument("--config", help=config_help())
    a.add_argument("--report-dir", default=default_report_dir(),
                   help="the report is stored as DIR/<index_hash>/report.json and as its config's copy "
                        "DIR/<index_hash>/<config hash>[.fail-on-X][.against-K][.allow-check-errors][.part-K-of-N]/report.json, "
                        "the 32 "
                        f"most recent copies kept (default {default_report_dir()}; "
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
                        "content also occurs there are dup.split_overlap (e.g. eval against train); a file the "
                        "audit itself reads is refused there (exit 2)")
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
