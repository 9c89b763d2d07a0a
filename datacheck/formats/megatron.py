"""Megatron-LM ``MMIDIDX`` indexed datasets: a ``<prefix>.bin`` of token ids and its ``<prefix>.idx``.

A small reader over numpy memory maps, written from the documented layout of Megatron-LM's
``megatron/core/datasets/indexed_dataset.py`` (``_IndexWriter`` / ``_IndexReader``; the same bytes
as Megatron-DeepSpeed's ``MMapIndexedDataset``). Megatron's own reader ships inside
``megatron-core`` (a training stack), so it is not imported. All integers are little-endian::

    offset  size        field
    0       9           magic b"MMIDIDX\\x00\\x00"
    9       8  uint64   version (1)
    17      1  uint8    dtype code: 1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, 6 float64,
                        7 float32, 8 uint16
    18      8  uint64   S, the sequence count
    26      8  uint64   D, the document-index length (documents + 1)
    34      4*S int32   sequence lengths, in tokens
    ..      8*S int64   sequence pointers, byte offsets into ``.bin``
    ..      8*D int64   document index: document k is sequences [doc[k], doc[k+1])

Rows are documents: row k holds ``input_ids`` = the tokens of its sequences, in order (dtype as
stored, so ``tokens.dtype_overflow`` sees a ``uint16`` store against a vocabulary above 65,536).

Layout rules (a break raises :class:`~datacheck.formats.base.FormatError`, i.e. ``decode.unreadable``;
Megatron's reader would silently read wrong tokens): the ``.idx`` exists and has the magic, version
1 and a known dtype code; its size is exactly ``34 + 12*S + 8*D``; every length is >= 0; the
pointers are the running byte offsets of the lengths (``pointer[i+1] = pointer[i] + len[i]*itemsize``,
``pointer[0] = 0``); the document index starts at 0, never decreases and ends at S; the ``.bin``
holds exactly the indexed tokens (``pointer[-1] + len[-1]*itemsize`` bytes).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from datacheck.formats.base import Format, FormatError, read_whole

__all__ = ["MAGIC", "DTYPES", "companion_index", "read_megatron", "read_index", "FORMAT", "companions", "is_index_of_pair", "sniff"]

MAGIC = b"MMIDIDX\x00\x00"
#: dtype code -> numpy dtype (Megatron-LM ``DType``)
DTYPES: dict[int, type] = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64,
                           6: np.float64, 7: np.float32, 8: np.uint16}
_HEADER = 34


def companion_index(bin_path: Path) -> Path:
    """The ``.idx`` beside ``<prefix>.bin``."""
    return bin_path.with_suffix(".idx")


def read_megatron(bin_path: Path) -> pl.DataFrame:
    """Read a ``.bin``/``.idx`` pair as one row per document.

    Returns:
        A frame with ``input_ids``: ``List(<stored dtype>)``, one row per document (D - 1 rows).

    Raises:
        FormatError: a layout rule of the module docstring is broken (the message names the field,
            the values and the remedy).
    """
    lengths, expect, docs, dtype, indexed = _read_index(bin_path)
    tokens = np.memmap(bin_path, dtype=dtype, mode="r") if indexed else np.zeros(0, dtype=dtype)
    offsets = np.append(expect // dtype.itemsize, indexed // dtype.itemsize)[np.asarray(docs)]
    lists = pa.LargeListArray.from_arrays(pa.array(offsets.astype(np.int64)), pa.array(np.asarray(tokens)))
    return pl.DataFrame({"input_ids": pl.Series("input_ids", lists)})


def read_index(bin_path: Path) -> tuple[np.ndarray, np.ndarray]:
    """The sequence lengths and the document index of a ``.bin``/``.idx`` pair, checked by the same
    layout rules as :func:`read_megatron` (what Megatron's ``GPTDataset`` builds its samples from:
    ``IndexedDataset.sequence_lengths`` and ``document_indices``).

    Returns:
        (tokens per sequence: int32, ``S``; the document index: int64, ``D``, document ``k`` = sequences
        ``[doc[k], doc[k+1])``), both copies in memory.

    Raises:
        FormatError: as :func:`read_megatron`.
    """
    lengths, _, docs, _, _ = _read_index(bin_path)
    return np.array(lengths, dtype=np.int32), np.array(docs, dtype=np.int64)


def _read_index(bin_path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.dtype, int]:
    """(lengths, each sequence's byte offset, document index, token dtype, indexed bytes) of a pair,
    every layout rule checked (module docstring).

    Raises:
        FormatError: a rule is broken.
    """
    idx_path = companion_index(bin_path)
    try:
        idx = np.memmap(idx_path, dtype=np.uint8, mode="r") if idx_path.stat().st_size else np.zeros(0, np.uint8)
        bin_size = bin_path.stat().st_size
    except OSError as exc:
        raise FormatError(f"cannot read the Megatron pair {bin_path.name}/{idx_path.name}: {exc.strerror or exc}") from None
    name = idx_path.name
    if idx.size < _HEADER:
        raise FormatError(f"{name}: {idx.size} bytes, shorter than the 34-byte MMIDIDX header (a cut write?)")
    if bytes(idx[:9]) != MAGIC:
        raise FormatError(f"{name}: bad magic {bytes(idx[:9])!r} (expected {MAGIC!r}): not a Megatron MMIDIDX index")
    version = int(idx[9:17].view("<u8")[0])
    if version != 1:
        raise FormatError(f"{name}: index version {version}; datacheck reads version 1 (MMIDIDX)")
    code = int(idx[17])
    if code not in DTYPES:
        raise FormatError(f"{name}: unknown dtype code {code} (known: {sorted(DTYPES)})")
    dtype = np.dtype(DTYPES[code])
    s = int(idx[18:26].view("<u8")[0])
    d = int(idx[26:34].view("<u8")[0])
    want = _HEADER + 12 * s + 8 * d
    if idx.size != want:
        raise FormatError(f"{name}: {idx.size} bytes but the header's {s} sequences and {d} document-index "
                          f"entries need {want} (the index was cut or belongs to another .bin)")
    o = _HEADER
    lengths = idx[o:o + 4 * s].view("<i4")
    o += 4 * s
    pointers = idx[o:o + 8 * s].view("<i8")
    o += 8 * s
    docs = idx[o:o + 8 * d].view("<i8")
    if s and lengths.min() < 0:
        i = int(np.argmax(lengths < 0))
        raise FormatError(f"{name}: sequence {i} has negative length {int(lengths[i])}")
    expect = np.zeros(s, dtype=np.int64)
    if s > 1:
        np.cumsum(lengths[:-1].astype(np.int64) * dtype.itemsize, out=expect[1:])
    if s and not np.array_equal(pointers, expect):
        i = int(np.argmax(pointers != expect))
        raise FormatError(f"{name}: sequence {i} points at byte {int(pointers[i])} of the .bin but the lengths "
                          f"before it put it at {int(expect[i])} (pointers and lengths disagree)")
    if d == 0 or docs[0] != 0 or docs[-1] != s or (d > 1 and np.any(np.diff(docs) < 0)):
        if d == 0:
            what = "it holds no entry"
        elif d > 1 and np.any(np.diff(docs) < 0):
            i = int(np.argmax(np.diff(docs) < 0))
            what = f"entry {i + 1} ({int(docs[i + 1])}) is below entry {i} ({int(docs[i])})"
        elif docs[0] != 0:
            what = f"entry 0 is {int(docs[0])}"
        else:
            what = f"its last entry ({d - 1}) is {int(docs[-1])}"
        raise FormatError(f"{name}: the document index must start at 0, never decrease and end at the sequence "
                          f"count {s}; {what} (a corrupt index, or one of another .bin); rebuild the pair")
    indexed = int(expect[-1] + int(lengths[-1]) * dtype.itemsize) if s else 0
    if bin_size != indexed:
        what = "shorter" if bin_size < indexed else "longer"
        raise FormatError(f"{bin_path.name}: {bin_size} bytes but {name} indexes {indexed} "
                          f"({indexed // dtype.itemsize} {dtype.name} tokens): the .bin is {what} than its index "
                          "(a cut write, or a .bin/.idx pair from different runs); rebuild the pair")
    return lengths, expect, docs, dtype, indexed


def sniff(path: Path) -> str | None:
    """``megatron`` for a ``<prefix>.bin`` with its ``<prefix>.idx`` beside it."""
    return "megatron" if path.name.lower().endswith(".bin") and companion_index(path).is_file() else None


def is_index_of_pair(path: Path) -> bool:
    """True when ``path`` is the ``.idx`` of a Megatron pair (its ``.bin`` is the shard)."""
    return path.name.lower().endswith(".idx") and path.with_suffix(".bin").is_file()


def companions(path: str) -> list[str]:
    """The ``.idx`` of the ``.bin`` shard ``path`` (a local path or an object key): read and hashed with it."""
    return [path.rpartition(".")[0] + ".idx"]


FORMAT = Format(names=("megatron",), open=read_whole(lambda path, opts: (read_megatron(path), [], {})), sniff=sniff, companions=companions,
                refusals={"megatron": "its writer owns the layout (the .idx holds every document's offset "
                                      "into the .bin); rebuild it with Megatron's preprocess_data.py"})
