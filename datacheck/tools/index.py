"""``datacheck index build|verify`` as library calls: the committed data index of a shard set
(format in :mod:`datacheck.io.dataindex`).

``build`` hashes every shard (xxh3-128 of its bytes), counts its rows (through the one read path)
and writes the versioned index atomically with sorted keys. ``verify`` hashes the shards on disk and
compares them with the index: ``index.missing_shard``, ``index.extra_shard``, ``index.changed_shard``,
``index.row_count_mismatch`` (the rows of every listed shard of every format the audit reads, as the
audit with ``[dataset] index`` compares them: a parquet shard's from its footer, another format's from
the audit's result cache when it holds the shard's result, else read; see :func:`verify`); with
``fail_on`` the findings go through the audit's policy.
"""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Callable

from datacheck.checks.index import compare_index
from datacheck.derive.classlabel import with_declared_classes
from datacheck.derive.read import count_rows
from datacheck.derive.tokenizer import with_tokenizer_facts
from datacheck.execute.cache import ShardCache
from datacheck.execute.setup import config_and_source, with_declared_splits
from datacheck.formats import parquet
from datacheck.formats.discovery import discover
from datacheck.formats.registry import hash_shard, read_context
from datacheck.io.dataindex import IndexEntry, build_index, read_index, write_index
from datacheck.io.discover import Discovery
from datacheck.io.outputs import check_outputs
from datacheck.model.config import Config
from datacheck.model.errors import DatacheckError, UsageError
from datacheck.model.findings import Finding
from datacheck.report.policy import apply_policy, check_totals

__all__ = ["build", "verify", "ROWS_FROM_METADATA", "ROW_SOURCES"]


def build(paths: list[str], output: str, config: Config | str | None = None, *,
          progress: Callable[[str, int, int], None] | None = None) -> dict[str, Any]:
    """Build and write the index of the shards under ``paths``; returns the index document.
    ``progress(shard path, shards done, shards)`` is called before each shard is hashed and counted.

    Raises:
        UsageError: no shard found; the output cannot be written, is a folder, is an audited file or
            lies inside an audited folder (except ``index.json`` directly in it).
    """
    # index.json beside the shards is allowed: discovery never reads it, and [dataset] index points there
    check_outputs({"--output": output}, paths, allow_names=("index.json",))
    cfg = config if isinstance(config, Config) else config_and_source(config, paths)[0]
    disc = discover(paths, cfg.dataset.format)
    entries = []
    for k, ds in enumerate(disc.shards):
        if progress is not None:
            progress(ds.rel, k, len(disc.shards))
        try:
            h, size = hash_shard(ds.source, ds.format, bytes_only=True)
        except OSError as exc:
            raise UsageError(f"{ds.rel}: cannot read: {exc.strerror or exc}") from None
        entries.append(IndexEntry(path=ds.rel, bytes=size, rows=count_rows(ds.source, ds.format, cfg), content_hash=h))
    doc = build_index(entries)
    write_index(doc, output)
    return doc


#: formats whose row count is read from metadata, never by parsing the rows (parquet: the footer's
#: ``num_rows``): ``verify`` counts their rows from it. Any other format's count parses every row
#: (measured: a 155 MB JSONL shard hashes in 0.08 s, counts its rows in 8 s), so ``verify`` takes it
#: from the audit's result cache where that holds the shard's result, and reads the shard otherwise.
ROWS_FROM_METADATA = frozenset(parquet.FORMAT.names)
#: where ``verify`` took a row count from (its ``rows_from`` values): the parquet footer, the audit's
#: result cache (no byte of the shard read past its hash), or a read of the shard (for a streamed
#: format its first pass alone: :func:`~datacheck.derive.read.count_rows`)
ROW_SOURCES = ("footer", "cache", "read")


def _audit_cache(cache_dir: str | Path | None, cfg: Config, disc: Discovery) -> ShardCache | None:
    """The audit's result cache under ``cache_dir``, read only, keyed as an audit of these PATHs with
    this config keys it (the config with the facts an audit fills before its cache is keyed: the
    tokenizer's, the splits and the classes the data declares, :func:`datacheck.execute.setup.prepare_audit`);
    None when ``cache_dir`` is None or no folder, or those facts cannot be worked out (a tokenizer
    that does not load: the audit would refuse the config, so it cached nothing under it)."""
    if cache_dir is None or not Path(cache_dir).is_dir():
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the audit says what it says about the config; verify only looks up
            audit_cfg = with_declared_classes(with_declared_splits(with_tokenizer_facts(cfg), disc), disc)
        return ShardCache(cache_dir, audit_cfg, read_only=True)
    except (DatacheckError, OSError):
        return None


def verify(paths: list[str], index: str, config: Config | str | None = None,
           fail_on: str | None = None, *, progress: Callable[[str, int, int], None] | None = None,
           rows_not_compared: list[str] | None = None, cache_dir: str | Path | None = None,
           rows_from: dict[str, str] | None = None) -> list[Finding]:
    """Compare the shards under ``paths`` with the index file; returns the findings (may be empty).

    Rows: the row count an index entry records is compared with the shard's own for every listed
    shard, of every format the audit reads, changed or not (as ``datacheck audit`` with ``[dataset]
    index`` compares them), counted with as little reading as the format allows: a parquet shard's
    from its footer (:data:`ROWS_FROM_METADATA`); another format's (JSONL, CSV, Arrow IPC, text,
    WebDataset, MDS, litdata, Megatron) from the audit's result cache in ``cache_dir`` when it holds
    this shard's result (same relative path, content hash, format, config and datacheck code: the
    rows that audit counted, no byte read past the hash), else by reading the shard through the one
    read path (:func:`~datacheck.derive.read.count_rows`). A shard whose rows cannot be counted (it is
    unreadable: the audit reports ``decode.unreadable``) is not compared and named in
    ``rows_not_compared``.

    Args:
        paths: shard files, folders or globs.
        index: the committed index file.
        config: a :class:`~datacheck.model.config.Config`, a ``datacheck.toml`` path, or None (found as for audit).
        fail_on: with ``"error"``/``"warn"``/``"never"``, the findings pass through the audit's policy
            (:func:`datacheck.report.policy.apply_policy`; ignored checks dropped, ``fails_policy`` set);
            None (default): the raw findings.
        progress: called as ``progress(shard path, shards done, shards)`` before each shard is hashed.
        rows_not_compared: when given, the listed shards (relative paths, sorted) whose recorded row
            count was not compared (their rows could not be counted) are appended to it.
        cache_dir: the audit's result cache folder (``datacheck audit --cache-dir``), only read (never
            created or written); None (default): no cache, every non-parquet shard is read.
        rows_from: when given, filled with ``{relative path: source}`` for every shard whose rows were
            counted, the source one of :data:`ROW_SOURCES` (``"footer"``, ``"cache"``, ``"read"``).

    Raises:
        UsageError: the index is missing, not JSON, newer, inconsistent (a row or byte count that is
            none, an ``index_hash`` that is not its entries'), or lists a path outside the root.
    """
    cfg = config if isinstance(config, Config) else config_and_source(config, paths)[0]
    disc = discover(paths, cfg.dataset.format)
    idx = read_index(index, disc.root)  # validated before any shard is hashed
    actual = []
    fmt = {}
    hashes: dict[str, str] = {}
    for k, ds in enumerate(disc.shards):
        if progress is not None:
            progress(ds.rel, k, len(disc.shards))
        fmt[ds.rel] = ds
        try:
            h, size = hash_shard(ds.source, ds.format, bytes_only=True)
        except OSError:
            h, size = "", 0
        hashes[ds.rel] = h
        actual.append((ds.rel, h, size, None))
    uncounted: list[str] = []
    cache: list[ShardCache | None] = []  # opened at the first shard that needs it

    def cached(rel: str) -> tuple[bool, int | None]:
        ds = fmt[rel]
        if ds.url is not None or not hashes[rel]:  # a store object's cache key holds the store's checksum
            return False, None
        if not cache:
            cache.append(_audit_cache(cache_dir, cfg, disc))
        if cache[0] is None:
            return False, None
        try:
            return cache[0].recorded_rows(rel, ds.format, hashes[rel], context=read_context(ds.source, ds.format))
        except OSError:
            return False, None

    def rows_of(rel: str) -> int | None:
        ds = fmt[rel]
        how = "footer" if ds.format in ROWS_FROM_METADATA else "cache"
        found, n = (False, None) if how == "footer" else cached(rel)
        if not found:
            how = "footer" if how == "footer" else "read"
            n = count_rows(ds.source, ds.format, cfg)
        if n is None:
            uncounted.append(rel)
        elif rows_from is not None:
            rows_from[rel] = how
        return n

    found = compare_index(idx, actual, disc.temp_files, rows_of=rows_of)
    if rows_not_compared is not None:
        rows_not_compared.extend(sorted(uncounted))
    if fail_on is None:
        return found

    totals = check_totals((), found, 0)  # thresholds held to each check's count over the whole index
    return [p for p in (apply_policy(f, cfg, fail_on, None, totals.get(f.check)) for f in found) if p is not None]
