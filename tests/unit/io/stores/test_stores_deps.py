"""A URL whose store package is not installed is exit 2 naming the datacheck extra and the install
command (never the PyPI name ``datacheck``); store checksum rules on listing entries of GCS and the
Hugging Face Hub (no server needed)."""
from __future__ import annotations

import base64
import hashlib
import importlib.util
from pathlib import Path

import pytest
from gatehelp import cli  # noqa: E402

from datacheck.io.stores import is_url, store_checksum  # noqa: E402


@pytest.mark.skipif(importlib.util.find_spec("gcsfs") is not None, reason="gcsfs is installed here")
def test_missing_store_package_is_exit_2_naming_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    r = cli("audit", "gs://bucket/data", "--no-cache", "--report-dir", str(tmp_path / "rep"), monkeypatch=monkeypatch)
    assert r.returncode == 2
    assert "datacheck[gcs]" in r.stderr and 'pip install "gcsfs>=2024.2"' in r.stderr


def test_is_url() -> None:
    assert is_url("s3://b/k") and is_url("hf://datasets/x/y") and is_url("gs://b")
    assert not is_url("file:///tmp/x") and not is_url("/tmp/x") and not is_url("data/s3:x")


class _FakeFS:
    def __init__(self, protocol):
        self.protocol = protocol


def test_gcs_md5hash_and_hf_lfs_sha256() -> None:
    data = b"some shard bytes"
    md5 = hashlib.md5(data)
    gcs = _FakeFS(("gs", "gcs"))
    assert store_checksum(gcs, "b/k", {"md5Hash": base64.b64encode(md5.digest()).decode()}) == "md5:" + md5.hexdigest()
    assert store_checksum(gcs, "b/k", {"crc32c": "AAAAAA=="}) is None  # a composite object: CRC only, hashed
    hf = _FakeFS("hf")
    sha = hashlib.sha256(data).hexdigest()
    assert store_checksum(hf, "datasets/a/b/x.parquet", {"lfs": {"sha256": sha, "size": 16}}) == "sha256:" + sha
    assert store_checksum(hf, "datasets/a/b/x.json", {"lfs": None, "blob_id": "ab" * 20}) is None  # git blob id


def test_store_checksums_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATACHECK_STORE_CHECKSUMS", "0")
    assert store_checksum(_FakeFS("hf"), "x", {"lfs": {"sha256": "a" * 64}}) is None


@pytest.mark.parametrize("url", ["ftp://no-such-host.invalid/data/train.parquet",
                                 "sftp://no-such-host.invalid/data/"])
def test_a_store_that_cannot_be_reached_when_opened_is_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              url: str) -> None:
    # fsspec's FTP/SFTP file systems connect when they are made (before any listing): a host that does
    # not resolve was an internal error with a traceback (exit 3)
    if url.startswith("sftp") and importlib.util.find_spec("paramiko") is None:
        pytest.skip("paramiko (fsspec's sftp) is not installed")
    r = cli("audit", url, "--no-cache", "--report-dir", str(tmp_path / "rep"), monkeypatch=monkeypatch)
    assert r.returncode == 2, r.stderr
    endpoint = url.split("/data/")[0]  # scheme://host: the endpoint named, never "no such object"
    assert f"{url}: the endpoint {endpoint} could not be reached" in r.stderr and "Traceback" not in r.stderr
