"""A Lightning ``litdata`` folder's ``index.json``, read in one place: whether a parsed document is a
litdata index, and the file sizes its chunks may have. The chunk reader is
:mod:`datacheck.formats.litdata`; the data index compares the chunks with it (:mod:`datacheck.io.dataindex`)."""
from __future__ import annotations

from typing import Any

__all__ = ["expected_chunk_sizes", "is_litdata_index"]


def is_litdata_index(doc: Any) -> bool:
    """True when a parsed ``index.json`` is a litdata index (``chunks`` and ``config`` keys)."""
    return isinstance(doc, dict) and isinstance(doc.get("chunks"), list) and isinstance(doc.get("config"), dict)


def expected_chunk_sizes(chunk_bytes: int, items: int) -> tuple[int, int]:
    """The file sizes a chunk of ``items`` items and ``chunk_bytes`` may have: the size itself
    (``litdata``) and the size plus the ``4*(items+2)``-byte header (``lightning.data`` 2023)."""
    return chunk_bytes, chunk_bytes + 4 * (items + 2)
