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
  4-byte length prefix not counted, repeated over the chunk's non-null values).

Nothing here imports polars or numpy (the command line's prefetch plans with it before they load).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

__all__ = ["MAX_PAGES_WALKED", "BigPage", "PageScan", "scan_pages"]

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
    return _Header(kind, unc, comp, values, rows, f.tell() - at, encoding, levels, bool(sub.get(7, True)))


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


class PageScan(NamedTuple):
    """What :func:`scan_pages` found.

    Attributes:
        big: the first value over the bound (row group order, then column order), or None.
        floors: ``{(row group, leaf column index): bytes}``: a lower bound of the chunk's decoded
            values where it exceeds the chunk's uncompressed bytes (a dictionary of one entry of ``L``
            bytes over ``V`` non-null values: ``V * L``); chunks not listed decode to at least their
            uncompressed bytes, as far as known.
    """

    big: BigPage | None
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


def scan_pages(path: Path | str, metadata: Any, limit: int, look: bool = True) -> PageScan:
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

    A header that does not parse, a chunk whose range leaves the file, or a file that cannot be
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
        f = open(path, "rb", buffering=1 << 16)
    except OSError:
        return PageScan(None, floors)
    with f:
        try:
            size = f.seek(0, 2)
        except OSError:
            return PageScan(None, floors)
        for g, j, first, n, big, one in todo:
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
                if one:
                    floor = _one_entry_floor(f, start, end, col)
                    if floor > col.total_uncompressed_size:
                        floors[(g, j)] = floor
            except (_Bad, OSError, ValueError, OverflowError):
                continue
    return PageScan(None, floors)


def _candidates(metadata: Any, limit: int) -> list[tuple[int, int, int, int, bool, bool]]:
    """(row group, leaf column, the group's first row, its rows, big, one) of the chunks to look into,
    from the footer alone: ``big``, a chunk of more than ``limit`` uncompressed bytes (looked for only in
    row groups of more: the chunks add up to the group's total); ``one``, a dictionary-encoded
    ``BYTE_ARRAY`` chunk whose statistics do not show two values (:func:`_maybe_one_entry`). A token
    shard (integer columns) of row groups within ``limit`` costs one look at each row group."""
    texts = [j for j in range(metadata.num_columns) if metadata.schema.column(j).physical_type == "BYTE_ARRAY"]
    out: list[tuple[int, int, int, int, bool, bool]] = []
    first = 0
    for g in range(metadata.num_row_groups):
        rg = metadata.row_group(g)
        n = rg.num_rows
        wide = rg.total_byte_size > limit  # the writer's total only screens: every chunk is looked at then
        for j in range(rg.num_columns) if wide else texts:
            col = rg.column(j)
            big = wide and col.total_uncompressed_size > limit
            one = j in texts and _maybe_one_entry(col)
            if big or one:
                out.append((g, j, first, n, big, one))
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
