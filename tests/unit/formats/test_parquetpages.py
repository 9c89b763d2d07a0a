"""One huge value among many small rows of a parquet row group, and a dictionary of one entry repeated
over many values (a decode bomb), are found from the page headers before pyarrow decodes them
(formats/parquetpages.py ``scan_pages``): the footer's average of a row group hides both. Every expected
value is computed here from the data written (row of the huge value, its bytes, the rows of its row
group, the values a dictionary entry is repeated over), never read back from datacheck."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import ROOT

import datacheck
from datacheck.formats.base import ReadOptions
from datacheck.formats.parquet import open_parquet, read_parquet_rows
from datacheck.formats.parquetdecode import row_floor, rows_bytes, sample_rows, wide_row_group
from datacheck.formats.parquetpages import scan_pages
from datacheck.io.shardbytes import Unreadable
from datacheck.model.config import config_from_dict
from datacheck.model.constants import BATCH_TARGET_BYTES

#: the bound the small files below are held to (bytes a row), in place of the 128 MiB default
LIMIT = 1 << 20


def _texts(n: int, size: int, seed: int = 0) -> list[str]:
    """``n`` distinct strings of ``size`` random lowercase letters."""
    codes = np.random.default_rng(seed).integers(97, 123, size=(n, size), dtype=np.uint8)
    return [row.tobytes().decode() for row in codes]


def _one_huge(path: Path, rows: int, at: int, huge: int, **write) -> Path:
    """``rows`` rows of 40-letter texts in one row group, row ``at`` replaced by ``huge`` letters."""
    text = _texts(rows, 40)
    text[at] = "h" * huge
    pq.write_table(pa.table({"id": pa.array(range(rows), pa.int64()), "text": text}), path,
                   row_group_size=rows, **write)
    return path


def _average_hides_it(path: Path, limit: int) -> None:
    """The footer's average row (all column chunks' uncompressed bytes over the rows) is within ``limit``."""
    md = pq.ParquetFile(path).metadata
    rg = md.row_group(0)
    total = sum(rg.column(j).total_uncompressed_size for j in range(rg.num_columns))
    assert total <= limit * rg.num_rows
    assert wide_row_group(md, limit) is None


@pytest.mark.parametrize("write", [
    {"use_dictionary": False, "compression": "snappy"},
    {"use_dictionary": False, "compression": "zstd", "data_page_version": "2.0"},
    {"use_dictionary": False, "compression": "none"},
    {"use_dictionary": False, "compression": "gzip", "data_page_version": "2.0"},
    {"use_dictionary": False, "compression": "lz4"},  # Hadoop-framed LZ4
    {"compression": "zstd"},  # dictionary: the huge value is an entry of the dictionary page
], ids=["plain-snappy", "plain-zstd-v2", "plain-none", "plain-gzip-v2", "plain-lz4", "dictionary-zstd"])
def test_one_huge_value_among_small_rows_is_found_before_any_decode(tmp_path, write):
    rows, at, huge = 20_000, 12_345, 3 * LIMIT // 2
    path = _one_huge(tmp_path / "t.parquet", rows, at, huge, **write)
    _average_hides_it(path, LIMIT)
    md = pq.ParquetFile(path).metadata
    big = scan_pages(path, md, LIMIT).big
    assert big is not None
    assert (big.group, big.group_first, big.group_rows, big.column) == (0, 0, rows, "text")
    assert big.value_bytes == huge and big.limit == LIMIT
    if big.kind != "dictionary":  # a data page: the rows it holds include row `at`
        assert big.first_row is not None and big.rows is not None
        assert big.first_row <= at < big.first_row + big.rows
    reason = big.reason
    assert reason.startswith(f"row group 0 (rows 0-{rows - 1:,}), column 'text': ")
    assert f"holds {huge:,} bytes" in reason and "[dataset] max_row_bytes" in reason
    assert "Split such values over more rows" in reason
    # one over the value: nothing found
    assert scan_pages(path, md, huge).big is None


def test_a_big_page_of_values_within_the_bound_is_clean(tmp_path):
    """pyarrow's writer checks a page's size every 1,024 values: 1,024 values of 20 KiB make a page of 20
    MiB, far past a bound of 64 KiB, while no value passes it: nothing found, and the audit reads it."""
    rows, size = 1_024, 20 << 10
    limit = 64 << 10
    path = tmp_path / "images.parquet"
    pq.write_table(pa.table({"blob": [t.encode() for t in _texts(rows, size, 1)]}), path,
                   use_dictionary=False, compression="zstd")
    md = pq.ParquetFile(path).metadata
    assert md.row_group(0).column(0).total_uncompressed_size > limit * 100  # one page or a few, all big
    assert scan_pages(path, md, limit).big is None
    data = open_parquet(path, "parquet", ReadOptions(dataset=config_from_dict(
        {"dataset": {"max_row_bytes": limit}}).dataset))
    assert data.lf.collect().height == rows


def test_the_audit_names_the_shard_and_row_group_and_the_key_raises_the_bound(tmp_path):
    rows, at, huge = 20_000, 777, 3 * LIMIT // 2
    path = _one_huge(tmp_path / "one.parquet", rows, at, huge, use_dictionary=False)
    rep = datacheck.audit([str(path)], config={"dataset": {"max_row_bytes": LIMIT}}, workers=1)
    found = [f for s in rep.shards for f in s.findings if f.check == "decode.unreadable"]
    assert len(found) == 1 and not rep.passed
    assert [s.path for s in rep.shards if s.findings] == ["one.parquet"]
    assert f"row group 0 (rows 0-{rows - 1:,}), column 'text'" in found[0].message
    assert f"holds {huge:,} bytes" in found[0].message
    rep = datacheck.audit([str(path)], config={"dataset": {"max_row_bytes": huge}}, workers=1)
    assert not [f for s in rep.shards for f in s.findings if f.check.startswith("decode.")]
    assert rep.summary["rows"] == rows


def _bomb(path: Path, rows: int, per_row: int, entry: int, empty: int = 0) -> Path:
    """A list-of-strings column: each of ``rows`` rows holds ``per_row`` copies of one ``entry``-byte
    string (a dictionary of one entry), then ``empty`` rows of an empty list."""
    one = "e" * entry
    lists = [[one] * per_row for _ in range(rows)] + [[] for _ in range(empty)]
    pq.write_table(pa.table({"texts": lists}), path, compression="zstd")
    return path


def test_a_one_entry_dictionary_bomb_is_refused_from_its_headers(tmp_path):
    rows, per_row, entry, empty = 100, 100, 4 << 10, 50
    path = _bomb(tmp_path / "bomb.parquet", rows, per_row, entry, empty)
    md = pq.ParquetFile(path).metadata
    decoded = rows * per_row * entry  # what the column decodes to (400 KiB a row)
    n = rows + empty
    limit = -(-decoded // n) - 1  # the decoded average passes it, the footer's does not
    assert os.path.getsize(path) < decoded // 1000
    _average_hides_it(path, limit)
    scan = scan_pages(path, md, limit)
    assert scan.big is None
    assert scan.floors == {(0, 0): decoded}
    wide = wide_row_group(md, limit, scan.floors)
    assert wide is not None and (wide.group, wide.rows, wide.nbytes, wide.column) == (0, n, decoded, "texts")
    with pytest.raises(Unreadable) as exc:
        open_parquet(path, "parquet", ReadOptions(dataset=config_from_dict(
            {"dataset": {"max_row_bytes": limit}}).dataset))
    assert exc.value.reason.startswith(f"row group 0 (rows 0-{n - 1}) decodes to at least {decoded:,} bytes (a "
                                       f"dictionary of one entry repeated over its values) for {n} rows")
    # within the bound, the batches are sized by what the rows decode to, not by the footer's few bytes
    data = open_parquet(path, "parquet", ReadOptions(dataset=config_from_dict(
        {"dataset": {"max_row_bytes": limit + 1}}).dataset))
    footer = data.stream.footer()
    assert row_floor(md, ["texts"], footer.floors, encoded=False) == decoded / n
    assert row_floor(md, ["texts"], {}, encoded=False) == 0.0  # no floor: the first rows size the batches
    got = rows_bytes(path, ["texts"], footer)
    assert got is not None and got[0] == n and got[1] >= decoded / n
    assert sample_rows(md, ["texts"], footer.floors) == max(1, int(BATCH_TARGET_BYTES // (decoded / n)))
    assert sample_rows(md, ["texts"]) == 1024  # the footer alone: the whole sample


def test_a_dictionary_that_falls_back_to_plain_counts_only_its_coded_values(tmp_path):
    """A dictionary of one entry past the writer's dictionary page limit: the first 100 values are
    coded, then the writer falls back to PLAIN pages (of small values here): the floor counts the coded
    values only, never the others as copies of the entry."""
    entry, coded = (64 << 10) + 10, 100
    values = ["x" * entry] * coded + ["s"] * 5000
    path = tmp_path / "fallback.parquet"
    # the writer looks at its dictionary every 100 values: past 64 KiB after the first 100
    pq.write_table(pa.table({"t": values}), path, compression="zstd", dictionary_pagesize_limit=64 << 10,
                   write_batch_size=coded)
    md = pq.ParquetFile(path).metadata
    scan = scan_pages(path, md, 128 << 20)
    assert scan.big is None
    assert scan.floors == {(0, 0): coded * entry}
    assert coded * entry <= sum(len(v) for v in values)


def test_rows_read_again_decode_bounded_batches(tmp_path):
    """read_parquet_rows decodes a row group in batches of 8,192 rows, fewer where the footer (and a
    one-entry dictionary) says those hold more than a batch: the rows come back the same."""
    rows, per_row, entry = 300, 20, 16 << 10
    path = _bomb(tmp_path / "again.parquet", rows, per_row, entry)
    data = open_parquet(path, "parquet", ReadOptions())
    import polars as pl

    got = read_parquet_rows(path, ["texts"], [5, 299], {"texts": pl.List(pl.String)}, data.stream.footer())
    assert got["__row"].to_list() == [5, 299]
    assert [len(v) for v in got["texts"].to_list()] == [per_row, per_row]


_RSS = r"""
import sys
from pathlib import Path
import datacheck
rep = datacheck.audit([sys.argv[1]], config={"dataset": {"max_row_bytes": int(sys.argv[2])}}, workers=1)
found = [f.message for s in rep.shards for f in s.findings if f.check == "decode.unreadable"]
print(len(found), "|", found[0] if found else "")
print(next(int(ln.split()[1]) for ln in open("/proc/self/status") if ln.startswith("VmHWM:")) // 1024)
"""  # VmHWM: the peak of this process' own memory (ru_maxrss is inherited from the forking parent)


def _peak(path: Path, limit: int) -> tuple[str, int]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("DATACHECK_BATCH_ROWS", None)
    p = subprocess.run([sys.executable, "-c", _RSS, str(path), str(limit)], capture_output=True, text=True,
                       env=env, timeout=300, cwd=path.parent)
    assert p.returncode == 0, p.stderr[-3000:]
    out = p.stdout.strip().splitlines()
    return out[-2], int(out[-1])


def test_peak_memory_grows_by_at_most_the_page_of_the_huge_value(tmp_path):
    """A value of 136 or 200 MiB among 20,000 small rows (one row group; zstd makes each file a few
    hundred KB), past the default bound (128 MiB), each audited in a child process: refused with the row
    group named, and the peak grows by less than 1.5 times the 64 MiB the value grows by (its page is
    decompressed once to read its values' lengths; pyarrow's decode peaked at about 4 copies of a value:
    2.12 GB for 500 MiB). Before, a 200 MiB value passed with no finding at 963 MiB (152 for the file
    without it); 327 now. The default bound, not a smaller one: the prefetch plans the read before the
    config is read, and decodes the first page (here the huge value's) of a file within the default."""
    peaks = []
    for mib in (136, 200):
        path = _one_huge(tmp_path / f"v{mib}.parquet", 20_000, 15_000, mib << 20, use_dictionary=False,
                         compression="zstd")
        said, peak = _peak(path, 128 << 20)
        assert said.startswith("1 | ") and f"holds {mib << 20:,} bytes" in said, said
        assert "row group 0 (rows 0-19,999), column 'text'" in said
        peaks.append(peak)
        path.unlink()
    assert peaks[1] - peaks[0] < 3 * 64 // 2, peaks


def test_hostile_page_headers_end_the_walk_never_the_audit(tmp_path):
    """Bytes of a file's page headers and bodies overwritten at random (300 seeded mutations, each of 1-8
    bytes, one of them a varint of a huge list size): the scan returns (what it found, or nothing) and
    never raises nor loops; pyarrow's own read then says what is wrong."""
    path = _one_huge(tmp_path / "h.parquet", 2_000, 1_000, 3 * LIMIT // 2, use_dictionary=False,
                     compression="none")
    good = path.read_bytes()
    md = pq.ParquetFile(path).metadata
    col = md.row_group(0).column(1)
    lo, hi = col.data_page_offset, col.data_page_offset + col.total_compressed_size
    rng = np.random.default_rng(11)
    bad = tmp_path / "bad.parquet"
    for k in range(300):
        data = bytearray(good)
        at = int(rng.integers(lo, min(hi, lo + 4_096)))
        width = int(rng.integers(1, 9))
        data[at:at + width] = rng.integers(0, 256, width, dtype=np.uint8).tobytes() if k % 10 else \
            b"\x19\xff\xff\xff\xff\x0f"[:width]  # a list of 2**32 - 1 elements
        bad.write_bytes(bytes(data))
        got = scan_pages(bad, md, LIMIT)
        assert got.big is None or got.big.value_bytes > LIMIT


WRITES = [
    {},  # pyarrow's defaults: dictionary, snappy, data pages v1
    {"use_dictionary": False, "compression": "zstd", "data_page_version": "2.0"},
    {"use_dictionary": False, "compression": "none"},
    {"compression": "gzip", "data_page_version": "2.0"},
    {"compression": "lz4"},  # Hadoop-framed LZ4: levels read from the whole page
    {"use_dictionary": False, "compression": "zstd", "data_page_size": 4096},  # a long row over many pages
]
WRITE_IDS = ["dict-snappy-v1", "plain-zstd-v2", "plain-none", "dict-gzip-v2", "lz4", "zstd-small-pages"]


def _lists(path: Path, lengths: list[int], dtype=pa.int32(), zeros: bool = False, **write) -> Path:
    """A list column ``ids`` whose row ``i`` holds ``lengths[i]`` small values, beside an int64 ``id``,
    in one row group."""
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    vals = np.zeros(int(offsets[-1]), dtype=np.int64) if zeros else np.arange(int(offsets[-1])) % 97
    ids = pa.ListArray.from_arrays(pa.array(offsets), pa.array(vals).cast(dtype))
    pq.write_table(pa.table({"id": pa.array(range(len(lengths)), pa.int64()), "ids": ids}), path,
                   row_group_size=len(lengths), **write)
    return path


@pytest.mark.parametrize("write", WRITES, ids=WRITE_IDS)
def test_a_list_row_over_the_bound_is_named_from_its_repetition_levels(tmp_path, write):
    """2,000 rows of 10 int32 values, row 1,234 of LIMIT // 4 + 1 values (one more than a row within
    LIMIT bytes holds): the row and its values are named before any decode; the footer's average hides it,
    and its chunk's uncompressed bytes too where the values are dictionary encoded."""
    most = LIMIT // 4
    lengths = [10] * 2_000
    lengths[1_234] = most + 1
    path = _lists(tmp_path / "l.parquet", lengths, **write)
    md = pq.ParquetFile(path).metadata
    assert wide_row_group(md, LIMIT) is None
    got = scan_pages(path, md, LIMIT).big
    assert got is not None and got.row == 1_234 and got.entries == most + 1, got
    assert (got.group, got.group_first, got.group_rows, got.column) == (0, 0, 2_000, "ids.list.element")
    assert got.reason.startswith("row group 0 (rows 0-1,999), column 'ids.list.element': row 1,234 holds "
                                 f"{most + 1:,} values (at least {4 * (most + 1):,} bytes decoded)")
    screen = scan_pages(path, md, LIMIT, look=False).big  # the prefetch: nothing decompressed whole
    assert screen is not None and screen.row is None
    # a row of exactly the bound's values: nothing found
    lengths[1_234] = most
    path = _lists(tmp_path / "m.parquet", lengths, **write)
    assert scan_pages(path, pq.ParquetFile(path).metadata, LIMIT).big is None


@pytest.mark.parametrize("write", WRITES, ids=WRITE_IDS)
@pytest.mark.parametrize("zeros", [False, True], ids=["values", "zeros"])
def test_token_rows_within_the_bound_are_clean_whatever_the_chunk(tmp_path, write, zeros):
    """20,000 rows of 100 tokens (8 MB decoded, 8 times LIMIT; all zeros: pages of many rows each): no row
    is named; the same for int64 tokens and lists of lists."""
    lengths = [100] * 20_000
    path = _lists(tmp_path / "t.parquet", lengths, zeros=zeros, **write)
    assert scan_pages(path, pq.ParquetFile(path).metadata, LIMIT).big is None
    path = _lists(tmp_path / "t64.parquet", lengths, dtype=pa.int64(), zeros=zeros, **write)
    assert scan_pages(path, pq.ParquetFile(path).metadata, LIMIT).big is None
    # pages of 1/16 of the bound (pyarrow's 1 MiB pages are 1/128 of the default 128 MiB): the screen alone
    # clears the chunk (the prefetch's look), no page decompressed whole
    if not zeros:
        small = {**write, "data_page_size": LIMIT // 16}
        path = _lists(tmp_path / "s.parquet", lengths, **small)
        assert scan_pages(path, pq.ParquetFile(path).metadata, LIMIT, look=False).big is None


def test_a_long_row_of_lists_of_lists_is_named(tmp_path):
    """A list of lists: rows start where the repetition level is 0 (not 1, an inner list's start)."""
    rows = [[[1, 2, 3]] * 5 for _ in range(1_000)]
    rows[700] = [[7] * 1_000] * (LIMIT // 4 // 1_000 + 1)
    path = tmp_path / "n.parquet"
    pq.write_table(pa.table({"ids": pa.array(rows, pa.list_(pa.list_(pa.int32())))}), path)
    got = scan_pages(path, pq.ParquetFile(path).metadata, LIMIT).big
    assert got is not None and got.row == 700 and got.entries == 1_000 * (LIMIT // 4 // 1_000 + 1)


def test_the_audit_refuses_the_row_of_10_to_the_8_values_at_a_small_peak(tmp_path):
    """The case of the brief at a tenth of its size and a tenth of the bound: 1,000 rows of 10 values, row
    500 of 10**7 int32 (40 MB decoded; dictionary encoded: the footer shows 8.8 MB): decode.unreadable
    naming row 500 and its values, nothing decoded."""
    lengths = [10] * 1_000
    lengths[500] = 10**7
    path = _lists(tmp_path / "big.parquet", lengths)
    cfg = {"dataset": {"max_row_bytes": 12_800_000}}
    rep = datacheck.audit([str(path)], config=cfg, workers=1, cache_dir=None)
    msgs = [f.message for s in rep.shards for f in s.findings if f.check == "decode.unreadable"]
    assert len(msgs) == 1 and "row 500 holds 10,000,000 values (at least 40,000,000 bytes decoded)" in msgs[0]


@pytest.mark.slow
def test_peak_memory_of_a_list_row_of_10_to_the_8_values_is_the_footers(tmp_path):
    """The brief's case: 1,000 rows of 10 int32, row 500 of 10**8 (400 MB decoded; dictionary encoded and
    snappy: 88 MB uncompressed, 4.6 MB on disk), audited in a child process at the default bound: refused
    naming row 500, at a peak of a few hundred MiB. Before: no finding (a dup warning), 2,723 MiB peak."""
    lengths = [10] * 1_000
    lengths[500] = 10**8
    path = _lists(tmp_path / "l.parquet", lengths)
    said, peak = _peak(path, 128 << 20)
    path.unlink()
    assert said.startswith("1 | ") and "row 500 holds 100,000,000 values (at least 400,000,000 bytes" in said, said
    assert peak < 700, peak
