"""A shard as a sequence of batches of rows, so that the engine's memory does not grow with the shard.

The engine (:mod:`datacheck.engine.shard`) reads the columns its checks need in batches of about
:data:`~datacheck.model.constants.BATCH_TARGET_BYTES` decoded bytes (or ``$DATACHECK_BATCH_ROWS``
rows when that variable is set) and merges every batch's result exactly. A shard of at most
:data:`ONE_BATCH_TARGETS` such batches is read as one batch (one projected read).

Every batch comes from a :class:`~datacheck.formats.base.ShardReader` (the protocol's ``batches``
and ``read_rows``), chosen by :func:`shard_reader` without asking the format's name:

- the reader the format's ``open`` put on the opened shard (``ShardData.stream``) when it holds
  every needed column: parquet (:class:`datacheck.formats.parquet.ParquetReader`: pyarrow record
  batches of only the needed columns, decoded, converted and cast in a background thread one
  batch ahead; the first batch is shorter, ``ramp``, so the checks start early), JSONL
  (:class:`datacheck.formats.jsonl.JsonlSource`: each chunk parsed, cast to the file's unified
  schema and re-cut to the batch's rows, the next chunk decoded one ahead), CSV/TSV and Arrow IPC
  (:mod:`datacheck.formats.csv`, :mod:`datacheck.formats.arrow`), straight from the file;
- else :class:`FrameReader`: zero-copy slices of the opened lazy frame (the in-memory frames of
  one-chunk JSONL/Megatron/MDS/WebDataset/litdata readers, shards copied from an object store,
  frames given to ``audit_frame``). When the shard has a reader that lacks a needed column (one
  the read path derived) and its frame reads the file again whenever it is collected
  (``ShardReader.rescans``), the needed columns are read once and sliced in memory.

Each batch is cast to the dtypes of the shard's checked schema (the same casts the one read path
applies lazily: fixed-size lists as lists, all-null role columns, dictionary text as strings), so
every batch has exactly the dtypes a one-batch read has.
"""
from __future__ import annotations

import os
from typing import ClassVar, Iterable, Iterator

import numpy as np
import polars as pl

from datacheck.formats.base import ShardReader, cast_frame
from datacheck.io.shardbytes import Unreadable
from datacheck.model.constants import (
    BATCH_TARGET_BYTES,
    ENV_BATCH_ROWS,
    LAYOUT_SAMPLE_BYTES,
    ONE_BATCH_TARGETS,
    RAMP_DIVISOR,
)
from datacheck.model.errors import ENGINE_ERRORS

__all__ = ["ONE_BATCH_TARGETS", "RAMP_DIVISOR", "BudgetedStreamedReader", "FrameReader", "StreamedReader", "batch_rows", "cast_batches", "first_batch", "forced_batch_rows", "gather_rows",
           "rows_from_batches", "shard_reader"]

#: rows sampled to estimate the decoded bytes of a row of a source whose reader does not know them
_SAMPLE_ROWS = 1024



def forced_batch_rows() -> int | None:
    """The rows of one batch forced by ``$DATACHECK_BATCH_ROWS`` (None when unset or empty).

    Raises:
        ValueError: a value that is not an int >= 1 (the message names the variable).
    """
    raw = os.environ.get(ENV_BATCH_ROWS, "").strip()
    if not raw:
        return None
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n < 1:
        raise ValueError(f"{ENV_BATCH_ROWS}={raw!r}: expected a whole number of rows >= 1 (or unset it)")
    return n


def gather_rows(lf: pl.LazyFrame, wanted: set[int] | list[int] | np.ndarray, offset: int = 0) -> pl.DataFrame | None:
    """The rows ``wanted`` (0-based shard rows: ints, or a numpy integer array, held as one: a
    million failing rows as Python ints took ~36 MB) of a batch starting at shard row ``offset``,
    with ``__row`` (UInt32, the shard row) first; None when reading them fails. A run of consecutive
    rows (every row of a check that fails them all) is a slice, not a lookup in a set of them."""
    arr = np.unique(np.fromiter(wanted, dtype=np.int64, count=len(wanted)) if isinstance(wanted, (set, frozenset))
                    else np.asarray(wanted, dtype=np.int64).reshape(-1))
    try:
        indexed = lf.with_row_index("__row", offset=offset)
        if arr.size and int(arr[-1]) - int(arr[0]) == arr.size - 1 and int(arr[0]) >= offset:
            return indexed.slice(int(arr[0]) - offset, int(arr.size)).collect()
        ids = pl.Series(arr.astype(np.uint32), dtype=pl.UInt32)
        return indexed.filter(pl.col("__row").is_in(ids.implode())).collect()
    except ENGINE_ERRORS:
        return None


def rows_from_batches(batches: Iterable[pl.DataFrame], wanted: list[int]) -> pl.DataFrame | None:
    """The shard rows ``wanted`` (0-based, sorted) gathered from the shard's ``batches`` read again
    from the start (stopping after the batch that holds the last of them), ``__row`` first; None
    when none is found or gathering fails. Raises what reading a batch raises."""
    got, off = [], 0
    lo, hi = min(wanted), max(wanted)
    for df in batches:
        h = df.height
        if off + h > lo and off <= hi:
            inside = [r for r in wanted if off <= r < off + h]
            if inside:
                sub = gather_rows(df.lazy(), inside, off)
                if sub is None:
                    return None
                got.append(sub)
        off += h
        if off > hi:
            break
    return pl.concat(got) if got else None


def first_batch(batches: Iterator[pl.DataFrame]) -> pl.DataFrame | None:
    """The first of ``batches`` (the generator closed after it: a reader's thread ends), or None when
    there is none or reading it raises :class:`Unreadable` (the caller's other read then says why)."""
    try:
        return next(batches, None)
    except Unreadable:
        return None
    finally:
        close = getattr(batches, "close", None)
        if close is not None:
            close()


def cast_batches(frames: Iterable[pl.DataFrame], want: dict[str, pl.DataType] | None) -> Iterator[pl.DataFrame]:
    """``frames`` each cast to the dtypes of ``want`` (as given when None). Raises :class:`Unreadable`
    when a cast fails (the first line of polars' message)."""
    for df in frames:
        if want is None:
            yield df
            continue
        try:
            yield cast_frame(df, want)
        except (pl.exceptions.PolarsError, pl.exceptions.PanicException) as exc:
            raise Unreadable(f"reading the data failed: {str(exc).splitlines()[0]}") from None


class StreamedReader:
    """What the streamed readers (JSONL, CSV/TSV, Arrow IPC) share as a
    :class:`~datacheck.formats.base.ShardReader`: a subclass has ``schema`` (the columns it reads),
    ``rows`` (its row count) and ``batches(columns, rows, want=None, ramp=False)``; its opened
    frame reads the file again whenever it is collected (``rescans``); it has no one-read path of
    its own (``read_all`` is None: the engine collects the opened frame once); its rows are read
    again by reading its batches again up to the last wanted row."""

    rescans: ClassVar[bool] = True
    schema: dict[str, pl.DataType]
    rows: int

    def batches(self, columns: list[str], rows: int, want: dict[str, pl.DataType] | None = None,
                ramp: bool = False) -> Iterator[pl.DataFrame]:
        raise NotImplementedError

    def holds(self, columns: list[str]) -> bool:
        """Whether every one of ``columns`` is read straight from the file."""
        return set(columns) <= set(self.schema)

    def size(self, columns: list[str]) -> tuple[int | None, float | None]:
        """(rows, None): the rows from the first pass; the bytes per row are not known."""
        return int(self.rows), None

    def read_all(self, columns: list[str], want: dict[str, pl.DataType]) -> pl.DataFrame | None:
        """None: no one-read path besides collecting the opened frame."""
        return None

    def first_rows(self, columns: list[str], rows: int, want: dict[str, pl.DataType]) -> pl.DataFrame | None:
        """None: the opened frame's ``head`` stops once it has the rows."""
        return None

    def read_rows(self, indices: list[int], columns: list[str], want: dict[str, pl.DataType],
                  rows: int) -> pl.DataFrame | None:
        """The rows ``indices`` (sorted) from the batches of ``rows`` rows read again."""
        return rows_from_batches(self.batches(columns, rows, want), indices)


class BudgetedStreamedReader(StreamedReader):
    """A :class:`StreamedReader` whose ``batches`` also take ``max_bytes`` (decoded bytes a batch; the
    JSONL, CSV/TSV and plain-text readers): its layout sample is its first batch within
    :data:`~datacheck.model.constants.LAYOUT_SAMPLE_BYTES`."""

    def batches(self, columns: list[str], rows: int, want: dict[str, pl.DataType] | None = None,
                ramp: bool = False, max_bytes: int | None = None) -> Iterator[pl.DataFrame]:
        raise NotImplementedError

    def first_rows(self, columns: list[str], rows: int, want: dict[str, pl.DataType]) -> pl.DataFrame | None:
        """The first ``rows`` rows of ``columns``, fewer where they hold more than
        :data:`~datacheck.model.constants.LAYOUT_SAMPLE_BYTES` (the layout's sample; at least one row), cast
        to ``want``; None when the file does not hold ``columns`` or cannot be read (the opened frame's
        ``head`` then says why)."""
        return first_batch(self.batches(columns, rows, want, max_bytes=LAYOUT_SAMPLE_BYTES)) \
            if columns and rows >= 1 and self.holds(columns) else None


class FrameReader:
    """A :class:`~datacheck.formats.base.ShardReader` over the opened lazy frame ``lf`` of ``n``
    rows: batches are zero-copy slices of it; with ``rescan`` (the frame reads the file again
    whenever it is collected) the needed columns are read once and sliced in memory, not read
    again from the start for every slice."""

    rescans: ClassVar[bool] = False

    def __init__(self, lf: pl.LazyFrame, n: int, rescan: bool = False):
        self.lf = lf
        self.n = n
        self.rescan = rescan

    def holds(self, columns: list[str]) -> bool:
        """True: the opened frame holds every column the read path made."""
        return True

    def size(self, columns: list[str]) -> tuple[int | None, float | None]:
        """(``n``, None): the bytes per row are sampled from the frame."""
        return self.n, None

    def read_all(self, columns: list[str], want: dict[str, pl.DataType]) -> pl.DataFrame | None:
        """None: the engine collects the opened frame once."""
        return None

    def first_rows(self, columns: list[str], rows: int, want: dict[str, pl.DataType]) -> pl.DataFrame | None:
        """None: the opened frame's ``head`` is the read."""
        return None

    def batches(self, columns: list[str], rows: int, want: dict[str, pl.DataType] | None = None,
                ramp: bool = False) -> Iterator[pl.DataFrame]:
        """``columns`` in slices of ``rows`` rows, in row order, cast to ``want``. Raises :class:`Unreadable`."""
        lf = self.lf
        if self.rescan:
            try:  # a column derived by the read path: the needed columns read once, sliced in memory
                lf = lf.select(columns).collect().lazy()
            except (pl.exceptions.PolarsError, pl.exceptions.PanicException, OSError) as exc:
                raise Unreadable(f"reading the data failed: {str(exc).splitlines()[0]}") from None
        sel = lf.select(columns)
        for off in range(0, self.n, rows):
            try:
                df = sel.slice(off, rows).collect()
            except (pl.exceptions.PolarsError, pl.exceptions.PanicException, OSError) as exc:
                raise Unreadable(f"reading the data failed: {str(exc).splitlines()[0]}") from None
            yield cast_frame(df, want) if want is not None else df

    def read_rows(self, indices: list[int], columns: list[str], want: dict[str, pl.DataType],
                  rows: int) -> pl.DataFrame | None:
        """The rows ``indices`` (sorted) from the slices read again."""
        return rows_from_batches(self.batches(columns, rows, want), indices)


def shard_reader(stream: ShardReader | None, lf: pl.LazyFrame, columns: list[str], n: int) -> ShardReader:
    """The reader the shard's ``columns`` are batched from: ``stream`` (the opened shard's reader)
    when it holds them all, else the opened frame ``lf`` of ``n`` rows sliced (:class:`FrameReader`;
    read once first when ``stream`` re-reads its file whenever ``lf`` is collected)."""
    if stream is not None and stream.holds(columns):
        return stream
    return FrameReader(lf, n, rescan=stream is not None and stream.rescans)


def batch_rows(lf: pl.LazyFrame, columns: list[str], stream: ShardReader | None = None) -> tuple[int, int | None]:
    """(rows of the shard, rows per batch) for reading ``columns`` of ``lf``; rows per batch is None
    when the shard is read as one frame: ``$DATACHECK_BATCH_ROWS`` or more rows when that is set,
    else decoded bytes of at most :data:`ONE_BATCH_TARGETS` x :data:`BATCH_TARGET_BYTES`.

    Rows per batch: ``$DATACHECK_BATCH_ROWS`` when set, else :data:`BATCH_TARGET_BYTES` over the
    decoded bytes per row. ``stream``: the opened shard's reader; what its ``size`` knows (rows
    from a first pass or a footer, bytes per row from a footer or a first pass's first rows) is not
    read again; the rest comes from ``lf`` (its row count; the decoded size of the first 1,024
    rows of the needed columns). Raises what reading the data raises; ValueError for a bad
    ``$DATACHECK_BATCH_ROWS``.
    """
    forced = forced_batch_rows()
    n, per_row = stream.size(columns) if stream is not None else (None, None)
    if n is None:
        n = int(lf.select(pl.len()).collect().item())
    if forced is not None:
        return n, (forced if n > forced else None)
    if per_row is None:
        sample = lf.select(columns).head(_SAMPLE_ROWS).collect() if columns else None
        per_row = sample.estimated_size() / sample.height if sample is not None and sample.height else 0.0
    if per_row <= 0 or n * per_row <= ONE_BATCH_TARGETS * BATCH_TARGET_BYTES:
        return n, None
    return n, max(1, int(BATCH_TARGET_BYTES // per_row))
