"""Readers of the shard formats ML teams ship besides parquet/Arrow/JSONL/CSV.

Each module reads one format into an in-memory polars frame plus the ``decode.*`` findings found on
the way, and raises :class:`FormatError` (turned into ``decode.unreadable`` by
:func:`datacheck.io.readers.open_shard`) when the bytes break the format's own layout rules:

- :mod:`.megatron`: Megatron-LM ``MMIDIDX`` ``.bin``/``.idx`` pairs (documents as rows);
- :mod:`.mds`: MosaicML Streaming ``.mds`` shards (samples as rows);
- :mod:`.webdataset`: WebDataset ``.tar`` shards (samples grouped by key as rows);
- :mod:`.litdata`: Lightning ``litdata`` optimized chunk files (items as rows).

The set-level rules (index files against the shards on disk: missing, extra, changed, row counts,
zero-shard indexes) live with the other shipped shard lists in :mod:`datacheck.io.dataindex`.
"""
from __future__ import annotations

__all__ = ["FormatError"]


class FormatError(Exception):
    """The bytes break the format's layout; ``reason`` says which rule, where, and the remedy."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)
