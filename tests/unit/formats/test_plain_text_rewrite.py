"""The plain-text rewrite of ``datacheck clean`` (datacheck/formats/text.rewrite_text): for any text and
any rows dropped, the copy reads, by the same ``sample_by``, as exactly the kept rows in order (a
paragraph dropped with the blank line after it), the quarantine holds the dropped rows as the audit
read them, and the bytes of what is kept (line breaks, blank lines, invalid UTF-8) stay as they were.
Expected rows are the reader's rows of the input less the dropped ones."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from conftest import examples
from hypothesis import example, given, settings
from hypothesis import strategies as st

from datacheck.formats import text
from datacheck.formats.registry import rewriter
from datacheck.formats.rewrite import RewriteJob
from datacheck.model.config import config_from_dict
from datacheck.model.errors import UsageError


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _rows(path: Path, sample_by: str) -> list[str]:
    return text.open_text(path, sample_by).lf.collect()[text.COLUMN].to_list()


def _clean(src: Path, out: Path, sample_by: str, reasons: dict[int, list[str]], rows: int, drop=(), **ds):
    dataset = config_from_dict({"dataset": {"sample_by": sample_by, **ds}}).dataset
    job = RewriteJob(source=src, fmt="text", rel=src.name, rows=rows, reasons=reasons, drop=tuple(drop), dataset=dataset)
    return rewriter("text")(job, out / src.name, out / ".q" / src.name, _write)


_PIECES = st.sampled_from(["a", "bc", " ", "\t", "\n", "\n", "\n\n", "\r\n", "\r", "\u00e9", "\u4e2d", "x y"])


@settings(max_examples=examples(200), deadline=None)
@given(pieces=st.lists(_PIECES, max_size=40), sample_by=st.sampled_from(["line", "paragraph", "document"]),
       data=st.data())
@example(pieces=["a", "\n", "\n", "\n", "b", "\n", "\n", "c", "\n"], sample_by="paragraph", data=None)
def test_the_copy_reads_as_the_kept_rows(tmp_path_factory, pieces, sample_by, data):
    tmp = tmp_path_factory.mktemp("r")
    src = tmp / "s.txt"
    raw = "".join(pieces).encode()
    src.write_bytes(raw)
    rows = _rows(src, sample_by)
    drop = (data.draw(st.sets(st.integers(0, len(rows) - 1))) if data is not None and rows else
            set(range(1, len(rows), 2)))
    got = _clean(src, tmp / "out", sample_by, {r: ["x.check"] for r in drop}, len(rows))
    out = tmp / "out" / src.name
    kept = [r for i, r in enumerate(rows) if i not in drop]
    assert (_rows(out, sample_by) if out.exists() else []) == kept
    assert out.exists() == (sample_by != "document" or bool(kept))
    q = tmp / "out" / ".q" / "s.txt.jsonl"
    quarantined = [json.loads(x) for x in q.read_text().splitlines()] if drop else []
    assert [(r["_datacheck_row"], r["text"]) for r in quarantined] == [(i, rows[i]) for i in sorted(drop)]
    assert (got.kept, got.quarantined) == (len(kept), len(drop))
    if not drop:
        assert out.read_bytes() == raw  # nothing dropped: the same bytes


def test_invalid_utf8_is_kept_as_bytes_or_dropped_when_asked(tmp_path):
    raw = b"good line\ncaf\xe9 au lait\r\nnext\n"
    src = tmp_path / "s.txt"
    src.write_bytes(raw)
    got = _clean(src, tmp_path / "keep", "line", {}, 3)
    assert (tmp_path / "keep" / "s.txt").read_bytes() == raw and got.quarantined == 0
    got = _clean(src, tmp_path / "drop", "line", {}, 3, drop=("decode.invalid_utf8",))
    assert (tmp_path / "drop" / "s.txt").read_bytes() == b"good line\nnext\n"
    assert got.reasons == [["decode.invalid_utf8"]]


def test_a_gzip_shard_is_written_as_gzip(tmp_path):
    src = tmp_path / "s.txt.gz"
    src.write_bytes(gzip.compress(b"one\ntwo\none\n"))
    _clean(src, tmp_path / "out", "line", {2: ["x.check"]}, 3)
    assert gzip.decompress((tmp_path / "out" / "s.txt.gz").read_bytes()) == b"one\ntwo\n"


def test_a_row_over_max_row_bytes_refuses_the_shard_and_writes_nothing(tmp_path):
    src = tmp_path / "s.txt"
    src.write_bytes(b"short\n" + b"x" * 64 + b"\nafter\n")
    with pytest.raises(UsageError, match="max_row_bytes"):
        _clean(src, tmp_path / "out", "line", {}, 2, max_row_bytes=32)
    assert not (tmp_path / "out").exists()
