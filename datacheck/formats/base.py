"""What every shard format shares: the opened shard (:class:`ShardData`), the format's layout error
(:class:`FormatError`), the one protocol a format implements (:class:`Format`) and the read options
a reader gets (:class:`ReadOptions`); fixed-size lists read as lists (:func:`normalize_shard`).

A format (one module of :mod:`datacheck.formats`, registered in :mod:`datacheck.formats.registry`):

- ``names``: the format names it reads (``DiscoveredShard.format``, ``[dataset] format``);
- ``extensions`` / ``forced_extensions`` / ``sniff``: which files are its shards (discovery);
- ``companions``: the files that belong to a shard besides itself (Megatron's ``.idx``): hashed
  with it, copied with it from an object store. Only files a shard's rows are read from are
  companions: the ``index.json`` of an MDS or litdata folder is not (its reader reads it, but it
  lists every shard of the folder: hashing it with each shard would change every shard's content
  hash, and so every cache key, whenever one shard of the folder is added or rewritten);
- ``open``: its ONE reader, a local file in, :class:`ShardData` out (a shard in an object store is
  copied to a local file first and opened by the same reader: :func:`datacheck.formats.registry.open_shard`);
- ``batches(columns)`` and ``rows(indices)``: members of the opened shard's reader,
  ``ShardData.stream`` (a :class:`ShardReader`: ``batches(columns, rows, want, ramp)`` and
  ``read_rows(indices, columns, want, rows)``, the name ``rows`` being the streamed readers' row
  count); the engine batches and reads rows again only through it
  (:mod:`datacheck.formats.batches`; a shard held in memory as a frame is sliced);
- ``rewrite``: per format name, how ``datacheck clean`` writes the kept rows
  (:mod:`datacheck.formats.rewrite`: a ``"records"`` rewrite copies JSONL/CSV records, a
  ``"table"`` rewrite writes parquet/Arrow again); a format name it does not list is refused
  before anything is written, with its ``refusals`` reason (JSON arrays, Megatron, MDS,
  WebDataset, litdata: their writers own their layout).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterator, Protocol

import numpy as np
import polars as pl

from datacheck.formats.rewrite import Rewriter
from datacheck.io.shardbytes import READ_ERRORS, Unreadable
from datacheck.model.findings import Finding
from datacheck.model.roles import TEXT_NAMES, cast_expr

__all__ = ["Nulled", "read_whole", "Format", "FormatError", "ReadOptions", "ShardData", "ShardReader", "cast_frame", "normalize_frame", "normalize_shard"]


class FormatError(Exception):
    """The bytes break the format's layout; ``reason`` says which rule, where, and the remedy
    (the format's reader turns it into :class:`~datacheck.io.shardbytes.Unreadable`)."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


class ShardReader(Protocol):
    """The reader an opened shard carries (``ShardData.stream``): the only reader of the shard's
    rows after ``open``, asked by the engine for batches and for rows read again (never by format
    name). Implemented by :class:`datacheck.formats.parquet.ParquetReader`,
    :class:`datacheck.formats.jsonl.JsonlSource`, :class:`datacheck.formats.csv.CsvStream`,
    :class:`datacheck.formats.arrow.IpcStream` (the last three through
    :class:`datacheck.formats.batches.StreamedReader`), and for every shard held as a frame by
    :class:`datacheck.formats.batches.FrameReader` (slices of the opened frame).

    ``rescans``: the opened frame (``ShardData.lf``) reads the file again whenever it is collected.
    """

    rescans: ClassVar[bool]

    def holds(self, columns: list[str]) -> bool:
        """Whether it reads every one of ``columns`` as the checks see them (False for a column the
        read path derived, or one it had to convert)."""
        ...

    def size(self, columns: list[str]) -> tuple[int | None, float | None]:
        """(rows, decoded bytes of one row of ``columns``) as far as known without a read (None: unknown)."""
        ...

    def read_all(self, columns: list[str], want: dict[str, pl.DataType]) -> pl.DataFrame | None:
        """``columns`` of every row as one frame with the dtypes ``want``, or None when it has no
        read of its own faster than collecting the opened frame (or that read failed)."""
        ...

    def first_rows(self, columns: list[str], rows: int, want: dict[str, pl.DataType]) -> pl.DataFrame | None:
        """The first ``rows`` rows of ``columns`` with the dtypes ``want``, or None when it has no read
        of them cheaper than the opened frame's ``head`` (or that read failed)."""
        ...

    def batches(self, columns: list[str], rows: int, want: dict[str, pl.DataType] | None = None,
                ramp: bool = False) -> Iterator[pl.DataFrame]:
        """``columns`` in batches of ``rows`` rows (the last may be shorter; with ``ramp`` a reader
        may make the first and the final batch shorter), in row order, cast to ``want`` (as read
        when None). Raises :class:`~datacheck.io.shardbytes.Unreadable`."""
        ...

    def read_rows(self, indices: list[int], columns: list[str], want: dict[str, pl.DataType],
                  rows: int) -> pl.DataFrame | None:
        """The shard rows ``indices`` (0-based, sorted): ``__row`` (UInt32) first, then ``columns``
        with the dtypes ``want``, in row order; None when they cannot be read. ``rows``: the rows
        per batch of :meth:`batches` (a reader that re-reads its batches uses the same cut)."""
        ...


@dataclass
class ShardData:
    """An opened shard.

    Attributes:
        lf: the rows as read (0-based row index = position in this frame).
        decode_findings: ``decode.*`` findings found while opening.
        line_format: True for JSONL/CSV (findings then also carry 1-based line numbers).
        line_of_row: 1-based line number of each row, or None when ``row + line_base``.
        line_base: offset of row 0's line when ``line_of_row`` is None (1 for JSONL, 2 for CSV with header).
        stream: the shard's :class:`ShardReader`, reading the rows straight from the file batch by
            batch (local parquet, JSONL of several chunks, CSV/TSV, Arrow IPC), or None (the rows are
            held as ``lf``: the engine slices it); the engine reads its batches and rows again from it
            instead of slicing ``lf``.
        retyped: ``{column: rows}``: the 0-based rows (sorted int64) whose value the reader read as
            null because it was of another JSON type than the column's (a ``true`` among numbers,
            reported as ``schema.dtype``), or because its bytes did not decode (a bad gzip member of a
            WebDataset sample, an MDS or litdata value: reported as ``decode.bad_record``); a check of
            missing values does not count them again (``RowCheck.not_retyped``).
    """

    lf: pl.LazyFrame
    decode_findings: list[Finding] = field(default_factory=list)
    line_format: bool = False
    line_of_row: np.ndarray | None = None
    line_base: int = 1
    stream: ShardReader | None = None
    retyped: dict[str, np.ndarray] = field(default_factory=dict)

    def lines_of(self, rows: list[int]) -> list[int]:
        if not self.line_format:
            return []
        if self.line_of_row is None:
            return [r + self.line_base for r in rows]
        return [int(self.line_of_row[r]) for r in rows if r < len(self.line_of_row)]


def _as_lists(dtype: pl.DataType) -> pl.DataType:
    """``dtype`` with every fixed-size ``Array`` (at any depth, also inside structs) made a ``List``."""
    if isinstance(dtype, pl.Array):
        return pl.List(_as_lists(dtype.inner))  # type: ignore[arg-type]
    if isinstance(dtype, pl.List):
        return pl.List(_as_lists(dtype.inner))  # type: ignore[arg-type]
    if isinstance(dtype, pl.Struct):
        return pl.Struct([pl.Field(f.name, _as_lists(f.dtype)) for f in dtype.fields])
    return dtype


def _normalize(data: ShardData) -> ShardData:
    """Fixed-size list columns (Arrow ``fixed_size_list``, polars ``Array``: e.g. Hugging Face
    ``Sequence(length=N)`` features or numpy-written parquet) are read as variable-size ``List``
    columns, so that every list check sees one list type. The cast is lazy (part of the fused query)."""
    try:
        schema = data.lf.collect_schema()
    except READ_ERRORS as exc:
        raise Unreadable(f"cannot read the schema: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    casts = {c: _as_lists(t) for c, t in schema.items() if _as_lists(t) != t}
    if casts:
        data.lf = data.lf.with_columns([pl.col(c).cast(t) for c, t in casts.items()])
    return data


def normalize_shard(data: ShardData) -> ShardData:
    """An opened shard with fixed-size lists read as lists (see :func:`_normalize`). Raises :class:`Unreadable`."""
    return _normalize(data)


#: cells a binary reader read as null because they did not decode (or were not read): ``{column: rows}``
Nulled = dict[str, list[int]]


def read_whole(read: Callable[[Path, ReadOptions], tuple[pl.DataFrame, list[Finding], Nulled]]
               ) -> Callable[[Path, str, ReadOptions], ShardData]:
    """The ``open`` of a format whose shard is decoded whole into memory by ``read`` (a frame, its
    ``decode.*`` findings and the cells those findings read as null, ``{column: rows}``): a
    :class:`FormatError` becomes :class:`Unreadable` with its reason, and fixed-size lists are read as
    lists; the null cells go to :attr:`ShardData.retyped`, so a check of missing values does not count a
    cell the decode finding reported already. The engine then batches the frame in slices."""

    def open_whole(path: Path, fmt: str, opts: ReadOptions) -> ShardData:
        try:
            df, findings, nulled = read(path, opts)
        except FormatError as exc:
            raise Unreadable(exc.reason) from None
        retyped = {c: np.unique(np.asarray(rows, dtype=np.int64)) for c, rows in nulled.items() if rows}
        return normalize_shard(ShardData(lf=df.lazy(), decode_findings=findings, retyped=retyped))

    return open_whole


def normalize_frame(lf: pl.LazyFrame) -> ShardData:
    """An in-memory frame as an opened shard: fixed-size lists as lists (see :func:`_normalize`),
    no decode findings, no line numbers. Raises :class:`Unreadable` when its schema cannot be read."""
    return _normalize(ShardData(lf=lf))


def cast_frame(df: pl.DataFrame, schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """``df`` with the columns of ``schema`` it holds cast to their dtypes there (a batch given the
    dtypes of the shard's checked schema), as the read path casts the whole shard
    (:func:`~datacheck.model.roles.cast_expr`: strictly, but a 128-bit integer column read as a
    64-bit one clipped to Int64's range). Raises polars' error of a strict cast."""
    casts = {c: t for c, t in schema.items() if c in df.schema and df.schema[c] != t}
    if not casts:
        return df
    return df.with_columns([cast_expr(c, df.schema[c], t) for c, t in casts.items()])


@dataclass(frozen=True)
class ReadOptions:
    """What a reader needs besides the path: ``dataset`` (the ``[dataset]`` config: CSV separator,
    quote, header, names), ``max_examples`` (examples of decode findings), ``string_columns`` (CSV/TSV
    columns read as strings whatever their values look like: the text columns)."""

    dataset: Any = None
    max_examples: int = 5
    string_columns: tuple[str, ...] = TEXT_NAMES


def _no_companions(path: str) -> list[str]:
    return []


def _no_context(path: Path) -> str | None:
    return None


@dataclass(frozen=True)
class Format:
    """One shard format (see the module docstring).

    Attributes:
        names: the format names it reads (the first is its own name).
        open: ``(local path, format name, options) -> ShardData``; raises :class:`Unreadable`.
        extensions: ``(extension, format name)`` pairs recognised in ``format = "auto"`` (lower case,
            compound extensions such as ``.jsonl.gz`` included).
        forced_extensions: format name -> the extensions a forced ``[dataset] format`` accepts.
        sniff: ``path -> format name or None`` for files whose extension alone does not say (a
            ``.json`` file, a ``.bin``).
        companions: ``path -> the paths of the files that belong to the shard`` (same store or
            folder; hashed before the shard's own bytes, copied with it from a store).
        open_remote: ``(fsspec filesystem, object path, URL, options) -> ShardData``: a shard in an object
            store read in place (raises :class:`Unreadable`); None: copied to a local file and
            opened by ``open``.
        rewrite: format name -> its :class:`~datacheck.formats.rewrite.Rewriter` (how ``clean``
            writes kept rows; ``mode`` ``"records"`` or ``"table"``).
        refusals: format name -> why ``clean`` cannot rewrite its shards (a name without a rewrite).
        context: ``local path -> text or None``: what reading the shard takes from files that are
            neither the shard nor its companions (litdata: its folder's ``index.json`` config, which
            decides how the chunk's items split into fields); part of the result cache's key, so an edit
            of that file is never answered with results read under the old one. None: nothing.
    """

    names: tuple[str, ...]
    open: Callable[[Path, str, ReadOptions], ShardData]
    extensions: tuple[tuple[str, str], ...] = ()
    forced_extensions: dict[str, tuple[str, ...]] = field(default_factory=dict)
    sniff: Callable[[Path], str | None] | None = None
    companions: Callable[[str], list[str]] = _no_companions
    open_remote: Callable[[Any, str, str, ReadOptions], ShardData] | None = None
    rewrite: dict[str, Rewriter] = field(default_factory=dict)
    refusals: dict[str, str] = field(default_factory=dict)
    context: Callable[[Path], str | None] = _no_context

    @property
    def name(self) -> str:
        return self.names[0]
