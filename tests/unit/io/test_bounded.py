"""datacheck.io.bounded: only regular files are opened, reads take at most the stated limit, and a
compressed file is inflated as a stream (never whole)."""
from __future__ import annotations

import gzip
import io
import os

import pytest
from conftest import run_cli

from datacheck.io.bounded import (
    TRUNCATED,
    NotRegular,
    OverLimit,
    dangling_link,
    human_bytes,
    open_inflated,
    open_regular,
    read_capped,
    special_kind,
    zstd_cut,
)


def test_special_files_are_named_and_never_opened(tmp_path):
    fifo = tmp_path / "x.jsonl"
    os.mkfifo(fifo)
    assert special_kind(fifo) == "a FIFO"
    assert special_kind("/dev/zero") == "a character device"
    assert special_kind(tmp_path) == "a folder"
    (tmp_path / "f").write_bytes(b"x")
    assert special_kind(tmp_path / "f") is None
    with pytest.raises(NotRegular, match="a FIFO"):
        open_regular(fifo)  # would block forever if it were opened
    with pytest.raises(NotRegular, match="character device"):
        open_regular("/dev/zero")
    os.symlink("/dev/zero", tmp_path / "link.tsv")
    with pytest.raises(NotRegular):
        open_regular(tmp_path / "link.tsv")


def test_read_capped_checks_the_declared_size_first():
    f = io.BytesIO(b"abcdef")
    assert read_capped(f, 4, 10, "x", "max_member_bytes") == b"abcd"
    assert read_capped(f, 100, 100, "x", "max_member_bytes") == b"ef"  # fewer at the end of the stream
    with pytest.raises(OverLimit, match=r"declares 3000000000 bytes, over the limit of 256 MiB \(\[dataset\] max_member_bytes\)"):
        read_capped(io.BytesIO(b""), 3_000_000_000, 256 << 20, "member '0.txt'", "max_member_bytes")


def test_open_inflated_streams(tmp_path):
    p = tmp_path / "a.gz"
    p.write_bytes(gzip.compress(b"0123456789" * 1000))
    with open_inflated(p) as f:
        assert f.read(5) == b"01234"


def test_human_bytes():
    assert [human_bytes(n) for n in (5, 1024, 256 << 20, 3 << 30, 1536)] == ["5 bytes", "1 KiB", "256 MiB", "3 GiB",
                                                                              "1.5 KiB"]


def test_zstd_cut_finds_every_cut_and_no_whole_file():
    import zstandard

    a = zstandard.ZstdCompressor(write_checksum=True).compress(b"0123456789" * 5000)
    b = zstandard.ZstdCompressor(write_checksum=False, write_content_size=False).compress(bytes(range(256)) * 900)
    skip = (0x184D2A53).to_bytes(4, "little") + (5).to_bytes(4, "little") + b"12345"  # a skippable frame
    data = a + skip + b
    whole = {0, len(a), len(a) + len(skip), len(data)}
    for k in range(len(data) + 1):
        why = zstd_cut(io.BytesIO(data[:k]))
        assert (why is None) == (k in whole), k
        if why is not None:
            assert why.startswith(TRUNCATED)


def test_open_inflated_refuses_a_cut_zst_and_reads_a_whole_one(tmp_path):
    import zstandard

    text = b"line\n" * 3000
    z = zstandard.ZstdCompressor(write_checksum=True).compress(text)
    (tmp_path / "w.zst").write_bytes(z)
    with open_inflated(tmp_path / "w.zst") as f:
        assert f.read() == text
    (tmp_path / "c.zst").write_bytes(z[:-1])
    with pytest.raises(EOFError, match="end-of-stream marker"):
        open_inflated(tmp_path / "c.zst")
    (tmp_path / "c.gz").write_bytes(gzip.compress(text)[:-1])
    with open_inflated(tmp_path / "c.gz") as g, pytest.raises(EOFError, match="end-of-stream marker"):
        g.read()


def test_dangling_link_names_a_broken_link_and_a_loop(tmp_path):
    gone = tmp_path / "not-downloaded.bin"
    (tmp_path / "broken").symlink_to(gone)
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    (tmp_path / "real").write_text("x")
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    assert dangling_link(tmp_path / "broken") == f"a broken symlink: its target {gone} does not exist"
    assert dangling_link(tmp_path / "loop") == f"a symlink loop (it leads back to itself through {tmp_path / 'loop'})"
    assert dangling_link(tmp_path / "alias") is None and dangling_link(tmp_path / "real") is None
    assert dangling_link(tmp_path / "nothing-here") is None


@pytest.mark.parametrize("verb", ["trace", "checkpoint"])
def test_trace_and_checkpoint_name_a_broken_link(tmp_path, verb):
    gone = tmp_path / "run" / "metrics.jsonl"
    link = tmp_path / "metrics.jsonl"
    link.symlink_to(gone)
    p = run_cli(verb, str(link), cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert f"a broken symlink: its target {gone} does not exist" in p.stderr, p.stderr
