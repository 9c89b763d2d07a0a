"""A shard as a sequence of batches of rows, so that the engine's memory does not grow with the shard.

The engine (:mod:`datacheck.engine.shard`) reads the columns its checks need in batches of about
:data:`~datacheck.model.constants.BATCH_TARGET_BYTES` decoded bytes (or ``$DATACHECK_BATCH_ROWS``
rows when that variable is set) and merges every batch's result exactly. A shard that fits in one
batch is read exactly as before (one projected ``collect``).

Sources:

- parquet: the format's batches (:mod:`datacheck.formats.parquet`: pyarrow record batches of only
  the needed columns, decoded, converted and cast in a background thread while the engine checks
  the current one); the first batch is shorter (``ramp``) so the checks start early.
- a local JSONL file: its streamed source (:class:`datacheck.formats.jsonl.JsonlSource`, the
  ``source`` argument): each chunk parsed, cast to the file's unified schema and re-cut to the
  batch's rows, the next chunk decoded one ahead; the decoded frame of the whole file never exists.
  A needed column the source does not hold (derived by the read path) makes one read of the
  needed columns, sliced in memory.
- local CSV/TSV and Arrow IPC: the reader's batch source (:mod:`datacheck.formats.csv`,
  :mod:`datacheck.formats.arrow`), straight from the file. The three streamed sources are one
  ``ShardData.stream`` (``schema``, ``rows``, ``batches(columns, rows)``).
- every other source (in-memory frames of one-chunk JSONL/Megatron/MDS/WebDataset/litdata readers,
  shards copied from an object store, frames given to ``audit_frame``): zero-copy slices of the lazy frame.

Each batch is cast to the dtypes of the shard's checked schema (the same casts the one read path
applies lazily: fixed-size lists as lists, all-null role columns, dictionary text as strings), so
every batch has exactly the dtypes a one-batch read has.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterator

import polars as pl

from datacheck.formats.base import cast_frame
from datacheck.formats.parquet import _parquet_batches, _parquet_rows_bytes, batchable
from datacheck.io.shardbytes import Unreadable
from datacheck.model.constants import BATCH_TARGET_BYTES, ENV_BATCH_ROWS

__all__ = ["forced_batch_rows", "batch_rows", "file_batches", "iter_batches"]

#: rows sampled to estimate the decoded bytes of a row of a non-parquet source
_SAMPLE_ROWS = 1024

#: with ``iter_batches(ramp=True)``, the first parquet batch holds 1/8 of a batch (decoded on its
#: own, :func:`datacheck.formats.parquet._decoded`), and so does the final one: the pipeline's fill (the engine waits for the first decode) drops from
#: a whole batch's decode (about 0.13 s of 0.33 s on the 100,000 x 128 shard of
#: benchmarks/bench_audit.py, 3 batches) to 1/8 of it, for one more batch (about 20 ms CPU of fixed
#: per-batch cost in the fused query)
RAMP_DIVISOR = 8


def forced_batch_rows() -> int | None:
    """The rows of one batch forced by ``$DATACHECK_BATCH_ROWS`` (None when unset or empty).

    Raises:
        Unreadable: never; a value that is not an int >= 1 raises ValueError naming the variable.
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


def file_batches(path: Path | None, fmt: str, columns: list[str], stream: Any = None) -> Any:
    """``path`` when the shard's ``columns`` can be read in batches straight from the file (parquet,
    through pyarrow), the reader's batch source ``stream`` (CSV/TSV, Arrow IPC: an object with
    ``schema``, ``rows`` and ``batches(columns, rows)``) when it holds the columns, else None (the
    engine then slices the frame the one read path opened). Not from
    the file: a column the read path made (a derived Alpaca ``messages``, columns rendered by a chat
    template) or a column whose Arrow type polars cannot take as stored (the read path converted it)."""
    if stream is not None:
        return stream if set(columns) <= set(stream.schema) else None
    if fmt != "parquet" or path is None:
        return None
    return path if batchable(path, columns) else None


def batch_rows(lf: pl.LazyFrame, columns: list[str], path: Any, fmt: str,
               stream: Any = None) -> tuple[int, int | None]:
    """(rows of the shard, rows per batch) for reading ``columns`` of ``lf``; rows per batch is None
    when the shard fits in one batch (read as one frame).

    Rows per batch: ``$DATACHECK_BATCH_ROWS`` when set, else :data:`BATCH_TARGET_BYTES` over the
    decoded bytes per row (the decoded size of the first 1,024 rows of the needed columns).
    ``stream``: the shard's batch source (``ShardData.stream``): its rows (and, where it knows them,
    bytes per row) come from its first pass, without reading the file again.
    Raises what reading the data raises.
    """
    forced = forced_batch_rows()
    per_row: float | None = None
    n: int | None = None
    if fmt == "parquet" and path is not None:
        got = _parquet_rows_bytes(path, columns)
        if got is not None:
            n, per_row = got
    if n is None and stream is not None:
        n = int(stream.rows)
    if n is None:
        n = int(lf.select(pl.len()).collect().item())
    if forced is not None:
        return n, (forced if n > forced else None)
    if per_row is None:
        if stream is not None and hasattr(stream, "bytes_per_row"):
            per_row = stream.bytes_per_row(columns)
        else:
            sample = lf.select(columns).head(_SAMPLE_ROWS).collect() if columns else None
            per_row = sample.estimated_size() / sample.height if sample is not None and sample.height else 0.0
    if per_row <= 0 or n * per_row <= BATCH_TARGET_BYTES:
        return n, None
    return n, max(1, int(BATCH_TARGET_BYTES // per_row))


def iter_batches(lf: pl.LazyFrame, schema: dict[str, pl.DataType], columns: list[str], rows: int,
                 n: int, path: Any, fmt: str, ramp: bool = False, rescan: bool = False) -> Iterator[pl.DataFrame]:
    """The ``columns`` of the shard in batches of ``rows`` rows (the last may be shorter), in row
    order, each with the dtypes of ``schema``.

    Args:
        lf: the shard as the one read path opened it (casts applied).
        schema: ``{column: dtype}`` of ``lf``.
        columns: the columns to read (in schema order).
        rows: rows per batch (>= 1).
        n: the shard's rows.
        path: the shard file (parquet is read through pyarrow), a reader's batch source
            (:func:`file_batches`), or None.
        fmt: the shard's format.
        rescan: ``lf`` reads the file again whenever it is collected (a streamed shard whose batch
            source lacks a needed column: one the read path derived): the needed columns are then
            read once and sliced in memory, not read again from the start for every slice.
        ramp: parquet only: the first and the final batch have at most ``rows // RAMP_DIVISOR``
            rows, so the engine's checks start after a short decode instead of a whole batch's
            (the decode of each later batch overlaps the checks of the one before) and, after the
            decode's end, only a short batch is left to check (batch sizes never change a result).

    Raises:
        Unreadable: decoding a batch failed (the reason names pyarrow's or polars' message).
    """
    want = {c: schema[c] for c in columns}
    if path is not None and not isinstance(path, Path):  # a reader's batch source (JSONL, CSV, Arrow IPC)
        for df in path.batches(columns, rows):
            try:
                yield cast_frame(df, want)
            except (pl.exceptions.PolarsError, pl.exceptions.PanicException) as exc:
                raise Unreadable(f"reading the data failed: {str(exc).splitlines()[0]}") from None
        return
    if fmt == "parquet" and path is not None:
        first = max(1, rows // RAMP_DIVISOR) if ramp and n > rows else None
        # ramped at both ends: the checks start after a short decode, and after the decode's end
        # only the final short batch is left to check
        yield from _parquet_batches(path, columns, rows, want, first, total=n, last=first)
        return
    if rescan:
        try:  # a column derived by the read path: the needed columns read once, sliced in memory
            lf = lf.select(columns).collect().lazy()
        except (pl.exceptions.PolarsError, pl.exceptions.PanicException, OSError) as exc:
            raise Unreadable(f"reading the data failed: {str(exc).splitlines()[0]}") from None
    sel = lf.select(columns)
    for off in range(0, n, rows):
        try:
            df = sel.slice(off, rows).collect()
        except (pl.exceptions.PolarsError, pl.exceptions.PanicException, OSError) as exc:
            raise Unreadable(f"reading the data failed: {str(exc).splitlines()[0]}") from None
        yield cast_frame(df, want)
