"""What the streamed readers share (:mod:`datacheck.formats.csv`, :mod:`datacheck.formats.arrow`,
:mod:`datacheck.formats.jsonl`, and the parquet batches of :mod:`datacheck.formats.parquet`):

- :func:`lazy_source`: a reader's frames as a polars ``LazyFrame`` (an IO plugin,
  ``polars.io.plugins.register_io_source``): the schema is known without a read, collecting it
  reads the file again, with the projection pushed down, the predicate applied per frame and
  ``n_rows`` stopping the read once enough rows passed the predicate.
- :func:`recut`: pieces of any heights (parsed chunks, record batches) turned into batches of
  exactly ``rows`` rows (the last may be shorter), in order.
"""
from __future__ import annotations

import queue
import threading
from typing import Callable, Generator, Iterable, Iterator, Protocol, Self, TypeVar

import polars as pl
from polars.io.plugins import register_io_source

from datacheck.model.constants import BATCH_MAX_BYTES

__all__ = ["BATCH_BYTES", "budget", "lazy_source", "recut", "recut_frames"]

#: the decoded bytes a streamed reader's batch holds at most unless told otherwise
#: (:data:`~datacheck.model.constants.BATCH_MAX_BYTES`; read at call time by :func:`budget`: tests shrink it)
BATCH_BYTES = BATCH_MAX_BYTES


def budget(max_bytes: int | None) -> int:
    """``max_bytes``, or :data:`BATCH_BYTES` when None: the byte budget of a streamed reader's batches."""
    return BATCH_BYTES if max_bytes is None else max_bytes


class _Sliceable(Protocol):
    """A table with a row count (``len``) and a zero-copy ``slice(offset, length)``:
    ``polars.DataFrame`` and ``pyarrow.Table`` both are."""

    def __len__(self) -> int: ...

    def slice(self, offset: int, length: int | None = None) -> Self: ...


T = TypeVar("T", bound=_Sliceable)


def lazy_source(batches: Callable[[list[str] | None, int | None], Iterator[pl.DataFrame]],
                schema: dict[str, pl.DataType], name: str, detail: str | None = None) -> pl.LazyFrame:
    """A ``LazyFrame`` whose rows are the frames ``batches(columns, batch_size)`` yields.

    Args:
        batches: called when the frame is collected with the columns polars needs (None: all) and
            polars' batch size in rows (None when polars gives none: the reader picks its own);
            yields the rows in order as frames with the dtypes of ``schema`` (``columns`` only).
        schema: ``{column: dtype}`` of the rows (``collect_schema`` reads nothing).
        name, detail: what ``LazyFrame.explain`` shows for the scan (``detail``: e.g. the file).

    Returns:
        The LazyFrame. Collecting it applies the query's predicate to each frame and stops reading
        once ``n_rows`` rows (a pushed-down ``head``) passed it; errors of ``batches`` propagate.
        A query that needs no column (only the rows: ``with_row_index(...).select(index)``, a row
        count) is served frames of no column that keep their heights: ``batches`` is asked for one
        column (:func:`_carrier`), which is dropped, since a frame built from no column has no rows.
    """
    carrier = _carrier(schema)

    def source(with_columns: list[str] | None, predicate: pl.Expr | None, n_rows: int | None,
               batch_size: int | None) -> Iterator[pl.DataFrame]:
        left = n_rows
        rows_only = with_columns is not None and not with_columns and carrier is not None
        for df in batches([carrier] if rows_only else with_columns, batch_size):  # type: ignore[list-item]
            if predicate is not None:
                df = df.filter(predicate)
            if rows_only:
                df = df.drop(df.columns)  # no column, the height kept
            if left is not None:
                df = df.head(left)
                left -= df.height
            yield df
            if left is not None and left <= 0:
                return

    return register_io_source(source, schema=schema, explain_name=name, explain_detail=detail)


def _carrier(schema: dict[str, pl.DataType]) -> str | None:
    """The column read for a query that needs none (:func:`lazy_source`): the first of a fixed-width
    dtype (numbers, booleans, dates: the fewest bytes decoded), else the first column; None for a
    schema of no column."""
    for name, dtype in schema.items():
        if dtype.is_numeric() or dtype.is_temporal() or dtype == pl.Boolean:
            return name
    return next(iter(schema), None)


def batch_sizes(rows: int, first: int | None = None, total: int | None = None,
                last: int | None = None) -> Generator[int, int | None, None]:
    """The rows of successive batches: ``first`` (when given), then ``rows`` each; with ``total`` (the
    rows of the whole source) and ``last``, the final batch holds at most ``last`` rows: when the
    rows left fit in the next batch but are more than ``last``, that batch takes all but ``last``
    of them. (A pipeline whose consumer is faster than its producer waits, after the producer's
    end, only for the consumer's work on the final batch: a small final batch shortens that wait.)
    ``send(taken)``: the batch just given held ``taken`` rows, fewer than asked (a byte budget cut it,
    :func:`recut`); ``next()``: it held the rows asked."""
    size, emitted = first or rows, 0
    while True:
        if total is not None and last is not None:
            left = total - emitted
            if last < left <= size:
                size = left - last
        taken = yield size
        emitted += size if taken is None else taken
        size = rows


def _rows_within(heights: list[int], weights: list[int], budget: int) -> int:
    """Rows, from the start of pieces of ``heights`` rows and ``weights`` bytes (a piece's bytes taken as
    spread evenly over its rows), that hold at most ``budget`` bytes; at least 1 (a row of more than the
    budget is a batch of its own)."""
    got, held = 0, 0
    for h, w in zip(heights, weights):
        if held + w <= budget:
            got, held = got + h, held + w
            continue
        if h and w:
            got += int((budget - held) * h // w)
        break
    return max(1, got)


def recut(pieces: Iterable[T], rows: int, join: Callable[[list[T]], T],
          out: Callable[[T], T] | None = None, first: int | None = None,
          total: int | None = None, last: int | None = None,
          weigh: Callable[[T], int] | None = None, max_bytes: int | None = None) -> Iterator[T]:
    """``pieces`` (tables of any heights, in row order) cut into batches of exactly ``rows`` rows
    (>= 1; the first has ``first`` rows when given; the last may be shorter; no empty batch), in
    row order. With ``total`` (the rows of all pieces) and ``last``, the final batch holds at most
    ``last`` rows (see :func:`batch_sizes`).

    Args:
        pieces: read lazily: a piece is only asked for when the rows held are fewer than the next
            batch needs, so a streamed source reads one piece ahead at most.
        join: one table of a list of pieces (all rows, in order; called with one piece too, so it may
            also make that piece contiguous): e.g. ``pl.concat(ps, rechunk=False)``.
        out: applied to each batch before it is handed out (e.g. ``pl.DataFrame.rechunk``); the
            batch is a slice of what ``join`` returned otherwise.
        first: the rows of the first batch (None: ``rows``).
        weigh, max_bytes: with both, a batch also holds at most ``max_bytes`` bytes (``weigh(piece)``: a
            piece's decoded bytes, spread evenly over its rows): rows counted and bytes counted, whichever
            comes first, so rows far bigger than the ones ``rows`` was sized by (a file's first rows) never
            make a batch of gigabytes. A batch is at least one row (a row over ``max_bytes`` comes alone,
            with the rest of its piece's rows held back by the same even spread); a batch cut by bytes is
            followed by the batches of ``rows`` again.

    Rows left after a batch are held as one slice of the joined table, joined with the next pieces.
    """
    pending: list[T] = []
    weights: list[int] = []
    have = held = 0
    capped = weigh is not None and max_bytes is not None
    sizes = batch_sizes(rows, first, total, last)
    size = next(sizes)
    for piece in pieces:
        pending.append(piece)
        have += len(piece)
        if capped:
            w = int(weigh(piece))  # type: ignore[misc]
            weights.append(w)
            held += w
        while have and (have >= size or (capped and held > max_bytes)):  # type: ignore[operator]
            take = size
            if capped:
                take = min(size, _rows_within([len(p) for p in pending], weights, max_bytes))  # type: ignore[arg-type]
            whole = join(pending)
            head, tail = whole.slice(0, take), whole.slice(take)
            yield out(head) if out is not None else head
            left = len(tail)
            if capped:  # the bytes of the rows left, spread evenly over the pieces they come from
                gone, rest = take, 0
                for p, w in zip(pending, weights):
                    h = len(p)
                    if gone >= h:
                        gone -= h
                        continue
                    rest += int(w * (h - gone) // h)
                    gone = 0
                weights, held = ([rest] if left else []), (rest if left else 0)
            pending, have = ([tail] if left else []), left
            size = sizes.send(take) if take != size else next(sizes)
    if have:
        whole = join(pending)
        yield out(whole) if out is not None else whole


def _join_frames(frames: list[pl.DataFrame]) -> pl.DataFrame:
    return pl.concat(frames, rechunk=False) if len(frames) > 1 else frames[0]


def recut_frames(pieces: Iterable[pl.DataFrame], rows: int, max_bytes: int | None = None) -> Iterator[pl.DataFrame]:
    """:func:`recut` of polars frames: pieces concatenated without a copy, each batch of ``rows``
    rows (the last may be shorter) made contiguous (``rechunk``: one copy of the batch, so the
    engine's query reads one chunk per column and the pieces behind it can be freed). ``max_bytes``:
    a batch also holds at most that many decoded bytes (``DataFrame.estimated_size`` of its pieces;
    see :func:`recut`); None: rows only."""
    return recut(pieces, rows, join=_join_frames, out=pl.DataFrame.rechunk,
                 weigh=pl.DataFrame.estimated_size if max_bytes is not None else None, max_bytes=max_bytes)


_T = TypeVar("_T")


def ahead(it: Iterator[_T], name: str, wrap: Callable[[BaseException], BaseException] | None = None) -> Iterator[_T]:
    """``it``'s items, the next one produced in a background thread (named ``name``) while the caller
    works on the current one (pyarrow decodes, polars parses and casts with the GIL released): one item
    ahead, never more. An error of the producer is raised in the caller (``wrap(error)`` when given);
    closing the generator early stops the producer and joins its thread."""
    done = object()
    q: queue.Queue = queue.Queue(maxsize=1)
    stop = threading.Event()

    def produce() -> None:
        try:
            for item in it:
                q.put(item)
                if stop.is_set():
                    return
            q.put(done)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, which raises it
            q.put(exc)

    t = threading.Thread(target=produce, name=name, daemon=True)
    t.start()
    try:
        while True:
            item = q.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise wrap(item) if wrap is not None else item
            yield item
    finally:
        stop.set()
        while t.is_alive():  # unblock a producer waiting on a full queue
            try:
                q.get_nowait()
            except queue.Empty:
                pass
            t.join(timeout=0.05)
