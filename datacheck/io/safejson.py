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

__all__ = ["MAX_JSON_DEPTH", "MAX_JSON_FILE_BYTES", "JsonInputError", "max_depths", "max_line_depth", "loads", "read_json_file"]

#: Deepest nesting of arrays/objects accepted (levels; a flat object is depth 1). datacheck's own bound:
#: real training records nest a handful of levels (Hugging Face ``Sequence`` of structs, chat messages);
#: Python's parser fails near 1,000 and polars' NDJSON reader crashes at 600 (issue 15).
MAX_JSON_DEPTH = 64

#: Largest metadata/user JSON file read whole (bytes): 256 MiB. A MosaicML ``index.json`` of a million
#: shards is ~300 MB at most; anything larger is not a metadata file.
MAX_JSON_FILE_BYTES = 256 * 1024 * 1024

_CHUNK = 8 * 1024 * 1024  # bytes scanned at a time by max_depths (bounded temporary arrays)


class JsonInputError(ValueError):
    """A JSON text is refused: ``reason`` says why, without the source (callers prefix the file)."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


def _chunk_depths(buf: np.ndarray, per_line: bool) -> tuple[np.ndarray, np.ndarray]:
    """(line start indexes, max depth of each line) of one chunk that ends at a line end (per_line)
    or of one whole text (not per_line: a single "line")."""
    n = buf.size
    idx = np.arange(n, dtype=np.int64)
    bs = buf == 92  # backslash
    quote = buf == 34
    if bs.any():
        last_non_bs = np.maximum.accumulate(np.where(bs, -1, idx))
        prev = np.concatenate(([-1], last_non_bs[:-1]))
        run = (idx - 1) - prev  # backslashes right before i
        quote &= (run & 1) == 0
    nl = (buf == 10) if per_line else np.zeros(n, dtype=bool)
    cq = np.cumsum(quote, dtype=np.int64)
    q_base = np.maximum.accumulate(np.where(nl, cq, 0))
    outside = ((cq - q_base) & 1) == 0
    delta = ((buf == 91) | (buf == 123)).astype(np.int8) - ((buf == 93) | (buf == 125)).astype(np.int8)
    delta[~outside] = 0
    d = np.cumsum(delta, dtype=np.int64)
    starts = np.concatenate(([0], np.flatnonzero(nl) + 1)) if per_line else np.zeros(1, dtype=np.int64)
    starts = starts[starts < n] if n else starts[:0]
    if starts.size == 0:
        return starts, np.zeros(0, dtype=np.int64)
    base = np.where(starts > 0, d[np.maximum(starts - 1, 0)], 0)
    line_id = np.cumsum(np.concatenate(([False], nl[:-1]))) if per_line else np.zeros(n, dtype=np.int64)
    depth = d - base[line_id]
    return starts, np.maximum.reduceat(depth, starts)


def max_depths(data: bytes, per_line: bool = True) -> np.ndarray:
    """Nesting depth of each line of ``data`` (int64, one value per ``\\n``-separated line, the last
    line included when it has no newline), or of the whole text when ``per_line`` is False (1 value).

    Brackets inside strings (with ``\\"`` escapes) do not count; a string never spans lines in valid
    JSON, so string state restarts at each line. A line that is not valid JSON still gets a value
    (the parser then reports it). Memory: about 40 bytes per byte of an 8 MiB chunk.
    """
    if not per_line:
        return _chunk_depths(np.frombuffer(data, dtype=np.uint8), False)[1]
    out: list[np.ndarray] = []
    pos, n = 0, len(data)
    while pos < n:
        end = min(pos + _CHUNK, n)
        if end < n:
            nl = data.find(b"\n", end)
            end = n if nl < 0 else nl + 1
        out.append(_chunk_depths(np.frombuffer(data, dtype=np.uint8, count=end - pos, offset=pos), True)[1])
        pos = end
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


def max_line_depth(data: bytes) -> int:
    """The deepest nesting of any line of ``data`` (as ``max_depths(data).max()``), cheaper on common
    data: a line's depth is at most its count of ``[``/``{`` bytes, so when no line holds more than
    :data:`MAX_JSON_DEPTH` of them the string-aware scan is skipped and that count is returned (an
    upper bound, exact enough to decide "within the limit")."""
    pos, n, worst = 0, len(data), 0
    while pos < n:
        end = min(pos + _CHUNK, n)
        if end < n:
            nl = data.find(b"\n", end)
            end = n if nl < 0 else nl + 1
        buf = np.frombuffer(data, dtype=np.uint8, count=end - pos, offset=pos)
        opens = np.cumsum((buf == 91) | (buf == 123), dtype=np.int64)
        nls = np.flatnonzero(buf == 10)
        bounds = np.concatenate((opens[nls], opens[-1:])) if buf.size else opens[:0]
        per_line = np.diff(bounds, prepend=0) if bounds.size else bounds
        if per_line.size and int(per_line.max()) > MAX_JSON_DEPTH:
            worst = max(worst, int(max_depths(bytes(buf)).max(initial=0)))
        else:
            worst = max(worst, int(per_line.max(initial=0)))
        pos = end
    return worst


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
