"""Plain text with lone ``\\r`` line ends (old Mac OS): a ``\\r`` not followed by ``\\n`` ends a line, as
Python's universal newlines (and so Hugging Face ``datasets``' text builder) read it, in the reader's
rows, the row count, the lines the findings name and the ``[dataset] max_row_bytes`` bound, which
measures each line on its own (datacheck/formats/text.py, io/shardbytes.bounded_line_chunks with
``universal``). Expected rows, lines and bad records are computed here from the bytes written, by a
plain-Python split of the file at its universal breaks. Real data: tinyshakespeare (PROVENANCE.md:
1,115,394 B, 40,000 lines)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import REALDATA, examples
from hypothesis import example, given, settings
from hypothesis import strategies as st

from datacheck.formats import text
from datacheck.io.shardbytes import LongLine, bounded_line_chunks

SHAKESPEARE = REALDATA / "tinyshakespeare" / "input.txt"
#: a universal line break ends after a \n or after a \r that no \n follows
_AFTER_BREAK = re.compile(rb"(?<=\n)|(?<=\r)(?!\n)")


def _lines(raw: bytes) -> list[tuple[int, bytes, str]]:
    """(1-based line, the line's bytes up to its break (a \\r before \\n kept, as the bound counts it),
    the line's text without its break) for each line of ``raw``."""
    out = []
    for k, piece in enumerate(p for p in _AFTER_BREAK.split(raw) if p):
        body = piece[:-1] if piece.endswith((b"\n", b"\r")) else piece
        txt = body.decode("utf-8")
        out.append((k + 1, body, txt[:-1] if txt.endswith("\r") and piece.endswith(b"\n") else txt))
    return out


def _read(path: Path, sample_by: str = "line", **kw):
    data = text.open_text(path, sample_by, **kw)
    return data.lf.collect()[text.COLUMN].to_list(), data.line_of_row.tolist(), data.decode_findings


def test_lone_cr_lines_are_rows_each_under_the_bound(tmp_path):
    lines = ["first line of the poem", "second line, a bit longer", "", "third"]
    raw = "\r".join(lines).encode() + b"\r"
    assert len(raw) > 40 and max(len(ln) for ln in lines) <= 40
    p = tmp_path / "mac.txt"
    p.write_bytes(raw)
    rows, at, findings = _read(p, "line", max_row=40)
    assert findings == []  # before: the whole file was one line of 78 bytes, a decode.bad_record
    assert rows == [ln for ln in lines if ln.strip()]
    assert at == [i + 1 for i, ln in enumerate(lines) if ln.strip()]
    para = len("\n".join(lines[:2]).encode())  # the first paragraph's bytes: under the bound, the file over it
    assert para < len(raw)
    rows, at, findings = _read(p, "paragraph", max_row=para)
    assert (rows, at, findings) == (["\n".join(lines[:2]), lines[3] + "\n"], [1, 4], [])


def test_a_long_lone_cr_line_is_the_bad_record_at_its_own_line(tmp_path):
    long = "y" * 50
    raw = f"alpha\r{long}\rgamma\r\ndelta\r".encode()
    p = tmp_path / "mac.txt"
    p.write_bytes(raw)
    rows, at, (f,) = _read(p, "line", max_row=40)
    assert rows == ["alpha", "gamma", "delta"] and at == [1, 3, 4]
    assert f.check == "decode.bad_record" and f.lines == (2,) and f.count == 1
    assert f.examples[0].byte_offset == raw.index(long.encode())


_PIECES = st.sampled_from(["a", "bcd", "efghij", " ", "\n", "\r\n", "\r", "\r", "\u4e2d"])


@settings(max_examples=examples(300), deadline=None)
@given(pieces=st.lists(_PIECES, max_size=40), chunk=st.sampled_from([1, 2, 3, 5, 64, 1 << 20]),
       max_row=st.integers(1, 12))
@example(pieces=["a", "\r", "\n", "bcd"], chunk=2, max_row=1)  # a \r\n across a block's end
@example(pieces=["efghij", "\r", "a"], chunk=3, max_row=2)  # a long line ended by a lone \r
def test_every_line_is_bounded_on_its_own_at_any_chunk_size(tmp_path_factory, pieces, chunk, max_row):
    raw = "".join(pieces).encode("utf-8")
    p = tmp_path_factory.mktemp("t") / "s.txt"
    p.write_bytes(raw)
    ref = _lines(raw)
    long = [k for k, body, _ in ref if len(body) > max_row]
    want_rows = [(k, t) for k, body, t in ref if len(body) <= max_row and t.strip()]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(text, "TEXT_CHUNK_BYTES", chunk)
        rows, at, findings = _read(p, "line", max_row=max_row)
    assert list(zip(at, rows)) == want_rows
    if long:
        (f,) = findings
        assert f.check == "decode.bad_record" and f.count == len(long) and list(f.lines) == long[:len(f.lines)]
    else:
        assert findings == []
    # the chunks themselves: whole lines, a line over the bound passed over at its own length
    got: list[int] = []
    pos = 0
    for c in bounded_line_chunks(p, chunk, max_row, universal=True):
        if isinstance(c, LongLine):
            got.append(c.length)
            pos += c.nbytes
        else:
            assert raw[pos:pos + len(c)] == c
            pos += len(c)
            assert not c.endswith(b"\r") or raw[pos:pos + 1] != b"\n"  # a \r\n is never cut in two
            got.extend(len(body) for _, body, _ in _lines(c))
    assert got == [len(body) for _, body, _ in ref] and pos == len(raw)


def test_real_tinyshakespeare_with_lone_cr_reads_as_with_newlines(tmp_path):
    if not SHAKESPEARE.exists():
        pytest.skip("../shared/realdata is not present")
    raw = SHAKESPEARE.read_bytes()
    assert len(raw) == 1_115_394 and raw.count(b"\n") == 40_000  # PROVENANCE.md
    mac = tmp_path / "mac.txt"
    mac.write_bytes(raw.replace(b"\n", b"\r"))
    bound = max(len(para) for para in raw.split(b"\n\n"))  # the longest paragraph: each fits, the file does not
    assert bound < len(raw)
    for sample_by in ("line", "paragraph"):
        want = _read(SHAKESPEARE, sample_by, max_row=bound)
        got = _read(mac, sample_by, max_row=bound)
        assert got[2] == [] and want[2] == []
        assert got[0] == want[0] and got[1] == want[1]
    rows, at, _ = _read(mac, "line", max_row=bound)
    lines = raw.decode("utf-8").split("\n")[:-1]
    assert len(rows) == sum(1 for ln in lines if ln.strip()) and at[-1] == max(
        i + 1 for i, ln in enumerate(lines) if ln.strip())
