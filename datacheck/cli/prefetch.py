"""``datacheck audit`` of one big parquet shard: its first batches decoded while the command still
imports.

Before the audit verb is imported (polars, numpy, pyarrow, the config's pydantic models and the check
families: 0.45-0.55 s on one core, before any batch is decoded), :func:`shard_prefetch` starts a
:func:`datacheck.formats.parquetdecode.prefetch` of the shard when the command line surely audits
exactly one local parquet file in this process (:func:`one_parquet_shard`); the engine's read of that
shard then takes the batches decoded meanwhile (the same record batches: the report is the same byte
for byte). Anything else (several paths or shards, a folder holding another file, a glob, a URL,
``--against``, a part, ``--executor process`` or ``ray``, a shard read as one batch) starts nothing.
A prefetch the audit does not take (another format forced by the config, the shard answered by the
cache) is stopped and dropped when the verb returns, however it returns.
"""
from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path

from datacheck.cli.rerun import parse_audit
from datacheck.formats.parquetdecode import prefetch
from datacheck.io.stores import is_url

__all__ = ["PARQUET_SUFFIXES", "MAX_LISTED", "one_parquet_shard", "shard_prefetch"]

#: the extensions discovery reads as parquet (:mod:`datacheck.formats.parquet`)
PARQUET_SUFFIXES = (".parquet", ".pq")
#: entries of a folder looked at before giving up (a big tree is not one shard)
MAX_LISTED = 1000


def _only_file(folder: Path) -> Path | None:
    """The one file under ``folder`` (links not followed; hidden names, which discovery never audits,
    left out), or None when there are none, several, or more than :data:`MAX_LISTED` entries."""
    found: list[os.DirEntry] = []
    todo, seen = [folder], 0
    while todo:
        try:
            with os.scandir(todo.pop()) as it:
                entries = list(it)
        except OSError:
            return None
        for e in entries:
            seen += 1
            if seen > MAX_LISTED:
                return None
            if e.name.startswith("."):
                continue
            if e.is_dir(follow_symlinks=False):
                todo.append(Path(e.path))
                continue
            found.append(e)
            if len(found) > 1:
                return None
    if len(found) != 1 or not found[0].is_file(follow_symlinks=False):
        return None
    return Path(found[0].path)


def one_parquet_shard(argv: Sequence[str]) -> Path | None:
    """The parquet file ``datacheck audit ARGV`` audits as its one shard in this process, or None when
    that is not sure: one PATH, a regular file (not a link) named ``*.parquet``/``*.pq``, or a folder
    whose only file (hidden names aside) is one; no ``--against``, no part, the executor ``local`` or
    the default (one shard is audited in the audit's own process)."""
    try:
        args = parse_audit(argv)
    except Exception:  # noqa: BLE001 - the verb's own parser says what is wrong
        return None
    if (len(args.paths) != 1 or args.against or args.num_parts is not None or args.part is not None
            or args.executor not in (None, "local")):
        return None
    given = args.paths[0]
    if not given.strip() or is_url(given) or any(ch in given for ch in "*?["):
        return None
    path = Path(given)
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return None
    if stat.S_ISDIR(mode):
        found = _only_file(path)
        if found is None:
            return None
        path = found
    elif not stat.S_ISREG(mode):
        return None
    return path if path.suffix.lower() in PARQUET_SUFFIXES else None


@contextlib.contextmanager
def shard_prefetch(argv: Sequence[str]) -> Iterator[None]:
    """For ``datacheck ARGV``: while the block runs, the prefetch of the one parquet shard an ``audit``
    reads (:func:`one_parquet_shard`), when there is one; nothing otherwise."""
    path = one_parquet_shard(argv[1:]) if argv and argv[0] == "audit" else None
    if path is None:
        yield
        return
    with prefetch(path):
        yield
