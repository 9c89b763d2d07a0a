"""A shard as a sequence of batches of rows, so that the engine's memory does not grow with the shard.

The engine (:mod:`datacheck.engine.shard`) reads the columns its checks need in batches of about
:data:`~datacheck.model.constants.BATCH_TARGET_BYTES` decoded bytes (or ``$DATACHECK_BATCH_ROWS``
rows when that variable is set) and merges every batch's result exactly. A shard that fits in one
batch is read exactly as before (one projected ``collect``).

Sources:

- parquet: ``pyarrow.parquet.ParquetFile.iter_batches`` over only the needed columns (pyarrow
  decodes page by page inside a row group; polars' own reader decodes a whole row group for any
  slice of it, 8x slower on a 400k-row row group cut in 8). The next batch is decoded (and
  converted to polars, and cast) in a background thread while the engine checks the current one
  (pyarrow and polars release the GIL); the first batch is shorter (``ramp``) so the checks start early.
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
import queue
import threading
from pathlib import Path
from typing import Any, Iterator

import polars as pl

from datacheck.formats.arrowtypes import needs_conversion
from datacheck.io.shardbytes import Unreadable
from datacheck.model.constants import BATCH_TARGET_BYTES, ENV_BATCH_ROWS

__all__ = ["forced_batch_rows", "batch_rows", "iter_batches", "read_parquet_columns", "read_parquet_rows"]

#: rows sampled to estimate the decoded bytes of a row of a non-parquet source
_SAMPLE_ROWS = 1024

#: with ``iter_batches(ramp=True)``, the first parquet batch holds 1/8 of a batch (decoded on its
#: own, :func:`_decoded`), and so does the final one: the pipeline's fill (the engine waits for the first decode) drops from
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
    import pyarrow.parquet as pq

    try:
        arrow = pq.read_schema(path)
    except Exception:  # noqa: BLE001 - the engine's read reports the problem
        return None
    if not set(columns) <= set(arrow.names):
        return None
    return None if needs_conversion(arrow) else path


def _footer_bytes(pf: Any, columns: list[str]) -> int | None:
    """The decoded (Arrow) bytes of ``columns`` from the footer alone, when each is a fixed-width
    value or a list of them (token lists): leaf values (the column chunks' ``num_values``, summed
    over row groups; a null or empty list counts one) times the value width, plus the list offsets
    and validity bitmaps. None for any other type (strings, structs, nested lists): the caller
    then decodes the first rows. Decoding the first rows of a shard stored as one row group made
    pyarrow decompress whole column chunks: 1.25 s CPU on the 50M-token ``bench_sft.py`` shard
    (read_parquet of all of it: about 3 s), against microseconds here."""
    import pyarrow as pa

    md = pf.metadata
    arrow = pf.schema_arrow
    leaves: dict[str, list[int]] = {}
    for j in range(md.num_columns):
        leaves.setdefault(md.schema.column(j).path.split(".")[0], []).append(j)
    total = 0
    for name in columns:
        if name not in arrow.names or len(leaves.get(name, [])) != 1:
            return None
        t = arrow.field(name).type
        per_row = 0.125  # the validity bit of the row
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            per_row += 4 if pa.types.is_list(t) else 8
            t = t.value_type
        if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)):
            return None
        width = 0.125 if pa.types.is_boolean(t) else t.bit_width / 8
        j = leaves[name][0]
        values = sum(md.row_group(g).column(j).num_values for g in range(md.num_row_groups))
        total += int(values * (width + 0.125) + md.num_rows * per_row)
    return total


def _parquet_rows_bytes(path: Path, columns: list[str]) -> tuple[int, float] | None:
    """(rows, decoded bytes per row of ``columns``) of a parquet file, or None when unknown. The
    rows come from the footer; the bytes per row from the footer's value counts for fixed-width
    columns and lists of them (:func:`_footer_bytes`), else from decoding the first
    ``_SAMPLE_ROWS`` rows (the footer's page sizes are of encoded pages: dictionary and RLE
    encoding make token lists look several times smaller than they decode)."""
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path, pre_buffer=False)
        rows = pf.metadata.num_rows
        if rows == 0:
            return 0, 0.0
        footer = _footer_bytes(pf, columns)
        if footer is not None:
            return rows, footer / rows
        first = next(pf.iter_batches(batch_size=_SAMPLE_ROWS, columns=columns), None)
    except Exception:  # noqa: BLE001 - the engine's read reports the problem
        return None
    if first is None or first.num_rows == 0:
        return rows, 0.0
    return rows, first.nbytes / first.num_rows


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


def _cast(df: pl.DataFrame, schema: dict[str, pl.DataType]) -> pl.DataFrame:
    casts = {c: t for c, t in schema.items() if c in df.schema and df.schema[c] != t}
    return df.cast(casts) if casts else df  # type: ignore[arg-type]


def _decoded(path: Path, columns: list[str], rows: int, first: int | None = None, total: int | None = None,
             last: int | None = None) -> Iterator[Any]:
    """The parquet file's ``columns`` as pyarrow tables of ``rows`` rows, each one record batch as
    ``ParquetFile.iter_batches`` decodes it (contiguous: no copy; its batches run across row groups):

    - ``first``: the first ``first`` rows come first on their own, decoded by a second reader (so the
      engine's checks start after a short decode); the first piece of ``rows`` is then handed out from
      row ``first`` on (a zero-copy slice: the first rows are decoded twice, 1/8 of a batch);
    - ``total`` (the file's rows) and ``last``: the final piece is cut in two zero-copy slices so that
      the final batch holds at most ``last`` rows (after the decode's end only a short batch is left
      to check).

    Decoding whole batches with pyarrow's threads costs no more than pieces of 1/8 (1.45 vs 1.56 CPU
    s for the 1 GiB x 128 shard of benchmarks/bench_audit.py; dec4.py with issue 14's note), and
    joining pieces into a batch (``combine_chunks``) cost 33 ms a 38,917 x 128 batch; a batch of
    several chunks cost the checks more (0.9 CPU s on that shard).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    # pre_buffer=False: with pyarrow's default (True) the reader keeps every row group's
    # pre-buffered column chunks allocated until the file is closed, so memory grew with the
    # shard (pyarrow.total_allocated_bytes 672 MiB after a 4 GiB shard; 19 MiB without it).
    done = 0
    if first:
        head = next(pq.ParquetFile(path, pre_buffer=False).iter_batches(
            batch_size=first, columns=columns, use_threads=True), None)
        if head is None:
            return
        done = head.num_rows
        yield pa.Table.from_batches([head])
    skip = done
    for rb in pq.ParquetFile(path, pre_buffer=False).iter_batches(batch_size=rows, columns=columns, use_threads=True):
        t = pa.Table.from_batches([rb])
        if skip:
            cut = min(skip, t.num_rows)
            t, skip = t.slice(cut), skip - cut
            if not t.num_rows:
                continue
        n = t.num_rows
        if total is not None and last and done + n >= total and n > last:
            yield t.slice(0, n - last)
            yield t.slice(n - last)
        else:
            yield t
        done += n


def _parquet_batches(path: Path, columns: list[str], rows: int, want: dict[str, pl.DataType],
                     first: int | None = None, total: int | None = None,
                     last: int | None = None) -> Iterator[pl.DataFrame]:
    """Batches of ``rows`` rows (:func:`_decoded`: with ``first``, a first batch of ``first`` rows;
    with ``total`` and ``last``, a final batch of at most ``last`` rows), decoded by pyarrow,
    converted to polars and cast to ``want`` in a background thread one batch ahead of the consumer:
    the engine's thread only runs the checks.

    Raises:
        Unreadable: decoding or casting a batch failed (the first line of pyarrow's or polars' message).
    """
    done = object()
    q: queue.Queue = queue.Queue(maxsize=1)
    stop = threading.Event()

    def produce() -> None:
        try:
            for table in _decoded(path, columns, rows, first, total, last):
                q.put(_cast(pl.from_arrow(table), want))  # type: ignore[arg-type]
                if stop.is_set():
                    return
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
            yield item
    finally:
        stop.set()
        while t.is_alive():  # unblock a producer waiting on a full queue
            try:
                q.get_nowait()
            except queue.Empty:
                pass
            t.join(timeout=0.05)


def read_parquet_columns(path: Path, columns: list[str], rows: int, schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """The ``columns`` of the parquet file ``path`` (``rows`` rows, >= 1) as one frame with the dtypes
    of ``schema``, decoded by pyarrow as one record batch (:func:`_decoded`): the one-batch read of
    a shard. It takes about half the CPU of polars' own reader on token lists (1.45 vs 3.2 CPU s for
    the 1 GiB x 128 shard of benchmarks/bench_audit.py decoded in batches).

    Raises:
        Unreadable: decoding failed (the first line of pyarrow's or polars' message).
    """
    want = {c: schema[c] for c in columns}
    got = list(_parquet_batches(path, columns, rows, want))
    return got[0] if len(got) == 1 else pl.concat(got)


def read_parquet_rows(path: Path, columns: list[str], rows: list[int], schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """The shard rows ``rows`` (0-based; any order, repeats ignored) of the parquet file ``path``:
    ``__row`` (UInt32, the shard row) first, then ``columns`` with the dtypes of ``schema``, in row
    order. Only the row groups that hold one of them are decoded (the footer gives each group's
    rows), one at a time, so memory is one row group: the engine reads candidate rows of a
    multi-batch shard again this way (duplicate candidates, examples of checks decided after the
    batches). Decoding the batches again up to the last wanted row took 4.9 of the 15.3 s of
    auditing benchmarks/bench_audit.py's 4 GiB x 128 shard for 2 candidate rows (in the 8th and the
    24th of its 32 row groups), against those 2 row groups here.

    Raises:
        Unreadable: the file or a row group cannot be decoded (the first line of pyarrow's message),
            or a row is past the file's end.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    want = {c: schema[c] for c in columns}
    wanted = np.unique(np.asarray(rows, dtype=np.int64))
    parts: list[pl.DataFrame] = []
    try:
        pf = pq.ParquetFile(path, pre_buffer=False)
        md = pf.metadata
        starts = np.cumsum([0] + [md.row_group(g).num_rows for g in range(md.num_row_groups)])
        if wanted.size and (wanted[0] < 0 or wanted[-1] >= starts[-1]):
            raise Unreadable(f"reading rows again failed: row {int(wanted[-1])} is past the file's "
                             f"{int(starts[-1])} rows (the file changed while being audited?)")
        group = np.searchsorted(starts, wanted, side="right") - 1
        for g in np.unique(group):
            inside = wanted[group == g]
            table = pf.read_row_group(int(g), columns=columns, use_threads=True).take(pa.array(inside - starts[g]))
            part = _cast(pl.from_arrow(table), want)  # type: ignore[arg-type]
            parts.append(part.insert_column(0, pl.Series("__row", inside, dtype=pl.UInt32)))
    except Unreadable:
        raise
    except (pa.ArrowException, OSError, pl.exceptions.PolarsError, pl.exceptions.PanicException) as exc:
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise Unreadable(f"reading the data failed: {msg}") from None
    if not parts:
        return pl.DataFrame([pl.Series("__row", [], dtype=pl.UInt32),
                             *[pl.Series(c, [], dtype=t) for c, t in want.items()]])
    return pl.concat(parts) if len(parts) > 1 else parts[0]


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
                yield _cast(df, want)
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
        yield _cast(df, want)
