"""Parquet shards (``.parquet``, ``.pq``).

- A local file: ``pl.scan_parquet`` (lazy; the fused query reads only the needed columns; the
  engine's batches are pyarrow record batches of only the needed columns, and the candidate rows of
  key checks are read again from only the row groups that hold them: see below).
- Arrow types polars cannot read (union, interval, run-end-encoded, list views, decimal256): the
  file is read by pyarrow instead, converted where a lossless polars type exists and the other
  columns dropped with a ``schema.dtype`` finding each
  (:func:`datacheck.formats.arrowtypes.arrow_for_polars`), never handed to polars (whose Rust code
  panics on them).
- A shard in an object store: opened with ``pyarrow.dataset`` over the store's fsspec filesystem
  and scanned lazily by polars (``pl.scan_pyarrow_dataset``), so only the footer, the page headers the
  footer cannot clear (ranged reads) and the columns the checks need are fetched (:func:`open_remote`).
- A file that does not open: zero bytes, bad leading or footer magic, else the reader's message.
- The engine's batches (:class:`ParquetReader`, the opened shard's reader; :func:`_parquet_batches`): ``pyarrow.parquet.ParquetFile.iter_batches`` over
  only the needed columns (pyarrow decodes page by page inside a row group; polars' own reader
  decodes a whole row group for any slice of it, 8x slower on a 400k-row row group cut in 8), the
  next batch decoded, converted and cast in a background thread; the batch size from the footer
  alone where it can (:func:`~datacheck.formats.parquetdecode.footer_bytes`; the first rows of the
  other columns only). The first tables may come from a prefetch of the same read started earlier
  (:class:`~datacheck.formats.parquetdecode.Prefetch`: the command line's, while it imports, or the
  library's, while the one shard is hashed, opened and planned). Rows read again: only the row
  groups that hold them (:func:`read_parquet_rows`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Iterator

import polars as pl

from datacheck.formats.arrowtypes import arrow_for_polars, needs_conversion, validate_arrow
from datacheck.formats.base import Format, ReadOptions, ShardData, cast_frame, normalize_shard
from datacheck.formats.parquetdecode import (
    claim,
    decode_threads,
    decoded,
    parquet_file,
    release_unused,
    row_floor,
    rows_bytes,
    wide_row_group,
)
from datacheck.formats.parquetpages import scan_pages
from datacheck.formats.rewrite import TableRewrite
from datacheck.formats.stream_source import ahead
from datacheck.io.shardbytes import READ_ERRORS, Unreadable, read_bytes, store_reason
from datacheck.io.stores import is_url
from datacheck.model.constants import BATCH_TARGET_BYTES, MAX_ROW_BYTES, RAMP_DIVISOR

__all__ = ["FORMAT", "ParquetReader", "batchable", "read_table", "open_parquet", "open_remote", "read_parquet_columns", "read_parquet_rows"]


class Footer:
    """A parquet file's footer, read once: ``metadata`` (``pyarrow.parquet.FileMetaData``: rows, row
    groups, column chunks), ``schema_arrow`` (the Arrow schema pyarrow decodes to, what
    ``pyarrow.parquet.read_schema`` gives) and ``convert`` (whether a column is of a type polars
    cannot take as stored: :func:`~datacheck.formats.arrowtypes.needs_conversion`). Every read of
    the shard's rows hands ``metadata`` to ``pyarrow.parquet.ParquetFile``, which then parses no
    footer again (the footer of a shard the engine audited was parsed 9 times: 1-2 ms of a 5,000 x
    256-token shard's 65 ms)."""

    def __init__(self, pf: Any):
        self.metadata = pf.metadata
        self.schema_arrow = pf.schema_arrow
        self.convert = needs_conversion(self.schema_arrow)
        #: column chunks that decode to more than their uncompressed bytes (set at open:
        #: :func:`~datacheck.formats.parquetpages.scan_pages`; the batch sizes count them)
        self.floors: dict[tuple[int, int], int] = {}

    @classmethod
    def read(cls, path: Path) -> Footer:
        """The footer of the file ``path``. Raises what pyarrow raises for a file it cannot open."""
        import pyarrow.parquet as pq

        with pq.ParquetFile(path, pre_buffer=False) as pf:
            return cls(pf)


def _row_limit(opts: ReadOptions | None) -> int:
    """``[dataset] max_row_bytes`` of the read's config, else its default."""
    return int(getattr(opts.dataset if opts is not None else None, "max_row_bytes", None) or MAX_ROW_BYTES)


def _refuse_wide(metadata: Any, limit: int, floors: dict[tuple[int, int], int] | None = None) -> None:
    """Raise :class:`Unreadable` when a row group's rows average more than ``limit`` bytes
    (:func:`~datacheck.formats.parquetdecode.wide_row_group`: from the footer, before any decode)."""
    wide = wide_row_group(metadata, limit, floors)
    if wide is not None:
        raise Unreadable(wide.reason)


def _refuse_big(path: Path, footer: Footer, limit: int) -> None:
    """Raise :class:`Unreadable` when a value of the file holds more than ``limit`` bytes, or a row group
    expands past ``limit`` bytes a row through a dictionary of one entry
    (:func:`~datacheck.formats.parquetpages.scan_pages`: the pages over ``limit`` looked into before
    pyarrow decodes them); else keep the chunks' decoded floors in ``footer.floors`` (batch sizes)."""
    scan = scan_pages(path, footer.metadata, limit)
    if scan.big is not None:
        raise Unreadable(scan.big.reason)
    footer.floors = scan.floors
    if scan.floors:
        _refuse_wide(footer.metadata, limit, scan.floors)


def _read_parquet(path: Path, limit: int = MAX_ROW_BYTES) -> ShardData:
    import pyarrow.parquet as pq

    footer: Footer | None
    try:
        footer = Footer.read(path)
    except READ_ERRORS:
        footer = None  # the polars reader below names the reason
    if footer is not None:
        _refuse_wide(footer.metadata, limit)
        _refuse_big(path, footer, limit)
    if footer is not None and footer.convert:
        try:
            table = pq.read_table(path)
            validate_arrow(table, "the parquet file")
            table, findings = arrow_for_polars(table)
            return ShardData(lf=pl.from_arrow(table).lazy(), decode_findings=findings)  # type: ignore[union-attr]
        except Unreadable:
            raise
        except READ_ERRORS as exc:
            raise Unreadable(_parquet_reason(path, exc)) from None
    try:
        lf = pl.scan_parquet(path, glob=False)  # a name holding [, * or ? is a name, not a pattern
        lf.collect_schema()
    except READ_ERRORS as exc:
        raise Unreadable(_parquet_reason(path, exc)) from None
    return ShardData(lf=lf, stream=ParquetReader(path, footer))


def _parquet_reason(path: Path, exc: BaseException, fs=None, url: str = "") -> str:
    """Why a parquet file does not open: zero bytes, bad leading or footer magic, else the reader's
    message. ``fs``/``url``: the file is ``path`` in that fsspec filesystem (an object store)."""
    try:
        if fs is None:
            size = path.stat().st_size
            with open(path, "rb") as f:
                head = f.read(4)
                f.seek(max(0, size - 4))
                tail = f.read(4)
        else:
            size = int(fs.size(str(path)))
            head = fs.cat_file(str(path), start=0, end=min(4, size)) if size else b""
            tail = fs.cat_file(str(path), start=max(0, size - 4), end=size) if size else b""
    except OSError as e:
        return f"cannot read file: {e.strerror or e}" if fs is None else store_reason(url, e)
    except Exception as e:  # noqa: BLE001 - a store client's error after its retries
        return store_reason(url, e)
    if size == 0:
        return "zero-byte file (an interrupted download or write?)"
    if head != b"PAR1":
        return f"not a parquet file: bad magic bytes {head!r} at offset 0 (expected b'PAR1')"
    if tail != b"PAR1":
        return f"truncated parquet file: no footer magic at the end ({size} bytes; the write was cut off)"
    return f"parquet reader error: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"


def read_table(path: Path | str) -> tuple[Any, str]:
    """The whole parquet file (a local path or the URL of an object in a store) as one pyarrow
    Table, with its writer kind ``"parquet"`` (``clean`` rewrites the kept rows with it)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if isinstance(path, str) and is_url(path):
        return pq.read_table(pa.BufferReader(read_bytes(path))), "parquet"
    return pq.read_table(path), "parquet"


def open_parquet(path: Path, fmt: str = "parquet", opts: ReadOptions | None = None) -> ShardData:
    """A local parquet file (see the module docstring). Raises :class:`Unreadable`, also for a row
    group whose rows average more than ``[dataset] max_row_bytes`` (the footer's uncompressed bytes
    over its rows: :func:`~datacheck.formats.parquetdecode.wide_row_group`), before any row is decoded."""
    return normalize_shard(_read_parquet(path, _row_limit(opts)))


#: bytes one ranged read of a store's object fetches at least while the page headers are walked
#: (:func:`open_remote`): a header is a few dozen bytes, so a read of a few KiB each, never the object
STORE_SCAN_BLOCK = 1 << 14


def open_remote(fs: Any, path: str, url: str, opts: ReadOptions | None = None) -> ShardData:
    """The parquet object ``path`` of the fsspec filesystem ``fs`` (``url``: its URL, named in
    errors), scanned lazily. Raises :class:`Unreadable`, also for a row group whose rows average more
    than ``[dataset] max_row_bytes`` (from the footer, as :func:`open_parquet`), and for a value or a
    list row over it, or a one-entry dictionary that expands past it, found from the page headers as
    :func:`open_parquet` finds them (:func:`~datacheck.formats.parquetpages.scan_pages`), read with
    ranged reads of :data:`STORE_SCAN_BLOCK` bytes (the headers and the few bytes looked into, not the
    object); a read of the store that fails there is :class:`Unreadable` naming the URL."""
    import pyarrow.dataset as pads
    from pyarrow.fs import FSSpecHandler, PyFileSystem

    try:
        dataset = pads.dataset(path, filesystem=PyFileSystem(FSSpecHandler(fs)), format="parquet")
        lf = pl.scan_pyarrow_dataset(dataset)
        lf.collect_schema()
        footers = [(frag.path, frag.metadata) for frag in dataset.get_fragments()]
    except READ_ERRORS as exc:
        raise Unreadable(_parquet_reason(Path(path), exc, fs=fs, url=url)) from None
    limit = _row_limit(opts)
    for key, metadata in footers:
        _refuse_wide(metadata, limit)
        try:
            scan = scan_pages(key, metadata, limit, opener=lambda key=key: fs.open(
                key, "rb", block_size=STORE_SCAN_BLOCK, cache_type="readahead"))
        except Exception as exc:  # noqa: BLE001 - a store client's error after its retries
            raise Unreadable(store_reason(url, exc)) from None
        if scan.big is not None:
            raise Unreadable(scan.big.reason)
        if scan.floors:
            _refuse_wide(metadata, limit, scan.floors)
    return normalize_shard(ShardData(lf=lf))


def batchable(path: Path, columns: list[str]) -> bool:
    """The parquet file's ``columns`` can be read in batches straight from the file (pyarrow): all
    present and of types polars takes as stored (else the read path converted them)."""
    import pyarrow.parquet as pq

    try:
        arrow = pq.read_schema(path)
    except Exception:  # noqa: BLE001 - the engine's read reports the problem
        return False
    return set(columns) <= set(arrow.names) and not needs_conversion(arrow)


def _parquet_batches(path: Path, columns: list[str], rows: int, want: dict[str, pl.DataType],
                     first: int | None = None, total: int | None = None,
                     last: int | None = None, footer: Footer | None = None,
                     overlap: bool = True) -> Iterator[pl.DataFrame]:
    """Batches of ``rows`` rows (:func:`~datacheck.formats.parquetdecode.decoded`: with ``first``, a first batch of ``first`` rows;
    with ``total`` and ``last``, a final batch of at most ``last`` rows), decoded by pyarrow,
    converted to polars and cast to ``want`` in a background thread one batch ahead of the consumer:
    the engine's thread only runs the checks (``overlap`` False: in the consumer's thread, each batch
    decoded once the one before was checked, for batches far over the target, :meth:`ParquetReader.batches`).
    The first tables come from a
    :class:`~datacheck.formats.parquetdecode.Prefetch` of this very read when the command line started
    one (:func:`~datacheck.formats.parquetdecode.claim`: the same file, columns and batch sizes), else
    they are decoded here.

    Raises:
        Unreadable: decoding or casting a batch failed (the first line of pyarrow's or polars' message).
    """
    tables = claim(path, columns, rows, first, total, last)
    if tables is None:
        tables = decoded(path, columns, rows, first, total, last, footer, threads=overlap)
    frames = (cast_frame(pl.from_arrow(table), want)  # type: ignore[arg-type]
              for table in tables)
    if overlap:
        yield from ahead(frames, "datacheck-parquet-decode", _unreadable)
        return
    while True:
        try:
            df = next(frames, None)
        except Exception as exc:  # noqa: BLE001 - as ahead() hands a decode error on
            raise _unreadable(exc) from None
        if df is None:
            return
        yield df
        del df  # not held while the next batch decodes
        release_unused()  # nor its pages, kept by the pool for a batch of its size (see release_unused)


def _unreadable(exc: BaseException) -> Unreadable:
    """A decode or cast error as :class:`Unreadable` with the first line of pyarrow's or polars' message."""
    msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return Unreadable(f"reading the data failed: {msg}")


def read_parquet_columns(path: Path, columns: list[str], rows: int, schema: dict[str, pl.DataType],
                         footer: Footer | None = None) -> pl.DataFrame:
    """The ``columns`` of the parquet file ``path`` (``rows`` rows, >= 1) as one frame with the dtypes
    of ``schema``, decoded by pyarrow as one record batch (:func:`~datacheck.formats.parquetdecode.decoded`): the one-batch read of
    a shard. It takes about half the CPU of polars' own reader on token lists (1.45 vs 3.2 CPU s for
    the 1 GiB x 128 shard of benchmarks/bench_audit.py decoded in batches). Decoded in the calling
    thread (pyarrow's own threads decode the columns): nothing overlaps one read, so a thread of its
    own would only add its start and hand-over to every shard of a folder.

    Raises:
        Unreadable: decoding failed (the first line of pyarrow's or polars' message).
    """
    want = {c: schema[c] for c in columns}
    try:
        got = [cast_frame(pl.from_arrow(table), want)  # type: ignore[arg-type]
               for table in decoded(path, columns, rows, footer=footer)]
    except (Exception, pl.exceptions.PanicException) as exc:  # noqa: BLE001 - any decode or cast failure
        raise _unreadable(exc) from None
    if not got:  # a footer counting rows that no row group holds
        raise Unreadable(f"reading the data failed: the footer gives {rows} row(s) but the row groups decode to none")
    return got[0] if len(got) == 1 else pl.concat(got)


#: Rows a record batch of :func:`read_parquet_rows`: a row group (often 100,000 rows, 333 MB decoded
#: for 256 tokens a row) is decoded this many rows at a time up to the last row wanted from it; fewer
#: where the row group's rows hold more than :data:`BATCH_TARGET_BYTES` that many
#: (:func:`~datacheck.formats.parquetdecode.row_floor`: 8,192 rows of a 1 MiB one-entry dictionary
#: are 8 GiB decoded).
REREAD_BATCH_ROWS = 8192


def read_parquet_rows(path: Path, columns: list[str], rows: list[int], schema: dict[str, pl.DataType],
                      footer: Footer | None = None) -> pl.DataFrame:
    """The shard rows ``rows`` (0-based; any order, repeats ignored) of the parquet file ``path``:
    ``__row`` (UInt32, the shard row) first, then ``columns`` with the dtypes of ``schema``, in row
    order. Only the row groups that hold one of them are decoded (the footer gives each group's
    rows), each in record batches of :data:`REREAD_BATCH_ROWS` rows up to its last wanted row, so
    memory is one such batch: the engine reads candidate rows of a
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

    want = {c: schema[c] for c in columns}
    wanted = np.unique(np.asarray(rows, dtype=np.int64))
    parts: list[pl.DataFrame] = []
    try:
        pf = parquet_file(path, footer, partial=True)
        md = pf.metadata
        starts = np.cumsum([0] + [md.row_group(g).num_rows for g in range(md.num_row_groups)])
        if wanted.size and (wanted[0] < 0 or wanted[-1] >= starts[-1]):
            raise Unreadable(f"reading rows again failed: row {int(wanted[-1])} is past the file's "
                             f"{int(starts[-1])} rows (the file changed while being audited?)")
        group = np.searchsorted(starts, wanted, side="right") - 1
        for g in np.unique(group):
            inside = wanted[group == g]
            local = inside - starts[g]
            taken = []
            off = 0
            # the group's record batches in order, decoded page by page: memory is one batch, and
            # nothing after the last wanted row is decoded
            per_row = row_floor(md, columns, getattr(footer, "floors", None), groups=[int(g)])
            step = REREAD_BATCH_ROWS if per_row * REREAD_BATCH_ROWS <= BATCH_TARGET_BYTES \
                else max(1, int(BATCH_TARGET_BYTES // per_row))
            for batch in pf.iter_batches(batch_size=step, row_groups=[int(g)], columns=columns,
                                         use_threads=decode_threads(step, per_row)):
                sel = local[(local >= off) & (local < off + batch.num_rows)]
                if sel.size:  # every row of the batch (a row over the target): the batch itself, not a copy
                    taken.append(batch if sel.size == batch.num_rows else batch.take(pa.array(sel - off)))
                off += batch.num_rows
                del batch
                if per_row > BATCH_TARGET_BYTES:  # rows over the target: no pages kept for the next
                    release_unused()
                if off > local[-1]:
                    break
            if off <= local[-1]:
                raise Unreadable(f"reading rows again failed: row group {int(g)} ended before row {int(inside[-1])}")
            table = pa.Table.from_batches(taken)
            part = cast_frame(pl.from_arrow(table), want)  # type: ignore[arg-type]
            parts.append(part.insert_column(0, pl.Series("__row", inside, dtype=pl.UInt32)))
    except Unreadable:
        raise
    except (pa.ArrowException, OSError, pl.exceptions.PolarsError, pl.exceptions.PanicException) as exc:
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise Unreadable(f"reading the data failed: {msg}") from None
    if not parts:
        # a dict keeps every name as written (a list of Series renames a column named "" column_<i>)
        return pl.DataFrame({"__row": pl.Series("__row", [], dtype=pl.UInt32),
                             **{c: pl.Series(c, [], dtype=t) for c, t in want.items()}})
    return pl.concat(parts) if len(parts) > 1 else parts[0]


class ParquetReader:
    """A local parquet file's :class:`~datacheck.formats.base.ShardReader` (see the module
    docstring): batches through pyarrow (:func:`_parquet_batches`: decoded one ahead in a
    background thread, ramped at both ends), the one-batch read (:func:`read_parquet_columns`),
    rows read again from only the row groups that hold them (:func:`read_parquet_rows`). Its opened
    frame is a ``scan_parquet`` (slices of it read only what they need: ``rescans`` is False)."""

    rescans: ClassVar[bool] = False

    def __init__(self, path: Path, footer: Footer | None = None):
        self.path = path
        #: the file's footer (:class:`Footer`), read once (at open, or on first use)
        self._footer = footer
        self._footer_failed = False
        #: :meth:`size`'s answer for the columns asked last (the sampler and the engine ask alike)
        self._size: tuple[tuple[str, ...], tuple[int | None, float | None]] | None = None

    def footer(self) -> Footer | None:
        """The file's footer, read once; None when it cannot be read (the reads then say why)."""
        if self._footer is None and not self._footer_failed:
            try:
                self._footer = Footer.read(self.path)
            except Exception:  # noqa: BLE001 - the engine's read reports the problem
                self._footer_failed = True
        return self._footer

    def holds(self, columns: list[str]) -> bool:
        """:func:`batchable`: every column in the file and of a type polars takes as stored (from
        the footer read once)."""
        footer = self.footer()
        return footer is not None and set(columns) <= set(footer.schema_arrow.names) and not footer.convert

    def size(self, columns: list[str]) -> tuple[int | None, float | None]:
        """(rows, decoded bytes per row) from the footer (:func:`~datacheck.formats.parquetdecode.rows_bytes`), when the file
        holds ``columns``; else (None, None)."""
        key = tuple(columns)
        if self._size is not None and self._size[0] == key:
            return self._size[1]
        got = rows_bytes(self.path, columns, self.footer()) if self.holds(columns) else None
        answer: tuple[int | None, float | None] = (None, None) if got is None else got
        self._size = (key, answer)
        return answer

    def _total(self) -> int:
        footer = self.footer()
        if footer is None:
            import pyarrow.parquet as pq

            return pq.ParquetFile(self.path, pre_buffer=False).metadata.num_rows  # raises why it cannot
        return footer.metadata.num_rows

    def read_all(self, columns: list[str], want: dict[str, pl.DataType]) -> pl.DataFrame | None:
        """:func:`read_parquet_columns` (about half the CPU of polars' reader); None when it fails
        (polars' read of the opened frame then says why)."""
        try:
            return read_parquet_columns(self.path, columns, self._total(), want, self.footer())
        except Unreadable:
            return None

    def first_rows(self, columns: list[str], rows: int, want: dict[str, pl.DataType]) -> pl.DataFrame | None:
        """The first ``rows`` rows of ``columns``, cast to ``want``: one record batch decoded by pyarrow
        page by page (``pl.scan_parquet``'s ``head`` decodes the whole first row group: 0.085 vs
        0.023 CPU s for the first 1,000 rows of 3 token-list columns x 256 in a 100,000-row row group,
        the layout recognizer's sample). None when the file does not hold ``columns`` as stored
        (:meth:`holds`), holds no row, or decoding fails (the opened frame's ``head`` then says why)."""
        if not columns or rows < 1 or not self.holds(columns):
            return None
        try:
            first = next(parquet_file(self.path, self.footer(), partial=True).iter_batches(
                batch_size=rows, columns=columns, use_threads=decode_threads(rows, self.size(columns)[1])), None)
            if first is None:
                return None
            return cast_frame(pl.from_arrow(first), want)  # type: ignore[arg-type]
        except Exception:  # noqa: BLE001 - the opened frame's read reports the problem
            return None

    def batches(self, columns: list[str], rows: int, want: dict[str, pl.DataType] | None = None,
                ramp: bool = False) -> Iterator[pl.DataFrame]:
        """:func:`_parquet_batches`; with ``ramp`` (and more than ``rows`` rows) the first and the
        final batch have at most ``rows // RAMP_DIVISOR`` rows, so the engine's checks start after a
        short decode instead of a whole batch's (the decode of each later batch overlaps the checks
        of the one before) and, after the decode's end, only a short batch is left to check (batch
        sizes never change a result).

        A batch predicted (the footer's bytes per row, :meth:`size`) to decode to more than
        :data:`~datacheck.model.constants.BATCH_TARGET_BYTES` (rows of more than the target: a batch is at
        least one row) is decoded after the one before was checked, not beside it: pyarrow's decode of a
        batch peaks at about three times its bytes, and beside the batch being checked that was most of
        the peak (``datacheck audit`` of 4 rows of 13 million tokens in three columns, 117 MB a row: 1.19 GB
        peak RSS decoded ahead, 1.07 GB not; 4 rows of 16 million int64 tokens: 1.14 against 0.98 GB;
        normal batches, of the target's size, still overlap)."""
        n = self._total()
        first = max(1, rows // RAMP_DIVISOR) if ramp and n > rows else None
        per_row = self.size(columns)[1]
        yield from _parquet_batches(self.path, columns, rows, want or {}, first, total=n, last=first,
                                    footer=self.footer(),
                                    overlap=decode_threads(rows, per_row))

    def read_rows(self, indices: list[int], columns: list[str], want: dict[str, pl.DataType],
                  rows: int) -> pl.DataFrame | None:
        """:func:`read_parquet_rows` (only the row groups that hold them); None when it fails."""
        try:
            return read_parquet_rows(self.path, columns, indices, want, self.footer())
        except Unreadable:
            return None


FORMAT = Format(
    names=("parquet",),
    open=open_parquet,
    extensions=((".parquet", "parquet"), (".pq", "parquet")),
    forced_extensions={"parquet": (".parquet", ".pq")},
    open_remote=open_remote,
    rewrite={"parquet": TableRewrite(read_table)},
)
