"""The binary-layout readers (MDS, WebDataset, litdata) under hostile bytes, in process: MDS takes
only the encodings its writer writes, configs of the wrong types and over-limit members are
findings naming the place, and every size is checked against ``[dataset]`` bounds before it is read
(the bounds lowered here so that small inputs pass them)."""
from __future__ import annotations

import json
import tarfile

import pytest
import zstandard
from hostilegen import gnu_sparse_tar, litdata_chunk, mds_bytes, mds_cfg, pax_size_tar, tar_bytes

from datacheck.formats.base import FormatError, ReadOptions
from datacheck.formats.litdata import read_litdata_chunk
from datacheck.formats.mds import read_mds
from datacheck.formats.webdataset import read_webdataset
from datacheck.model.config import DatasetSection


def _opts(**limits: int) -> ReadOptions:
    return ReadOptions(dataset=DatasetSection(**limits), max_examples=5)


@pytest.mark.parametrize("enc", ["ndarray:O", "ndarray:O:2", "ndarray:xyz", "ndarray:V8", "ndarray:<U3", "ndarray:int32:a",
                                 "ndarray:int32:0", "ndarray:int32:2:3", "nd", 5, None, ["str"]])
def test_mds_encodings_it_does_not_write_are_unreadable(tmp_path, enc):
    p = tmp_path / "shard.00000.mds"
    p.write_bytes(mds_bytes(mds_cfg(["x"], [enc]), [[bytes(16)]]))
    with pytest.raises(FormatError, match="unsupported MDS encoding"):
        read_mds(p, _opts())


@pytest.mark.parametrize(("cfg", "why"), [
    (mds_cfg(["x"], ["str"], ["abc"]), "column_sizes of column 'x'"),
    (mds_cfg([5], ["str"]), "column_names must be distinct strings"),
    (mds_cfg(["x", "x"], ["str", "str"]), "column_names must be distinct strings"),
    ({"column_names": "x", "column_encodings": ["str"]}, "column_names is str, not a list"),
    ({"column_encodings": ["str"]}, "column_names is missing"),
    (b"[1, 2]", "is a JSON list, not an object"),
    (b'{"a": ' + b"[" * 100 + b"]" * 100 + b"}", "nested 101 levels deep"),
])
def test_mds_config_of_wrong_types_is_unreadable_naming_the_key(tmp_path, cfg, why):
    p = tmp_path / "shard.00000.mds"
    p.write_bytes(mds_bytes(cfg, [[b"abc"]]))
    with pytest.raises(FormatError, match=why):
        read_mds(p, _opts())


def test_mds_over_limit_value_is_a_bad_record_and_zstd_stops_at_the_file_bound(tmp_path):
    p = tmp_path / "shard.00000.mds"
    p.write_bytes(mds_bytes(mds_cfg(["x"], ["str"]), [[b"a" * 100], [b"ok"]]))
    df, findings = read_mds(p, _opts(max_member_bytes=50))
    assert df["x"].to_list() == [None, "ok"]
    assert findings[0].rows == (0,) and "max_member_bytes" in findings[0].message
    z = tmp_path / "shard.00001.mds.zstd"
    z.write_bytes(zstandard.ZstdCompressor().compress(mds_bytes(mds_cfg(["x"], ["str"]), [[b"a" * 10_000]])))
    with pytest.raises(FormatError, match="max_file_bytes"):
        read_mds(z, _opts(max_file_bytes=1000))


def test_mds_dynamic_ndarray_with_a_short_header_is_a_bad_record(tmp_path):
    p = tmp_path / "shard.00000.mds"
    p.write_bytes(mds_bytes(mds_cfg(["x"], ["ndarray:uint8"]), [[bytes([60 << 2])], [bytes([1 << 2, 2, 7, 8])]]))
    df, findings = read_mds(p, _opts())
    assert df["x"].to_list() == [None, [7, 8]]
    assert findings[0].rows == (0,)


@pytest.mark.parametrize(("raw", "where"), [(gnu_sparse_tar(3_000_000_000), "0.txt"), (pax_size_tar(10**12), "0.txt")])
def test_tar_sizes_are_checked_before_reading(tmp_path, raw, where):
    p = tmp_path / "s.tar"
    p.write_bytes(raw)
    try:
        df, findings = read_webdataset(p, _opts())
        msg = findings[0].message + repr(findings[0].examples)
    except FormatError as exc:
        msg = exc.reason
    assert where in msg and ("max_member_bytes" in msg or "declares" in msg), msg


def test_tar_member_and_sample_bounds_and_gz_members(tmp_path):
    import gzip

    p = tmp_path / "s.tar"
    p.write_bytes(tar_bytes([("a.txt", b"x" * 100), ("a.json", b"{}"), ("b.txt", b"y"), ("b.json.gz", gzip.compress(b"1" * 500)),
                             ("c.cls", b"9" * 30)]))
    df, findings = read_webdataset(p, _opts(max_member_bytes=200, max_record_bytes=101))
    text = " ".join(e.value for e in findings[0].examples)
    assert "'a.json'" in text and "max_record_bytes" in text  # the sample's members add up past the bound
    assert "b.json.gz" in text and "inflates past" in text
    assert "c.cls" in text and "64 bits" in text
    assert df["txt"].to_list() == ["x" * 100, "y", None]


def test_tar_member_name_not_utf8_is_a_bad_record(tmp_path):
    raw = bytearray(tar_bytes([("s0.txt", b"a")], fmt=tarfile.USTAR_FORMAT))
    raw[1] = 0xFF
    head = raw[:512]
    head[148:156] = b" " * 8
    head[148:156] = b"%06o\0 " % sum(head)
    raw[:512] = head
    p = tmp_path / "s.tar"
    p.write_bytes(bytes(raw))
    df, findings = read_webdataset(p, _opts())
    assert "s\\xff.txt" in findings[0].message and df["__key__"].to_list() == ["s\\xff"]


def test_litdata_item_over_the_record_bound_is_unreadable(tmp_path):
    p = tmp_path / "chunk-0-0.bin"
    p.write_bytes(litdata_chunk([[b"a" * 100]]))
    (tmp_path / "index.json").write_text('{"chunks": [], "config": {"data_format": ["bytes"]}}')
    assert read_litdata_chunk(p, _opts())[0].height == 1
    with pytest.raises(FormatError, match="item 0: 104 bytes, over the limit"):
        read_litdata_chunk(p, _opts(max_record_bytes=50))
    with pytest.raises(FormatError, match="max_file_bytes"):
        read_litdata_chunk(p, _opts(max_file_bytes=50))


def test_litdata_index_nested_deep_is_no_litdata_folder(tmp_path):
    from datacheck.formats.litdata import litdata_folder

    (tmp_path / "index.json").write_bytes(b'{"chunks": [], "config": {"x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}")
    assert litdata_folder(str(tmp_path)) is False


def test_tar_gz_member_with_corrupt_deflate_is_a_bad_record(tmp_path):
    import gzip

    body = bytearray(gzip.compress(b'{"a": 1}', compresslevel=0))
    body[11] ^= 0xFF  # the stored block's LEN no longer matches its NLEN: zlib.error, not OSError
    p = tmp_path / "s.tar"
    p.write_bytes(tar_bytes([("a.txt", b"x"), ("a.json.gz", bytes(body))]))
    df, findings = read_webdataset(p, _opts())
    assert "a.json.gz" in findings[0].message and df["json.gz"].to_list() == [None]


def _litdata_folder(tmp_path, items, data_format, compression=None, raw=None):
    p = tmp_path / "chunk-0-0.bin"
    body = litdata_chunk(items)
    p.write_bytes(raw if raw is not None else body)
    (tmp_path / "index.json").write_text(json.dumps({"chunks": [], "config": {"data_format": data_format,
                                                                               "compression": compression}}))
    return p, body


def test_litdata_field_that_does_not_decode_is_a_bad_record_naming_the_item(tmp_path):
    """An ``int``/``float`` field that is not 8 bytes: a null cell and a ``decode.bad_record`` naming the
    item (they were null with no finding: the shard passed). A ``str`` that is not UTF-8 is
    ``decode.invalid_utf8`` naming the item, the field, the byte and its offset, its text read with
    replacement characters as the line formats read theirs (it was a null cell and a bad_record, and
    the null then counted again as an empty text)."""
    import struct

    good = [struct.pack("<q", 7), struct.pack("<d", 0.5), "é".encode()]
    p, _ = _litdata_folder(tmp_path, [good, [b"\x01\x02", struct.pack("<d", 1.5), b"ok"], [struct.pack("<q", 9),
                                      b"\x00" * 4, b"\xff\xfe"]], ["int", "float", "str"])
    df, findings = read_litdata_chunk(p, _opts())
    assert df.rows() == [(7, 0.5, "é"), (None, 1.5, "ok"), (9, None, b"\xff\xfe".decode("utf-8", "replace"))]
    f, u = findings
    assert f.check == "decode.bad_record" and f.count == 2 and f.rows == (1, 2)
    assert "item 1, field_0 (int): 2 bytes for an int (litdata writes 8)" in f.message
    assert "field_1 (float): 4 bytes" in str(f.examples[1].value)
    assert (u.check, u.count, u.rows) == ("decode.invalid_utf8", 1, (2,))
    assert u.examples[0].value == "field_2: byte 0xff at offset 0 of the value"


@pytest.mark.parametrize("fmt", [[], "jpeg", [1, 2], None])
def test_litdata_index_whose_data_format_is_no_list_of_names_is_unreadable(tmp_path, fmt):
    p, _ = _litdata_folder(tmp_path, [[b"abc"]], fmt)
    with pytest.raises(FormatError, match="index.json config.data_format is .* not a list of 1 to 4096 format names"):
        read_litdata_chunk(p, _opts())


def test_litdata_zstd_chunk_is_inflated_and_a_raw_one_under_a_zstd_index_is_unreadable(tmp_path):
    """litdata compresses each whole chunk with zstd: such a chunk is read inflated; a raw chunk
    under an index that declares zstd (litdata cannot read it) and another compressor are refused."""
    items = [[b"a" * 10], [b"bc"]]
    p, body = _litdata_folder(tmp_path, items, ["bytes"], "zstd", raw=zstandard.ZstdCompressor().compress(litdata_chunk(items)))
    df, findings = read_litdata_chunk(p, _opts())
    assert df["field_0"].to_list() == [b"a" * 10, b"bc"] and findings == []
    with pytest.raises(FormatError, match="max_file_bytes"):
        read_litdata_chunk(p, _opts(max_file_bytes=len(body) - 1))
    p.write_bytes(body)
    with pytest.raises(FormatError, match="declares compression 'zstd' but the chunk does not inflate as zstd"):
        read_litdata_chunk(p, _opts())
    _litdata_folder(tmp_path, items, ["bytes"], "lz4")
    with pytest.raises(FormatError, match="compression 'lz4': datacheck inflates litdata chunks compressed with zstd only"):
        read_litdata_chunk(p, _opts())


def test_litdata_offsets_that_decrease_name_the_item(tmp_path):
    import struct

    p, body = _litdata_folder(tmp_path, [[b"ab"], [b"cd"], [b"ef"]], ["bytes"])
    raw = bytearray(body)
    struct.pack_into("<I", raw, 8, 1 << 31)  # offset[1]
    p.write_bytes(bytes(raw))
    with pytest.raises(FormatError, match=r"item 2's offset \d+ is below item 1's 2147483648"):
        read_litdata_chunk(p, _opts())
