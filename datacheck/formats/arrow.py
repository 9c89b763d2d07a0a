"""Arrow IPC shards (``.arrow``/``.ipc``/``.feather``; file form, ``ARROW1`` magic, and stream form:
Hugging Face ``save_to_disk`` ``data-*.arrow``, whose folder's ``state.json`` lists the shards:
:mod:`datacheck.io.discover`): the one reader, for a local file and a copy of an object in a store
alike, reading record batch by record batch, in bounded memory.

At open (:func:`open_arrow`) every record batch is read once (``pyarrow.ipc``, from the file, not
memory-mapped, so nothing of the file stays resident) and fully validated
(:func:`datacheck.formats.arrowtypes.validate_arrow`: polars trusts offsets, and a corrupt inner list offset
kills the process); the rows are counted. A corrupt batch anywhere is
``decode.unreadable`` with pyarrow's reason and the batch's index.

The engine's batches (:meth:`IpcStream.batches`) read the record batches again, only the columns
the checks need, each validated again before polars sees it (the file may have changed since),
converted per batch where polars cannot take the Arrow type as stored
(:func:`datacheck.formats.arrowtypes.arrow_for_polars`; a column with no polars equivalent is left out with
one ``schema.dtype`` finding, counted over the whole shard), and cut into frames of the engine's rows.

Batches are bounded by rows and by bytes (:meth:`IpcStream.batches`, as the JSONL and CSV/TSV
readers' are): a record batch is cut into zero-copy slices of at most 1/8 of the byte budget
(:func:`byte_slices`), which are joined into batches of the engine's rows or
:data:`~datacheck.model.constants.BATCH_MAX_BYTES`, whichever comes first, so a record batch of huge rows
is converted to polars and checked a slice at a time. The engine sizes its batches by the file's bytes
per row counted at open (:meth:`IpcStream.size`), not by a sample of its first rows.

Memory: one record batch of the file (pyarrow reads a record batch's buffers whole; no part of one can
be read alone) plus one engine batch of at most the byte budget. A file written as one huge record
batch (``polars.DataFrame.write_ipc`` of a rechunked frame) is still read whole, but converted and
checked a slice at a time.

``ShardData.lf`` for the other consumers (inspect, clean, contracts, schema infer) is a
``polars.io.plugins.register_io_source`` scan over the same batches (projection and ``n_rows``
pushed down, the predicate applied per batch).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterator

import polars as pl

from datacheck.formats.arrowtypes import arrow_for_polars, needs_conversion, validate_arrow
from datacheck.formats.base import Format, ReadOptions, ShardData, normalize_shard
from datacheck.formats.batches import BudgetedStreamedReader, cast_batches
from datacheck.formats.rewrite import TableRewrite
from datacheck.formats.stream_source import budget, lazy_source, recut
from datacheck.io.shardbytes import Unreadable, read_bytes
from datacheck.io.stores import is_url
from datacheck.model.findings import Finding

__all__ = ["FORMAT", "IpcStream", "open_arrow", "read_table"]

#: rows handed to polars at once by the LazyFrame scan when polars gives no batch size
_SCAN_ROWS = 65_536
#: a record batch is cut into pieces of at most 1/8 of a batch's byte budget (or one row) before the
#: pieces are joined into the engine's batches: the byte count of a batch is then exact to within one
#: piece, however unevenly a record batch's bytes are spread over its rows (small rows, then huge ones)
PIECES_PER_BATCH = 8


def byte_slices(rb: Any, limit: int) -> Iterator[Any]:
    """``rb`` (a pyarrow RecordBatch) as zero-copy slices in row order, each holding at most ``limit``
    bytes (``RecordBatch.nbytes`` of the slice: the buffers its rows use) or a single row: a slice over
    the limit is halved until it fits. A record batch within the limit is one slice (one ``nbytes``
    call: uniform small rows cost nothing). Zero-row batches yield nothing."""
    todo = [(0, rb.num_rows)]
    while todo:
        off, n = todo.pop()
        if n == 0:
            continue
        piece = rb.slice(off, n)
        if n == 1 or piece.nbytes <= limit:
            yield piece
            continue
        half = n // 2
        todo += [(off + half, n - half), (off, half)]  # the first half next: row order kept


def _join_tables(tables: list[Any]) -> Any:
    import pyarrow as pa

    return pa.concat_tables(tables) if len(tables) > 1 else tables[0]


def _check_names(schema: Any) -> None:
    """Every field name of ``schema``, nested ones included (list items, struct fields, map keys and
    values, dictionary values), decodes as UTF-8: pyarrow stores the bytes as written and raises
    ``UnicodeDecodeError`` only when a name is read.

    Raises:
        Unreadable: naming the column (index, and name where it decodes) whose field name does not.
    """
    import pyarrow as pa

    def walk(t: Any) -> None:
        if isinstance(t, pa.DictionaryType):
            walk(t.value_type)
            return
        for i in range(t.num_fields):
            child = t.field(i)
            child.name  # noqa: B018 - decoding the name is the check
            walk(child.type)

    for k in range(len(schema)):
        f = schema.field(k)
        try:
            top = f.name
        except UnicodeDecodeError:
            raise Unreadable(f"column {k} of the Arrow schema has a name that is not valid UTF-8: the file is "
                             "corrupt or was not written by an Arrow library; re-export it") from None
        try:
            walk(f.type)
        except UnicodeDecodeError:
            raise Unreadable(f"column {k} ({top!r}) of the Arrow schema has a nested field whose name is not valid "
                             "UTF-8: the file is corrupt or was not written by an Arrow library; re-export it") from None


def _reason(head: bytes, exc: BaseException) -> str:
    msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return f"not a readable Arrow IPC file or stream (first bytes {head!r}): {msg}"


@dataclass
class IpcStream(BudgetedStreamedReader):
    """An Arrow IPC file's rows as batches read straight from the file (see the module docstring).

    Attributes:
        path: the file. file_form: ``ARROW1`` file (random access) rather than a stream.
        head: the file's first 8 bytes (named in read errors).
        schema: ``{column: dtype}`` polars gives the converted batches.
        rows: the rows of the file.
        convert: some column needs :func:`arrow_for_polars` before polars sees it.
        total_bytes: ``{column: Arrow bytes of the whole file's column}`` (``Array.nbytes`` summed over
            the record batches at open): :meth:`size`'s bytes per row.
    """

    path: Path
    file_form: bool
    head: bytes
    schema: dict[str, pl.DataType] = field(default_factory=dict)
    rows: int = 0
    convert: bool = False
    total_bytes: dict[str, int] = field(default_factory=dict)

    def size(self, columns: list[str]) -> tuple[int | None, float | None]:
        """(rows, Arrow bytes of one row of ``columns`` on average over the file), both counted at open,
        no read: the engine sizes its batches (and decides whether the shard is one read) by the whole
        file, never by a sample of its first rows, which may be far smaller than the later ones (or, huge,
        take gigabytes to sample). (rows, None) for a file of no rows."""
        if not self.rows:
            return int(self.rows), None
        return int(self.rows), sum(self.total_bytes.get(c, 0) for c in columns) / self.rows

    def record_batches(self, columns: list[str] | None = None) -> Iterator[Any]:
        """The file's record batches in order (only ``columns`` when given), each fully validated.
        Raises :class:`Unreadable`."""
        import pyarrow as pa

        try:
            with pa.OSFile(str(self.path), "rb") as src:
                if self.file_form:
                    reader = pa.ipc.open_file(src)
                    it: Iterator[Any] = (reader.get_batch(i) for i in range(reader.num_record_batches))
                else:
                    it = iter(pa.ipc.open_stream(src))
                i = 0
                # no enumerate: it keeps its last (index, batch) tuple while the next batch is read,
                # holding two record batches at once (two 240 MB batches: 589 MiB peak instead of 347)
                for rb in it:
                    if columns is not None:
                        rb = rb.select(columns)
                    validate_arrow(rb, f"record batch {i}" if self.file_form else f"the stream (record batch {i})")
                    yield rb
                    del rb  # not held while the next one is read: one record batch at a time
                    i += 1
        except Unreadable:
            raise
        except (Exception, pl.exceptions.PanicException) as exc:  # noqa: BLE001 - any reader failure
            raise Unreadable(_reason(self.head, exc)) from None

    def _frame(self, table: Any) -> pl.DataFrame:
        if self.convert:
            table, _ = arrow_for_polars(table)
        try:
            return pl.from_arrow(table)  # type: ignore[return-value]
        except (Exception, pl.exceptions.PanicException) as exc:  # noqa: BLE001
            raise Unreadable(f"reading the data failed: {str(exc).splitlines()[0] if str(exc) else exc}") from None

    def batches(self, columns: list[str] | None, rows: int,
                want: dict[str, pl.DataType] | None = None, ramp: bool = False,
                max_bytes: int | None = None) -> Iterator[pl.DataFrame]:
        """The ``columns`` (all when None) in frames of ``rows`` rows or ``max_bytes`` Arrow bytes (None:
        :data:`~datacheck.formats.stream_source.BATCH_BYTES`), whichever comes first (at least one row; the
        last may be shorter; :func:`~datacheck.formats.stream_source.recut` over the record batches cut
        by :func:`byte_slices` into pieces of at most 1/:data:`PIECES_PER_BATCH` of the budget), in row
        order, with the dtypes of :attr:`schema`, cast to ``want`` (when given): a record batch of huge
        rows is handed out in slices, never converted whole. Raises :class:`Unreadable`."""
        yield from cast_batches(self._frames(columns, rows, budget(max_bytes)), want)

    def _frames(self, columns: list[str] | None, rows: int, limit: int) -> Iterator[pl.DataFrame]:
        import pyarrow as pa

        piece = max(1, limit // PIECES_PER_BATCH)

        def tables() -> Iterator[Any]:
            for rb in self.record_batches(columns):
                slices = byte_slices(rb, piece)
                del rb  # held by its slices only: freed once the last of them is handed on
                for s in slices:
                    yield pa.Table.from_batches([s])
                del slices

        for table in recut(tables(), max(1, rows), join=_join_tables, weigh=lambda t: t.nbytes, max_bytes=limit):
            yield self._frame(table)
            del table

    def lazy(self) -> pl.LazyFrame:
        """The rows as a LazyFrame that reads the file again when collected."""
        return lazy_source(lambda cols, batch_size: self.batches(cols, batch_size or _SCAN_ROWS),
                           self.schema, "datacheck-arrow-ipc")


def open_arrow(path: Path) -> ShardData:
    """Open a local Arrow IPC file or stream (see the module docstring): every record batch read and
    validated once, rows counted, the polars schema fixed; the rows are read later, batch by batch.

    Raises:
        Unreadable: zero bytes, unreadable, not Arrow IPC, or a record batch fails full validation
            (the reason names the batch and pyarrow's message).
    """
    import pyarrow as pa

    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(8)
    except OSError as exc:
        raise Unreadable(f"cannot read file: {exc.strerror or exc}") from None
    if size == 0:
        raise Unreadable("zero-byte file (an interrupted download or write?)")
    stream = IpcStream(path=path, file_form=head.startswith(b"ARROW1"), head=head)
    try:
        with pa.OSFile(str(path), "rb") as src:
            arrow_schema = (pa.ipc.open_file(src) if stream.file_form else pa.ipc.open_stream(src)).schema
    except (Exception, pl.exceptions.PanicException) as exc:  # noqa: BLE001 - any reader failure
        raise Unreadable(_reason(head, exc)) from None
    _check_names(arrow_schema)
    totals = dict.fromkeys(arrow_schema.names, 0)
    for rb in stream.record_batches():
        stream.rows += rb.num_rows
        for k, name in enumerate(rb.schema.names):
            totals[name] += rb.column(k).nbytes
        del rb  # not held while the next record batch is read
    stream.total_bytes = totals
    stream.convert = needs_conversion(arrow_schema)
    findings: list[Finding] = []
    empty = pa.Table.from_batches([], schema=arrow_schema)
    if stream.convert:
        try:
            empty, findings = arrow_for_polars(empty)
        except (Exception, pl.exceptions.PanicException) as exc:  # noqa: BLE001
            raise Unreadable(_reason(head, exc)) from None
        findings = [replace(f, count=stream.rows) for f in findings]
    try:
        stream.schema = dict(pl.from_arrow(empty).schema)  # type: ignore[union-attr]
    except (Exception, pl.exceptions.PanicException) as exc:  # noqa: BLE001
        raise Unreadable(_reason(head, exc)) from None
    return ShardData(lf=stream.lazy(), decode_findings=findings, stream=stream)


def read_table(path: Path | str) -> tuple[Any, str]:
    """The whole Arrow IPC file or stream (a local path or the URL of an object in a store) as one
    pyarrow Table, fully validated (never hand corrupt offsets to a writer or polars), with its writer
    kind (``"ipc_file"`` or ``"ipc_stream"``: ``clean`` rewrites the kept rows in the same form)."""
    import pyarrow as pa

    if isinstance(path, str) and is_url(path):
        buf = pa.BufferReader(read_bytes(path))
        head = buf.read(6)
        buf.seek(0)
        if head == b"ARROW1":
            table, kind = pa.ipc.open_file(buf).read_all(), "ipc_file"
        else:
            table, kind = pa.ipc.open_stream(buf).read_all(), "ipc_stream"
        validate_arrow(table, path)
        return table, kind
    with open(path, "rb") as f:
        head = f.read(6)
    with pa.memory_map(str(path), "r") as src:
        if head == b"ARROW1":
            table, kind = pa.ipc.open_file(src).read_all(), "ipc_file"
        else:
            table, kind = pa.ipc.open_stream(src).read_all(), "ipc_stream"
    validate_arrow(table, str(path))
    return table, kind


def _open(path: Path, fmt: str, opts: ReadOptions) -> ShardData:
    return normalize_shard(open_arrow(path))


FORMAT = Format(
    names=("arrow",),
    open=_open,
    extensions=((".arrow", "arrow"), (".ipc", "arrow"), (".feather", "arrow")),
    forced_extensions={"arrow": (".arrow", ".ipc", ".feather")},
    rewrite={"arrow": TableRewrite(read_table)},
)
