"""A compressed shard must end at its compressor's end-of-stream marker with a matching checksum:
a file cut anywhere in its last bytes (gzip's CRC32/ISIZE trailer, a zstd frame's checksum or last
block) or with a bad checksum is ``decode.unreadable``, for every reader that inflates (WebDataset
``.tar.gz``/``.tgz``, JSONL ``.gz``/``.zst``, CSV ``.gz``, MDS ``.mds.zstd``); the whole file reads
as before."""
from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import tarfile
from pathlib import Path

import pytest
import zstandard
from conftest import SHARED

import datacheck
from datacheck.io.shardbytes import Unreadable, read_bytes

GZIP_TRAILER = 8  # CRC32 + ISIZE (RFC 1952 section 2.3)
ZSTD_CHECKSUM = 4  # Content_Checksum (RFC 8878 section 3.1.1)


def _unreadable(rep) -> list[str]:
    return [f.message for s in rep.shards for f in s.findings if f.check == "decode.unreadable"]


def _rows(rep) -> int:
    return sum(s.rows for s in rep.shards)


def _tar_bytes(n: int) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for i in range(n):
            for ext, data in (("txt", f"sample {i}".encode()), ("json", json.dumps({"i": i}).encode())):
                info = tarfile.TarInfo(f"s{i:03d}.{ext}")
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _write(tmp_path: Path, sub: str, name: str, data: bytes) -> Path:
    d = tmp_path / sub
    d.mkdir()
    (d / name).write_bytes(data)
    return d


@pytest.mark.parametrize("name", ["shard-000.tar.gz", "shard-000.tgz"])
def test_webdataset_tar_gz_cut_in_its_trailer_is_unreadable(tmp_path, name):
    n = 7
    gz = gzip.compress(_tar_bytes(n), mtime=0)
    whole = datacheck.audit(str(_write(tmp_path, "whole", name, gz)))
    assert _rows(whole) == n and not _unreadable(whole)
    for cut in range(1, GZIP_TRAILER + 1):
        rep = datacheck.audit(str(_write(tmp_path, f"cut{cut}", name, gz[:-cut])))
        msgs = _unreadable(rep)
        assert len(msgs) == 1 and "end-of-stream marker" in msgs[0], (cut, msgs)
        assert f"{n} sample(s) read before it" in msgs[0]


def test_webdataset_tar_gz_with_a_bad_crc_is_unreadable(tmp_path):
    gz = bytearray(gzip.compress(_tar_bytes(3), mtime=0))
    gz[-GZIP_TRAILER] ^= 0xFF  # first byte of the CRC32
    msgs = _unreadable(datacheck.audit(str(_write(tmp_path, "crc", "s.tar.gz", bytes(gz)))))
    assert len(msgs) == 1 and "CRC check failed" in msgs[0]


def test_webdataset_tar_gz_of_a_tar_without_its_end_marker_is_unreadable(tmp_path):
    raw = _tar_bytes(4)
    body = raw[:raw.rfind(b"sample 3") + 512 - raw.rfind(b"sample 3") % 512]  # up to the last member's data block
    assert len(body) % 512 == 0 and len(body) < len(raw)
    msgs = _unreadable(datacheck.audit(str(_write(tmp_path, "nomark", "s.tar.gz", gzip.compress(body)))))
    assert len(msgs) == 1 and "no end-of-archive marker" in msgs[0] and "4 complete sample(s)" in msgs[0]


def _jsonl(n: int) -> bytes:
    return "".join(json.dumps({"text": f"row {i}", "id": i}) + "\n" for i in range(n)).encode()


def test_jsonl_gz_cut_in_its_trailer_is_unreadable(tmp_path):
    n = 25
    gz = gzip.compress(_jsonl(n), mtime=0)
    assert _rows(datacheck.audit(str(_write(tmp_path, "whole", "d.jsonl.gz", gz)))) == n
    for cut in range(1, GZIP_TRAILER + 1):
        msgs = _unreadable(datacheck.audit(str(_write(tmp_path, f"c{cut}", "d.jsonl.gz", gz[:-cut]))))
        assert len(msgs) == 1 and "end-of-stream marker" in msgs[0], cut


def test_csv_gz_cut_in_its_trailer_is_unreadable(tmp_path):
    n = 12
    gz = gzip.compress(("a,b\n" + "".join(f"{i},x{i}\n" for i in range(n))).encode(), mtime=0)
    assert _rows(datacheck.audit(str(_write(tmp_path, "whole", "d.csv.gz", gz)))) == n
    msgs = _unreadable(datacheck.audit(str(_write(tmp_path, "cut", "d.csv.gz", gz[:-3]))))
    assert len(msgs) == 1 and "end-of-stream marker" in msgs[0]


def test_jsonl_zst_cut_anywhere_in_its_last_frame_is_unreadable(tmp_path):
    first, second = _jsonl(30), _jsonl(40)
    frames = [zstandard.ZstdCompressor(write_checksum=True).compress(first),
              zstandard.ZstdCompressor(write_checksum=False).compress(second)]
    data = b"".join(frames)
    whole = datacheck.audit(str(_write(tmp_path, "whole", "d.jsonl.zst", data)))
    assert _rows(whole) == first.count(b"\n") + second.count(b"\n") and not _unreadable(whole)
    # cut the checksum of the first frame (alone), then every tail length of the second (no checksum)
    for i, cut_data in enumerate([frames[0][:-k] for k in range(1, ZSTD_CHECKSUM + 1)]
                                 + [data[:-k] for k in range(1, len(frames[1]))]):
        msgs = _unreadable(datacheck.audit(str(_write(tmp_path, f"c{i}", "d.jsonl.zst", cut_data))))
        assert len(msgs) == 1 and "end-of-stream marker" in msgs[0], (i, msgs)


MDS = SHARED / "realdata" / "mds_fixtures" / "naive_MDSdataset" / "26" / "shard.00000.mds"


@pytest.mark.skipif(not MDS.is_file(), reason="../shared/realdata is not present")
def test_mds_zstd_cut_in_its_frame_checksum_is_unreadable(tmp_path):
    src = MDS.read_bytes()
    z = zstandard.ZstdCompressor(write_checksum=True).compress(src)
    whole = datacheck.audit(str(_write(tmp_path, "whole", "shard.00000.mds.zstd", z)))
    plain = datacheck.audit(str(_write(tmp_path, "plain", "shard.00000.mds", src)))
    assert _rows(whole) == _rows(plain) > 0 and not _unreadable(whole)
    msgs = _unreadable(datacheck.audit(str(_write(tmp_path, "cut", "shard.00000.mds.zstd", z[:-2]))))
    assert len(msgs) == 1 and "end-of-stream marker" in msgs[0]


@pytest.mark.skipif(not MDS.is_file(), reason="../shared/realdata is not present")
@pytest.mark.parametrize("suffix, compress, tail", [
    (".gz", lambda b: gzip.compress(b, mtime=0), GZIP_TRAILER),
    (".bz2", bz2.compress, 10),  # bz2's end-of-stream: a 48-bit magic, the 32-bit combined CRC, padding
])
def test_mds_gz_and_bz2_cut_in_their_last_bytes_are_unreadable(tmp_path, suffix, compress, tail):
    src = MDS.read_bytes()
    c = compress(src)
    plain = _rows(datacheck.audit(str(_write(tmp_path, "plain", "shard.00000.mds", src))))
    whole = datacheck.audit(str(_write(tmp_path, "whole", "shard.00000.mds" + suffix, c)))
    assert _rows(whole) == plain > 0 and not _unreadable(whole)
    for cut in range(1, tail + 1):
        msgs = _unreadable(datacheck.audit(str(_write(tmp_path, f"c{cut}", "shard.00000.mds" + suffix, c[:-cut]))))
        assert len(msgs) == 1 and ("end-of-stream marker" in msgs[0] or "CRC" in msgs[0]), (cut, msgs)


def test_read_bytes_of_a_cut_zst_is_unreadable(tmp_path):
    data = _jsonl(50)
    z = zstandard.ZstdCompressor(write_checksum=True).compress(data)
    (tmp_path / "w.jsonl.zst").write_bytes(z)
    assert read_bytes(tmp_path / "w.jsonl.zst") == data
    (tmp_path / "c.jsonl.zst").write_bytes(z[:-1])
    with pytest.raises(Unreadable, match="cannot decompress .zst data: Compressed file ended before the "
                                         "end-of-stream marker was reached"):
        read_bytes(tmp_path / "c.jsonl.zst")


@pytest.mark.parametrize("name, compress", [
    ("shard.tar", lambda b: gzip.compress(b, mtime=0)),  # webdataset opens "r|*": a .tar may hold a gzip stream
    ("shard.tar", bz2.compress),
    ("shard.tar", lambda b: lzma.compress(b)),
    ("shard.tar.gz", None),  # an uncompressed tar under a .tar.gz name
])
def test_webdataset_compression_is_told_by_the_bytes_not_the_name(tmp_path, name, compress):
    n = 6
    raw = _tar_bytes(n)
    data = compress(raw) if compress else raw
    whole = datacheck.audit(str(_write(tmp_path, "whole", name, data)))
    assert _rows(whole) == n and not _unreadable(whole)
    # a compressed stream cut by its last byte; an uncompressed tar cut after its last member's data
    # (a cut in its zero padding leaves a whole archive: tar reads it too)
    cut = data[:-1] if compress else raw[:(len(raw.rstrip(b"\0")) + 511) // 512 * 512]
    msgs = _unreadable(datacheck.audit(str(_write(tmp_path, "cut", name, cut))))
    assert len(msgs) == 1 and ("end-of-stream marker" in msgs[0] or "end-of-archive marker" in msgs[0]), msgs
