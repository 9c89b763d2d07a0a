"""The list-row page screen (formats/parquetpages.py ``_long_row``) reads the first bytes of each data
page's repetition levels, decompressing a page only that far: LZ4 pages (raw blocks and Hadoop's
framing, what pyarrow writes for ``compression="lz4"``) too, no longer whole; BROTLI pages are still
decompressed whole (no prefix read: the docstring says what it costs) and give the same answer.
Expected bytes are pyarrow's own decompression of what pyarrow compressed."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from datacheck.formats import parquetpages
from datacheck.formats.parquetpages import scan_pages

LIMIT = 1 << 20


def _blocks() -> list[bytes]:
    rng = np.random.default_rng(7)
    levels = bytes([2, 1]) + bytes(rng.integers(0, 4, 4_000, dtype=np.uint8))  # levels-like
    return [b"", b"a", b"abc" * 10_000, rng.bytes(5_000), levels, bytes(range(256)) * 64 + b"tail",
            b"\x00" * 100_000]


@pytest.mark.parametrize("k", range(7))
@pytest.mark.parametrize("n", [1, 4, 20, 4_096, 1 << 20])
def test_lz4_prefix_is_the_first_bytes_of_the_whole_block(k, n):
    raw = _blocks()[k]
    codec = pa.Codec("lz4_raw")
    block = codec.compress(raw, asbytes=True)
    assert parquetpages._lz4_prefix(block, n) == raw[:n]
    framed = len(raw).to_bytes(4, "big") + len(block).to_bytes(4, "big") + block  # Hadoop's framing
    assert parquetpages._hadoop_lz4_prefix(framed, n, len(raw), len(framed)) == raw[:n]
    try:  # the body's first 4 KiB only (what the screen reads): the bytes asked for, or refused when they
        # reach past what those decompress to (the screen then reads the page whole)
        got = parquetpages._hadoop_lz4_prefix(framed[:4_096], n, len(raw), len(framed))
    except parquetpages._Bad:
        assert len(framed) > 4_096
    else:
        assert got == raw[:n]


def test_a_cut_or_corrupt_lz4_block_is_refused_not_read_past():
    block = pa.Codec("lz4_raw").compress(b"abc" * 1_000, asbytes=True)
    with pytest.raises(parquetpages._Bad):
        parquetpages._lz4_prefix(block[:3], 1_000)
    with pytest.raises(parquetpages._Bad):
        parquetpages._lz4_prefix(b"\x0f\xff\xff", 10)  # a match before any byte was written


class _NoWholePage(dict):
    """``_CODECS`` for a test that must see no page decompressed whole (the full-body path asks it)."""

    def get(self, key, default=None):
        raise AssertionError(f"a {key} page was decompressed whole")


def _lists(path: Path, lengths: list[int], **write) -> Path:
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    ids = pa.ListArray.from_arrays(pa.array(offsets), pa.array(np.arange(int(offsets[-1])) % 97).cast(pa.int32()))
    pq.write_table(pa.table({"ids": ids}), path, row_group_size=len(lengths), **write)
    return path


def test_the_lz4_screen_reads_no_page_whole(tmp_path, monkeypatch):
    """20,000 rows of 100 tokens in pages of 1/16 of the bound, LZ4: the screen clears the chunk from
    each page's first bytes (before: every page decompressed whole)."""
    path = _lists(tmp_path / "t.parquet", [100] * 20_000, compression="lz4", use_dictionary=False,
                  data_page_size=LIMIT // 16)
    md = pq.ParquetFile(path).metadata
    assert md.row_group(0).column(0).compression == "LZ4"
    monkeypatch.setattr(parquetpages, "_CODECS", _NoWholePage())
    assert scan_pages(path, md, LIMIT, look=False).big is None


@pytest.mark.parametrize("compression", ["lz4", "brotli"])
def test_a_long_row_is_named_under_lz4_and_brotli(tmp_path, compression):
    most = LIMIT // 4
    lengths = [10] * 2_000
    lengths[1_234] = most + 1
    path = _lists(tmp_path / "l.parquet", lengths, compression=compression, use_dictionary=False)
    got = scan_pages(path, pq.ParquetFile(path).metadata, LIMIT).big
    assert got is not None and got.row == 1_234 and got.entries == most + 1, got
    lengths[1_234] = most
    path = _lists(tmp_path / "m.parquet", lengths, compression=compression, use_dictionary=False)
    assert scan_pages(path, pq.ParquetFile(path).metadata, LIMIT).big is None
