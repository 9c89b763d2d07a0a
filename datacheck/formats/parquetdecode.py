"""The pyarrow side of a parquet shard's batched read, without polars: the footer's sizes of the
needed columns (:func:`footer_bytes`, :func:`rows_bytes`), the record batches the engine checks
(:func:`decoded`), and a :class:`Prefetch` of the first of them.

Nothing here imports polars or numpy (pyarrow is imported when a function runs), so the command line
can start decoding a big shard's first batches (:func:`prefetch`) while it still imports polars, the
config models and the checks (0.45-0.55 s on one core): the batches the engine then asks for
(:func:`claim`, from :class:`datacheck.formats.parquet.ParquetReader`) are the same record batches,
decoded earlier.
"""
from __future__ import annotations

import contextlib
import os
import queue
import threading
from pathlib import Path
from typing import Any, Iterable, Iterator, NamedTuple

from datacheck.formats.parquetpages import scan_pages
from datacheck.model.constants import BATCH_TARGET_BYTES, ENV_BATCH_ROWS, MAX_ROW_BYTES, ONE_BATCH_TARGETS, RAMP_DIVISOR

__all__ = ["ARROW_POOL_VAR", "HEAD_BUFFER_BYTES", "PREFETCH_PIECES", "SAMPLE_ROWS", "Prefetch", "batch_plan", "claim", "decode_order", "decode_pool", "decoded", "prefetch_pieces",
           "footer_bytes", "parquet_file", "prefetch", "release", "row_floor", "rows_bytes", "sample_rows",
           "WideRowGroup", "wide_row_group"]

#: rows decoded to estimate the decoded bytes of a row when the footer alone does not tell
SAMPLE_ROWS = 1024


#: bytes a reader of a file's first rows (or of rows read again) reads at a time (``ParquetFile(buffer_size=...)``): without
#: it pyarrow reads each column chunk whole before decoding its first page; the first 1,000 rows of
#: three token lists in one 200,000-row row group (51 MiB a chunk, benchmarks/bench_peers.py's shard)
#: cost 35-44 ms CPU whole, 7 ms buffered. The engine's full read keeps whole chunks (buffered reads
#: measured no cheaper there: 3.2-3.9 vs 3.4-4.2 CPU s for big128's ten row groups)
HEAD_BUFFER_BYTES = 1 << 20


#: the environment variable that names pyarrow's default memory pool (read once, when pyarrow loads)
ARROW_POOL_VAR = "ARROW_DEFAULT_MEMORY_POOL"

_pool: list[Any] = []  # decode_pool's answer, once asked


def decode_pool() -> Any:
    """The pyarrow memory pool the reads of this module decode into: pyarrow's jemalloc pool where the
    process's default pool is mimalloc and nobody chose it (``$ARROW_DEFAULT_MEMORY_POOL`` unset:
    pyarrow >= 18's default on Linux, a library caller's process), else None (the process's default
    pool: the one the command line chose, :data:`datacheck.cli.main.ARROW_POOL_ENV`, or the one the
    user named; a pyarrow built without jemalloc). The process's default pool is never changed:
    only the buffers decoded here come from jemalloc, and go back to it when freed.

    mimalloc hands a freed batch's pages back to the system within milliseconds, so every batch of a
    big shard decodes into freshly mapped memory, and pyarrow's record reader grows each column's
    buffer by doubling (each step copied into fresh pages). jemalloc keeps freed pages for a second
    (pyarrow's build) and reuses them: ``datacheck.audit`` of the 200,000 x 256-token shard of
    benchmarks/bench_peers.py took 5.4-7.2 CPU s (3.1-4.6 s system: zeroing new pages) with mimalloc
    and 2.8-3.7 (0.6-0.9 s system) with jemalloc, three alternating runs each on the 2-core development
    machine under load. Asked once a process (pyarrow loaded)."""
    if not _pool:
        import pyarrow as pa

        pool = None
        if not os.environ.get(ARROW_POOL_VAR) and pa.default_memory_pool().backend_name == "mimalloc":
            try:
                pool = pa.jemalloc_memory_pool()
            except NotImplementedError:  # a build without jemalloc
                pool = None
        _pool.append(pool)
    return _pool[0]


def release_unused() -> None:
    """Hand the pages the decode pool (:func:`decode_pool`, else the process's default pool) keeps of
    freed buffers back to the system now (``MemoryPool.release_unused``: jemalloc's purge), for rows
    far over the batch target only: the command line's jemalloc keeps freed pages for 10 s
    (:data:`datacheck.cli.main.ARROW_POOL_ENV`) to reuse them for the next batch of the same size, but
    each read of a row of 16 million int64 tokens (128 MB) left its pages there beside the next one's
    (4 equal such rows: 1.9-2.5 GB peak RSS, 1.2 GB with those pages purged as they were freed)."""
    import pyarrow as pa

    (decode_pool() or pa.default_memory_pool()).release_unused()


def parquet_file(path: Path, footer: Any = None, partial: bool = False) -> Any:
    """``pyarrow.parquet.ParquetFile`` of ``path`` (``pre_buffer=False``, see :func:`decoded`),
    given the footer already read when there is one; ``partial``: for reads that stop early (the
    first rows, rows read again up to the last one wanted in a row group): column chunks read
    :data:`HEAD_BUFFER_BYTES` at a time. It decodes into :func:`decode_pool` (``ParquetFile`` takes
    no pool: its reader is replaced by one of that pool opened on the same file with the same
    options, after ``ParquetFile`` read the footer)."""
    import pyarrow.parquet as pq

    metadata = None if footer is None else footer.metadata
    buffer_size = HEAD_BUFFER_BYTES if partial else 0
    pf = pq.ParquetFile(path, pre_buffer=False, metadata=metadata, buffer_size=buffer_size)
    pool = decode_pool()
    if pool is not None:
        from pyarrow._parquet import ParquetReader

        reader = ParquetReader(memory_pool=pool)
        reader.open(str(path), use_memory_map=False, buffer_size=buffer_size, pre_buffer=False,
                    metadata=pf.metadata, **_parquetfile_defaults())
        pf.reader.close()
        pf.reader = reader
    return pf


_defaults: list[dict[str, Any]] = []  # _parquetfile_defaults' answer, once asked


def _parquetfile_defaults() -> dict[str, Any]:
    """The reader options whose defaults differ between ``pyarrow.parquet.ParquetFile`` and the reader it
    opens, taken from ``ParquetFile``'s signature (where this pyarrow has them), so a reader opened by
    :func:`parquet_file` decodes the same types ``ParquetFile`` would: ``arrow_extensions_enabled``
    (True in ``ParquetFile``: a UUID or JSON logical type decodes to ``arrow.uuid``/``arrow.json``,
    False in the reader: ``fixed_size_binary[16]``/``string``)."""
    if not _defaults:
        import inspect

        import pyarrow.parquet as pq

        params = inspect.signature(pq.ParquetFile).parameters
        _defaults.append({k: params[k].default for k in ("arrow_extensions_enabled",) if k in params})
    return _defaults[0]


class WideRowGroup(NamedTuple):
    """A parquet row group whose rows hold more bytes, on average, than a reader decodes in one row
    (:func:`wide_row_group`). All sizes are the footer's uncompressed bytes (``int``). A NamedTuple, not
    a dataclass: the command line imports this module on paths that never load ``dataclasses``.

    Attributes:
        group: the row group's 0-based index in the file.
        first_row: the 0-based shard row of its first row.
        rows: its rows (>= 1).
        nbytes: its uncompressed bytes (every column chunk's ``total_uncompressed_size``, summed).
        column: the top-level column whose chunks hold the most of them.
        column_bytes: that column's uncompressed bytes in the row group.
        limit: the bound, bytes a row (``[dataset] max_row_bytes``).
        expanded: ``nbytes`` counts a chunk's decoded floor (a dictionary of one entry repeated over its
            values) in place of its uncompressed bytes.
    """

    group: int
    first_row: int
    rows: int
    nbytes: int
    column: str
    column_bytes: int
    limit: int
    expanded: bool = False

    @property
    def reason(self) -> str:
        """What was refused, where, by how much, and what to do (the ``decode.unreadable`` reason)."""
        last = self.first_row + self.rows - 1
        where = f"row {self.first_row:,}" if self.rows == 1 else f"rows {self.first_row:,}-{last:,}"
        holds = "decodes to at least" if self.expanded else "holds"
        unit = " (a dictionary of one entry repeated over its values)" if self.expanded else " uncompressed"
        return (f"row group {self.group} ({where}) {holds} {self.nbytes:,} bytes{unit} for {self.rows:,} "
                f"row{'s' if self.rows != 1 else ''} ({self.nbytes // self.rows:,} bytes a row on average; column "
                f"{self.column!r}: {self.column_bytes:,} bytes), more than the {_mib(self.limit)} a row datacheck "
                f"decodes ([dataset] max_row_bytes), so it was not decoded: a row is the least a reader decodes "
                f"at once. Split such values over more rows, or raise [dataset] max_row_bytes on a machine with "
                f"several times that memory free")


def _under(path: str, name: str) -> bool:
    """Whether the leaf column ``path`` (dotted) belongs to the top-level column ``name``."""
    return path == name or path.startswith(name + ".")


def _mib(n: int) -> str:
    """``n`` bytes as ``"128 MiB"`` (whole MiB), else ``"N bytes"``."""
    return f"{n >> 20:,} MiB" if n >= 1 << 20 and n % (1 << 20) == 0 else f"{n:,} bytes"


def wide_row_group(metadata: Any, limit: int = MAX_ROW_BYTES,
                   floors: dict[tuple[int, int], int] | None = None) -> WideRowGroup | None:
    """The first row group of a parquet file whose rows hold more than ``limit`` bytes each on
    average, decided from the footer alone (``metadata``: a ``pyarrow.parquet.FileMetaData`` read
    already), before any page is read; None when there is none.

    A row group of ``n`` rows whose column chunks hold ``B`` bytes uncompressed (their
    ``total_uncompressed_size`` summed, looked at only where ``RowGroupMetaData.total_byte_size``, the
    writer's total of them, passes the bound) fails when ``B > limit * n``: its rows average more than
    ``limit`` bytes, so its largest row does (the footer's uncompressed bytes are the encoded pages; the
    decoded values take about as much or more: dictionary entries repeat, run-length encoding
    expands), and a row is the least any read decodes (pyarrow decompresses a page or a dictionary
    page whole). Row groups of 0 rows hold
    no row to decode. The column named is the one whose chunks hold the most bytes of that group.

    ``floors``: ``{(row group, leaf column): bytes}`` a column chunk decodes to at least, where that is
    more than its uncompressed bytes (:func:`~datacheck.formats.parquetpages.scan_pages`: a dictionary of
    one entry repeated over the chunk's values, a decode bomb whose footer shows a few bytes); such a
    chunk counts those bytes instead.

    Cost: one look at each row group's size and row count in the parsed footer (0.4 us a row group:
    4 us for the 10 row groups of a 1,000,000 x 128-token shard, on the loaded 2-core development machine); the column chunks are looked at only for a row group that fails. What the footer cannot
    tell: one huge value among many small rows of a row group (its average stays low) is decoded."""
    extra: dict[int, int] = {}
    for (g, j), floor in (floors or {}).items():
        if g < metadata.num_row_groups:
            extra[g] = extra.get(g, 0) + max(0, floor - metadata.row_group(g).column(j).total_uncompressed_size)
    start = 0
    for g in range(metadata.num_row_groups):
        rg = metadata.row_group(g)
        n = rg.num_rows
        if n > 0 and rg.total_byte_size + extra.get(g, 0) > limit * n:
            wide = _wide(metadata, rg, g, start, limit, floors or {})
            if wide.nbytes > limit * n:
                return wide
        start += n
    return None


def _wide(metadata: Any, rg: Any, g: int, start: int, limit: int, floors: dict[tuple[int, int], int]) -> WideRowGroup:
    """Row group ``g`` (``rg``, first row ``start``) measured by its column chunks' uncompressed bytes
    (the footer's own total only screens: a writer's total is not trusted to refuse a file), naming
    its largest top-level column."""
    top = [f.name for f in metadata.schema.to_arrow_schema()]
    sizes: dict[str, int] = {}
    for j in range(rg.num_columns):
        path = metadata.schema.column(j).path
        # the top-level field a leaf belongs to: the longest name equal to its path or prefixing it with
        # a dot (a name may hold dots itself)
        owner = max((t for t in top if _under(path, t)), key=len, default=path)
        sizes[owner] = sizes.get(owner, 0) + max(rg.column(j).total_uncompressed_size, floors.get((g, j), 0))
    column = max(sizes, key=lambda c: sizes[c]) if sizes else ""
    return WideRowGroup(group=g, first_row=start, rows=rg.num_rows, nbytes=sum(sizes.values()), column=column,
                        column_bytes=sizes.get(column, 0), limit=limit,
                        expanded=any(k[0] == g and v > rg.column(k[1]).total_uncompressed_size
                                     for k, v in floors.items()))


def footer_bytes(pf: Any, columns: list[str]) -> tuple[int, list[str]]:
    """The decoded (Arrow) bytes of those ``columns`` the footer alone sizes, and the others (in
    order). A column is sized when it is a fixed-width value or a list of them (token lists): leaf
    values (the column chunks' ``num_values``, summed over row groups; a null or empty list counts
    one) times the value width, plus the list offsets and validity bitmaps. Strings, structs and
    nested lists are not: the caller decodes the first rows of those columns only. Decoding the
    first rows of a shard stored as one row group made pyarrow decompress whole column chunks: 1.25
    s CPU on the 50M-token ``bench_sft.py`` shard (read_parquet of all of it: about 3 s), against
    microseconds here."""
    import pyarrow as pa

    md = pf.metadata
    arrow = pf.schema_arrow
    leaves: dict[str, list[int]] = {}
    for j in range(md.num_columns):
        leaves.setdefault(md.schema.column(j).path.split(".")[0], []).append(j)
    total = 0
    rest: list[str] = []
    for name in columns:
        if name not in arrow.names or len(leaves.get(name, [])) != 1:
            rest.append(name)
            continue
        t = arrow.field(name).type
        per_row = 0.125  # the validity bit of the row
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            per_row += 4 if pa.types.is_list(t) else 8
            t = t.value_type
        if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)):
            rest.append(name)
            continue
        width = 0.125 if pa.types.is_boolean(t) else t.bit_width / 8
        j = leaves[name][0]
        values = sum(md.row_group(g).column(j).num_values for g in range(md.num_row_groups))
        total += int(values * (width + 0.125) + md.num_rows * per_row)
    return total, rest


def rows_bytes(path: Path, columns: list[str], footer: Any = None) -> tuple[int, float] | None:
    """(rows, decoded bytes per row of ``columns``) of a parquet file, or None when unknown. The
    rows come from the footer; the bytes per row from the footer's value counts for fixed-width
    columns and lists of them (:func:`footer_bytes`), plus, for the other columns only, their
    decoded bytes in the first :data:`SAMPLE_ROWS` rows, fewer where the footer says those hold more than
    a batch (:func:`sample_rows`) (the footer's page sizes are of encoded pages:
    dictionary and RLE encoding make token lists look several times smaller than they decode). A
    text column beside three token lists (benchmarks/bench_peers.py's shard) decoded the lists'
    first rows too: 29 ms CPU before the first batch, the text column's alone about 1 ms.
    ``footer``: the file's footer read already (:class:`~datacheck.formats.parquet.Footer`, or any object with its
    ``metadata``; its ``floors``, when it has them, are :func:`row_floor`'s).

    The bytes per row are at least :func:`row_floor`'s over the chunks that decode to more than their
    uncompressed bytes (``footer.floors``: a one-entry dictionary), so that a batch sized by first rows
    that are null does not take the row group's later rows, each the dictionary's entry, by the
    thousand."""
    try:
        pf = footer if footer is not None else parquet_file(path, None)
        rows = pf.metadata.num_rows
        if rows == 0:
            return 0, 0.0
        floor = row_floor(pf.metadata, columns, getattr(footer, "floors", None), encoded=False)
        known, rest = footer_bytes(pf, columns)
        if not rest:
            return rows, max(floor, known / rows)
        first = next(parquet_file(path, footer, partial=True).iter_batches(
            batch_size=sample_rows(pf.metadata, rest, getattr(footer, "floors", None)), columns=rest), None)
    except Exception:  # noqa: BLE001 - the engine's read reports the problem
        return None
    if first is None or first.num_rows == 0:
        return rows, max(floor, known / rows)
    return rows, max(floor, known / rows + first.nbytes / first.num_rows)


def row_floor(metadata: Any, columns: list[str], floors: dict[tuple[int, int], int] | None = None,
              groups: Iterable[int] | None = None, encoded: bool = True) -> float:
    """Bytes a row of ``columns`` decodes to at least in the widest row group (of ``groups``, 0-based
    indices; all when None): the most, over row groups, of their ``columns``' uncompressed bytes (each column
    chunk's ``total_uncompressed_size``, or its floor in ``floors`` where that is more:
    :func:`~datacheck.formats.parquetpages.scan_pages`) over their rows; 0.0 for a file of no rows.
    ``encoded`` False: only the chunks of ``floors`` count (the others 0; none: 0.0 without a look at the
    footer): the uncompressed bytes of tiny row groups are mostly page headers and dictionaries, more
    than their rows decode to (7-row groups of token lists: 21 bytes a row against 5.3 decoded), which
    would shrink batches sized by the decoded bytes. From the footer alone (one look at each column
    chunk: about 1 us a chunk)."""
    floors = floors or {}
    if not encoded and not floors:
        return 0.0
    wanted = [j for j in range(metadata.num_columns)
              if any(_under(metadata.schema.column(j).path, c) for c in columns)]
    most = 0.0
    for g in range(metadata.num_row_groups) if groups is None else groups:
        if not 0 <= g < metadata.num_row_groups:
            continue
        rg = metadata.row_group(g)
        if rg.num_rows > 0:
            nbytes = sum(max(rg.column(j).total_uncompressed_size if encoded else 0, floors.get((g, j), 0))
                         for j in wanted)
            most = max(most, nbytes / rg.num_rows)
    return most


def sample_rows(metadata: Any, columns: list[str], floors: dict[tuple[int, int], int] | None = None) -> int:
    """Rows to decode from the file's start to size ``columns`` (:func:`rows_bytes`):
    :data:`SAMPLE_ROWS`, fewer where the footer says those rows hold more than
    :data:`BATCH_TARGET_BYTES` (rows times the first row group's uncompressed bytes of ``columns``
    over its rows: about what its rows decode to, or less), at least 1. Rows of 1 MiB images: 64 rows,
    not 1,024 (1 GiB decoded for an estimate). Columns missing from the file are not counted. ``floors``:
    chunks that decode to more than their uncompressed bytes (:func:`row_floor`): a one-entry dictionary
    of 1 MiB over every row makes 64 rows, not 1,024."""
    if metadata.num_row_groups == 0:
        return SAMPLE_ROWS
    rg = metadata.row_group(0)
    if rg.num_rows <= 0 or (not floors and rg.total_byte_size * SAMPLE_ROWS <= BATCH_TARGET_BYTES * rg.num_rows):
        return SAMPLE_ROWS  # every column of the sample's rows holds at most a batch
    per_row = row_floor(metadata, columns, floors, groups=[0])
    return SAMPLE_ROWS if per_row * SAMPLE_ROWS <= BATCH_TARGET_BYTES else max(1, int(BATCH_TARGET_BYTES // per_row))


def decode_order(pf: Any, columns: list[str]) -> list[str]:
    """``columns`` in the order to decode them: the largest first (the footer's decoded size,
    :func:`footer_bytes`, where it gives one, else the column chunks' uncompressed bytes), ties in
    the order given; ``columns`` as given when a name is missing from the file or not unique there.

    pyarrow decodes a batch's columns in parallel, handing them to its threads in the order asked;
    with the largest first, the others share the remaining threads: ``input_ids`` (int32),
    ``attention_mask`` (int8) then ``labels`` (int64) left one of two threads decoding the mask and
    then the labels while the other was done; labels first balanced them (the 1,000,000 x 128-token
    shard of benchmarks/bench_table.py decoded in batches of 40,240 rows: 2.25-2.60 s wall, threads
    1.76 + 1.04 CPU s, against 1.64-1.77 s, 1.62 + 1.46; the 200,000 x 256 one 0.78-0.80 against
    0.65-0.72 s; on the 2-core development machine)."""
    md = pf.metadata
    names = pf.schema_arrow.names
    if len(columns) < 2 or len(set(names)) != len(names) or not set(columns) <= set(names) \
            or len(set(columns)) != len(columns):
        return list(columns)
    leaves: dict[str, list[int]] = {}
    for j in range(md.num_columns):
        leaves.setdefault(md.schema.column(j).path.split(".")[0], []).append(j)
    size: dict[str, float] = {}
    for name in columns:
        known, rest = footer_bytes(pf, [name])
        size[name] = known if not rest else sum(md.row_group(g).column(j).total_uncompressed_size
                                                 for g in range(md.num_row_groups) for j in leaves.get(name, []))
    return sorted(columns, key=lambda c: -size[c])


def decode_threads(rows: int, per_row: float | None) -> bool:
    """Whether a batch of ``rows`` rows of ``per_row`` decoded bytes each (the footer's estimate,
    :func:`row_floor`; None: not known) is decoded on pyarrow's threads (``use_threads=True``): yes,
    unless the batch is predicted to hold more than :data:`BATCH_TARGET_BYTES` (rows of more than the
    target: a batch is at least one row), which is decoded in the calling thread.

    Why: pyarrow's jemalloc gives each thread an arena of its own, and the pages of a huge row's
    buffers (grown by doubling while it decodes) freed by one of pyarrow's threads stay in that thread's
    arena; ``MemoryPool.release_unused`` did not hand them back (one 128 MB row decoded on pyarrow's
    threads: 470 MB left resident in a decode thread's arena after the purge, 12 MB decoded in the
    calling thread), and the next row, decoded by another thread, faulted fresh pages beside them.
    ``datacheck audit`` of 4 rows of 16 million int64 tokens peaked at 750-1,060 MiB depending on which
    threads decoded (1,110 in a CI run on a larger machine); decoded in the calling thread, see
    tests/unit/formats/test_parquet_huge_rows_memory.py for the peaks now."""
    return per_row is None or rows * per_row <= BATCH_TARGET_BYTES


def decoded(path: Path, columns: list[str], rows: int, first: int | None = None, total: int | None = None,
            last: int | None = None, footer: Any = None, threads: bool = True) -> Iterator[Any]:
    """The parquet file's ``columns`` as pyarrow tables of ``rows`` rows, each one record batch as
    ``ParquetFile.iter_batches`` decodes it (contiguous: no copy; its batches run across row groups):

    - ``first``: the first ``first`` rows come first on their own, decoded by a second reader (so the
      engine's checks start after a short decode); the first piece of ``rows`` is then handed out from
      row ``first`` on (a zero-copy slice: the first rows are decoded twice, 1/8 of a batch);
    - ``total`` (the file's rows) and ``last``: the final piece is cut in two zero-copy slices so that
      the final batch holds at most ``last`` rows (after the decode's end only a short batch is left
      to check).

    ``footer``: the file's footer read already (:class:`~datacheck.formats.parquet.Footer`, or any object with its
    ``metadata``).

    The columns are decoded in :func:`decode_order` (pyarrow's threads take them in the order asked) and
    handed out in the order of ``columns``.

    The columns are decoded on pyarrow's threads (``use_threads=True``) also where the process has one
    core to itself (a pool worker): decoded in the calling thread instead, a 5,000 x 256-token shard
    of three token lists (benchmarks/bench_table.py's ``f100``) took as much user time but faulted its
    buffers in fresh memory every time (9-11k page faults and 15-19 ms of system time a shard
    against 0.2-1k and 1-3 ms, the CLI's jemalloc settings), and the CLI's audit of ``f100`` took 9.24
    CPU s against 7.62 (medians of 4, one run; the 2-core development machine under load).

    Decoding whole batches with pyarrow's threads costs no more than pieces of 1/8 (1.45 vs 1.56 CPU
    s for the 1 GiB x 128 shard of benchmarks/bench_audit.py), and
    joining pieces into a batch (``combine_chunks``) cost 33 ms a 38,917 x 128 batch; a batch of
    several chunks cost the checks more (0.9 CPU s on that shard).
    """
    import pyarrow as pa

    # pre_buffer=False: with pyarrow's default (True) the reader keeps every row group's
    # pre-buffered column chunks allocated until the file is closed, so memory grew with the
    # shard (pyarrow.total_allocated_bytes 672 MiB after a 4 GiB shard; 19 MiB without it).
    order = decode_order(footer if footer is not None else parquet_file(path, None), columns)

    def table(rb: Any) -> Any:  # the columns back in the order asked (zero-copy)
        t = pa.Table.from_batches([rb])
        return t if order == columns else t.select(columns)

    done = 0
    if first:
        head = next(parquet_file(path, footer, partial=True).iter_batches(
            batch_size=first, columns=order, use_threads=threads), None)
        if head is None:
            return
        done = head.num_rows
        t = table(head)
        del head
        yield t
        del t  # not held while the next batch decodes
    skip = done
    for rb in parquet_file(path, footer).iter_batches(batch_size=rows, columns=order, use_threads=threads):
        t = table(rb)
        del rb  # only the table (its buffers) is held from here on: dropped below before the next decode
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
        del t
        done += n


#: tables a :class:`Prefetch` decodes at most before a read takes it: the ramp's short first batch
#: and three whole ones (about 3.1 x :data:`BATCH_TARGET_BYTES` held while the engine holds no batch;
#: once taken, it stops after the table it is decoding and the engine's own decode thread goes on,
#: one ahead, as without a prefetch). The command line imports for 0.45-0.55 s on one core before
#: the engine asks (longer on a loaded machine), while one whole 64 MiB batch of the 200,000 x
#: 256-token shard of benchmarks/bench_table.py decodes in 0.11-0.17 s (its first batch and one
#: whole batch were decoded 0.33-0.35 s after the start, on the 2-core development machine)
PREFETCH_PIECES = 4


def prefetch_pieces(rows: int, first: int | None, per_row: float, pieces: int = PREFETCH_PIECES) -> int:
    """The tables a :class:`Prefetch` decodes before a read takes it: at most ``pieces``, and no more
    than the ramp's first batch and ``pieces - 1`` whole batches of :data:`BATCH_TARGET_BYTES` hold
    (3.125 targets, 200 MiB: what :data:`PREFETCH_PIECES` was sized by), each table's bytes predicted
    from the footer (``rows`` or ``first`` rows of ``per_row`` decoded bytes); at least one. Batches of
    the target's size (every shard whose rows are smaller than a target) get all ``pieces``; a shard of
    rows over a target (a batch is at least one row: 4 rows of 16 million int64 tokens, 128 MB each) gets
    one table, not four (the prefetch held 512 MB of them beside the engine's own read: 1.25 GB peak RSS
    against 0.9 GB for the same audit through ``datacheck.audit``, which has no prefetch)."""
    budget = (pieces - 1 + 1 / RAMP_DIVISOR) * BATCH_TARGET_BYTES
    held, count = 0.0, 0
    for k in range(pieces):
        size = (first if k == 0 and first else rows) * per_row
        if count and held + size > budget:
            break
        held, count = held + size, count + 1
    return max(1, count)

_DONE = object()  # the read has no more tables
_HANDOVER = object()  # the prefetch thread stopped: the consumer goes on with the read itself


def _identity(path: Path) -> tuple[int, int, int, int]:
    """What names one version of a file: device, inode, size, modification time (ns). Raises OSError."""
    st = os.stat(path)
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


class _Meta:
    """A footer read once (what :func:`parquet_file` and :func:`footer_bytes` take): ``metadata``, ``schema_arrow``."""

    def __init__(self, pf: Any):
        self.metadata = pf.metadata
        self.schema_arrow = pf.schema_arrow
        #: chunks that decode to more than their uncompressed bytes (:func:`row_floor`)
        self.floors: dict[tuple[int, int], int] = {}
        #: decoded bytes a row of every column (:func:`rows_bytes`), once :func:`batch_plan` sized them
        self.per_row: float | None = None


def batch_plan(path: Path) -> tuple[list[str], int, int | None, int, Any] | None:
    """How the engine reads a parquet shard whose every column is checked: (columns, rows a batch,
    rows of the ramp's first batch or None, the file's rows, the footer), as
    :func:`datacheck.formats.batches.batch_rows` and :meth:`datacheck.formats.parquet.ParquetReader.batches`
    decide them (the footer's sizes, :func:`rows_bytes`; :data:`BATCH_TARGET_BYTES` a batch; the first
    holds 1/:data:`RAMP_DIVISOR` of a batch). None when the shard is read as one batch (at most
    :data:`ONE_BATCH_TARGETS` targets), when ``$DATACHECK_BATCH_ROWS`` forces the batches, when the
    footer cannot be read, or when a row group's rows average more than the default ``[dataset]
    max_row_bytes`` (:func:`wide_row_group`: the open refuses the shard; the prefetch starts before
    the config is read, and decodes nothing of such a file)."""
    import pyarrow.parquet as pq

    if os.environ.get(ENV_BATCH_ROWS, "").strip():
        return None
    try:
        with pq.ParquetFile(path, pre_buffer=False) as pf:
            meta = _Meta(pf)
    except Exception:  # noqa: BLE001 - the engine's own read says why
        return None
    scan = scan_pages(path, meta.metadata, MAX_ROW_BYTES, look=False)
    meta.floors = scan.floors
    if scan.big is not None or wide_row_group(meta.metadata, MAX_ROW_BYTES, scan.floors) is not None:
        return None  # refused at open (the default bound): nothing decoded
    columns = list(meta.schema_arrow.names)
    sized = rows_bytes(path, columns, meta)
    if sized is None:
        return None
    n, per_row = sized
    if per_row <= 0 or n * per_row <= ONE_BATCH_TARGETS * BATCH_TARGET_BYTES:
        return None
    meta.per_row = per_row
    rows = max(1, int(BATCH_TARGET_BYTES // per_row))
    first = max(1, rows // RAMP_DIVISOR) if n > rows else None
    return columns, rows, first, n, meta


class Prefetch:
    """The first :data:`PREFETCH_PIECES` tables (fewer where they hold more than 3.125 batch targets:
    :func:`prefetch_pieces`) of a parquet shard's batched read (:func:`decoded` with
    the batch sizes of :func:`batch_plan`: every column), decoded in a thread of their own
    (``datacheck-parquet-prefetch``) from :meth:`start` on, while the caller does other work.

    :meth:`take` hands the read over when it is the one asked for (same columns in the same order,
    batch rows, first and final batch rows, file rows; :func:`claim` stops the thread after the table
    it is decoding): the decoded tables, then the rest of the same read, decoded by whoever iterates
    (the tables are those :func:`decoded` gives; an error the prefetch met is raised where the plain
    read would raise it). :meth:`close` stops the thread after the table it is decoding, joins it and
    drops the read (its file closes with it): nothing of it outlives the call."""

    def __init__(self, path: Path | str, pieces: int = PREFETCH_PIECES):
        self.path = Path(path)
        self.identity = _identity(self.path)
        self.pieces = pieces
        #: (columns, rows, first, total, last) of the read, once the footer was read; None: no read
        self.key: tuple[tuple[str, ...], int, int | None, int, int | None] | None = None
        #: a claim asked for a read (:func:`claim`): the prefetch serves no later one
        self.asked = False
        #: the read was handed over (:meth:`take`)
        self.taken = False
        self._planned = threading.Event()
        self._stop = threading.Event()
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._read: Iterator[Any] | None = None
        self._thread = threading.Thread(target=self._run, name="datacheck-parquet-prefetch", daemon=True)

    def start(self) -> Prefetch:
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            try:
                plan = batch_plan(self.path)
                count = 0
                if plan is not None:
                    columns, rows, first, total, meta = plan
                    count = prefetch_pieces(rows, first, meta.per_row or 0.0, self.pieces)
                    self._read = decoded(self.path, columns, rows, first, total, first, meta,
                                         threads=decode_threads(rows, meta.per_row))
                    self.key = (tuple(columns), rows, first, total, first)
            finally:
                self._planned.set()
            for _ in range(count if self._read is not None else 0):
                if self._stop.is_set():
                    return
                item = next(self._read, _DONE)  # type: ignore[arg-type]
                self._q.put(item)
                if item is _DONE:
                    return
        except BaseException as exc:  # noqa: BLE001 - raised where the plain read would raise it
            self._q.put(exc)
        finally:
            self._q.put(_HANDOVER)

    def matches(self, columns: list[str], rows: int, first: int | None, total: int | None,
                last: int | None) -> bool:
        """Whether this is the read of ``columns`` in batches of ``rows`` (``first``, ``total``, ``last`` as
        :func:`decoded` takes them); waits for the footer to be read."""
        self._planned.wait()
        return self.key == (tuple(columns), rows, first, total, last)

    def take(self) -> Iterator[Any]:
        """The read's tables in order (see the class docstring); once."""
        while True:
            item = self._q.get()
            if item is _HANDOVER:
                break
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
        self._thread.join()
        if self._read is not None:
            yield from self._read

    def close(self) -> None:
        """Stop and join the thread; a read not taken is dropped (its tables and open file freed)."""
        self._stop.set()
        self._thread.join()
        if not self.taken:
            if self._read is not None:
                self._read.close()  # type: ignore[attr-defined]
            self._read = None
            while not self._q.empty():
                self._q.get_nowait()


_started: dict[tuple[int, int, int, int], Prefetch] = {}
_started_lock = threading.Lock()


@contextlib.contextmanager
def prefetch(path: Path | str, pieces: int = PREFETCH_PIECES) -> Iterator[Prefetch | None]:
    """Start a :class:`Prefetch` of the parquet file ``path`` for the duration of the ``with`` block,
    so that the engine's first :func:`claim` of that file's batches takes it; closed (thread joined,
    an untaken read dropped) when the block ends, however it ends. Yields None where ``path`` cannot
    be read (the audit says why) or is prefetched already."""
    try:
        p = Prefetch(path, pieces)
    except OSError:
        yield None
        return
    with _started_lock:
        if p.identity in _started:
            p = None  # type: ignore[assignment]
        else:
            _started[p.identity] = p
    if p is None:
        yield None
        return
    try:
        yield p.start()
    finally:
        with _started_lock:
            _started.pop(p.identity, None)
        p.close()


def claim(path: Path, columns: list[str], rows: int, first: int | None = None, total: int | None = None,
          last: int | None = None) -> Iterator[Any] | None:
    """The tables of :func:`decoded` for these arguments from the :class:`Prefetch` started for this
    file (the same device, inode, size and modification time) when it is that read; None otherwise
    (nothing started, another version of the file, other columns or batch sizes: that prefetch is
    closed at once, so its thread and memory do not wait for the end of the ``with`` block). A
    prefetch is claimed at most once."""
    if not _started:
        return None
    try:
        ident = _identity(path)
    except OSError:
        return None
    with _started_lock:
        p = _started.get(ident)
        if p is None or p.asked:
            return None
        p.asked = True
    if not p.matches(columns, rows, first, total, last):
        p.close()
        return None
    p.taken = True
    p._stop.set()  # hand over after the table in progress: the engine's decode thread goes on
    return p.take()


def release(path: Path) -> None:
    """Stop the :class:`Prefetch` started for this file (when one is and no read took it), without
    waiting: the audit will not read its batches (the result cache answered the shard). Its thread
    ends after the table it is decoding; the tables it decoded are dropped now; the end of the
    :func:`prefetch` block joins the thread and closes the read."""
    if not _started:
        return
    try:
        ident = _identity(path)
    except OSError:
        return
    with _started_lock:
        p = _started.get(ident)
        if p is None or p.asked:
            return
        p.asked = True
    p._stop.set()
    while not p._q.empty():
        p._q.get_nowait()
