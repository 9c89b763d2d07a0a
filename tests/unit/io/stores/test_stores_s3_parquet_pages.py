"""A parquet object in a store (``s3://`` against the moto server on 127.0.0.1) gets the page-header
checks a local file gets (formats/parquet.py ``open_remote`` -> formats/parquetpages.py ``scan_pages``
over the store's file object): a huge text value among small rows and a list row of too many values are
``decode.unreadable`` naming their row, as locally, and the walk fetches the page headers with ranged
reads, not the object. Before, only the footer's average was checked there: both passed unnamed.
Expected values are computed here from the rows written."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from datacheck.execute.audit import audit
from datacheck.formats import parquet as parquet_format
from datacheck.io.stores import filesystem


def _client(env: dict[str, str]):
    """A boto3 S3 client of the moto server whose environment is ``env`` (the ``s3_server`` fixture)."""
    import boto3

    return boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"], aws_session_token=env["AWS_SESSION_TOKEN"],
                        region_name=env["AWS_DEFAULT_REGION"])


#: the bound the small objects are held to (bytes a row), in place of 128 MiB
LIMIT = 1 << 20


def _texts(n: int, size: int) -> list[str]:
    codes = np.random.default_rng(0).integers(97, 123, size=(n, size), dtype=np.uint8)
    return [row.tobytes().decode() for row in codes]


def _huge_text(path: Path) -> Path:
    """8,000 rows of 1,000 random letters (incompressible: pages of 64 KiB), row 3,210 of 1.5 MiB, no
    dictionary, no compression."""
    text = _texts(8_000, 1_000)
    text[3_210] = "h" * (3 * LIMIT // 2)
    pq.write_table(pa.table({"id": pa.array(range(8_000), pa.int64()), "text": text}), path,
                   row_group_size=8_000, use_dictionary=False, compression="none", data_page_size=1 << 16)
    return path


def _long_list(path: Path) -> Path:
    """1,000 rows of 10 int32, row 777 of LIMIT // 4 + 1 (one more value than LIMIT bytes hold)."""
    lengths = np.full(1_000, 10)
    lengths[777] = LIMIT // 4 + 1
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    vals = pa.array(np.arange(int(offsets[-1])) % 97).cast(pa.int32())
    pq.write_table(pa.table({"ids": pa.ListArray.from_arrays(pa.array(offsets), vals)}), path)
    return path


@pytest.fixture
def bucket(s3_server: dict[str, str], s3_endpoint: str, tmp_path: Path) -> str:
    s3 = _client(s3_server)
    s3.create_bucket(Bucket="pages")
    for make in (_huge_text, _long_list):
        local = make(tmp_path / f"{make.__name__.strip('_')}.parquet")
        s3.put_object(Bucket="pages", Key=f"d/{local.name}", Body=local.read_bytes())
    return "s3://pages/d"


def test_page_header_refusals_in_a_store_name_the_row_as_locally(bucket: str, tmp_path: Path) -> None:
    cfg = {"dataset": {"max_row_bytes": LIMIT}}
    remote = audit([bucket], config=cfg, workers=1, cache_dir=None)
    local_dir = tmp_path / "local"
    local_dir.mkdir()
    _huge_text(local_dir / "huge_text.parquet")
    _long_list(local_dir / "long_list.parquet")
    local = audit([str(local_dir)], config=cfg, workers=1, cache_dir=None)

    def said(rep) -> dict[str, list[str]]:
        return {s.path: [f.message.split(": ", 1)[1] for f in s.findings if f.check == "decode.unreadable"]
                for s in rep.shards}

    got = said(remote)
    assert got == said(local)
    assert len(got["huge_text.parquet"]) == 1 and f"holds {3 * LIMIT // 2:,} bytes" in got["huge_text.parquet"][0]
    assert "column 'text'" in got["huge_text.parquet"][0]
    assert len(got["long_list.parquet"]) == 1
    assert f"row 777 holds {LIMIT // 4 + 1:,} values" in got["long_list.parquet"][0]


def test_the_walk_fetches_page_headers_not_the_object(bucket: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The page-header walk over a 9.6 MB object whose text chunk passes the bound (every page header
    read) fetches its headers (and the page of 1.5 MiB looked into where that passes the bound): well
    under the object's bytes, counted on the store file's ranged reads (s3fs ``S3File._fetch_range``)."""
    import s3fs

    fetched: list[int] = []
    real = s3fs.core.S3File._fetch_range

    def counting(self, start, end):
        fetched.append(end - start)
        return real(self, start, end)

    monkeypatch.setattr(s3fs.core.S3File, "_fetch_range", counting)
    url = bucket + "/huge_text.parquet"
    fs, key = filesystem(url)
    size = int(fs.size(key))
    md = pq.ParquetFile(fs.open(key, "rb")).metadata
    fetched.clear()
    scan = parquet_format.scan_pages(key, md, 2 * LIMIT, opener=lambda: fs.open(  # nothing over 2 MiB: headers only
        key, "rb", block_size=parquet_format.STORE_SCAN_BLOCK, cache_type="readahead"))
    assert scan.big is None
    assert 0 < sum(fetched) < size // 3, (sum(fetched), size)
    fetched.clear()
    scan = parquet_format.scan_pages(key, md, LIMIT, opener=lambda: fs.open(
        key, "rb", block_size=parquet_format.STORE_SCAN_BLOCK, cache_type="readahead"))
    assert scan.big is not None and scan.big.value_bytes == 3 * LIMIT // 2
    assert sum(fetched) < size // 2, (sum(fetched), size)  # the headers and the 1.5 MiB page


def test_a_failing_store_read_during_the_walk_is_unreadable(bucket: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store read that fails while the page headers are walked is decode.unreadable naming the URL,
    never a file taken as clean."""
    import s3fs

    def failing(self, start, end):
        raise OSError("connection reset by peer")

    real_open = parquet_format.scan_pages

    def scan(*args, **kwargs):
        monkeypatch.setattr(s3fs.core.S3File, "_fetch_range", failing)
        return real_open(*args, **kwargs)

    monkeypatch.setattr(parquet_format, "scan_pages", scan)
    rep = audit([bucket + "/long_list.parquet"], config={"dataset": {"max_row_bytes": LIMIT}}, workers=1,
                cache_dir=None)
    msgs = [f.message for s in rep.shards for f in s.findings if f.check == "decode.unreadable"]
    assert len(msgs) == 1 and "s3://pages/d/long_list.parquet" in msgs[0] and "connection reset" in msgs[0], msgs
