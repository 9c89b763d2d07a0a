"""Shard discovery and reading (parquet, Arrow IPC file/stream, JSONL(.gz/.zst), CSV/TSV)."""
from datacheck.io.discover import DiscoveredShard, Discovery, discover
from datacheck.io.readers import ShardData, Unreadable, open_shard

__all__ = ["discover", "Discovery", "DiscoveredShard", "open_shard", "ShardData", "Unreadable"]
