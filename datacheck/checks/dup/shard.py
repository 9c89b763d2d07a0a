"""dup.shard: two or more shards with identical bytes (by content hash), and the groups
``clean --drop dup.shard`` reads."""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable

from datacheck.checks.index import SHARD_NAME
from datacheck.checks.registry import check, finding
from datacheck.model import layouts as lay
from datacheck.model.findings import Finding

__all__ = ["duplicate_shards", "duplicate_shard_groups"]


def duplicate_shard_groups(shards: Iterable[Any]) -> list[tuple[str, list[str]]]:
    """(content hash, shard paths) of each set of two or more readable shards with identical bytes, by
    content hash. The first path of a group is the copy ``clean --drop dup.shard`` keeps; the others
    are the duplicates it drops. Paths named as a member of a numbered set (``train-00002-of-00004``,
    :data:`~datacheck.checks.index.SHARD_NAME`) come first, then path order: of
    ``train-00002-of-00004.parquet`` and its copy ``train-00002-of-00004 (copy).parquet`` the
    numbered name is kept (path order alone kept the copy, since ``' ' < '.'``, and renamed the
    whole set to ``-of-00003``). Unreadable shards (``rows`` None) and empty files are left out (see
    :func:`duplicate_shards`)."""
    by_hash: dict[str, list[str]] = defaultdict(list)
    for s in shards:
        if s.bytes and s.rows is not None:
            by_hash[s.content_hash].append(s.path)
    return [(h, sorted(paths, key=_keep_order)) for h, paths in sorted(by_hash.items()) if len(paths) > 1]


def _keep_order(path: str) -> tuple[bool, str]:
    """Sort key of a group's paths: numbered-set members (``NAME-0000k-of-0000N``) first, then by path."""
    return SHARD_NAME.match(path.rpartition("/")[2]) is None, path


@check("dup.shard", layouts=lay.ANY, level="dataset")
def duplicate_shards(dctx: Any) -> Iterable[Finding]:
    """``dup.shard``: two or more shards with identical content hashes (bytes), e.g. a shard uploaded twice.

    Unreadable shards (``rows`` None: ``decode.unreadable``) do not count: they feed no row to training,
    so two identical broken files are two ``decode.unreadable`` findings, not rows seen twice."""
    for h, paths in duplicate_shard_groups(dctx.shards):
        yield finding(
            "dup.shard", count=len(paths) - 1, shards=tuple(paths),
            message=f"{len(paths)} shards have identical bytes ({h}): {', '.join(paths)}; every row is seen twice",
            details={"content_hash": h},
        )
