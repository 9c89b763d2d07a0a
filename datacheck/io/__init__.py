"""BYTES IN AND OUT: shard discovery, object stores, hashing, outputs, the JSON loader, metadata files.
The shard formats and their readers are :mod:`datacheck.formats`."""
from datacheck.io.discover import DiscoveredShard, Discovery, discover
from datacheck.io.shardbytes import Unreadable

__all__ = ["discover", "Discovery", "DiscoveredShard", "Unreadable"]
