"""A WebDataset member, MDS value or litdata field that does not decode is one ``decode.bad_record``
finding and a null cell (never ``""``) that the checks of missing values do not count again
(``ShardData.retyped``): a bad gzip member was also an ``empty.text`` error.

Material: webdataset's own ``testdata/compressed.tar`` (../shared/realdata/webdataset_text, PROVENANCE.md:
3 samples ``compressed/000{1,2,3}.txt.gz`` = "hello", "world", "gzip"), one member's deflate stream
overwritten in a copy."""
from __future__ import annotations

import gzip
import io
import tarfile

import pytest
from checkhelp import findings
from conftest import REALDATA

import datacheck
from datacheck.formats.base import ReadOptions
from datacheck.formats.webdataset import read_webdataset_cells
from datacheck.model.config import DatasetSection

SRC = REALDATA / "webdataset_text" / "compressed.tar"


def _broken_copy(dst, member: str = "compressed/0002.txt.gz") -> list[str]:
    """Copy SRC with ``member``'s deflate data overwritten; returns the texts of the members that decode."""
    if not SRC.is_file():
        pytest.skip("../shared/realdata is not present")
    texts = []
    with tarfile.open(SRC) as src, tarfile.open(dst, "w") as out:
        for m in src.getmembers():
            data = src.extractfile(m).read() if m.isfile() else None
            if data is not None and m.name == member:
                data = data[:10] + b"\x00garbage" + data[18:]  # the 10-byte gzip header kept, the stream broken
            elif data is not None:
                texts.append(gzip.decompress(data).decode().strip())
            if data is not None:
                m.size = len(data)
                out.addfile(m, io.BytesIO(data))
            else:
                out.addfile(m)
    return texts


def _copy(dst, members: list[str], broken: list[str]) -> None:
    """A tar of SRC's ``members`` (by name), the deflate data of those in ``broken`` overwritten."""
    with tarfile.open(SRC) as src, tarfile.open(dst, "w") as out:
        for m in src.getmembers():
            if m.name not in members:
                continue
            data = src.extractfile(m).read()
            if m.name in broken:
                data = data[:10] + b"\x00garbage" + data[18:]
            m.size = len(data)
            out.addfile(m, io.BytesIO(data))


def test_null_cells_that_did_not_decode_are_no_duplicates(tmp_path):
    """Two undecoded text members, in one shard or in two, are not the same text: no dup.* finding
    (their cells were both null, and null equals null in the row hash)."""
    if not SRC.is_file():
        pytest.skip("../shared/realdata is not present")
    m = [f"compressed/000{k}.txt.gz" for k in (1, 2, 3)]
    (tmp_path / "two").mkdir()
    _copy(tmp_path / "two" / "a.tar", m, [m[1]])
    _copy(tmp_path / "two" / "b.tar", [m[2]], [m[2]])
    rep = datacheck.audit(str(tmp_path / "two"), config={})
    assert sorted((f.check, f.shards, f.rows) for f in rep.findings) == [
        ("decode.bad_record", ("a.tar",), (1,)), ("decode.bad_record", ("b.tar",), (0,))]
    (tmp_path / "one").mkdir()
    _copy(tmp_path / "one" / "a.tar", m, m[1:])
    rep = datacheck.audit(str(tmp_path / "one"), config={})
    assert [(f.check, f.rows) for f in rep.findings] == [("decode.bad_record", (1, 2))]
    # the readable copies still repeat: a.tar's rows 0 and 2 again in c.tar
    _copy(tmp_path / "two" / "c.tar", [m[0], m[2]], [])
    rep = datacheck.audit(str(tmp_path / "two"), config={})
    f = findings(rep, "dup.exact_across_shards")
    assert len(f) == 1 and f[0].count == 2 and f[0].shards == ("a.tar", "c.tar")


def test_a_bad_gzip_member_is_one_decode_finding_and_a_null_cell(tmp_path):
    texts = _broken_copy(tmp_path / "a.tar")
    assert texts == ["hello", "gzip"]  # PROVENANCE.md, the other two members
    df, found, nulled = read_webdataset_cells(tmp_path / "a.tar", ReadOptions(dataset=DatasetSection()))
    assert [None if v is None else v.strip() for v in df["txt.gz"].to_list()] == ["hello", None, "gzip"]
    assert nulled == {"txt.gz": [1]} and [f.check for f in found] == ["decode.bad_record"]
    rep = datacheck.audit(str(tmp_path), config={})
    assert [(f.check, f.rows) for f in rep.findings if f.severity != "info"] == [("decode.bad_record", (1,))]
    assert findings(rep, "empty.text") == []
    # a real empty text next to it is still found
    with tarfile.open(tmp_path / "a.tar", "a") as out:
        blank = gzip.compress(b"  ")
        ti = tarfile.TarInfo("compressed/0004.txt.gz")
        ti.size = len(blank)
        out.addfile(ti, io.BytesIO(blank))
    rep = datacheck.audit(str(tmp_path), config={})
    assert [(f.check, f.rows) for f in findings(rep, "empty.text")] == [("empty.text", (3,))]
