"""BYTES IN AND OUT: shard discovery (the formats' rules passed in), object stores, hashing, outputs,
the JSON loader, metadata files. The shard formats, their readers and their discovery rules are
:mod:`datacheck.formats` (``datacheck.formats.discovery.discover``)."""
from datacheck.io.discover import DiscoveredShard, Discovery
from datacheck.io.shardbytes import Unreadable

__all__ = ["Discovery", "DiscoveredShard", "Unreadable"]
