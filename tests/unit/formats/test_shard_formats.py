"""The shard formats of datacheck.formats on the real samples of ../shared/realdata (facts from
its PROVENANCE.md) and on copies broken one rule at a time: Megatron .bin/.idx, MosaicML MDS,
WebDataset tar, litdata chunks."""
from __future__ import annotations

import gzip
import io
import json
import shutil
import tarfile
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from conftest import SHARED

import datacheck
from datacheck.derive.read import open_for_checks
from datacheck.formats.discovery import discover
from datacheck.formats.registry import hash_shard
from datacheck.io.discover import DiscoveredShard
from datacheck.model.config import config_from_dict
from datacheck.model.errors import UsageError

REAL = (SHARED / "realdata")
if not REAL.is_dir():
    REAL = Path(__file__).resolve().parents[4] / "shared" / "realdata"
pytestmark = pytest.mark.skipif(not REAL.is_dir(), reason="../shared/realdata is not present")

OWT = REAL / "megatron_gpt2_openwebtext"
TOY = REAL / "megatron_toy_duplicates"
MDS = REAL / "mds_fixtures"
WDS = REAL / "webdataset_text"
LIT = REAL / "litdata_images_partial"


def _frame(path: Path, fmt: str) -> pl.DataFrame:
    ci = open_for_checks(DiscoveredShard(path=path, rel=path.name, format=fmt), config_from_dict({}))
    return ci.lf.collect()


def _ds(rep, check: str):
    return [f for f in rep.dataset_findings if f.check == check]


def _sh(rep, check: str):
    return [(s.path, f) for s in rep.shards for f in s.findings if f.check == check]


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    for p in dst.rglob("*"):
        p.chmod(0o644 if p.is_file() else 0o755)
    return dst


# ------------------------------------------------------------------------------------------ Megatron


def test_megatron_openwebtext_documents_as_rows_real_facts():
    disc = discover([str(OWT)])
    assert [(s.rel, s.format) for s in disc.shards] == [("meg-gpt2-openwebtext_text_document.bin", "megatron")]
    assert "meg-gpt2-openwebtext_text_document.idx" not in [i["path"] for i in disc.ignored_data]
    df = _frame(disc.shards[0].path, "megatron")
    assert df.height == 1000 and df.schema["input_ids"] == pl.List(pl.UInt16)
    lens = df["input_ids"].list.len()
    assert int(lens.sum()) == 1_361_845
    assert int(df["input_ids"].list.max().max()) == 4999
    assert df["input_ids"].list.last().eq(4999).all()  # the EOD token ends every document


def test_megatron_vocab_rules_on_real_pair():
    rep = datacheck.audit(str(OWT), config={"tokens": {"vocab_size": 4999}})
    oov = _sh(rep, "tokens.out_of_vocab")
    assert len(oov) == 1 and oov[0][1].count == 1000  # every document ends with EOD 4999
    rep = datacheck.audit(str(OWT), config={"tokens": {"vocab_size": 119547}})
    assert len(_sh(rep, "tokens.dtype_overflow")) == 1  # uint16 cannot hold ids up to 119546
    rep = datacheck.audit(str(OWT), config={"tokens": {"vocab_size": 50257}})
    assert not _sh(rep, "tokens.out_of_vocab") and not _sh(rep, "tokens.dtype_overflow")


def test_megatron_toy_duplicates_real_defect():
    rep = datacheck.audit(str(TOY / "my-gpt2_text_document.bin"))
    s = rep.shards[0]
    assert s.rows == 10_000 and s.format == "megatron"
    df = _frame(TOY / "my-gpt2_text_document.bin", "megatron")
    assert int(df["input_ids"].list.len().sum()) == 60_000
    assert set(df["input_ids"].list.len().unique()) == {5, 7}
    dup = [f for f in s.findings if f.check == "dup.exact_in_shard"]
    assert dup and dup[0].count == 9998  # 2 distinct documents, 5,000 copies each


@pytest.mark.parametrize("breakit, words", [
    (lambda b, i: b.write_bytes(b.read_bytes()[:-2]), "shorter than its index"),
    (lambda b, i: b.write_bytes(b.read_bytes() + b"\0\0"), "longer than its index"),
    (lambda b, i: i.write_bytes(b"MMIDIDY\0\0" + i.read_bytes()[9:]), "bad magic"),
    (lambda b, i: i.write_bytes(i.read_bytes()[:-8]), "the index was cut"),
    (lambda b, i: i.write_bytes(i.read_bytes()[:17] + bytes([9]) + i.read_bytes()[18:]), "unknown dtype code 9"),
    (lambda b, i: i.write_bytes(i.read_bytes()[:-8] + np.int64(3).tobytes()),
     "end at the sequence count 1000; entry 1000 (3) is below entry 999 (999)"),
    # entry 5 of the 1,001-entry document index (after the 34-byte header, 1,000 sizes, 1,000 pointers)
    (lambda b, i: i.write_bytes((lambda r: r[:34 + 4000 + 8000 + 40] + np.int64(99_999).tobytes()
                                 + r[34 + 4000 + 8000 + 48:])(i.read_bytes())), "entry 6 (6) is below entry 5 (99999)"),
    (lambda b, i: i.unlink(), None),
])
def test_megatron_broken_pairs_are_unreadable(tmp_path, breakit, words):
    d = _copy(OWT, tmp_path / "m")
    b, i = d / "meg-gpt2-openwebtext_text_document.bin", d / "meg-gpt2-openwebtext_text_document.idx"
    breakit(b, i)
    if words is None:  # without its .idx the .bin is not a shard: a usage error that says why
        with pytest.raises(UsageError, match="neither a Megatron .idx"):
            datacheck.audit(str(d))
        return
    rep = datacheck.audit(str(d))
    un = _sh(rep, "decode.unreadable")
    assert len(un) == 1 and words in un[0][1].message, un


def test_megatron_hash_covers_the_idx(tmp_path):
    d = _copy(OWT, tmp_path / "m")
    b, i = d / "meg-gpt2-openwebtext_text_document.bin", d / "meg-gpt2-openwebtext_text_document.idx"
    h1, n1 = hash_shard(b, "megatron")
    assert n1 == 2_723_690 + 20_042
    raw = bytearray(i.read_bytes())
    raw[-1] ^= 1
    i.write_bytes(bytes(raw))
    assert hash_shard(b, "megatron")[0] != h1


# ------------------------------------------------------------------------------------------ MDS


def test_mds_real_fixtures_rows_values_and_zero_shard_index():
    rep = datacheck.audit(str(MDS))
    rows = {s.path: s.rows for s in rep.shards}
    assert rows == {"joining_sample_dataset/x/shard.00000.mds": 100, "joining_sample_dataset/y/shard.00000.mds": 100,
                    "naive_MDSdataset/25/shard.00000.mds": 2, "naive_MDSdataset/26/shard.00000.mds": 3}
    assert {s.format for s in rep.shards} == {"mds"}
    df = _frame(MDS / "naive_MDSdataset/26/shard.00000.mds", "mds")
    assert df.to_dicts() == [{"dept": "Finance", "id": "36636"}, {"dept": "Finance", "id": "40288"},
                             {"dept": "Sales", "id": "42114"}]
    x = _frame(MDS / "joining_sample_dataset/x/shard.00000.mds", "mds")
    assert x.schema == {"_id": pl.Int32, "x": pl.List(pl.Float64)} and x["_id"].to_list() == list(range(100))
    empty = _ds(rep, "index.empty_shard")
    assert len(empty) == 1 and empty[0].shards == ("naive_MDSdataset/27/index.json",)
    # the merged root index and the per-folder indexes agree with the shards: no other index finding
    assert not [f for f in rep.dataset_findings if f.check.startswith("index.") and f.check != "index.empty_shard"]


def test_mds_index_rules_on_a_broken_copy(tmp_path):
    d = _copy(MDS / "naive_MDSdataset", tmp_path / "n")
    root = json.loads((d / "index.json").read_text())
    root["shards"][0]["samples"] = 4  # 26/ holds 3
    root["shards"][1]["raw_data"]["hashes"] = {"sha1": "0" * 40}  # 25/ hash recorded wrong
    (d / "index.json").write_text(json.dumps(root))
    shutil.copy(d / "26/shard.00000.mds", d / "26/shard.00001.mds")  # an orphan shard
    (d / "25/index.json").unlink()
    rep = datacheck.audit(str(d))
    rc = _ds(rep, "index.row_count_mismatch")
    assert len(rc) == 1 and rc[0].shards == ("26/shard.00000.mds",) and rc[0].details["expected"] == 4
    ch = _ds(rep, "index.changed_shard")
    assert len(ch) == 1 and ch[0].shards == ("25/shard.00000.mds",) and "sha1" in ch[0].message
    ex = _ds(rep, "index.extra_shard")
    assert len(ex) == 1 and ex[0].shards == ("26/shard.00001.mds",)
    (d / "25/shard.00000.mds").unlink()
    rep = datacheck.audit(str(d))
    assert _ds(rep, "index.missing_shard")[0].shards == ("25/shard.00000.mds",)


def test_mds_truncated_and_bad_values(tmp_path):
    src = (MDS / "naive_MDSdataset/26/shard.00000.mds").read_bytes()
    (tmp_path / "a").mkdir()
    (tmp_path / "a/shard.00000.mds").write_bytes(src[:-3])
    rep = datacheck.audit(str(tmp_path / "a"))
    un = _sh(rep, "decode.unreadable")
    assert len(un) == 1 and "truncated" in un[0][1].message
    bad = bytearray(src)
    bad[-1] = 0xFF  # the last sample's id ("42114", PROVENANCE: dept/id str columns) is no longer UTF-8
    (tmp_path / "b").mkdir()
    (tmp_path / "b/shard.00000.mds").write_bytes(bytes(bad))
    rep = datacheck.audit(str(tmp_path / "b"))
    # an invalid str is decode.invalid_utf8 at its sample, column and byte, read with U+FFFD (it was a
    # null cell and a decode.bad_record), as JSONL and CSV report theirs
    assert _sh(rep, "decode.bad_record") == []
    u = _sh(rep, "decode.invalid_utf8")
    assert len(u) == 1 and u[0][1].rows == (2,) and rep.shards[0].rows == 3
    assert u[0][1].examples[0].value == "column 'id': byte 0xff at offset 4 of the value"
    assert _frame(tmp_path / "b/shard.00000.mds", "mds")["id"].to_list()[2] == "4211\ufffd"


# ------------------------------------------------------------------------------------------ WebDataset


def test_webdataset_real_shards():
    rep = datacheck.audit(str(WDS))
    assert {s.path: s.rows for s in rep.shards} == {"compressed.tar": 3, "testgz.tar": 1000}
    df = _frame(WDS / "compressed.tar", "webdataset")
    assert df["__key__"].to_list() == ["compressed/0001", "compressed/0002", "compressed/0003"]
    assert [t.strip() for t in df["txt.gz"].to_list()] == ["hello", "world", "gzip"]
    big = _frame(WDS / "testgz.tar", "webdataset")
    assert big.height == 1000 and big["__key__"].n_unique() == 1000 and big["txt.gz"].null_count() == 0
    assert not [f for s in rep.shards for f in s.findings if f.check.startswith("decode.")]


def _tar(path: Path, members: list[tuple[str, bytes]]) -> Path:
    with tarfile.open(path, "w") as t:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return path


def test_webdataset_member_rules(tmp_path):
    _tar(tmp_path / "s.tar", [
        ("a.txt", b"one"), ("a.cls", b"1"),
        ("b.txt.gz", b"not gzip"), ("b.cls", b"2"),
        ("b2.txt.gz", gzip.compress(b"fine")),          # sample 1: bad gzip
        ("c.txt", b"three"), ("c.cls", b"x"),                # sample 2: class not an int
        ("a.json", b"{}"),                                   # sample 3: key a resumes
        ("d.txt", b"caf\xe9"),                               # sample 5: cp1252, not UTF-8
    ])
    df = _frame(tmp_path / "s.tar", "webdataset")
    assert df["__key__"].to_list() == ["a", "b", "b2", "c", "a", "d"]
    assert df.schema["cls"] == pl.Int64 and df["cls"].to_list() == [1, 2, None, None, None, None]
    assert df["txt.gz"].to_list() == [None, None, "fine", None, None, None]
    assert df["txt"].to_list() == ["one", None, None, "three", None, "caf\ufffd"]
    rep = datacheck.audit(str(tmp_path / "s.tar"))
    br = _sh(rep, "decode.bad_record")
    assert len(br) == 1 and br[0][1].count == 3 and br[0][1].rows == (1, 3, 4)
    # a text member that is not UTF-8: decode.invalid_utf8 naming the sample, member, byte and the
    # likely encoding, read with U+FFFD (it was a bad record and a null that empty.text counted again)
    (u,) = [f for _, f in _sh(rep, "decode.invalid_utf8")]
    assert (u.rows, u.details["likely_encoding"]) == ((5,), "cp1252")
    assert u.examples[0].value == "member 'd.txt': byte 0xe9 at offset 3 of the value"
    assert not [f for _, f in _sh(rep, "empty.text") if f.column == "txt" and 5 in f.rows]


def test_webdataset_truncated_tar_is_unreadable(tmp_path):
    raw = (WDS / "testgz.tar").read_bytes()
    (tmp_path / "t.tar").write_bytes(raw[:5000])
    rep = datacheck.audit(str(tmp_path / "t.tar"))
    un = _sh(rep, "decode.unreadable")
    assert len(un) == 1 and "tar" in un[0][1].message


# ------------------------------------------------------------------------------------------ litdata


def test_litdata_real_partial_chunk_set():
    rep = datacheck.audit(str(LIT))
    assert {s.path: (s.format, s.rows) for s in rep.shards} == {
        f"chunk-{w}-{n}.bin": ("litdata", 2) for w, n in [(0, 0), (0, 1), (0, 2), (0, 3), (0, 4), (16, 0)]}
    miss = _ds(rep, "index.missing_shard")
    assert len(miss) == 1 and miss[0].count == 75  # 80 listed, the 5 chunks of worker 0 present
    extra = _ds(rep, "index.extra_shard")
    assert len(extra) == 1 and extra[0].shards == ("chunk-16-0.bin",)  # not in the index
    dup = _ds(rep, "dup.shard")
    assert len(dup) == 1 and dup[0].shards == ("chunk-0-0.bin", "chunk-16-0.bin")  # byte-identical
    # Each chunk is 16 bytes longer than its chunk_bytes: the 4*(2+2)-byte header, which the 2023
    # lightning.data writer left out of chunk_bytes. Not a defect: no index.changed_shard.
    assert not _ds(rep, "index.changed_shard")
    df = _frame(LIT / "chunk-0-0.bin", "litdata")
    assert df.schema == {"field_0": pl.Binary, "field_1": pl.Binary}
    assert all(b[:2] == b"\xff\xd8" for b in df["field_0"].to_list())  # JPEG SOI marker
    assert all(b[:1] == b"\x80" for b in df["field_1"].to_list())  # pickle protocol header, never unpickled


def test_litdata_resized_and_recounted_chunks(tmp_path):
    d = _copy(LIT, tmp_path / "l")
    raw = (d / "chunk-0-1.bin").read_bytes()
    (d / "chunk-0-1.bin").write_bytes(raw[:-10])
    idx = json.loads((d / "index.json").read_text())
    idx["chunks"][2]["chunk_size"] = 3  # chunk-0-2 holds 2 items
    (d / "index.json").write_text(json.dumps(idx))
    rep = datacheck.audit(str(d))
    ch = _ds(rep, "index.changed_shard")  # chunk-0-2: 3 items would need a 4 bytes longer header
    assert len(ch) == 1 and ch[0].shards == ("chunk-0-1.bin", "chunk-0-2.bin")
    assert _sh(rep, "decode.unreadable")[0][0] == "chunk-0-1.bin"
    rc = _ds(rep, "index.row_count_mismatch")
    assert len(rc) == 1 and rc[0].shards == ("chunk-0-2.bin",)


def test_other_bin_files_are_ignored_with_reason(tmp_path):
    (tmp_path / "weights.bin").write_bytes(b"\0" * 16)
    (tmp_path / "a.jsonl").write_text('{"text": "x"}\n')
    rep = datacheck.audit(str(tmp_path))
    assert [s.path for s in rep.shards] == ["a.jsonl"]
    assert any(i["path"] == "weights.bin" and "litdata" in i["reason"] for i in rep.ignored)



@pytest.mark.parametrize("raw", [b"", b"\x00garbage" * 300], ids=["empty", "garbage"])
def test_webdataset_file_that_is_no_tar_says_so_on_one_line(tmp_path, raw):
    """tarfile's "r:*" error lists every method it tried on several lines; the finding says in one
    line that the file is neither a tar nor a compressed one."""
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "s.tar").write_bytes(raw)
    (f,) = [f for f in datacheck.audit(str(tmp_path / "d")).findings if f.check == "decode.unreadable"]
    assert "\n" not in f.message
    assert "not a readable tar file (no tar header at its start, and not a gzip, bz2 or xz stream either)" in f.message
