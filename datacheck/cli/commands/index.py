"""``datacheck index build PATH... -o index.json`` and ``datacheck index verify PATH... --index index.json``:
the committed data index (format in :mod:`datacheck.io.dataindex`).

``build`` hashes every shard (xxh3-128 of its bytes), counts its rows and writes the versioned
index atomically with sorted keys. ``verify`` hashes the shards on disk and compares them with the
index: ``index.missing_shard``, ``index.extra_shard``, ``index.changed_shard``,
``index.row_count_mismatch`` (the recorded rows of every listed shard, of every format, as ``datacheck
audit`` with ``[dataset] index`` compares them: a parquet shard's from its footer, another format's from
the audit's result cache (``--cache-dir``, only read) when it holds the shard's result, else read; the
text output says how many came from where on a ``rows:`` line, the JSON output per shard in
``rows_from``; a shard whose rows cannot be counted, an unreadable one, is named on a ``note:`` line and
in ``rows_not_compared``). The findings go through the
audit's policy (:func:`datacheck.report.policy.apply_policy`: ``[policy]`` severities, thresholds and
``--fail-on``), so each finding's ``fails_policy`` agrees with the exit code: 1 when a finding fails
the policy, 0 when none does, 2 for a bad index or config.

The config is found as for every command (:func:`datacheck.api.resolve_config_path`); the first
line of the text output (and ``config_path`` in the JSON output) says which one was used.
"""
from __future__ import annotations

import argparse
import sys

from datacheck.cli.defaults import config_help, default_cache_dir
from datacheck.cli.envelope import write_envelope
from datacheck.cli.progress import activity
from datacheck.execute.setup import config_and_source
from datacheck.model.config import describe_config
from datacheck.model.constants import EXIT_OK, EXIT_POLICY_FAILED
from datacheck.model.errors import UsageError
from datacheck.render.text import terminal_lines
from datacheck.tools.index import ROW_SOURCES, build, verify

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    a = sub.add_parser("index", help="build or verify a committed data index (shard paths, bytes, rows, hashes)")
    verbs = a.add_subparsers(dest="index_command", metavar="{build,verify}")
    b = verbs.add_parser("build", help="write the index of the shards under PATH")
    b.add_argument("paths", nargs="+", metavar="PATH", help="shard file, folder (recursive) or glob")
    b.add_argument("--output", "-o", required=True, metavar="FILE", help="where to write the index (JSON)")
    b.add_argument("--config", help=config_help(" ([dataset] format and csv options)"))
    b.add_argument("--no-progress", action="store_true",
                   help="never show the progress bar (drawn on stderr when stderr is a terminal)")
    v = verbs.add_parser("verify", help="compare the shards under PATH with a committed index")
    v.add_argument("paths", nargs="+", metavar="PATH", help="shard file, folder (recursive) or glob")
    v.add_argument("--index", required=True, metavar="FILE", help="the committed index (from `datacheck index build`)")
    v.add_argument("--config", help="datacheck.toml ([policy] and format; default: as for build)")
    v.add_argument("--format", choices=["text", "json"], default="text", help="what to print (default text)")
    v.add_argument("--fail-on", choices=["error", "warn", "never"], default="error",
                   help="lowest severity that fails (default error)")
    v.add_argument("--cache-dir", default=None, metavar="DIR",
                   help="the audit's result cache, only read: the rows of a non-parquet shard it holds the result of "
                        "are taken from it instead of reading the shard (default .datacheck/cache, or "
                        "$DATACHECK_DIR/cache)")
    v.add_argument("--no-cache", action="store_true", help="read every non-parquet shard's rows, never the cache")
    v.add_argument("--no-progress", action="store_true",
                   help="never show the progress bar (drawn on stderr when stderr is a terminal)")
    return a


def run(args: argparse.Namespace) -> int:
    if args.index_command is None:
        raise UsageError("datacheck index needs a verb: build or verify (see datacheck index --help)")
    cfg, source = config_and_source(args.config, args.paths)
    if args.index_command == "build":
        with activity("indexing", no_progress=args.no_progress) as tick:
            doc = build(args.paths, args.output, cfg, progress=tick)
        print(describe_config(source))
        print(f"wrote {args.output}: {len(doc['shards'])} shard(s), "
              f"{sum(s['rows'] or 0 for s in doc['shards'])} rows, index hash {doc['index_hash']}")
        return EXIT_OK
    uncounted: list[str] = []
    rows_from: dict[str, str] = {}
    cache_dir = None if args.no_cache else (args.cache_dir or default_cache_dir())
    with activity("verifying", no_progress=args.no_progress) as tick:
        findings = verify(args.paths, args.index, cfg, fail_on=args.fail_on, progress=tick,
                          rows_not_compared=uncounted, cache_dir=cache_dir, rows_from=rows_from)
    fail = any(f.fails_policy for f in findings)
    if args.format == "json":
        write_envelope("datacheck.index.verify", {"index": args.index, "passed": not fail, "config_path": source,
                                                  "rows_not_compared": uncounted, "rows_from": dict(sorted(rows_from.items())),
                                                  "findings": [f.to_dict(dataset_level=True) for f in findings]})
    else:
        what = "paths, bytes and content hashes" if uncounted else "paths, bytes, content hashes and row counts"
        lines = [describe_config(source)] + ([f"ok: the shards match {args.index} ({what})"] if not findings else [])
        if rows_from:
            said = {"footer": "from parquet footers", "cache": f"from the audit's result cache ({cache_dir})",
                    "read": "read from the shards"}
            counts = [f"{sum(1 for v in rows_from.values() if v == how)} {said[how]}" for how in ROW_SOURCES
                      if how in rows_from.values()]
            lines.append(f"rows: {len(rows_from)} shard(s) counted: {', '.join(counts)}")
        if uncounted:
            lines.append(f"note: the row counts of {len(uncounted)} shard(s) were not compared (unreadable: "
                         f"`datacheck audit` names why): "
                         f"{', '.join(uncounted[:10])}{' ...' if len(uncounted) > 10 else ''}")
        lines += [f"{f.severity.upper():5}{'!' if f.fails_policy else ' '} {f.check}: {f.message}" for f in findings]
        sys.stdout.write(terminal_lines(lines))  # shard names from the data: escaped, one line each
    return EXIT_POLICY_FAILED if fail else EXIT_OK
