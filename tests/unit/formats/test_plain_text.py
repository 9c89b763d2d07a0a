"""Plain-text shards (datacheck/formats/text.py): the rows of Hugging Face datasets' ``text`` builder
for each ``sample_by`` (its real builder when ``datasets`` is installed, else a plain-Python reference
of text.py's rules written here), blank lines and paragraphs left out, the line each row starts on,
chunk sizes that change nothing, and the byte rules: invalid UTF-8, rows over ``max_row_bytes``,
``.gz``/``.zst``. Real data: tinyshakespeare (PROVENANCE.md: 1,115,394 B, 40,000 lines)."""
from __future__ import annotations

import gzip
from pathlib import Path

import pytest
import zstandard
from conftest import REALDATA, examples
from hypothesis import example, given, settings
from hypothesis import strategies as st

import datacheck
from datacheck.formats import text
from datacheck.io.shardbytes import Unreadable

SHAKESPEARE = REALDATA / "tinyshakespeare" / "input.txt"


def _hf_reference(raw: bytes, sample_by: str) -> list[str]:
    """text.py's rows, rule by rule: UTF-8 read in text mode (universal newlines: \\r\\n and \\r become \\n),
    then one row per line without its \\n, or the text split on "\\n\\n" without empty pieces, or the whole text."""
    t = raw.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    if sample_by == "line":
        return (t[:-1] if t.endswith("\n") else t).split("\n") if t else []  # StringIO.readlines: "\n" only
    if sample_by == "paragraph":
        return [p for p in t.split("\n\n") if p]
    return [t]


def _hf_builder(path: Path, sample_by: str, cache: Path) -> list[str] | None:
    """The rows of datasets' own text builder (None when datasets is not installed)."""
    try:
        from datasets.packaged_modules.text.text import Text
    except ImportError:
        return None
    b = Text(cache_dir=str(cache), data_files={"train": [str(path)]}, sample_by=sample_by)
    return [r for _, t in b._generate_tables([str(path)], [[str(path)]]) for r in t.column("text").to_pylist()]


def _not_blank(rows: list[str]) -> list[str]:
    return [r for r in rows if r.strip()]


def _read(path: Path, sample_by: str = "line", **kw) -> tuple[list[str], list[int], list]:
    data = text.open_text(path, sample_by, **kw)
    rows = data.lf.collect()[text.COLUMN].to_list()
    return rows, data.line_of_row.tolist(), data.decode_findings


CASES = [
    b"",
    b"a\n",
    b"a",
    b"\n\n\n",
    b"first\n\nsecond line\r\nthird\rfourth\n",
    b"a\n\n\nb\n\n\n\nc\n",
    b"  \n\t\nx  \n \n",
    b"para one\nstill one\n\npara two\n\n\n",
    "caf\u00e9 \u2014 na\u00efve\n\n\u4e2d\u6587\n".encode(),
    b"\xef\xbb\xbfbom first\n",
]


@pytest.mark.parametrize("raw", CASES)
@pytest.mark.parametrize("sample_by", text.SAMPLE_BY)
def test_rows_are_the_text_builders_without_blank_ones(tmp_path, raw, sample_by):
    p = tmp_path / "s.txt"
    p.write_bytes(raw)
    ref = _hf_reference(raw, sample_by)
    builder = _hf_builder(p, sample_by, tmp_path / "hf")
    if builder is not None:
        assert builder == ref  # the reference here is datasets' own rule
    want = ref if sample_by == "document" else _not_blank(ref)
    assert _read(p, sample_by)[0] == want


def _line_numbers(raw: bytes) -> list[int]:
    t = raw.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    return [i + 1 for i, ln in enumerate(t.split("\n")) if ln.strip()]


def _paragraph_lines(raw: bytes) -> list[int]:
    t = raw.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    out, pos = [], 0
    for p in t.split("\n\n"):
        if p.strip():
            out.append(t[:pos].count("\n") + 1)
        pos += len(p) + 2
    return out


_PIECES = st.sampled_from(["a", "bc", " ", "\t", "\n", "\n", "\r\n", "\r", "\u00e9", "\u4e2d", "\u00a0", "\u2028",
                           "\x0c", "\x85"])


@settings(max_examples=examples(300), deadline=None)
@given(pieces=st.lists(_PIECES, max_size=40), chunk=st.sampled_from([1, 2, 5, 64, 1 << 20]))
@example(pieces=["a", "\r", "\n", "\n", "b"], chunk=1)
@example(pieces=["a", "\n", "\n", "\n", "b", "\n", "\n"], chunk=2)
def test_any_text_any_chunk_size(tmp_path_factory, pieces, chunk):
    """Rows and their lines do not depend on where the chunks are cut (a \\r\\n or a "\\n\\n" across a cut)."""
    raw = "".join(pieces).encode("utf-8")
    p = tmp_path_factory.mktemp("t") / "s.txt"
    p.write_bytes(raw)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(text, "TEXT_CHUNK_BYTES", chunk)
        rows, lines, findings = _read(p, "line")
        assert (rows, lines, findings) == (_not_blank(_hf_reference(raw, "line")), _line_numbers(raw), [])
        rows, lines, _ = _read(p, "paragraph")
        assert (rows, lines) == (_not_blank(_hf_reference(raw, "paragraph")), _paragraph_lines(raw))
        assert _read(p, "document")[:2] == ([_hf_reference(raw, "document")[0]], [1])


def test_an_empty_file_is_one_empty_document_and_no_line(tmp_path):
    p = tmp_path / "e.txt"
    p.write_bytes(b"")
    assert _read(p, "line")[0] == [] and _read(p, "paragraph")[0] == []
    assert _read(p, "document")[0] == [""]


def test_invalid_utf8_names_the_line_and_byte_and_reads_the_rest(tmp_path):
    raw = b"good\n\ncaf\xe9 au lait\r\nnext\n"
    p = tmp_path / "l1.txt"
    p.write_bytes(raw)
    rows, lines, (f,) = _read(p)
    assert rows == ["good", "caf\ufffd au lait", "next"] and lines == [1, 3, 4]
    assert f.check == "decode.invalid_utf8" and f.lines == (3,) and f.count == 1
    assert f.examples[0].byte_offset == raw.index(b"\xe9")
    assert f.details["likely_encoding"] == "cp1252"


@pytest.mark.parametrize("chunk", [3, 1 << 20])
def test_a_line_over_max_row_bytes_is_a_bad_record_and_never_a_row(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(text, "TEXT_CHUNK_BYTES", chunk)
    long = b"x" * 64
    raw = b"short\n" + long + b"\nafter\n\nlast\n"
    p = tmp_path / "long.txt"
    p.write_bytes(raw)
    rows, lines, (f,) = _read(p, "line", max_row=32)
    assert rows == ["short", "after", "last"] and lines == [1, 3, 5]
    assert f.check == "decode.bad_record" and f.lines == (2,) and f.examples[0].byte_offset == raw.index(long)
    assert "64 bytes" in f.message and "max_row_bytes" in f.message
    # by paragraph: the paragraph holding it is the bad record, the next one is a row
    rows, lines, (f,) = _read(p, "paragraph", max_row=32)
    assert rows == ["last\n"] and lines == [5] and f.lines == (2,)


@pytest.mark.parametrize("chunk", [4, 1 << 20])
def test_a_paragraph_over_max_row_bytes_is_a_bad_record_at_its_first_line(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(text, "TEXT_CHUNK_BYTES", chunk)
    raw = b"q\n\n" + b"ab\n" * 20 + b"\nz z\n"
    p = tmp_path / "para.txt"
    p.write_bytes(raw)
    rows, lines, (f,) = _read(p, "paragraph", max_row=30)
    assert rows == ["q", "z z\n"] and lines == [1, 24]
    assert f.check == "decode.bad_record" and f.lines == (3,) and f.examples[0].byte_offset == 3


def test_a_document_over_max_row_bytes_is_unreadable(tmp_path):
    p = tmp_path / "doc.txt"
    p.write_bytes(b"line\n" * 10)
    assert _read(p, "document", max_row=50)[0] == ["line\n" * 10]
    with pytest.raises(Unreadable, match="max_row_bytes"):
        text.open_text(p, "document", max_row=49)


def test_compressed_shards_read_as_the_plain_file(tmp_path):
    raw = SHAKESPEARE.read_bytes()[:20_000] if SHAKESPEARE.exists() else b"a\n\nb c\r\nd\n" * 500
    (tmp_path / "p.txt").write_bytes(raw)
    (tmp_path / "p.txt.gz").write_bytes(gzip.compress(raw))
    (tmp_path / "p.txt.zst").write_bytes(zstandard.ZstdCompressor().compress(raw))
    for mode in text.SAMPLE_BY:
        plain = _read(tmp_path / "p.txt", mode)
        assert _read(tmp_path / "p.txt.gz", mode) == plain == _read(tmp_path / "p.txt.zst", mode)


def test_the_file_changing_between_passes_is_unreadable(tmp_path, monkeypatch):
    monkeypatch.setattr(text, "TEXT_CHUNK_BYTES", 8)
    monkeypatch.setattr(text, "KEEP_BYTES", 0)
    p = tmp_path / "c.txt"
    p.write_bytes(b"one\ntwo\nthree\n")
    data = text.open_text(p)
    p.write_bytes(b"one\n\ntwo three\nfour\n")
    with pytest.raises(Unreadable, match="changed"):
        data.lf.collect()


def test_real_tinyshakespeare_by_line_paragraph_and_document(tmp_path):
    if not SHAKESPEARE.exists():
        pytest.skip("../shared/realdata is not present")
    raw = SHAKESPEARE.read_bytes()
    assert len(raw) == 1_115_394 and raw.count(b"\n") == 40_000  # PROVENANCE.md
    t = raw.decode("utf-8")
    lines = t.split("\n")[:-1]  # the file ends with a line break
    rows, at, findings = _read(SHAKESPEARE, "line")
    assert findings == []
    assert rows == [ln for ln in lines if ln.strip()]
    assert at == [i + 1 for i, ln in enumerate(lines) if ln.strip()]
    assert len(rows) == 40_000 - sum(1 for ln in lines if not ln.strip())
    paragraphs, _, _ = _read(SHAKESPEARE, "paragraph")
    assert paragraphs == [p for p in t.split("\n\n") if p.strip()]
    assert _read(SHAKESPEARE, "document")[0] == [t]
    builder = _hf_builder(SHAKESPEARE, "line", tmp_path / "hf")
    if builder is not None:
        assert len(builder) == 40_000 and _not_blank(builder) == rows  # datasets: one row per line, blanks ""


# ----------------------------------------------------------------- a table in a .txt is not running text

def test_real_emotion_txt_is_refused_as_a_table_with_its_separator_named(realdata, tmp_path):
    """dair-ai emotion (PROVENANCE: ';'-separated, header text;label_name; 31 duplicate texts in train,
    val/test texts also in train): read as lines it passed with no finding, its labels and leakage
    unchecked; as auto-detected text it is refused, naming the separator, and as the CSV it is, its
    duplicates are found."""
    rep = datacheck.audit(str(realdata / "emotion"), config={})
    assert sorted((f.shards, f.check) for f in rep.findings) == [((n,), "decode.unreadable")
                                                                  for n in ("test.txt", "train.txt", "val.txt")]
    assert all("separator = \";\"" in f.message and "'text;label_name'" in f.message for f in rep.findings)
    as_text = datacheck.audit(str(realdata / "emotion"), config={"dataset": {"format": "text"}})
    assert not as_text.findings and sum(s.rows for s in as_text.shards) == 16_001 + 2_001 + 2_001
    as_csv = datacheck.audit(str(realdata / "emotion" / "train.txt"),
                             config={"dataset": {"format": "csv", "separator": ";"}})
    rows = [tuple(ln.rsplit(";", 1)) for ln in (realdata / "emotion" / "train.txt").read_text().splitlines()[1:]]
    texts = [t for t, _ in rows]
    assert len(texts) - len(set(texts)) == 31  # PROVENANCE #11
    # 'label_name' is read as the class label: a copy repeats text and label; a text under two labels is label noise
    (dup,) = [f for f in as_csv.findings if f.check == "dup.exact_in_shard"]
    assert dup.count == len(rows) - len(set(rows))
    labels_of: dict[str, set[str]] = {}
    for t, lab in rows:
        labels_of.setdefault(t, set()).add(lab)
    (noise,) = [f for f in as_csv.findings if f.check == "dup.conflicting_labels"]
    assert noise.message.startswith(f"{sum(len(v) > 1 for v in labels_of.values())} distinct content(s)")


@pytest.mark.parametrize("head, sep", [("sentence\tlabel\n", "\t"), ('"text","label"\n', ","), ("a|b|c\n", "|")])
def test_a_header_of_names_and_records_of_as_many_fields_is_a_table(tmp_path, head, sep):
    width = len(head.split(sep))
    body = "".join(sep.join([f"some words {i}"] + [str(i % 3)] * (width - 1)) + "\n" for i in range(5))
    (tmp_path / "t.txt").write_text(head + body)
    got = text.table_head(tmp_path / "t.txt")
    assert got is not None and got[0] == sep and got[2] == width and got[3] == 5


@pytest.mark.parametrize("content", [
    "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n",  # verse
    "Hello, world\nYes, indeed\nNo, never\n",            # one comma a line, but no header of names
    "title;notes\nonly one field here\nx;y\n",            # a record of another width
    "a;b\n",                                              # a header and nothing after it
])
def test_running_text_is_no_table(tmp_path, content):
    (tmp_path / "t.txt").write_text(content)
    assert text.table_head(tmp_path / "t.txt") is None
