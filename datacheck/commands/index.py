"""``datacheck index build PATH... -o index.json`` and ``datacheck index verify PATH... --index index.json``:
the committed data index (format in :mod:`datacheck.dataindex`).

``build`` hashes every shard (xxh3-128 of its bytes), counts its rows and writes the versioned
index atomically with sorted keys. ``verify`` hashes the shards on disk and compares them with the
index: ``index.missing_shard``, ``index.extra_shard``, ``index.changed_shard``,
``index.row_count_mismatch`` (rows are counted only for changed shards); exit 1 when a finding of
severity ``error`` (or at/above ``--fail-on``) is found, 0 when the data matches, 2 for a bad index.
"""
from __future__ import annotations

import argparse
import json
import sys

from datacheck.constants import EXIT_OK, EXIT_POLICY_FAILED

__all__ = ["add_parser", "run", "build", "verify"]


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    a = sub.add_parser("index", help="build or verify a committed data index (shard paths, bytes, rows, hashes)")
    verbs = a.add_subparsers(dest="index_command", metavar="{build,verify}")
    b = verbs.add_parser("build", help="write the index of the shards under PATH")
    b.add_argument("paths", nargs="+", metavar="PATH", help="shard file, folder (recursive) or glob")
    b.add_argument("--output", "-o", required=True, metavar="FILE", help="where to write the index (JSON)")
    b.add_argument("--config", help="datacheck.toml ([dataset] format and csv options; default ./datacheck.toml)")
    v = verbs.add_parser("verify", help="compare the shards under PATH with a committed index")
    v.add_argument("paths", nargs="+", metavar="PATH", help="shard file, folder (recursive) or glob")
    v.add_argument("--index", required=True, metavar="FILE", help="the committed index (from `datacheck index build`)")
    v.add_argument("--config", help="datacheck.toml (default ./datacheck.toml)")
    v.add_argument("--format", choices=["text", "json"], default="text", help="what to print (default text)")
    v.add_argument("--fail-on", choices=["error", "warn", "never"], default="error",
                   help="lowest severity that fails (default error)")
    return a


def _cfg(path: str | None):
    from datacheck.config import load_config

    return load_config(path)


def build(paths: list[str], output: str, config=None) -> dict:
    """Build and write the index of the shards under ``paths``; returns the index document.

    Raises:
        UsageError: no shard found, or the output cannot be written.
    """
    from datacheck.config import Config
    from datacheck.dataindex import IndexEntry, build_index, count_rows, write_index
    from datacheck.hashing import hash_file
    from datacheck.io.discover import discover

    cfg = config if isinstance(config, Config) else _cfg(config)
    disc = discover(paths, cfg.dataset.format)
    entries = []
    for ds in disc.shards:
        try:
            h, size = hash_file(ds.path)
        except OSError as exc:
            from datacheck.errors import UsageError

            raise UsageError(f"{ds.rel}: cannot read: {exc.strerror or exc}") from None
        entries.append(IndexEntry(path=ds.rel, bytes=size, rows=count_rows(ds.path, ds.format, cfg), content_hash=h))
    doc = build_index(entries)
    write_index(doc, output)
    return doc


def verify(paths: list[str], index: str, config=None) -> list:
    """Compare the shards under ``paths`` with the index file; returns the findings (may be empty).

    Raises:
        UsageError: the index is missing, not JSON, newer, or lists a path outside the root.
    """
    from datacheck.config import Config
    from datacheck.dataindex import compare_index, count_rows, read_index
    from datacheck.hashing import hash_file
    from datacheck.io.discover import discover

    cfg = config if isinstance(config, Config) else _cfg(config)
    disc = discover(paths, cfg.dataset.format)
    idx = read_index(index, disc.root)  # validated before any shard is hashed
    actual = []
    fmt = {}
    for ds in disc.shards:
        fmt[ds.rel] = ds
        try:
            h, size = hash_file(ds.path)
        except OSError:
            h, size = "", 0
        actual.append((ds.rel, h, size, None))

    def rows_of(rel: str):
        ds = fmt[rel]
        return count_rows(ds.path, ds.format, cfg)

    return compare_index(idx, actual, disc.temp_files, rows_of=rows_of)


def run(args: argparse.Namespace) -> int:
    from datacheck.errors import UsageError
    from datacheck.findings import Severity

    if args.index_command is None:
        raise UsageError("datacheck index needs a verb: build or verify (see datacheck index --help)")
    if args.index_command == "build":
        doc = build(args.paths, args.output, args.config)
        print(f"wrote {args.output}: {len(doc['shards'])} shard(s), "
              f"{sum(s['rows'] or 0 for s in doc['shards'])} rows, index hash {doc['index_hash']}")
        return EXIT_OK
    findings = verify(args.paths, args.index, args.config)
    fail = args.fail_on != "never" and any(Severity(f.severity).rank >= Severity(args.fail_on).rank for f in findings)
    if args.format == "json":
        sys.stdout.write(json.dumps({"index": args.index, "passed": not fail,
                                     "findings": [f.to_dict(dataset_level=True) for f in findings]},
                                    sort_keys=True, indent=2) + "\n")
    else:
        if not findings:
            print(f"ok: the shards match {args.index}")
        for f in findings:
            print(f"{f.severity.upper():5} {f.check}: {f.message}")
    return EXIT_POLICY_FAILED if fail else EXIT_OK
