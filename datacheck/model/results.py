"""What an audit learned, as values: one shard's result and the dataset stage's context.

Imports only the other value modules of :mod:`datacheck.model` (and polars' types)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from datacheck.model.config import Config
from datacheck.model.findings import Finding, Skipped

__all__ = ["ShardResult", "DatasetContext"]


@dataclass
class ShardResult:
    """Everything the audit learned about one shard (before the policy is applied)."""

    path: str
    format: str
    content_hash: str
    bytes: int
    rows: int | None
    findings: list[Finding] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    skipped: list[Skipped] = field(default_factory=list)
    roles: dict[str, Any] = field(default_factory=dict)
    columns: dict[str, str] = field(default_factory=dict)  # column -> dtype string
    #: every failing row (0-based, sorted) per "check" or "check:column"; only with ``keep_rows=True``
    failing_rows: dict[str, list[int]] = field(default_factory=dict)
    #: values of :class:`~datacheck.checks.registry.Payload` items (for the merge; never in the report)
    payload: dict[str, Any] = field(default_factory=dict)
    #: the shard's layout (:meth:`datacheck.model.layouts.Layout.to_dict`: name, source, why); empty
    #: for a shard that could not be read
    layout: dict[str, Any] = field(default_factory=dict)
    #: the shard-stage checks that do not apply to the shard's layout (not run, not skipped)
    not_applicable: list[str] = field(default_factory=list)

    @property
    def readable(self) -> bool:
        return self.rows is not None

    @property
    def check_errors(self) -> list[Skipped]:
        """The checks that failed internally on this shard (``Skipped`` entries with ``error=True``)."""
        return [s for s in self.skipped if s.error]


@dataclass
class DatasetContext:
    """What dataset-level checks see: the config, every shard result, and the discovery."""

    cfg: Config
    shards: list[ShardResult]
    temp_files: list[str] = field(default_factory=list)
    root: Path | None = None
    #: shard lists (``state.json``/``index.json``, relative paths) discovery found in the searched folders
    shard_lists: list[str] = field(default_factory=list)
    #: shard path -> split name from ``[splits]`` (shards matching no glob are absent)
    splits: dict[str, str] = field(default_factory=dict)
    #: the committed ``[dataset] index`` (:class:`~datacheck.io.dataindex.DataIndex`), read before any shard
    index: Any = None
    #: shard results of the ``--against`` dataset (hash payloads only), or None
    against: list[ShardResult] | None = None
    #: the splits ``datasets.load_dataset`` gives the shards (a :class:`datacheck.io.hubsplits.HubSplits`,
    #: :meth:`datacheck.io.discover.Discovery.hub_splits`: the dataset card's ``configs``, else the file
    #: names), as discovery found them; None: the dataset checks work them out from ``root`` (a merge)
    loader_splits: Any = None
    #: values several dataset checks work out alike, computed once (e.g. the simulated batch order of
    #: an epoch, :func:`datacheck.checks.batch.dataset_order`): key -> value
    memo: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)

    def readable_shards(self) -> list[ShardResult]:
        return [s for s in self.shards if s.readable]
