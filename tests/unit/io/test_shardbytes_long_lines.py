"""bounded_line_chunks (io/shardbytes.py): a line over the bound comes as a LongLine (its length, first
bytes, whether a newline ends it) in its place, the other bytes exactly as line_chunks gives them, whatever
the chunk size, plain or gzip; without a bound nothing changes."""
from __future__ import annotations

import gzip

import pytest

from datacheck.io.shardbytes import LONG_LINE_HEAD, LongLine, bounded_line_chunks, line_chunks

LINES = [b"a" * 5, b"b" * 300, b"c" * 7, b"", b"d" * 2000, b"e" * 3]


def _expected(lines: list[bytes], limit: int, last_newline: bool) -> list[object]:
    """The file's lines in order: the bytes of each short line (with its newline) or the LongLine of a long one."""
    out: list[object] = []
    for i, ln in enumerate(lines):
        nl = last_newline or i < len(lines) - 1
        out.append(LongLine(len(ln), ln[:LONG_LINE_HEAD], nl) if len(ln) > limit else ln + (b"\n" if nl else b""))
    return out


def _as_lines(items) -> list[object]:
    """Chunks cut into their lines (newline kept); LongLines as they are."""
    out: list[object] = []
    for it in items:
        if isinstance(it, LongLine):
            out.append(it)
            continue
        out += it.splitlines(keepends=True)
    return out


@pytest.mark.parametrize("chunk", [4, 64, 301, 1 << 20])
@pytest.mark.parametrize("last_newline", [True, False])
@pytest.mark.parametrize("gz", [False, True])
def test_long_lines_come_in_their_place(tmp_path, chunk, last_newline, gz):
    body = b"\n".join(LINES) + (b"\n" if last_newline else b"")
    path = tmp_path / ("f.jsonl.gz" if gz else "f.jsonl")
    path.write_bytes(gzip.compress(body) if gz else body)
    got = list(bounded_line_chunks(path, chunk, 100))
    assert _as_lines(got) == _expected(LINES, 100, last_newline)
    # the file's bytes are all accounted for, in order
    assert sum(it.nbytes if isinstance(it, LongLine) else len(it) for it in got) == len(body)
    # no bound: exactly line_chunks' chunks
    assert list(bounded_line_chunks(path, chunk, None)) == list(line_chunks(path, chunk))
    assert b"".join(line_chunks(path, chunk)) == body


def test_a_file_of_one_long_line_is_never_held(tmp_path):
    """A 3 MB line read 64 KiB at a time with a bound of 100 bytes: one LongLine."""
    path = tmp_path / "f.jsonl"
    path.write_bytes(b"x" * 3_000_000)
    assert list(bounded_line_chunks(path, 1 << 16, 100)) == [LongLine(3_000_000, b"x" * LONG_LINE_HEAD, False)]


def test_a_line_at_the_bound_is_kept(tmp_path):
    path = tmp_path / "f.jsonl"
    path.write_bytes(b"y" * 100 + b"\n" + b"z" * 101 + b"\n")
    assert _as_lines(bounded_line_chunks(path, 1 << 20, 100)) == [b"y" * 100 + b"\n", LongLine(101, b"z" * 80, True)]
