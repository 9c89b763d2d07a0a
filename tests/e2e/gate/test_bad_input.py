"""Bad input through the CLI: every case gives a clear finding or exit 2 with a message, never a
traceback; the other shards are still audited; datacheck never writes into the audited folder."""
from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import polars as pl
import pytest
from conftest import run_cli


def _good(path: Path) -> None:
    pl.DataFrame({"text": ["a", "b", "c"], "label": [0, 1, 0]}).write_parquet(path)


@pytest.fixture
def bad_folder(tmp_path) -> Path:
    d = tmp_path / "data"
    d.mkdir()
    _good(d / "good.parquet")
    (d / "zero.parquet").write_bytes(b"")
    whole = (d / "good.parquet").read_bytes()
    (d / "truncated.parquet").write_bytes(whole[: len(whole) - 20])  # footer cut off
    (d / "text.parquet").write_text("hello, I am not parquet\n")
    (d / "broken.jsonl").write_text(
        '{"text": "a", "label": 0}\n'          # line 1 ok
        '{"text": "b",\n'                       # line 2 truncated object
        '{"text": "c", "label": 1}{"text": "d", "label": 1}\n'  # line 3 two objects
        '\n'                                    # line 4 blank
        '{"text": "e", "label": 1}\n')          # line 5 ok
    (d / "cp1252.jsonl").write_bytes(
        '{"text": "café", "label": 0}\n{"text": "ok", "label": 1}\n'.encode("cp1252"))
    (d / "cp1252.csv").write_bytes("text,label\nok,1\ncafé,0\n".encode("cp1252"))
    (d / "fields.csv").write_text("text,label\na,0\nb,1,extra\nc,1\n")
    return d


def _audit_json(tmp_path: Path, *args: str, cwd: Path | None = None) -> tuple[int, dict, str]:
    p = run_cli("audit", *args, "--format", "json", "--report-dir", str(tmp_path / "reports"), cwd=cwd)
    assert "Traceback" not in p.stderr, p.stderr
    return p.returncode, (json.loads(p.stdout) if p.stdout.strip() else {}), p.stderr


def test_corrupt_shards_are_findings_and_the_rest_is_audited(tmp_path, bad_folder):
    rc, rep, _ = _audit_json(tmp_path, str(bad_folder))
    assert rc == 1
    shards = {s["path"]: s for s in rep["shards"]}
    assert set(shards) == {"good.parquet", "zero.parquet", "truncated.parquet", "text.parquet", "broken.jsonl",
                           "cp1252.jsonl", "cp1252.csv", "fields.csv"}

    def only(path: str, check: str) -> dict:
        got = [f for f in shards[path]["findings"] if f["check"] == check and f["severity"] != "info"]
        assert len(got) == 1, shards[path]["findings"]
        return got[0]

    assert shards["good.parquet"]["rows"] == 3 and shards["good.parquet"]["findings"] == []
    for path, words in (("zero.parquet", "zero-byte file"),
                        ("truncated.parquet", "truncated parquet file: no footer magic"),
                        ("text.parquet", "not a parquet file: bad magic bytes b'hell'")):
        assert shards[path]["rows"] is None and shards[path]["status"] == "fail"
        f = only(path, "decode.unreadable")
        assert words in f["message"] and f["severity"] == "error"

    s = shards["broken.jsonl"]
    assert s["rows"] == 2  # lines 1 and 5
    f = only("broken.jsonl", "decode.bad_record")
    assert (f["count"], f["lines"]) == (2, [2, 3])
    assert [e["byte_offset"] for e in f["examples"]] == [26, 40]
    assert "two JSON values on one line" in f["examples"][1]["value"]
    blank = [f for f in s["findings"] if f["check"] == "decode.bad_record" and f["severity"] == "info"]
    assert blank[0]["lines"] == [4]

    for path, line, offset in (("cp1252.jsonl", 1, 13), ("cp1252.csv", 3, 19)):
        f = only(path, "decode.invalid_utf8")
        assert f["lines"] == [line]
        assert f["examples"][0]["byte_offset"] == offset
        assert "byte 0xe9" in f["message"] and "cp1252" in f["message"]
    assert shards["cp1252.jsonl"]["rows"] == 2 and shards["cp1252.csv"]["rows"] == 2

    f = only("fields.csv", "decode.bad_record")
    assert (f["lines"], f["count"]) == ([3], 1)
    assert "3 fields, expected 2" in f["examples"][0]["value"]
    assert shards["fields.csv"]["rows"] == 2


def test_missing_column_named_in_config(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    _good(d / "s.parquet")
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text('[columns]\ntext = "sentence"\nlabel = "label"\n[labels]\nnum_classes = 2\n')
    rc, rep, _ = _audit_json(tmp_path, str(d), "--config", str(cfg))
    assert rc == 1
    (f,) = [f for f in rep["shards"][0]["findings"] if f["check"] == "schema.missing_column"]
    assert (f["column"], f["severity"]) == ("sentence", "error")
    assert "[columns] text" in f["message"]
    assert rep["shards"][0]["rows"] == 3  # the label checks still ran


def test_empty_folder_exits_2(tmp_path):
    d = tmp_path / "empty"
    d.mkdir()
    (d / "README.md").write_text("no shards here")
    p = run_cli("audit", str(d), "--report-dir", str(tmp_path / "reports"))
    assert p.returncode == 2
    assert "no shard files under" in p.stderr and "README.md" in p.stderr
    assert "Traceback" not in p.stderr
    assert not (tmp_path / "reports").exists()


def test_nonexistent_path_exits_2(tmp_path):
    p = run_cli("audit", str(tmp_path / "nope"), "--report-dir", str(tmp_path / "reports"))
    assert p.returncode == 2
    assert "no such file or folder" in p.stderr and "nope" in p.stderr
    assert "Traceback" not in p.stderr


def _snapshot(folder: Path) -> dict[str, tuple[int, int, int]]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            st = os.lstat(Path(dirpath) / name)
            out[str((Path(dirpath) / name).relative_to(folder))] = (st.st_size, st.st_mtime_ns, st.st_mode)
    return out


def test_audit_never_writes_into_the_audited_folder(tmp_path, bad_folder, monkeypatch):
    monkeypatch.delenv("DATACHECK_DIR")  # the real default: .datacheck/ under the working directory
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    before = _snapshot(bad_folder)
    folder_mtime = os.stat(bad_folder).st_mtime_ns
    p = run_cli("audit", str(bad_folder), "--output", str(tmp_path / "out.json"), cwd=cwd)
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert _snapshot(bad_folder) == before
    assert os.stat(bad_folder).st_mtime_ns == folder_mtime
    assert list((cwd / ".datacheck" / "reports").iterdir())  # the report went to the cwd's report dir


def test_read_only_folder_audits(tmp_path, bad_folder):
    ro = tmp_path / "ro"
    shutil.copytree(bad_folder, ro)
    modes = []
    for dirpath, _, filenames in os.walk(ro, topdown=False):
        for name in filenames:
            os.chmod(Path(dirpath) / name, stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
        modes.append(dirpath)
    for d in modes:
        os.chmod(d, stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    try:
        before = _snapshot(ro)
        rc, rep, _ = _audit_json(tmp_path, str(ro))
        assert rc == 1
        assert rep["summary"]["shards"] == 8
        assert _snapshot(ro) == before
    finally:
        for d in modes:
            os.chmod(d, stat.S_IRWXU)
