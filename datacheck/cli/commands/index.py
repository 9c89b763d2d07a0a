"""``datacheck index build PATH... -o index.json`` and ``datacheck index verify PATH... --index index.json``:
the committed data index (format in :mod:`datacheck.io.dataindex`).

``build`` hashes every shard (xxh3-128 of its bytes), counts its rows and writes the versioned
index atomically with sorted keys. ``verify`` hashes the shards on disk and compares them with the
index: ``index.missing_shard``, ``index.extra_shard``, ``index.changed_shard``,
``index.row_count_mismatch`` (rows are counted only for changed shards). The findings go through the
audit's policy (:func:`datacheck.api.apply_policy`: ``[policy]`` severities, thresholds and
``--fail-on``), so each finding's ``fails_policy`` agrees with the exit code: 1 when a finding fails
the policy, 0 when none does, 2 for a bad index or config.

The config is found as for every command (:func:`datacheck.api.resolve_config_path`); the first
line of the text output (and ``config_path`` in the JSON output) says which one was used.
"""
from __future__ import annotations

import argparse

from datacheck.cli.envelope import write_envelope
from datacheck.execute.setup import config_and_source
from datacheck.io.dataindex import IndexEntry, build_index, compare_index, count_rows, read_index, write_index
from datacheck.io.discover import discover
from datacheck.io.hashing import hash_shard
from datacheck.io.outputs import check_outputs
from datacheck.model.config import Config, describe_config
from datacheck.model.constants import EXIT_OK, EXIT_POLICY_FAILED
from datacheck.model.errors import UsageError
from datacheck.report.policy import apply_policy

__all__ = ["add_parser", "run", "build", "verify"]


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    a = sub.add_parser("index", help="build or verify a committed data index (shard paths, bytes, rows, hashes)")
    verbs = a.add_subparsers(dest="index_command", metavar="{build,verify}")
    b = verbs.add_parser("build", help="write the index of the shards under PATH")
    b.add_argument("paths", nargs="+", metavar="PATH", help="shard file, folder (recursive) or glob")
    b.add_argument("--output", "-o", required=True, metavar="FILE", help="where to write the index (JSON)")
    b.add_argument("--config", help="datacheck.toml ([dataset] format and csv options; default: ./datacheck.toml, "
                                    "else datacheck.toml in the one folder holding every PATH, else in its parent)")
    v = verbs.add_parser("verify", help="compare the shards under PATH with a committed index")
    v.add_argument("paths", nargs="+", metavar="PATH", help="shard file, folder (recursive) or glob")
    v.add_argument("--index", required=True, metavar="FILE", help="the committed index (from `datacheck index build`)")
    v.add_argument("--config", help="datacheck.toml ([policy] and format; default: as for build)")
    v.add_argument("--format", choices=["text", "json"], default="text", help="what to print (default text)")
    v.add_argument("--fail-on", choices=["error", "warn", "never"], default="error",
                   help="lowest severity that fails (default error)")
    return a


def _cfg(path: str | None, paths: list[str] = ()):
    """(config, its source) found by :func:`datacheck.api.resolve_config_path` from ``--config`` and PATHs."""
    return config_and_source(path, paths)


def build(paths: list[str], output: str, config=None) -> dict:
    """Build and write the index of the shards under ``paths``; returns the index document.

    Raises:
        UsageError: no shard found; the output cannot be written, is a folder, is an audited file or
            lies inside an audited folder (except ``index.json`` directly in it).
    """
    # index.json beside the shards is allowed: discovery never reads it, and [dataset] index points there
    check_outputs({"--output": output}, paths, allow_names=("index.json",))
    cfg = config if isinstance(config, Config) else _cfg(config, paths)[0]
    disc = discover(paths, cfg.dataset.format)
    entries = []
    for ds in disc.shards:
        try:
            h, size = hash_shard(ds.path, ds.format)
        except OSError as exc:
            raise UsageError(f"{ds.rel}: cannot read: {exc.strerror or exc}") from None
        entries.append(IndexEntry(path=ds.rel, bytes=size, rows=count_rows(ds.path, ds.format, cfg), content_hash=h))
    doc = build_index(entries)
    write_index(doc, output)
    return doc


def verify(paths: list[str], index: str, config=None, fail_on: str | None = None) -> list:
    """Compare the shards under ``paths`` with the index file; returns the findings (may be empty).

    Args:
        paths: shard files, folders or globs.
        index: the committed index file.
        config: a :class:`~datacheck.config.Config`, a ``datacheck.toml`` path, or None (found as for audit).
        fail_on: with ``"error"``/``"warn"``/``"never"``, the findings pass through the audit's policy
            (:func:`datacheck.api.apply_policy`; ignored checks dropped, ``fails_policy`` set);
            None (default): the raw findings.

    Raises:
        UsageError: the index is missing, not JSON, newer, or lists a path outside the root.
    """
    cfg = config if isinstance(config, Config) else _cfg(config, paths)[0]
    disc = discover(paths, cfg.dataset.format)
    idx = read_index(index, disc.root)  # validated before any shard is hashed
    actual = []
    fmt = {}
    for ds in disc.shards:
        fmt[ds.rel] = ds
        try:
            h, size = hash_shard(ds.path, ds.format)
        except OSError:
            h, size = "", 0
        actual.append((ds.rel, h, size, None))

    def rows_of(rel: str):
        ds = fmt[rel]
        return count_rows(ds.path, ds.format, cfg)

    found = compare_index(idx, actual, disc.temp_files, rows_of=rows_of)
    if fail_on is None:
        return found

    return [p for p in (apply_policy(f, cfg, fail_on, None) for f in found) if p is not None]


def run(args: argparse.Namespace) -> int:
    if args.index_command is None:
        raise UsageError("datacheck index needs a verb: build or verify (see datacheck index --help)")
    cfg, source = _cfg(args.config, args.paths)
    if args.index_command == "build":
        doc = build(args.paths, args.output, cfg)
        print(describe_config(source))
        print(f"wrote {args.output}: {len(doc['shards'])} shard(s), "
              f"{sum(s['rows'] or 0 for s in doc['shards'])} rows, index hash {doc['index_hash']}")
        return EXIT_OK
    findings = verify(args.paths, args.index, cfg, fail_on=args.fail_on)
    fail = any(f.fails_policy for f in findings)
    if args.format == "json":
        write_envelope("datacheck.index.verify", {"index": args.index, "passed": not fail, "config_path": source,
                                                  "findings": [f.to_dict(dataset_level=True) for f in findings]})
    else:
        print(describe_config(source))
        if not findings:
            print(f"ok: the shards match {args.index}")
        for f in findings:
            print(f"{f.severity.upper():5}{'!' if f.fails_policy else ' '} {f.check}: {f.message}")
    return EXIT_POLICY_FAILED if fail else EXIT_OK
