"""Metadata files shipped with the data: a hostile or broken state.json,
dataset_info.json or MosaicML index.json is a finding naming the file; the shards are still audited."""
from __future__ import annotations

import json

import polars as pl
import pytest
from conftest import run_cli


def _hf_split(d, state: bytes):
    d.mkdir()
    pl.DataFrame({"text": ["a", "b"], "label": [0, 1]}).to_arrow()
    import pyarrow as pa

    t = pa.table({"text": ["a", "b"], "label": [0, 1]})
    with pa.OSFile(str(d / "data-00000-of-00001.arrow"), "wb") as f, pa.ipc.new_stream(f, t.schema) as w:
        w.write_table(t)
    (d / "state.json").write_bytes(state)


HOSTILE = {
    "deep_list": b'{"_data_files": ' + b"[" * 3000 + b"]" * 3000 + b"}",
    "deep_object": b'{"_data_files": [' + b'{"a":' * 600 + b"1" + b"}" * 600 + b"]}",
    "huge_int": b'{"_data_files": [{"filename": ' + b"9" * 5000 + b"}]}",
    "outside_root": b'{"_data_files": [{"filename": "../../etc/passwd"}]}',
    "not_a_list": b'{"_data_files": {"filename": "x"}}',
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_state_json_is_a_finding_not_an_exit(tmp_path, name):
    d = tmp_path / "split"
    _hf_split(d, HOSTILE[name])
    p = run_cli("audit", str(d), "--report-dir", str(tmp_path / "r"), "--format", "json", cwd=tmp_path)
    assert "Traceback" not in p.stderr, p.stderr
    assert p.returncode == 1, (p.returncode, p.stderr)
    rep = json.loads(p.stdout)
    assert rep["summary"]["shards"] == 1 and rep["summary"]["rows"] == 2
    broken = [f for f in rep["findings"] if f["check"] == "index.missing_shard"]
    assert broken and broken[0]["shards"] == ["state.json"], rep["findings"]
    assert "state.json" in broken[0]["message"]


@pytest.mark.parametrize("body", [b"[" * 5000 + b"]" * 5000, b'{"version": 2, "shards": [{"samples": ' + b"7" * 5000 + b"}]}"])
def test_hostile_mosaic_index_is_a_finding(tmp_path, body):
    d = tmp_path / "mds"
    d.mkdir()
    (d / "a.jsonl").write_text('{"text": "x", "label": 1}\n')
    (d / "index.json").write_bytes(body)
    p = run_cli("audit", str(d), "--report-dir", str(tmp_path / "r"), "--format", "json", cwd=tmp_path)
    assert "Traceback" not in p.stderr, p.stderr
    assert p.returncode == 1, (p.returncode, p.stderr)
    rep = json.loads(p.stdout)
    assert [f["shards"] for f in rep["findings"] if f["check"] == "index.missing_shard"] == [["index.json"]]


def test_user_index_file_nested_too_deep_is_exit_2(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    (d / "a.jsonl").write_text('{"text": "x"}\n')
    idx = tmp_path / "idx.json"
    idx.write_bytes(b"[" * 5000 + b"]" * 5000)
    p = run_cli("index", "verify", str(d), "--index", str(idx), cwd=tmp_path)
    assert "Traceback" not in p.stderr, p.stderr
    assert p.returncode == 2 and "idx.json" in p.stderr and "nested 5000 levels" in p.stderr, p.stderr


@pytest.mark.parametrize("name", ["shard.00000.jso" + "[" * 3000 + "]" * 3000 + "nl", "shard\u0000.jsonl"],
                         ids=["name-too-long", "embedded-nul"])
def test_mosaic_index_naming_a_file_the_os_cannot_take_is_a_missing_shard(tmp_path, name):
    """A shard name in index.json that no file system can hold (ENAMETOOLONG, a NUL byte: seen in the
    fuzz run as a check error of every index.* check, exit 3) is a listed shard that is absent."""
    d = tmp_path / "mds"
    d.mkdir()
    (d / "shard.00000.jsonl").write_text('{"text": "x", "label": 1}\n')
    index = {"version": 2, "shards": [{"column_encodings": ["str"], "column_names": ["text"], "column_sizes": [None],
                                       "compression": None, "format": "jsonl", "hashes": ["sha1"],
                                       "raw_data": {"basename": name, "bytes": 27, "hashes": {"sha1": "0" * 40}},
                                       "samples": 1, "size_limit": 67108864, "zip_data": None}]}
    (d / "index.json").write_text(json.dumps(index))
    p = run_cli("audit", str(d), "--report-dir", str(tmp_path / "r"), "--format", "json", cwd=tmp_path)
    assert "Traceback" not in p.stderr, p.stderr
    assert p.returncode == 1, (p.returncode, p.stderr)
    rep = json.loads(p.stdout)
    assert not [s for s in rep["skipped"] if s.get("error")], rep["skipped"]
    missing = [f for f in rep["findings"] if f["check"] == "index.missing_shard"]
    # the long name is listed and absent; the NUL byte makes index.json itself unusable (a finding on it)
    assert missing and (missing[0]["details"].get("missing") == [name] or missing[0]["shards"] == ["index.json"]), \
        rep["findings"]
