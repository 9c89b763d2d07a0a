"""A shard as a sequence of batches of rows, so that the engine's memory does not grow with the shard.

The engine (:mod:`datacheck.engine.shard`) reads the columns its checks need in batches of about
:data:`~datacheck.model.constants.BATCH_TARGET_BYTES` decoded bytes (or ``$DATACHECK_BATCH_ROWS``
rows when that variable is set) and merges every batch's result exactly. A shard that fits in one
batch is read exactly as before (one projected ``collect``).

Sources:

- parquet: ``pyarrow.parquet.ParquetFile.iter_batches`` over only the needed columns (pyarrow
  decodes page by page inside a row group; polars' own reader decodes a whole row group for any
  slice of it, 8x slower on a 400k-row row group cut in 8). The next batch is decoded in a
  background thread while the engine checks the current one (pyarrow releases the GIL).
- local CSV/TSV and Arrow IPC: the reader's batch source (``ShardData.stream``:
  :mod:`datacheck.io.csv_stream`, :mod:`datacheck.io.ipc_stream`), straight from the file.
- every other source (in-memory frames of JSONL/Megatron/MDS/WebDataset/litdata readers, shards
  copied from an object store, frames given to ``audit_frame``): zero-copy slices of the lazy frame.

Each batch is cast to the dtypes of the shard's checked schema (the same casts the one read path
applies lazily: fixed-size lists as lists, all-null role columns, dictionary text as strings), so
every batch has exactly the dtypes a one-batch read has.
"""
from __future__ import annotations

import os
import queue
import threading
from pathlib import Path
from typing import Any, Iterator

import polars as pl

from datacheck.io.readers import Unreadable, needs_conversion
from datacheck.model.constants import BATCH_TARGET_BYTES, ENV_BATCH_ROWS

__all__ = ["forced_batch_rows", "batch_rows", "iter_batches"]

#: rows sampled to estimate the decoded bytes of a row of a non-parquet source
_SAMPLE_ROWS = 1024


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
    import pyarrow.parquet as pq

    try:
        arrow = pq.read_schema(path)
    except Exception:  # noqa: BLE001 - the engine's read reports the problem
        return None
    if not set(columns) <= set(arrow.names):
        return None
    return None if needs_conversion(arrow) else path


def _parquet_rows_bytes(path: Path, columns: list[str]) -> tuple[int, float] | None:
    """(rows, decoded bytes per row of ``columns``) of a parquet file, or None when unknown. The
    rows come from the footer; the bytes per row from decoding the first ``_SAMPLE_ROWS`` rows
    (the footer's page sizes are of encoded pages: dictionary and RLE encoding make token lists
    look several times smaller than they decode)."""
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
        rows = pf.metadata.num_rows
        if rows == 0:
            return 0, 0.0
        first = next(pf.iter_batches(batch_size=_SAMPLE_ROWS, columns=columns), None)
    except Exception:  # noqa: BLE001 - the engine's read reports the problem
        return None
    if first is None or first.num_rows == 0:
        return rows, 0.0
    return rows, first.nbytes / first.num_rows


def batch_rows(lf: pl.LazyFrame, columns: list[str], path: Any, fmt: str) -> tuple[int, int | None]:
    """(rows of the shard, rows per batch) for reading ``columns`` of ``lf``; rows per batch is None
    when the shard fits in one batch (read as one frame).

    Rows per batch: ``$DATACHECK_BATCH_ROWS`` when set, else :data:`BATCH_TARGET_BYTES` over the
    decoded bytes per row (the decoded size of the first 1,024 rows of the needed columns). Raises what reading the data raises.
    """
    forced = forced_batch_rows()
    per_row: float | None = None
    n: int | None = None
    if fmt == "parquet" and path is not None:
        got = _parquet_rows_bytes(path, columns)
        if got is not None:
            n, per_row = got
    if n is None and path is not None and not isinstance(path, Path):  # a reader's batch source
        n = int(path.rows)
    if n is None:
        n = int(lf.select(pl.len()).collect().item())
    if forced is not None:
        return n, (forced if n > forced else None)
    if per_row is None:
        sample = lf.select(columns).head(_SAMPLE_ROWS).collect() if columns else None
        per_row = sample.estimated_size() / sample.height if sample is not None and sample.height else 0.0
    if per_row <= 0 or n * per_row <= BATCH_TARGET_BYTES:
        return n, None
    return n, max(1, int(BATCH_TARGET_BYTES // per_row))


def _cast(df: pl.DataFrame, schema: dict[str, pl.DataType]) -> pl.DataFrame:
    casts = {c: t for c, t in schema.items() if c in df.schema and df.schema[c] != t}
    return df.cast(casts) if casts else df  # type: ignore[arg-type]


def _parquet_batches(path: Path, columns: list[str], rows: int) -> Iterator[pl.DataFrame]:
    """Batches of exactly ``rows`` rows (the last may be shorter), decoded by pyarrow one ahead."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    done = object()
    q: queue.Queue = queue.Queue(maxsize=1)
    stop = threading.Event()

    def produce() -> None:
        try:
            pf = pq.ParquetFile(path)
            pending: list = []  # pa.Table pieces not yet handed out
            have = 0
            for rb in pf.iter_batches(batch_size=rows, columns=columns, use_threads=True):
                pending.append(pa.Table.from_batches([rb]))
                have += rb.num_rows
                while have >= rows:
                    table = pa.concat_tables(pending).combine_chunks()
                    head, tail = table.slice(0, rows), table.slice(rows)
                    q.put(head)
                    if stop.is_set():
                        return
                    pending, have = ([tail] if tail.num_rows else []), tail.num_rows
            if have:
                q.put(pa.concat_tables(pending).combine_chunks())
            q.put(done)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, which reports it
            q.put(exc)

    t = threading.Thread(target=produce, name="datacheck-parquet-decode", daemon=True)
    t.start()
    try:
        while True:
            item = q.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                msg = str(item).splitlines()[0] if str(item) else type(item).__name__
                raise Unreadable(f"reading the data failed: {msg}")
            yield pl.from_arrow(item)  # type: ignore[misc]
    finally:
        stop.set()
        while t.is_alive():  # unblock a producer waiting on a full queue
            try:
                q.get_nowait()
            except queue.Empty:
                pass
            t.join(timeout=0.05)


def iter_batches(lf: pl.LazyFrame, schema: dict[str, pl.DataType], columns: list[str], rows: int,
                 n: int, path: Any, fmt: str) -> Iterator[pl.DataFrame]:
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

    Raises:
        Unreadable: decoding a batch failed (the reason names pyarrow's or polars' message).
    """
    want = {c: schema[c] for c in columns}
    if path is not None and not isinstance(path, Path):  # a reader's batch source (CSV, Arrow IPC)
        for df in path.batches(columns, rows):
            try:
                yield _cast(df, want)
            except (pl.exceptions.PolarsError, pl.exceptions.PanicException) as exc:
                raise Unreadable(f"reading the data failed: {str(exc).splitlines()[0]}") from None
        return
    if fmt == "parquet" and path is not None:
        for df in _parquet_batches(path, columns, rows):
            try:
                yield _cast(df, want)
            except (pl.exceptions.PolarsError, pl.exceptions.PanicException) as exc:
                raise Unreadable(f"reading the data failed: {str(exc).splitlines()[0]}") from None
        return
    sel = lf.select(columns)
    for off in range(0, n, rows):
        try:
            df = sel.slice(off, rows).collect()
        except (pl.exceptions.PolarsError, pl.exceptions.PanicException, OSError) as exc:
            raise Unreadable(f"reading the data failed: {str(exc).splitlines()[0]}") from None
        yield _cast(df, want)
