"""decode: a shard that cannot be opened or parsed (``decode.unreadable``).

Record-level decode findings (``decode.bad_record``, ``decode.invalid_utf8``) come from the shard
reader itself (the format's reader, :mod:`datacheck.formats`), which finds them while opening the shard.
"""
from __future__ import annotations

from datacheck.checks.registry import finding, on_unreadable
from datacheck.model.findings import Finding

__all__ = ["unreadable"]


@on_unreadable("decode.unreadable")
def unreadable(shard: str, fmt: str, reason: str) -> list[Finding]:
    """``decode.unreadable`` (error, shard level): the shard cannot be opened, decompressed or parsed.

    Args:
        shard: the shard's path relative to the audited root.
        fmt: its format (``parquet``, ``jsonl``, ..., or ``frame`` for an in-memory frame).
        reason: why, in words (the reader's or the engine's first error line).
    """
    return [finding("decode.unreadable", message=f"{shard}: {reason}. The other shards were still audited.",
                    details={"reason": reason, "format": fmt})]
