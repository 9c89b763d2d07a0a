"""File names whose bytes are not UTF-8 (a Latin-1 ``tr\\xe9in.jsonl`` copied from an old machine, a
Megatron pair named ``m\\xfe``): every verb reads them, the report, the cache and the index name
them with the byte written ``\\xNN`` (they crashed the audit with a UnicodeEncodeError when the index
hash, the report or the cache encoded the name), and a report folder or output path with such bytes
is written and printed."""
from __future__ import annotations

import json
import os
import shutil

import pytest
from conftest import SHARED, run_cli, run_cli_subprocess

from datacheck.io.dataindex import safe_relpath
from datacheck.model.errors import UsageError

TOY = SHARED / "realdata" / "megatron_toy_duplicates"


@pytest.fixture
def data(tmp_path):
    d = tmp_path / "d"
    sub = os.fsdecode(bytes(d / "sub") + b"\xff")
    os.makedirs(sub)
    with open(os.fsdecode(bytes(d) + b"/sub\xff/tr\xe9in.jsonl"), "w") as f:
        f.write('{"text": "a", "label": 1}\n{"text": "b", "label": 1}\n')
    (d / "ok.jsonl").write_text('{"text": "c", "label": 0}\n{"text": "c", "label": 0}\n')  # a repeated row
    if TOY.is_dir():
        for ext in ("bin", "idx"):
            shutil.copy(TOY / f"my-gpt2_text_document.{ext}", os.fsdecode(bytes(d) + b"/m\xfe." + ext.encode()))
    return d


def test_audit_names_the_bytes_and_reads_the_shards(tmp_path, data):
    rep = tmp_path / "rep"
    for _ in range(2):  # the second run answers from the cache and the memo
        r = run_cli("audit", str(data), "--report-dir", str(rep), "--show-passing", "-o", str(tmp_path / "r.json"))
        assert r.returncode in (0, 1) and "Traceback" not in r.stderr, r.stderr
        doc = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
        rows = {s["path"]: s["rows"] for s in doc["shards"]}
        assert rows["sub\\xff/tr\\xe9in.jsonl"] == 2 and rows["ok.jsonl"] == 2
        if TOY.is_dir():
            assert rows["m\\xfe.bin"] == 10_000
        assert "sub\\xff/tr\\xe9in.jsonl" in r.stdout
    for fmt in ("json", "markdown", "html"):
        r = run_cli("audit", str(data), "--report-dir", str(rep), "--format", fmt, "--no-cache")
        assert r.returncode in (0, 1) and "Traceback" not in r.stderr, (fmt, r.stderr)


def test_index_build_and_verify_and_clean_take_such_names(tmp_path, data):
    idx = tmp_path / "index.json"
    assert run_cli("index", "build", str(data), "-o", str(idx)).returncode == 0
    paths = [s["path"] for s in json.loads(idx.read_text())["shards"]]
    assert "sub\\xff/tr\\xe9in.jsonl" in paths
    r = run_cli("index", "verify", str(data), "--index", str(idx))
    assert r.returncode == 0, r.stdout + r.stderr
    r = run_cli("clean", str(data / "ok.jsonl"), os.fsdecode(bytes(data) + b"/sub\xff/tr\xe9in.jsonl"),
                "--out", str(tmp_path / "out"))
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr


def test_an_escaped_byte_is_no_backslash_separator_but_a_backslash_still_is(tmp_path):
    assert safe_relpath("sub\\xff/tr\\xe9in.jsonl", tmp_path, "i") == "sub\\xff/tr\\xe9in.jsonl"
    for bad in ("..\\x2e/etc", "a\\b.jsonl", "\\x41.jsonl", "..\\xe9\\..\\x"):
        with pytest.raises(UsageError):
            safe_relpath(bad, tmp_path, "i")


def test_report_folder_with_such_bytes_is_written_and_printed(tmp_path, data):
    """A report folder named with a non-UTF-8 byte: written, and the "report:" line printed (escaped)
    even on a terminal whose encoding refuses the byte; the memo replays it."""
    rep = os.fsdecode(bytes(tmp_path) + b"/rep\xe9")
    for _ in range(2):
        r = run_cli_subprocess("audit", str(data), "--report-dir", rep, env={"PYTHONIOENCODING": "utf-8:strict"})
        assert r.returncode in (0, 1) and "Traceback" not in r.stderr, r.stderr
        assert "report: " + str(tmp_path) + "/rep\\udce9/" in r.stdout
