"""Object stores (``s3://`` through fsspec/s3fs) against a moto S3 server on 127.0.0.1.

The shipped ``sample_data`` is uploaded as it is and audited from ``s3://``: the report is the local
audit's, shard for shard (paths relative to the prefix); content hashes are the store's MD5 (the ETag of
a single-part upload, checked here against the MD5 of the local bytes) or, with store checksums off,
xxh3-128 of the bytes streamed, equal to the local ones. A second audit is answered from the cache
after metadata requests only; a truncated or vanished object is ``decode.unreadable`` naming it; and
inspect, index build, clean and plan read the same URLs."""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
from conftest import ROOT
from gatehelp import cli  # noqa: E402
from s3help import client, upload

from datacheck.execute.audit import audit, audit_shards  # noqa: E402
from datacheck.execute.cache import ShardCache  # noqa: E402
from datacheck.formats.discovery import discover  # noqa: E402
from datacheck.io.stores import filesystem, store_checksum  # noqa: E402
from datacheck.model.config import load_config  # noqa: E402

SAMPLE = ROOT / "sample_data"
CONFIG = SAMPLE / "datacheck.toml"


@pytest.fixture(scope="module")
def _sample_uploaded(s3_server: dict[str, str]) -> str:
    """``sample_data`` uploaded once per module: its URL."""
    upload(s3_server, "datasets", SAMPLE, "sample")
    return "s3://datasets/sample"


@pytest.fixture
def sample_url(_sample_uploaded: str, s3_endpoint: str) -> str:
    """The uploaded ``sample_data``'s URL, the server's variables set for the test."""
    return _sample_uploaded


def _comparable(report_json: str) -> dict:
    """The report with what legitimately differs between a local and an s3 audit blanked: the creation
    time, content hashes (xxh3-128 of local bytes vs the store's MD5, also where ``dup.shard`` names
    one) and the index hash made of them."""
    d = json.loads(re.sub(r"(xxh3-128|md5):[0-9a-f]{32}", "HASH", report_json))
    d["created_at"] = ""
    d["index_hash"] = ""
    for s in d["shards"]:
        s["content_hash"] = ""
    return d


@pytest.mark.slow
def test_audit_s3_equals_local(sample_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = load_config(CONFIG)
    local = audit([SAMPLE], cfg, workers=1, config_path=None)
    remote = audit([sample_url], cfg, workers=1, config_path=None)
    assert remote.summary == local.summary and remote.summary["shards"] >= 20
    assert _comparable(remote.to_json()) == _comparable(local.to_json())
    # the store's MD5 (single-part ETag) is the MD5 of the local bytes, shard for shard
    for s in remote.to_dict()["shards"]:
        if s["content_hash"]:
            assert s["content_hash"] == "md5:" + hashlib.md5((SAMPLE / s["path"]).read_bytes()).hexdigest()
    assert {s["path"] for s in remote.to_dict()["shards"]} == {s["path"] for s in local.to_dict()["shards"]}
    import jsonschema  # the report with store hashes is valid against the published schema

    schema = json.loads((ROOT / "schemas" / "report.schema.json").read_text())
    jsonschema.validate(json.loads(remote.to_json()), schema)
    # store checksums off: the bytes are hashed streaming and every content hash equals the local one
    monkeypatch.setenv("DATACHECK_STORE_CHECKSUMS", "0")
    hashed = audit([sample_url], cfg, workers=1, config_path=None)
    assert json.loads(hashed.to_json())["shards"] == json.loads(local.to_json())["shards"]
    assert hashed.index_hash == local.index_hash


def test_second_audit_answered_from_cache(sample_url: str, tmp_path: Path) -> None:
    cfg = load_config(CONFIG)
    url = sample_url + "/lm_clean"
    first = audit([url], cfg, workers=1, cache_dir=tmp_path / "cache", config_path=None)
    cache = ShardCache(tmp_path / "cache", cfg)
    disc = discover([url], cfg.dataset.format)
    again = audit_shards(disc, cfg, cache=cache, workers=1, cross_shard=True)
    assert cache.stats.hits == 2 and cache.stats.misses == 0
    assert [r.content_hash for r in again] == [s["content_hash"] for s in first.to_dict()["shards"]]


@pytest.mark.slow
def test_process_executor_reads_s3(sample_url: str) -> None:
    cfg = load_config(CONFIG)
    one = audit([sample_url + "/defects"], cfg, workers=1, config_path=None)
    two = audit([sample_url + "/defects"], cfg, workers=2, executor="process", config_path=None)
    strip = re.compile(r'"created_at": "[^"]*"')
    assert strip.sub("", one.to_json()) == strip.sub("", two.to_json())


def test_truncated_and_vanished_objects_are_unreadable(s3_server: dict[str, str], s3_endpoint: str,
                                                        tmp_path: Path) -> None:
    good = (SAMPLE / "lm_clean" / "train-00000-of-00002.parquet").read_bytes()
    s3 = client(s3_server)
    s3.create_bucket(Bucket="broken")
    s3.put_object(Bucket="broken", Key="d/cut.parquet", Body=good[: len(good) // 2])
    s3.put_object(Bucket="broken", Key="d/good.parquet", Body=good)
    s3.put_object(Bucket="broken", Key="d/gone.jsonl", Body=b'{"text": "a"}\n{"text": "b"}\n')
    disc = discover(["s3://broken/d"], "auto")
    assert [s.rel for s in disc.shards] == ["cut.parquet", "gone.jsonl", "good.parquet"]
    s3.delete_object(Bucket="broken", Key="d/gone.jsonl")  # removed between the listing and the read
    cfg = load_config(CONFIG)
    results = audit_shards(disc, cfg, workers=1)
    by = {r.path: r for r in results}
    cut = [f for f in by["cut.parquet"].findings if f.check == "decode.unreadable"]
    assert cut and "truncated parquet file" in cut[0].message
    gone = [f for f in by["gone.jsonl"].findings if f.check == "decode.unreadable"]
    assert gone and "s3://broken/d/gone.jsonl" in gone[0].message
    assert by["good.parquet"].rows == 16 and not by["good.parquet"].findings


def test_store_checksum_rules(sample_url: str) -> None:
    fs, path = filesystem(sample_url + "/lm_clean/train-00000-of-00002.parquet")
    info = fs.info(path)
    local = (SAMPLE / "lm_clean" / "train-00000-of-00002.parquet").read_bytes()
    assert store_checksum(fs, path, info) == "md5:" + hashlib.md5(local).hexdigest()
    # a multipart ETag ("<md5 of part md5s>-<parts>") is no hash of the bytes: never used
    assert store_checksum(fs, path, {**info, "ETag": '"' + "a" * 32 + '-3"'}) is None


def test_verbs_read_s3(sample_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = sample_url + "/cls_clean"
    cfg = ["--config", str(CONFIG)]
    r = cli("audit", url, *cfg, "--no-cache", "--report-dir", str(tmp_path / "rep"), "--format", "json",
            "--output", str(tmp_path / "r.json"), monkeypatch=monkeypatch)
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "r.json").read_text())["summary"]["rows"] == 39  # cls_clean: 9 + 24 + 6 rows
    r = cli("inspect", url + "/train.jsonl", *cfg, "--format", "json", monkeypatch=monkeypatch)
    assert r.returncode == 0, r.stderr
    r = cli("index", "build", url, *cfg, "-o", str(tmp_path / "index.json"), monkeypatch=monkeypatch)
    assert r.returncode == 0, r.stderr
    idx = json.loads((tmp_path / "index.json").read_text())
    assert {s["path"]: s["content_hash"] for s in idx["shards"]} == {
        s["path"]: s["content_hash"] for s in json.loads(_local_index(tmp_path, monkeypatch))["shards"]}
    r = cli("index", "verify", url, "--index", str(tmp_path / "index.json"), *cfg, monkeypatch=monkeypatch)
    assert r.returncode == 0, r.stdout + r.stderr
    r = cli("clean", url, *cfg, "--out", str(tmp_path / "cleaned"), monkeypatch=monkeypatch)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (tmp_path / "cleaned").iterdir() if p.is_file() and p.suffix != ".json") == [
        "test.parquet", "train.jsonl", "validation.csv"]


def _local_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    out = tmp_path / "local-index.json"
    r = cli("index", "build", str(SAMPLE / "cls_clean"), "--config", str(CONFIG), "-o", str(out), monkeypatch=monkeypatch)
    assert r.returncode == 0, r.stderr
    return out.read_text()


def test_plan_reads_s3(sample_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    (tmp_path / "batch.toml").write_text("[batch]\nbatch_size = 4\nshuffle = false\n")
    runs = {}
    for name, where in (("s3", sample_url + "/lm_clean"), ("local", str(SAMPLE / "lm_clean"))):
        r = cli("plan", where, "--config", str(tmp_path / "batch.toml"), "--step", "1", "--format", "json",
                monkeypatch=monkeypatch)
        assert r.returncode == 0, r.stderr
        runs[name] = json.loads(r.stdout)["result"]
    assert runs["s3"]["plan"]["rows"] == runs["local"]["plan"]["rows"] == 32
    assert [(x["shard"], x["row"]) for x in runs["s3"]["step"]["rows"]] == \
        [(x["shard"], x["row"]) for x in runs["local"]["step"]["rows"]] == [("train-00000-of-00002.parquet", i)
                                                                           for i in range(4, 8)]


def test_store_retries_setting(sample_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from datacheck.model.errors import UsageError

    monkeypatch.setenv("DATACHECK_STORE_RETRIES", "7")
    fs, _ = filesystem(sample_url)
    assert fs.retries == 7
    monkeypatch.setenv("DATACHECK_STORE_RETRIES", "none")
    with pytest.raises(UsageError, match="DATACHECK_STORE_RETRIES"):
        filesystem(sample_url)


def test_mixed_local_and_url_paths_are_usage_errors(sample_url: str) -> None:
    from datacheck.model.errors import UsageError

    with pytest.raises(UsageError, match="separate runs"):
        discover([sample_url, str(SAMPLE)], "auto")
    with pytest.raises(UsageError, match="no such object or prefix"):
        discover(["s3://datasets/nothing-here"], "auto")


def test_read_failing_halfway_is_retried_then_unreadable(sample_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A GET whose body is cut off (``IncompleteRead``, what a connection reset mid-download raises) is
    retried by s3fs; when every attempt fails the shard is ``decode.unreadable`` naming the URL."""
    import s3fs.core as core

    real = core.S3FileSystem._call_s3
    left = {"n": 0, "seen": 0}

    async def flaky(self, method, *args, **kwargs):
        if method == "get_object":
            left["seen"] += 1
            if left["n"] > 0:
                left["n"] -= 1
                raise core.IncompleteRead(0, 4096)  # 0 of 4096 bytes arrived
        return await real(self, method, *args, **kwargs)

    monkeypatch.setattr(core.S3FileSystem, "_call_s3", flaky)
    monkeypatch.setenv("DATACHECK_STORE_RETRIES", "3")
    cfg = load_config(CONFIG)
    url = sample_url + "/lm_clean/train-00000-of-00002.parquet"
    left["n"] = 2  # two cut reads, then the third attempt succeeds
    (ok,) = audit_shards(discover([url], "auto"), cfg, workers=1)
    assert ok.rows == 16 and not ok.findings and left["n"] == 0, [f.message for f in ok.findings]
    left["n"], left["seen"] = 10**6, 0  # the store keeps cutting every read
    (bad,) = audit_shards(discover([url], "auto"), cfg, workers=1)
    (f,) = [f for f in bad.findings if f.check == "decode.unreadable"]
    assert bad.rows is None and url in f.message and "retries" in f.message
    assert left["seen"] >= 3  # every read was attempted 3 times before giving up
