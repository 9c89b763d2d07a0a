"""What a parquet file's page headers say before any page is decompressed: the pages too big to decode
(:func:`scan_pages`: a value never spans pages, and a page is decompressed whole, so a page over
``[dataset] max_row_bytes`` holds what no bounded read can decode) and the bytes a dictionary of one
entry expands to (a few bytes on disk that decode to the entry once a row: a decode bomb the footer's
uncompressed sizes do not show).

The footer (``pyarrow.parquet.FileMetaData``) gives each column chunk's byte range, its
uncompressed bytes and its values; each page begins with a Thrift compact-protocol ``PageHeader``
(parquet-format's ``parquet.thrift``): its type (data, dictionary, data v2), uncompressed and
compressed sizes, and values (a dictionary page: its entries). Only those headers are read here (a
few dozen bytes each, seeked to one after the other; a binary field such as a page's statistics is
seeked over, never read), and only for the chunks the footer cannot clear:

- a chunk whose uncompressed bytes exceed the bound: every page header (a chunk within the bound holds
  no page over it);
- a dictionary-encoded ``BYTE_ARRAY`` chunk whose statistics do not show two distinct values (no
  min/max, or min == max): its dictionary page's header (one entry of ``L`` bytes, a PLAIN entry's
  4-byte length prefix not counted, repeated over the chunk's non-null values);
- a chunk of a list column whose values decode to more than the bound (the footer's ``num_values``
  times the value's Arrow width): a row of more is possible there, and neither the footer nor pyarrow
  (no page index) says which row holds what. Each data page's header and the first bytes of its
  repetition levels are read (the page decompressed only that far where the codec allows: all but
  BROTLI, whose pages are decompressed whole, one at a time): a page
  whose levels are one run above 0 starts no row; only where the pages a row may span add up to more
  than the bound are the chunk's levels read whole, page by page, and counted into rows, naming the
  first row over the bound (:class:`LongRow`: a list of 10**8 int32 in row 500 of 1,000, 4.6 MB on
  disk, was decoded at a 2.7 GB peak with no finding).

Nothing here imports polars or numpy (the command line's prefetch plans with it before they load).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, BinaryIO, Callable, NamedTuple

__all__ = ["MAX_PAGES_WALKED", "BigPage", "LongRow", "PageScan", "scan_pages"]

#: page headers read at most in one column chunk (a chunk of millions of tiny pages is walked no
#: further: it holds no big page in the pages walked, and pyarrow decodes it page by page)
MAX_PAGES_WALKED = 100_000

#: Thrift compact-protocol nesting read at most (a PageHeader nests 3 deep: header, data page
#: header, statistics)
_MAX_DEPTH = 16
#: elements of one Thrift list, set or map read at most (a PageHeader holds none but in statistics' and
#: encryption's optional fields: a few); and fields of one struct
_MAX_ELEMENTS = 1 << 12

_DATA, _DICTIONARY, _DATA_V2 = 0, 2, 3
_KINDS = {_DATA: "data", _DICTIONARY: "dictionary", _DATA_V2: "data (v2)"}


class _Bad(Exception):
    """A page header that does not parse (pyarrow's own read then says why)."""


class _Header(NamedTuple):
    kind: int
    uncompressed: int
    compressed: int
    values: int  # data page: values (nulls included); dictionary page: entries
    rows: int | None  # data page v2: rows; else None
    size: int  # bytes of the header itself
    encoding: int  # the values' encoding (0 PLAIN, 2 PLAIN_DICTIONARY, 8 RLE_DICTIONARY, ...)
    levels: int  # data page v2: bytes of its repetition and definition levels (never compressed)
    compressed_values: bool  # data page v2: whether its values are compressed (else True)
    rep_levels: int = 0  # data page v2: bytes of its repetition levels (the first of its levels)


def _byte(f: BinaryIO) -> int:
    b = f.read(1)
    if not b:
        raise _Bad("cut")
    return b[0]


def _varint(f: BinaryIO) -> int:
    out = shift = 0
    for _ in range(10):
        x = _byte(f)
        out |= (x & 0x7F) << shift
        if not x & 0x80:
            return out
        shift += 7
    raise _Bad("varint")


def _zigzag(n: int) -> int:
    return (n >> 1) ^ -(n & 1)


def _skip(f: BinaryIO, t: int, depth: int, element: bool = False) -> None:
    """Pass over a value of compact type ``t`` (``element``: inside a list, where a bool takes a byte)."""
    if depth > _MAX_DEPTH:
        raise _Bad("depth")
    if t in (1, 2):
        if element:
            _byte(f)
    elif t == 3:
        _byte(f)
    elif t in (4, 5, 6):
        _varint(f)
    elif t == 7:
        if len(f.read(8)) != 8:
            raise _Bad("cut")
    elif t == 8:
        f.seek(_varint(f), 1)
    elif t in (9, 10):
        h = _byte(f)
        size, et = h >> 4, h & 0x0F
        if size == 15:
            size = _varint(f)
        if size > _MAX_ELEMENTS:
            raise _Bad("list")
        for _ in range(size):
            _skip(f, et, depth + 1, element=True)
    elif t == 11:
        size = _varint(f)
        if size > _MAX_ELEMENTS:
            raise _Bad("map")
        if size:
            kv = _byte(f)
            for _ in range(size):
                _skip(f, kv >> 4, depth + 1, element=True)
                _skip(f, kv & 0x0F, depth + 1, element=True)
    elif t == 12:
        _struct(f, depth + 1)
    else:
        raise _Bad(f"type {t}")


def _struct(f: BinaryIO, depth: int) -> dict[int, Any]:
    """A struct's i32/i64 fields and nested structs by field id (the others passed over)."""
    if depth > _MAX_DEPTH:
        raise _Bad("depth")
    out: dict[int, Any] = {}
    fid = 0
    for _ in range(_MAX_ELEMENTS):
        h = _byte(f)
        if h == 0:
            return out
        delta, t = h >> 4, h & 0x0F
        fid = fid + delta if delta else _zigzag(_varint(f))
        if t in (5, 6):
            out[fid] = _zigzag(_varint(f))
        elif t in (1, 2):
            out[fid] = t == 1
        elif t == 12:
            out[fid] = _struct(f, depth + 1)
        else:
            _skip(f, t, depth)
    raise _Bad("fields")


def _header(f: BinaryIO, at: int) -> _Header:
    f.seek(at)
    h = _struct(f, 0)
    kind, unc, comp = h.get(1), h.get(2), h.get(3)
    if not isinstance(kind, int) or not isinstance(unc, int) or not isinstance(comp, int) or unc < 0 or comp < 0:
        raise _Bad("sizes")
    sub = h.get(5) if kind == _DATA else h.get(7) if kind == _DICTIONARY else h.get(8) if kind == _DATA_V2 else None
    sub = sub if isinstance(sub, dict) else {}
    values, encoding = sub.get(1, 0), sub.get(4 if kind == _DATA_V2 else 2, -1)
    rows = sub.get(3) if kind == _DATA_V2 else None
    levels = sub.get(5, 0) + sub.get(6, 0) if kind == _DATA_V2 else 0
    if not all(isinstance(v, int) and v >= 0 for v in (values, levels)) or not isinstance(encoding, int):
        raise _Bad("page header")
    rep_bytes = sub.get(6, 0) if kind == _DATA_V2 else 0
    if not isinstance(rep_bytes, int) or rep_bytes < 0:
        raise _Bad("page header")
    return _Header(kind, unc, comp, values, rows, f.tell() - at, encoding, levels, bool(sub.get(7, True)), rep_bytes)


class BigPage(NamedTuple):
    """A value of more than the bound in a page (:func:`scan_pages`). Sizes in bytes (``int``).

    Attributes:
        group: the row group's 0-based index; ``group_first``/``group_rows``: its first shard row and rows.
        column: the leaf column's dotted path.
        page: the page's 0-based index in its column chunk; ``kind``: data, dictionary or data (v2).
        nbytes: the page's uncompressed bytes; ``values``: its values (nulls included; a dictionary: entries).
        value: the 0-based index of the value among the page's stored values (nulls hold none; a
            dictionary: the entry); ``value_bytes``: its bytes.
        first_row, rows: the shard rows the page holds when known (a flat column, or a v2 page after
            flat ones), else None.
        limit: the bound (``[dataset] max_row_bytes``).
    """

    group: int
    group_first: int
    group_rows: int
    column: str
    page: int
    kind: str
    nbytes: int
    values: int
    value: int
    value_bytes: int
    first_row: int | None
    rows: int | None
    limit: int

    @property
    def reason(self) -> str:
        """What was refused, where, and what to do (the ``decode.unreadable`` reason)."""
        last = self.group_first + self.group_rows - 1
        where = f"row {self.group_first:,}" if self.group_rows == 1 else f"rows {self.group_first:,}-{last:,}"
        if self.kind == "dictionary":
            what = f"dictionary entry {self.value:,}, referenced by its rows,"
        elif self.first_row is not None and self.rows:
            held = (f"row {self.first_row:,}" if self.rows == 1 else
                    f"one of rows {self.first_row:,}-{self.first_row + self.rows - 1:,}")
            what = f"a value of {held}"
        else:
            what = "a value of one of its rows"
        return (f"row group {self.group} ({where}), column {self.column!r}: {what} holds {self.value_bytes:,} "
                f"bytes ({self.kind} page {self.page}: {self.nbytes:,} bytes uncompressed), more than the "
                f"{_mib(self.limit)} a row datacheck decodes ([dataset] max_row_bytes), so the row group was not "
                f"decoded: a row is the least a reader decodes at once. Split such values over more rows, or "
                f"raise [dataset] max_row_bytes on a machine with several times that memory free")


class LongRow(NamedTuple):
    """A row of a list column whose values decode to more than the bound (:func:`scan_pages`), found from
    its pages' repetition levels. Sizes in bytes (``int``).

    Attributes:
        group: the row group's 0-based index; ``group_first``/``group_rows``: its first shard row and rows.
        column: the leaf column's dotted path.
        row: the 0-based shard row, or None where only the screen ran (``look`` False: a row may be long).
        entries: its level entries (values, null and empty lists each one) as far as counted.
        width: the bytes a value decodes to at least (the physical type's Arrow width; a string: its
            4-byte offset).
        limit: the bound (``[dataset] max_row_bytes``).
    """

    group: int
    group_first: int
    group_rows: int
    column: str
    row: int | None
    entries: int
    width: float
    limit: int

    @property
    def reason(self) -> str:
        """What was refused, where, and what to do (the ``decode.unreadable`` reason)."""
        last = self.group_first + self.group_rows - 1
        where = f"row {self.group_first:,}" if self.group_rows == 1 else f"rows {self.group_first:,}-{last:,}"
        which = f"row {self.row:,}" if self.row is not None else "a row"
        return (f"row group {self.group} ({where}), column {self.column!r}: {which} holds {self.entries:,} values "
                f"(at least {int(self.entries * self.width):,} bytes decoded), more than the {_mib(self.limit)} a "
                f"row datacheck decodes ([dataset] max_row_bytes), so the row group was not decoded: a row is the "
                f"least a reader decodes at once. Split such rows, or raise [dataset] max_row_bytes on a machine "
                f"with several times that memory free")


class PageScan(NamedTuple):
    """What :func:`scan_pages` found.

    Attributes:
        big: the first value over the bound (row group order, then column order), or the first row of a list
            column whose values decode to more (:class:`LongRow`), or None.
        floors: ``{(row group, leaf column index): bytes}``: a lower bound of the chunk's decoded
            values where it exceeds the chunk's uncompressed bytes (a dictionary of one entry of ``L``
            bytes over ``V`` non-null values: ``V * L``); chunks not listed decode to at least their
            uncompressed bytes, as far as known.
    """

    big: BigPage | LongRow | None
    floors: dict[tuple[int, int], int]


def _mib(n: int) -> str:
    return f"{n >> 20:,} MiB" if n >= 1 << 20 and n % (1 << 20) == 0 else f"{n:,} bytes"


def _start(col: Any) -> int:
    """The chunk's first byte: its dictionary page when it has one (written before the data pages)."""
    d = col.dictionary_page_offset
    if col.has_dictionary_page and d is not None and 0 < d < col.data_page_offset:
        return int(d)
    return int(col.data_page_offset)


def _maybe_one_entry(col: Any) -> bool:
    """Whether a dictionary-encoded BYTE_ARRAY chunk may hold a dictionary of one entry: its
    statistics do not show two distinct values (none, no min/max, or min == max)."""
    if col.physical_type != "BYTE_ARRAY" or not col.has_dictionary_page:
        return False
    st = col.statistics
    if st is None or not st.has_min_max:
        return True
    try:
        return bool(st.min == st.max)
    except Exception:  # noqa: BLE001 - statistics that do not decode: not known
        return True


def scan_pages(path: Path | str, metadata: Any, limit: int, look: bool = True,
               opener: Callable[[], BinaryIO] | None = None) -> PageScan:
    """The page headers of the parquet file ``path`` that its footer (``metadata``:
    ``pyarrow.parquet.FileMetaData``) cannot clear (see the module docstring), and the values of its
    pages over ``limit``: the first ``BYTE_ARRAY`` value of more than ``limit`` bytes (``big``) and
    the decoded floor of each chunk whose dictionary holds one entry (``floors``).

    A page of more than ``limit`` uncompressed bytes may hold such a value or many smaller ones
    (pyarrow's writer checks a page's size every 1,024 values: 1,024 images of 200 KiB make a page of
    200 MiB); its PLAIN values (a dictionary page, a PLAIN data page of a ``BYTE_ARRAY`` column) are
    decompressed (the page's bytes, as pyarrow's own read would) and their 4-byte lengths read, no
    value copied (``look`` False: not decompressed; the first such page is ``big`` itself, with ``value``
    -1 and ``value_bytes`` its bytes: the prefetch, which decodes nothing of a file that may be
    refused, and must not decompress a page the open decompresses again at the same time).
    Other encodings (delta, byte stream split) and LZO pages are not looked into: pyarrow decodes them
    as before.

    ``opener``: opens the file where ``path`` is not a local file (an object in a store: a file object
    of the store's filesystem whose reads are ranged requests, so only the page headers and the bytes
    looked into are fetched, never the whole object); its errors (and any read error then) are raised,
    never taken for a clean file.

    A header that does not parse, a chunk whose range leaves the file, or a local file that cannot be
    opened ends the walk of that chunk (or of the file) with nothing found there: pyarrow's read then
    says what is wrong. Cost: nothing for a file whose chunks are within ``limit`` and whose string
    chunks' statistics show two values; else one small read per page header of a big chunk (a 500 MiB
    chunk of pyarrow's 1 MiB pages: 500 headers), one per dictionary page looked at, and the
    decompression of each page over ``limit``."""
    floors: dict[tuple[int, int], int] = {}
    todo = _candidates(metadata, limit)
    if not todo:
        return PageScan(None, floors)
    try:
        f = opener() if opener is not None else open(path, "rb", buffering=1 << 16)
    except OSError:
        if opener is not None:
            raise
        return PageScan(None, floors)
    with f:
        try:
            size = f.seek(0, 2)
        except OSError:
            if opener is not None:
                raise
            return PageScan(None, floors)
        for g, j, first, n, big, one, long in todo:
            col = metadata.row_group(g).column(j)
            start = _start(col)
            end = start + int(col.total_compressed_size)
            if start < 0 or end > size:
                continue
            try:
                if big:
                    found = _walk(f, start, end, metadata, col, g, j, first, n, limit, look)
                    if found is not None:
                        return PageScan(found, floors)
                if long:
                    row = _long_row(f, start, end, metadata, col, g, j, first, n, limit, look)
                    if row is not None:
                        return PageScan(row, floors)
                if one:
                    floor = _one_entry_floor(f, start, end, col)
                    if floor > col.total_uncompressed_size:
                        floors[(g, j)] = floor
            except OSError:
                if opener is not None:  # a store's read that failed: never a clean file
                    raise
                continue
            except (_Bad, ValueError, OverflowError):
                continue
    return PageScan(None, floors)


#: bytes a value of each physical type decodes to at least in Arrow (a string or binary value: its 4-byte
#: offset; a fixed-length one: its length, from the schema)
_WIDTH = {"BOOLEAN": 0.125, "INT32": 4, "INT64": 8, "INT96": 12, "FLOAT": 4, "DOUBLE": 8, "BYTE_ARRAY": 4}


def _width(leaf: Any) -> float:
    """Bytes a value of the leaf column ``leaf`` (``pyarrow.parquet.ColumnSchema``) decodes to at least."""
    if leaf.physical_type == "FIXED_LEN_BYTE_ARRAY":
        return float(max(1, int(getattr(leaf, "length", 1) or 1)))
    return float(_WIDTH.get(leaf.physical_type, 1))


def _candidates(metadata: Any, limit: int) -> list[tuple[int, int, int, int, bool, bool, bool]]:
    """(row group, leaf column, the group's first row, its rows, big, one, long) of the chunks to look
    into, from the footer alone: ``big``, a chunk of more than ``limit`` uncompressed bytes (looked for only
    in row groups of more: the chunks add up to the group's total); ``one``, a dictionary-encoded
    ``BYTE_ARRAY`` chunk whose statistics do not show two values (:func:`_maybe_one_entry`); ``long``, a
    chunk of a list column (a repeated leaf) whose values decode to more than ``limit`` (``num_values``
    times :func:`_width`: a row over ``limit`` is possible there, and its footer may show a few MB: a list
    of 10**8 small ints, dictionary encoded, 88 MB uncompressed and 4.6 MB on disk, decodes to 400 MB).
    A token shard (integer columns) of row groups within ``limit`` costs one look at each row group."""
    schema = metadata.schema
    texts = [j for j in range(metadata.num_columns) if schema.column(j).physical_type == "BYTE_ARRAY"]
    lists = {j: _width(schema.column(j)) for j in range(metadata.num_columns)
             if schema.column(j).max_repetition_level > 0}
    out: list[tuple[int, int, int, int, bool, bool, bool]] = []
    first = 0
    for g in range(metadata.num_row_groups):
        rg = metadata.row_group(g)
        n = rg.num_rows
        wide = rg.total_byte_size > limit  # the writer's total only screens: every chunk is looked at then
        for j in range(rg.num_columns) if wide else sorted(set(texts) | set(lists)):
            col = rg.column(j)
            big = wide and col.total_uncompressed_size > limit
            one = j in texts and _maybe_one_entry(col)
            long = j in lists and col.num_values * lists[j] > limit
            if big or one or long:
                out.append((g, j, first, n, big, one, long))
        first += n
    return out


#: the footer's codec names -> ``pyarrow.Codec``'s (LZ4: Hadoop-framed blocks of LZ4, :func:`_hadoop_lz4`;
#: LZO has none)
_CODECS = {"SNAPPY": "snappy", "GZIP": "gzip", "BROTLI": "brotli", "ZSTD": "zstd", "LZ4_RAW": "lz4_raw",
           "LZ4": "lz4_raw"}


def _hadoop_lz4(pa: Any, data: memoryview, size: int) -> Any:
    """Parquet's deprecated ``LZ4`` pages as Arrow writes and reads them: Hadoop's framing (blocks of a
    4-byte big-endian decompressed size, a 4-byte big-endian compressed size, then LZ4 raw bytes), else
    one LZ4 raw block (older writers). Raises what ``pyarrow.Codec`` raises, or ValueError."""
    codec = pa.Codec("lz4_raw")
    parts: list[Any] = []
    pos = got = 0
    try:
        while pos < data.nbytes:
            if pos + 8 > data.nbytes:
                raise ValueError("cut")
            out_n = int.from_bytes(data[pos:pos + 4], "big")
            in_n = int.from_bytes(data[pos + 4:pos + 8], "big")
            if pos + 8 + in_n > data.nbytes or got + out_n > size:
                raise ValueError("not Hadoop framing")
            parts.append(codec.decompress(data[pos + 8:pos + 8 + in_n], decompressed_size=out_n))
            pos, got = pos + 8 + in_n, got + out_n
        if got != size:
            raise ValueError("not Hadoop framing")
    except (pa.ArrowException, ValueError):
        return codec.decompress(data, decompressed_size=size)
    return parts[0] if len(parts) == 1 else pa.py_buffer(b"".join(memoryview(p) for p in parts))


def _walk(f: BinaryIO, start: int, end: int, metadata: Any, col: Any, g: int, j: int, first: int, n: int,
          limit: int, look: bool = True) -> BigPage | None:
    """Every page header of one chunk; the first value over ``limit`` in its pages over ``limit``, or None."""
    leaf = metadata.schema.column(j)
    flat = leaf.max_repetition_level == 0
    at, row, page = start, 0, 0
    known = True  # the rows of the pages so far are known (a flat column, or v2 pages)
    while at < end and page < MAX_PAGES_WALKED:
        h = _header(f, at)
        data = h.kind in (_DATA, _DATA_V2)
        rows = (h.values if flat else h.rows) if data else 0
        if h.uncompressed > limit and col.physical_type == "BYTE_ARRAY" and h.encoding in (0, 2):
            got = _largest(f, at + h.size, h, col.compression, leaf, limit) if look else (-1, h.uncompressed)
            if got is not None:
                holds = data and known and rows is not None
                return BigPage(group=g, group_first=first, group_rows=n, column=leaf.path, page=page,
                               kind=_KINDS.get(h.kind, str(h.kind)), nbytes=h.uncompressed, values=h.values,
                               value=got[0], value_bytes=got[1], first_row=first + row if holds else None,
                               rows=rows if holds else None, limit=limit)
        if data:
            if rows is None:
                known = False
            else:
                row += rows
        at += h.size + h.compressed
        page += 1
    return None


def _largest(f: BinaryIO, at: int, h: _Header, codec: str, leaf: Any, limit: int) -> tuple[int, int] | None:
    """(index, bytes) of the first PLAIN ``BYTE_ARRAY`` value of more than ``limit`` bytes in the page
    whose body starts at ``at``, or None (none, or a codec this pyarrow cannot decompress). The body is
    decompressed whole (as pyarrow's read does); a value is only its 4-byte length, read in place."""
    import struct

    f.seek(at)
    body = f.read(h.compressed)
    if len(body) != h.compressed:
        raise _Bad("cut")
    skip = h.levels if h.kind == _DATA_V2 else 0
    compressed = codec != "UNCOMPRESSED" and (h.kind != _DATA_V2 or h.compressed_values)
    if compressed:
        name = _CODECS.get(codec)
        if name is None:
            return None
        import pyarrow as pa

        try:  # a pyarrow Buffer read in place (bytes would copy it)
            if codec == "LZ4":
                values: Any = memoryview(_hadoop_lz4(pa, memoryview(body)[skip:], h.uncompressed - skip))
            else:
                values = memoryview(pa.Codec(name).decompress(memoryview(body)[skip:],
                                                              decompressed_size=h.uncompressed - skip))
        except (pa.ArrowException, ValueError):
            raise _Bad("decompress") from None
        del body
    else:
        values = memoryview(body)[skip:]
    pos = 0
    if h.kind == _DATA:  # v1: the levels come first, each a 4-byte length and its bytes
        for present in (leaf.max_repetition_level > 0, leaf.max_definition_level > 0):
            if present:
                if pos + 4 > values.nbytes:
                    raise _Bad("levels")
                pos += 4 + struct.unpack_from("<I", values, pos)[0]
    count = values.nbytes
    k = 0
    while pos + 4 <= count:
        length = struct.unpack_from("<I", values, pos)[0]
        if length > limit:
            return k, length
        pos += 4 + length
        k += 1
    return None


def _one_entry_floor(f: BinaryIO, start: int, end: int, col: Any) -> int:
    """``V * L`` for a chunk whose dictionary page holds one entry of ``L`` bytes (PLAIN: a 4-byte
    length, then the bytes): ``V`` is the values of its dictionary-encoded data pages (their headers
    walked: a writer falls back to PLAIN pages, whose values may be anything, once the dictionary
    grows past its limit) less the chunk's nulls (statistics), each of them that entry; 0 otherwise
    (several entries, no dictionary page first, an unknown null count)."""
    h = _header(f, start)
    if h.kind != _DICTIONARY or h.values != 1:
        return 0
    st = col.statistics
    nulls = st.null_count if st is not None and st.has_null_count else None
    if nulls is None:
        return 0
    entry = max(0, h.uncompressed - 4)
    at, page, coded = start + h.size + h.compressed, 1, 0
    try:
        while at < end and page < MAX_PAGES_WALKED:
            d = _header(f, at)
            if d.kind in (_DATA, _DATA_V2) and d.encoding in (2, 8):  # PLAIN_DICTIONARY, RLE_DICTIONARY
                coded += d.values
            at += d.size + d.compressed
            page += 1
    except _Bad:
        pass  # the pages walked so far: still a floor
    return max(0, coded - int(nulls)) * entry


def _snappy_prefix(data: bytes | memoryview, n: int) -> bytes:
    """The first ``n`` bytes (fewer when the block is shorter) a raw snappy block decompresses to, read
    element by element (snappy's format description: literals and back-references) without the rest.
    Raises :class:`_Bad` for a block that does not parse."""
    buf = memoryview(data)
    pos = 0
    _, pos = _uvarint(buf, pos)  # the block's decompressed length
    out = bytearray()
    while len(out) < n and pos < buf.nbytes:
        tag = buf[pos]
        pos += 1
        kind = tag & 3
        if kind == 0:
            size = tag >> 2
            if size >= 60:
                k = size - 59
                size = int.from_bytes(buf[pos:pos + k], "little")
                pos += k
            size += 1
            if pos + size > buf.nbytes:
                raise _Bad("snappy")
            out += buf[pos:pos + size]
            pos += size
            continue
        if kind == 1:
            size, back = 4 + ((tag >> 2) & 7), ((tag >> 5) << 8) | buf[pos]
            pos += 1
        else:
            k = 2 if kind == 2 else 4
            size, back = (tag >> 2) + 1, int.from_bytes(buf[pos:pos + k], "little")
            pos += k
        if not 0 < back <= len(out):
            raise _Bad("snappy")
        for _ in range(size):  # a back-reference may overlap what it writes
            out.append(out[-back])
    return bytes(out[:n])


def _lz4_prefix(data: bytes | memoryview, n: int) -> bytes:
    """The first ``n`` bytes (fewer when the block is shorter) a raw LZ4 block (the LZ4 block format:
    sequences of a token, literals, a 2-byte little-endian offset and a match) decompresses to, read
    sequence by sequence without the rest. Raises :class:`_Bad` for a block that does not parse."""
    buf = memoryview(data)
    pos, end = 0, buf.nbytes
    out = bytearray()

    def length(base: int) -> int:
        nonlocal pos
        if base != 15:
            return base
        while True:
            if pos >= end:
                raise _Bad("lz4")
            b = buf[pos]
            pos += 1
            base += b
            if b != 255:
                return base

    while len(out) < n:
        if pos >= end:
            break
        token = buf[pos]
        pos += 1
        lit = length(token >> 4)
        if pos + lit > end:  # literals past the bytes given (a prefix of the block): enough of them, or cut
            out += buf[pos:end]
            if len(out) < n:
                raise _Bad("lz4")
            break
        out += buf[pos:pos + lit]
        pos += lit
        if len(out) >= n or pos >= end:  # enough, or the block's last sequence (literals only)
            break
        if pos + 2 > end:
            raise _Bad("lz4")
        back = int.from_bytes(buf[pos:pos + 2], "little")
        pos += 2
        size = length(token & 15) + 4
        if not 0 < back <= len(out):
            raise _Bad("lz4")
        for _ in range(min(size, n - len(out))):  # a match may overlap what it writes
            out.append(out[-back])
    return bytes(out[:n])


def _hadoop_lz4_prefix(data: bytes | memoryview, n: int, size: int, compressed: int | None) -> bytes:
    """The first ``n`` bytes of a parquet ``LZ4`` page body (``size`` bytes decompressed, ``compressed``
    on disk) from its first bytes ``data``: Hadoop's framing (a 4-byte big-endian decompressed size of at
    most ``size``, a 4-byte big-endian compressed size within the body, then a raw block: its prefix),
    else one raw LZ4 block (older writers), as :func:`_hadoop_lz4` reads the whole body. A raw block's
    first 4 bytes read as a decompressed size of at least 2**28 (its first token holds literals), more
    than a page the screen reads (``max_row_bytes``), so the two do not mix. Raises :class:`_Bad`."""
    buf = memoryview(data)
    if buf.nbytes >= 8:
        out_n = int.from_bytes(buf[:4], "big")
        in_n = int.from_bytes(buf[4:8], "big")
        if out_n <= size and (compressed is None or 8 + in_n <= compressed):
            return _lz4_prefix(buf[8:8 + in_n], min(n, out_n))
    return _lz4_prefix(buf, n)


def _uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    out = shift = 0
    for _ in range(10):
        if pos >= buf.nbytes:
            raise _Bad("cut")
        x = buf[pos]
        pos += 1
        out |= (x & 0x7F) << shift
        if not x & 0x80:
            return out, pos
        shift += 7
    raise _Bad("varint")


def _inflate(body: bytes, codec: str, size: int, head: int | None = None,
             compressed: int | None = None) -> bytes | memoryview | None:
    """The decompressed page body (``size`` bytes), or its first ``head`` bytes at least where the codec
    reads a prefix alone (uncompressed, snappy, LZ4 raw and Hadoop-framed LZ4, zstd, gzip; ``compressed``:
    the body's bytes on disk where ``body`` is only its first bytes); None for a codec this build cannot
    decompress (LZO). BROTLI has no prefix read here (pyarrow's codec decompresses a whole body, and the
    ``brotli`` package that streams is no dependency): its page is decompressed whole, as pyarrow's own
    read of it does, one page at a time. Raises :class:`_Bad` when it does not decompress."""
    if codec == "UNCOMPRESSED":
        return memoryview(body)
    if head is not None:
        try:
            if codec == "SNAPPY":
                return _snappy_prefix(body, head)
            if codec == "LZ4_RAW":
                return _lz4_prefix(body, head)
            if codec == "LZ4":
                return _hadoop_lz4_prefix(body, head, size, compressed)
            if codec == "ZSTD":
                import io

                import zstandard

                with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(body)) as r:
                    return r.read(head)
            if codec == "GZIP":
                import zlib

                return zlib.decompressobj(47).decompress(body, head)
        except _Bad:
            raise
        except Exception:  # noqa: BLE001 - a body that does not decompress
            raise _Bad("decompress") from None
    name = _CODECS.get(codec)
    if name is None:
        return None
    import pyarrow as pa

    try:
        if codec == "LZ4":
            return memoryview(_hadoop_lz4(pa, memoryview(body), size))
        return memoryview(pa.Codec(name).decompress(body, decompressed_size=size))
    except (pa.ArrowException, ValueError):
        raise _Bad("decompress") from None


#: compressed bytes of a page read first for the screen's few decompressed bytes (the whole body only where
#: they do not decompress alone): a store's ranged reads then fetch a page's header and these, not the page
_PREFIX_BYTES = 1 << 12


def _levels(f: BinaryIO, at: int, h: _Header, codec: str, head: int | None) -> memoryview | None:
    """The repetition levels' RLE/bit-packed hybrid bytes of the data page whose body starts at ``at``
    (v1: after their 4-byte length; v2: the first ``rep_levels`` bytes, never compressed), all of them, or
    the first ``head`` bytes at least (the screen); None where they cannot be read (a codec without a
    decompressor here)."""
    f.seek(at)
    if h.kind == _DATA_V2:
        data = f.read(h.rep_levels if head is None else min(h.rep_levels, head))
        return memoryview(data)
    got: bytes | memoryview | None = None
    if head is not None and h.compressed > _PREFIX_BYTES:  # the body's first bytes, where they decompress alone
        try:
            got = _inflate(f.read(_PREFIX_BYTES), codec, h.uncompressed, head + 4, h.compressed)
        except _Bad:
            got = None
        if got is not None and memoryview(got).nbytes < min(head + 4, h.uncompressed):
            got = None
        f.seek(at)
    if got is None:
        body = f.read(h.compressed)
        if len(body) != h.compressed:
            raise _Bad("cut")
        got = _inflate(body, codec, h.uncompressed, None if head is None else head + 4)
        if got is None:
            return None
    view = memoryview(got)
    if view.nbytes < 4:
        raise _Bad("levels")
    length = int.from_bytes(view[:4], "little")
    return view[4:4 + length]


def _level_runs(buf: memoryview, width: int, count: int) -> Any:
    """The runs of an RLE/bit-packed hybrid level stream of ``count`` levels of ``width`` bits:
    ``(value, n)`` for a repeated run, ``(None, levels)`` for a bit-packed one (a numpy uint8 array, at most
    8 levels a byte of it). Raises :class:`_Bad` for a stream that ends early."""
    import numpy as np

    pos = got = 0
    nbytes = (width + 7) // 8
    while got < count:
        header, pos = _uvarint(buf, pos)
        if header & 1:
            groups = header >> 1
            k = groups * width
            if pos + k > buf.nbytes or not groups:
                raise _Bad("levels")
            bits = np.unpackbits(np.frombuffer(buf[pos:pos + k], dtype=np.uint8), bitorder="little")
            pos += k
            vals = bits.reshape(-1, width) @ (1 << np.arange(width, dtype=np.uint16)) if width > 1 else bits
            take = min(groups * 8, count - got)
            got += take
            yield None, vals[:take]
        else:
            n = header >> 1
            if pos + nbytes > buf.nbytes or not n:
                raise _Bad("levels")
            value = int.from_bytes(buf[pos:pos + nbytes], "little")
            pos += nbytes
            n = min(n, count - got)
            got += n
            yield value, n


def _no_row_start(levels: memoryview | None, width: int, values: int) -> bool:
    """Whether a data page of ``values`` levels, whose repetition levels begin with ``levels`` (a prefix),
    starts no row: one repeated run of a level above 0 covering every value (a page inside a long row)."""
    if levels is None or not values:
        return False
    try:
        header, pos = _uvarint(levels, 0)
    except _Bad:
        return False
    nbytes = (width + 7) // 8
    if header & 1 or pos + nbytes > levels.nbytes:
        return False
    return (header >> 1) >= values and int.from_bytes(levels[pos:pos + nbytes], "little") > 0


def _long_row(f: BinaryIO, start: int, end: int, metadata: Any, col: Any, g: int, j: int, first: int, n: int,
              limit: int, look: bool = True) -> LongRow | None:
    """The first row of a list column's chunk whose values decode to more than ``limit`` bytes, or None.

    A screen first, from each data page's header and the first bytes of its repetition levels (a
    page's body decompressed only as far as those bytes where the codec allows: uncompressed, snappy,
    LZ4 (raw and Hadoop-framed), zstd, gzip; a BROTLI page is decompressed whole, one at a time: memory
    one page's uncompressed bytes, time a full decompression of every data page of the chunk): a page
    whose levels are one run above 0 starts no row, so a row spans it whole; a row
    holds at most the values of the pages it touches. Only where that bound passes ``limit`` over the
    value width (pages inside a long row) are the chunk's levels read whole (every page decompressed,
    one at a time) to count each row's values and name the row (``look`` False: not read; the row is
    None). Cost on a token shard of big row groups: one header and a few bytes of each page."""
    leaf = metadata.schema.column(j)
    width = _width(leaf)
    most = int(limit // width)  # the values a row may hold
    bits = int(leaf.max_repetition_level).bit_length()
    at, page, span = start, 0, 0
    suspect = False
    while at < end and page < MAX_PAGES_WALKED:
        h = _header(f, at)
        if h.kind in (_DATA, _DATA_V2):
            if h.values > most:
                suspect = True
                break
            body = at + h.size
            if _no_row_start(_levels(f, body, h, col.compression, 16), bits, h.values):
                span += h.values  # the row in progress spans this page whole
                over = span > most
            else:  # the row in progress ends in this page (at most its values more), and the last one starts here
                over, span = span + h.values > most, h.values
            if over:
                suspect = True
                break
        at += h.size + h.compressed
        page += 1
    if not suspect:
        return None
    if not look:
        return LongRow(g, first, n, leaf.path, None, most + 1, width, limit)
    return _count_rows(f, start, end, col, leaf, g, first, n, width, most, limit)


def _count_rows(f: BinaryIO, start: int, end: int, col: Any, leaf: Any, g: int, first: int, n: int,
                width: float, most: int, limit: int) -> LongRow | None:
    """Every data page's repetition levels read (one page at a time) and counted into rows: the first row
    of more than ``most`` values (its row and values), or None."""
    import numpy as np

    bits = int(leaf.max_repetition_level).bit_length()
    at, page = start, 0
    row, cur = -1, 0  # the row in progress (0-based in the row group) and its values so far
    long: int | None = None  # the row found, counted to its end
    while at < end and page < MAX_PAGES_WALKED:
        h = _header(f, at)
        if h.kind in (_DATA, _DATA_V2):
            levels = _levels(f, at + h.size, h, col.compression, None)
            if levels is None:
                return None
            for value, run in _level_runs(levels, bits, h.values):
                if value is not None:  # a repeated run
                    if value:
                        cur += run
                        continue
                    ends = [cur] + [1] * (run - 1)
                    row, cur = row + run, 1
                else:
                    zeros = np.flatnonzero(run == 0)
                    if not zeros.size:
                        cur += int(run.size)
                        continue
                    ends = [cur + int(zeros[0])] + np.diff(zeros).tolist()
                    row, cur = row + int(zeros.size), int(run.size - zeros[-1])
                if long is not None:
                    return LongRow(g, first, n, leaf.path, first + long, ends[0], width, limit)
                over = next((k for k, m in enumerate(ends) if m > most), None)
                if over is not None:  # row - len(ends) + 1 + over: the row those values belong to
                    return LongRow(g, first, n, leaf.path, first + row - len(ends) + over, ends[over], width, limit)
                if cur > most:
                    long = row
        at += h.size + h.compressed
        page += 1
    if long is not None or cur > most:
        return LongRow(g, first, n, leaf.path, first + row, cur, width, limit)
    return None
