"""Row-hash payloads on disk, and a partitioned pass over them: the bounded-memory form of the
cross-shard duplicate merge (:mod:`datacheck.checks.dup.cross`).

Two pieces:

- :class:`SpillFolder` / :class:`SpilledRows`: during an audit of many rows, each shard's
  ``crossdup.rows`` payload (``hash`` ``UInt128`` and, with a class label, ``label``) is written
  to one Arrow IPC file when the shard's result arrives, and the result keeps only a
  :class:`SpilledRows` reference (path, rows, columns). The files live in a fresh folder
  ``datacheck-spill-*`` in the system temp folder (``tempfile.gettempdir()``, i.e. ``$TMPDIR``),
  never among the audited data (the audit refuses to spill when the temp folder lies inside it and
  keeps the payloads in memory), and the folder is removed when the audit ends, even on an error.
- :meth:`SpillFolder.spill_array` / :class:`SpilledColumns`: the same for the MinHash signatures
  of ``dup.near_duplicate`` (uint32 [rows, 128], 512 B a row), written column-major to ``.npy``:
  the dataset stage reads one LSH band's columns, or the rows it compares, and nothing stays
  mapped (:class:`~datacheck.checks.dup.near.ShardSignatures`).
- :func:`partitions`: the rows of a list of per-shard payloads (in-memory frames or spilled files,
  read one at a time) split into ``parts`` partitions by the top bits of the low 64 bits of the row
  hash and written to a temp folder as ``(hash, shard, row)`` (24 bytes a row); the partitions
  are then yielded one at a time. Equal hashes always land in the same partition, so whatever is
  decided per hash over one partition is decided exactly as over all rows at once.

Memory: one shard's payload, plus the write buffers (:data:`BUFFER_ROWS` rows at most, 24 B a
row), plus one partition (total rows / ``parts`` x 24 B; polars group-by overhead on top).

The threshold :func:`spill_rows` (``$DATACHECK_SPILL_ROWS``, default :data:`DEFAULT_SPILL_ROWS`
= 8,000,000 rows, i.e. 128 MB of hashes) decides when an audit starts to spill (and the merge, on
spilled payloads, runs the partitioned pass); ``0`` spills everything (tests use it). The
partition files go to a subfolder of the spill folder, so they too never land among the data.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import polars as pl

__all__ = ["ENV_SPILL_ROWS", "DEFAULT_SPILL_ROWS", "BUFFER_ROWS", "PARTITIONS", "spill_rows", "SpilledRows",
           "SpilledColumns",
           "SpillFolder", "rows_frame", "partitions", "read_spilled"]

ENV_SPILL_ROWS = "DATACHECK_SPILL_ROWS"
#: rows of row hashes held in memory before an audit spills them (16 B a row: 128 MB)
DEFAULT_SPILL_ROWS = 8_000_000
#: rows buffered over all partitions before the partition files are appended to (24 B a row: 48 MB)
BUFFER_ROWS = 2_000_000
#: partitions of the partitioned pass (the top 6 bits of the hash's low 64 bits)
PARTITIONS = 64
_LOW64 = 2**64 - 1


def spill_rows() -> int:
    """Rows of row hashes held in memory before spilling (``$DATACHECK_SPILL_ROWS``, else
    :data:`DEFAULT_SPILL_ROWS`).

    Raises:
        ValueError: the variable is set to something other than a whole number >= 0 (naming it).
    """
    raw = os.environ.get(ENV_SPILL_ROWS, "").strip()
    if not raw:
        return DEFAULT_SPILL_ROWS
    try:
        n = int(raw)
    except ValueError:
        n = -1
    if n < 0:
        raise ValueError(f"{ENV_SPILL_ROWS}={raw!r}: expected a whole number of rows >= 0 (or unset it)")
    return n


def read_spilled(path: str | Path) -> pl.DataFrame:
    """One spill file (Arrow IPC) read back whole. ``glob=False``: the spill folder lies under
    ``TMPDIR``, whose name may hold ``[``, ``*`` or ``?`` (``/scratch/job[7]``), and ``pl.read_ipc``
    expands its path as a glob (then finds no file)."""
    return pl.scan_ipc(path, glob=False).collect()


@dataclass(frozen=True)
class SpilledRows:
    """A ``crossdup.rows`` payload written to ``path`` (Arrow IPC): ``height`` rows, ``columns``
    (``["hash"]`` or ``["hash", "label"]``). It has the ``height`` and ``columns`` of the frame
    it stands for; :meth:`load` reads it back."""

    path: str
    height: int
    columns: tuple[str, ...]

    def load(self) -> pl.DataFrame:
        return read_spilled(self.path)


@dataclass(frozen=True)
class SpilledColumns:
    """A 2-D array of ``shape`` (rows, columns) written column-major to ``path`` (``.npy`` of its
    transpose). :meth:`columns` and :meth:`rows` map the file only while they copy what was asked
    for, so the pages read never stay in the process's memory."""

    path: str
    shape: tuple[int, int]

    def columns(self, c0: int, c1: int, rows: np.ndarray) -> np.ndarray:
        """``a[rows, c0:c1]`` (a copy); ``rows``: ascending, distinct row indices."""
        m = np.load(self.path, mmap_mode="r")
        block = m[c0:c1]
        whole = rows.size == self.shape[0]  # every row (rows are ascending and distinct): no gather
        out = np.ascontiguousarray((np.array(block) if whole else block[:, rows]).T)
        del m, block
        return out

    def rows(self, rows: np.ndarray) -> np.ndarray:
        """``a[rows]`` (a copy)."""
        m = np.load(self.path, mmap_mode="r")
        out = np.ascontiguousarray(m[:, rows].T)
        del m
        return out


class SpillFolder:
    """A temp folder of spilled payloads, removed by :meth:`close` (or leaving a ``with`` block)."""

    def __init__(self, parent: str | os.PathLike[str] | None = None):
        self.path = Path(tempfile.mkdtemp(prefix="datacheck-spill-", dir=parent))
        self._n = 0

    def spill(self, df: pl.DataFrame) -> SpilledRows:
        """Write ``df`` (a ``crossdup.rows`` frame) to a new file of the folder; its reference."""
        p = self.path / f"rows-{self._n:06d}.arrow"
        self._n += 1
        df.write_ipc(p)
        return SpilledRows(path=str(p), height=df.height, columns=tuple(df.columns))

    def spill_array(self, a: np.ndarray) -> "SpilledColumns":
        """Write the 2-D array ``a`` column-major (``a.T`` contiguous, so one column range is one
        run of bytes) to a new ``.npy`` file of the folder; its reference."""
        p = self.path / f"columns-{self._n:06d}.npy"
        self._n += 1
        np.save(p, np.ascontiguousarray(a.T))
        return SpilledColumns(path=str(p), shape=(int(a.shape[0]), int(a.shape[1])))

    def close(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)

    def __enter__(self) -> "SpillFolder":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def rows_frame(item: pl.DataFrame | SpilledRows) -> pl.DataFrame:
    """The payload frame of an in-memory or spilled ``crossdup.rows`` payload."""
    return item.load() if isinstance(item, SpilledRows) else item


def _low64(h: pl.Series) -> np.ndarray:
    return h.to_frame("h").select(pl.col("h").and_(pl.lit(_LOW64, dtype=pl.UInt128)).cast(pl.UInt64)) \
        .to_series().to_numpy()


def partitions(frames: Sequence[pl.DataFrame | SpilledRows], parts: int = PARTITIONS,
               buffer_rows: int = BUFFER_ROWS, folder: str | os.PathLike[str] | None = None) -> Iterator[pl.DataFrame]:
    """The rows of ``frames`` as ``parts`` partitions by hash, one at a time (module docstring).

    Args:
        frames: per-shard payloads with a ``hash`` (``UInt128``) column; read one at a time.
        parts: number of partitions, a power of two from 1 to 65536.
        buffer_rows: rows buffered over all partitions before they are appended to the files.
        folder: where the partition files' temp folder is made (the audit's spill folder, which
            lies outside the audited data); None: the system temp folder. Removed afterwards.

    Yields:
        one ``DataFrame`` per non-empty partition: ``hash`` (``UInt128``), ``shard`` (``UInt32``:
        the index into ``frames``), ``row`` (``UInt32``: 0-based row of that shard), in no
        particular row order. Every hash value occurs in exactly one partition.

    Raises:
        ValueError: ``parts`` is not a power of two in range.
        OSError: the temp folder cannot be written (disk full): the caller reports it.
    """
    if parts < 1 or parts > 65536 or parts & (parts - 1):
        raise ValueError(f"parts={parts}: expected a power of two from 1 to 65536")
    shift = np.uint64(64 - (parts.bit_length() - 1))
    with tempfile.TemporaryDirectory(prefix="datacheck-parts-", dir=folder) as tmp:
        buf: list[list[pl.DataFrame]] = [[] for _ in range(parts)]
        files = [0] * parts
        held = 0

        def flush() -> None:
            for p in range(parts):
                if buf[p]:
                    pl.concat(buf[p]).write_ipc(Path(tmp) / f"p{p:05d}-{files[p]:06d}.arrow")
                    files[p] += 1
                    buf[p] = []

        for i, item in enumerate(frames):
            h = rows_frame(item).get_column("hash")
            if h.len() == 0:
                continue
            part = (_low64(h) >> shift).astype(np.int64) if parts > 1 else np.zeros(h.len(), dtype=np.int64)
            order = np.argsort(part, kind="stable")
            bounds = np.searchsorted(part[order], np.arange(parts + 1))
            frame = pl.DataFrame({"hash": h.gather(pl.Series(order)),
                                  "shard": pl.Series([i], dtype=pl.UInt32).extend_constant(i, h.len() - 1),
                                  "row": pl.Series(order, dtype=pl.UInt32)})
            for p in range(parts):
                lo, hi = int(bounds[p]), int(bounds[p + 1])
                if hi > lo:
                    buf[p].append(frame.slice(lo, hi - lo))
            held += h.len()
            del h, frame, order, part
            if held >= buffer_rows:
                flush()
                held = 0
        flush()
        for p in range(parts):
            if files[p]:
                paths = [Path(tmp) / f"p{p:05d}-{k:06d}.arrow" for k in range(files[p])]
                yield pl.concat([read_spilled(x) for x in paths])
                for x in paths:
                    x.unlink()
