"""The one bounded JSON loader for every JSON text that comes with the data or from the user.

JSONL records, Hugging Face ``state.json`` / ``dataset_info.json``, MosaicML ``index.json``, the data
index, reports, report parts, cache headers and JSON schema files are all parsed here, so that hostile
bytes give one clear error instead of an internal failure:

- nesting deeper than :data:`MAX_JSON_DEPTH` (Python's ``json`` raises ``RecursionError`` near 1,000
  levels; polars' ``read_ndjson`` segfaults on a 600-deep object) is refused *before* any parser runs,
  by a vectorized bracket count that skips brackets inside strings (:func:`max_depths`);
- integers longer than Python's ``sys.get_int_max_str_digits()`` (4,300 digits by default), which
  ``json`` rejects with a plain ``ValueError``, become the same error;
- invalid UTF-8 and syntax errors name the line and column.

Callers turn :class:`JsonInputError` into a usage error (exit 2) for user files, or a finding for
files inside the audited data.
"""
from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["MAX_JSON_DEPTH", "MAX_JSON_FILE_BYTES", "JsonInputError", "element_spans", "max_depths", "max_line_depth", "loads",
           "read_json_file"]

#: Deepest nesting of arrays/objects accepted (levels; a flat object is depth 1). datacheck's own bound:
#: real training records nest a handful of levels (Hugging Face ``Sequence`` of structs, chat messages);
#: Python's parser fails near 1,000 and polars' NDJSON reader crashes at 600.
MAX_JSON_DEPTH = 64

#: Largest metadata/user JSON file read whole (bytes): 256 MiB. A MosaicML ``index.json`` of a million
#: shards is ~300 MB at most; anything larger is not a metadata file.
MAX_JSON_FILE_BYTES = 256 * 1024 * 1024

_CHUNK = 8 * 1024 * 1024  # bytes scanned at a time by max_depths (bounded temporary arrays)

# byte class of each of the 256 byte values: 0 for every byte the scan ignores
_NL, _QUOTE, _BS, _OPEN, _CLOSE = 1, 2, 3, 4, 5
_CLASS = np.zeros(256, dtype=np.uint8)
_CLASS[10], _CLASS[34], _CLASS[92] = _NL, _QUOTE, _BS
_CLASS[[91, 123]] = _OPEN
_CLASS[[93, 125]] = _CLOSE


class JsonInputError(ValueError):
    """A JSON text is refused: ``reason`` says why, without the source (callers prefix the file)."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


def _backslashes_and_quotes(cls: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(backslash, unescaped quote) masks over the bytes of interest ``cls`` (their classes) at the
    byte offsets ``pos``: a quote is escaped when the run of backslashes right before it is odd."""
    bs = cls == _BS
    quote = cls == _QUOTE
    if bs.any() and quote.any():
        idx = np.arange(cls.size, dtype=np.int64)
        cont = np.zeros(cls.size, dtype=bool)
        cont[1:] = bs[1:] & bs[:-1] & (pos[1:] == pos[:-1] + 1)
        start = np.maximum.accumulate(np.where(bs & ~cont, idx, -1))
        run = np.where(bs, idx - start + 1, 0)
        q = np.flatnonzero(quote[1:]) + 1
        esc = bs[q - 1] & (pos[q - 1] == pos[q] - 1) & ((run[q - 1] & 1) == 1)
        quote[q[esc]] = False
    return bs, quote


def _chunk_depths(buf: np.ndarray, per_line: bool) -> np.ndarray:
    """The max depth of each line of one chunk that ends at a line end (per_line; one value a line,
    never below 0) or of one whole text (not per_line: one value).

    Only the bytes that matter (newlines, quotes, backslashes, brackets) are looked at: one uint8
    class a byte, then int64 arrays the size of those bytes only (a few per record in common data;
    at worst 8 bytes x a few arrays per byte of the chunk)."""
    n = buf.size
    cls_all = _CLASS[buf]
    pos = np.flatnonzero(cls_all)
    cls = cls_all[pos]
    del cls_all
    if per_line:
        n_lines = int(np.count_nonzero(cls == _NL)) + (0 if n == 0 or buf[-1] == 10 else 1)
    else:
        n_lines = 1 if n else 0
        if cls.size:
            keep = cls != _NL
            pos, cls = pos[keep], cls[keep]
    out = np.zeros(n_lines, dtype=np.int64)
    if not cls.size:
        return out
    bs, quote = _backslashes_and_quotes(cls, pos)
    keep = ~bs
    cls, quote = cls[keep], quote[keep]
    del pos, bs, keep
    nl = cls == _NL
    cq = np.cumsum(quote, dtype=np.int64)
    q_base = np.maximum.accumulate(np.where(nl, cq, 0))
    outside = ((cq - q_base) & 1) == 0
    del cq, q_base, quote
    delta = (outside & (cls == _OPEN)).astype(np.int8) - (outside & (cls == _CLOSE)).astype(np.int8)
    d = np.cumsum(delta, dtype=np.int64)
    line_id = np.cumsum(nl, dtype=np.int64) - nl  # newlines before each byte of interest
    base = np.concatenate(([0], d[nl]))
    depth = d - base[line_id]
    np.maximum.at(out, line_id, depth)  # a newline or quote has the depth of the byte before it
    return out


def max_depths(data: bytes, per_line: bool = True) -> np.ndarray:
    """Nesting depth of each line of ``data`` (int64, one value per ``\\n``-separated line, the last
    line included when it has no newline), or of the whole text when ``per_line`` is False (1 value).

    Brackets inside strings (with ``\\"`` escapes) do not count; a string never spans lines in valid
    JSON, so string state restarts at each line. A line that is not valid JSON still gets a value
    (the parser then reports it); a line whose brackets only close is depth 0. Memory: one byte per
    byte of an 8 MiB block, plus about 40 bytes per newline, quote, backslash or bracket in it.
    """
    if not per_line:
        return _chunk_depths(np.frombuffer(data, dtype=np.uint8), False)
    out: list[np.ndarray] = []
    pos, n = 0, len(data)
    while pos < n:
        end = min(pos + _CHUNK, n)
        if end < n:
            nl = data.find(b"\n", end)
            end = n if nl < 0 else nl + 1
        out.append(_chunk_depths(np.frombuffer(data, dtype=np.uint8, count=end - pos, offset=pos), True))
        pos = end
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


def element_spans(data: bytes) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends): the byte offsets (int64; ends exclusive) of each object or array nested
    directly in the top-level value of the JSON text ``data`` (a JSON array file's records), in
    order, without parsing anything: brackets inside strings (with ``\\"`` escapes) do not count, as in
    :func:`max_depths`. A text that is not valid JSON still gets spans (the parser then reports it);
    unmatched brackets leave the last span out. Memory: one byte per byte of ``data`` plus about 40
    bytes per quote, backslash or bracket in it."""
    buf = np.frombuffer(data, dtype=np.uint8)
    cls_all = _CLASS[buf]
    pos = np.flatnonzero(cls_all)
    cls = cls_all[pos]
    del cls_all
    keep = cls != _NL
    pos, cls = pos[keep], cls[keep]
    bs, quote = _backslashes_and_quotes(cls, pos)
    keep = ~bs
    pos, cls, quote = pos[keep], cls[keep], quote[keep]
    outside = (np.cumsum(quote, dtype=np.int64) & 1) == 0
    opens = outside & (cls == _OPEN)
    closes = outside & (cls == _CLOSE)
    depth = np.cumsum(opens.astype(np.int8) - closes.astype(np.int8), dtype=np.int64)  # after each byte
    starts = pos[opens & (depth == 2)].astype(np.int64)
    ends = pos[closes & (depth == 1)].astype(np.int64) + 1
    k = min(starts.size, ends.size)
    return starts[:k], ends[:k]


def _max_line_opens(buf: np.ndarray) -> int:
    """The most ``[`` and ``{`` bytes on one line of ``buf`` (uint8; strings included: an upper bound
    of the line's nesting depth), 0 for no byte. Memory: two bytes per byte and 8 per line."""
    if not buf.size:
        return 0
    opens = buf == 91
    opens |= buf == 123
    starts = np.concatenate(([0], np.flatnonzero(buf == 10) + 1))
    starts = starts[starts < buf.size]
    return int(np.add.reduceat(opens.view(np.uint8), starts, dtype=np.int64).max())


def max_line_depth(data: bytes, limit: int = MAX_JSON_DEPTH) -> int:
    """The deepest nesting of any line of ``data`` as far as ``limit`` needs it (0 for no line): at
    least that depth, and above ``limit`` exactly when some line nests deeper than ``limit``.

    A line nests at most as deep as it has ``[`` and ``{`` bytes: when no line has more than
    ``limit`` of them, that count is returned (a cheap pass: 2.2 ms for a 1.8 MB chunk of chat records
    against 17 ms for the scan); otherwise the exact depth (``max_depths(data).max()``). Memory: two
    bytes per byte of ``data``, or the scan's: one byte per byte of an 8 MiB block plus a few int64 per
    newline, quote, backslash or bracket of it (not per byte), so a 16 MiB chunk of records adds tens
    of MiB at most."""
    bound = _max_line_opens(np.frombuffer(data, dtype=np.uint8))
    if bound <= limit:
        return bound
    return int(max_depths(data).max(initial=0))


def loads(text: bytes | str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Parse one JSON text. Raises :class:`JsonInputError` (nesting over ``max_depth`` levels, an
    integer over Python's digit limit, invalid UTF-8, a syntax error with line and column)."""
    raw = text.encode("utf-8", errors="surrogatepass") if isinstance(text, str) else bytes(text)
    depth = int(max_depths(raw, per_line=False).max(initial=0))
    if depth > max_depth:
        raise JsonInputError(f"JSON nested {depth} levels deep (datacheck reads at most {max_depth})")
    try:
        s = raw.decode("utf-8") if not isinstance(text, str) else text
    except UnicodeDecodeError as exc:
        raise JsonInputError(f"not valid UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})") from None
    try:
        return json.loads(s)
    except json.JSONDecodeError as exc:
        raise JsonInputError(f"not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except RecursionError:  # pragma: no cover - the depth bound comes first
        raise JsonInputError(f"JSON nested too deep (datacheck reads at most {max_depth} levels)") from None
    except ValueError as exc:  # e.g. an integer over sys.get_int_max_str_digits() digits
        raise JsonInputError(f"not readable JSON: {str(exc).splitlines()[0]}") from None


def read_json_file(path: Path, max_bytes: int = MAX_JSON_FILE_BYTES, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Read and parse a JSON file. Raises :class:`JsonInputError` (as :func:`loads`; also a file over
    ``max_bytes`` bytes, or a FIFO/device, which is never opened) and ``OSError`` when the file cannot
    be read (``IsADirectoryError`` for a folder; the caller names what it is)."""
    p = Path(path)
    if p.is_dir():
        raise IsADirectoryError(21, "is a folder", str(p))
    if p.exists() and not stat.S_ISREG(p.stat().st_mode):
        raise JsonInputError("not a regular file (a FIFO, device or folder)")
    with open(p, "rb") as f:
        raw = f.read(max_bytes + 1)
    if len(raw) > max_bytes:
        raise JsonInputError(f"file over {max_bytes} bytes: not a metadata file datacheck reads")
    return loads(raw, max_depth)
