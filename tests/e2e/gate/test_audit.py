"""``datacheck audit`` report basics: stored report and --output, index_hash keyed to the bytes,
sorted JSON keys, --format json|markdown|text, exit codes 0/1/2."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from conftest import run_cli, run_cli_subprocess

from datacheck.cli.main import main
from datacheck.report.model import read_report


@pytest.fixture
def data(tmp_path) -> Path:
    d = tmp_path / "data"
    d.mkdir()
    pl.DataFrame({"text": ["a", "b", "a"], "label": [0, 1, 0]}).write_parquet(d / "a.parquet")
    pl.DataFrame({"text": ["c", "d"], "label": [1, 0]}).write_parquet(d / "b.parquet")
    return d


def _keys_sorted(obj) -> bool:
    if isinstance(obj, dict):
        return list(obj) == sorted(obj) and all(_keys_sorted(v) for v in obj.values())
    if isinstance(obj, list):
        return all(_keys_sorted(v) for v in obj)
    return True


def test_output_equals_stored_report(tmp_path, data):
    out = tmp_path / "out" / "report.json"
    reports = tmp_path / "reports"
    p = run_cli("audit", str(data), "--report-dir", str(reports), "--output", str(out))
    assert p.returncode == 0, p.stderr
    d = json.loads(out.read_text())
    stored = reports / d["index_hash"] / "report.json"
    assert stored.read_bytes() == out.read_bytes()
    assert f"report: {stored}" in p.stdout
    assert d["report_version"] == 1
    assert _keys_sorted(d)
    assert out.read_text() == json.dumps(d, sort_keys=True, indent=2, ensure_ascii=False) + "\n"
    assert [s["path"] for s in d["shards"]] == ["a.parquet", "b.parquet"]
    assert all(s["content_hash"].startswith("xxh3-128:") and len(s["content_hash"]) == 9 + 32 for s in d["shards"])
    keys = ("status", "shards", "rows", "errors", "warnings", "policy_failures")
    assert {k: d["summary"][k] for k in keys} == {"status": "warn", "shards": 2, "rows": 5, "errors": 0,
                                                  "warnings": 1, "policy_failures": 0}
    assert not list(reports.rglob("*.tmp"))  # atomic write leaves no temporary file
    assert read_report(stored).index_hash == d["index_hash"]


def test_index_hash_stable_and_keyed_to_bytes(tmp_path, data, capsys):
    def run() -> dict:
        rc = main(["audit", str(data), "--report-dir", str(tmp_path / "r"), "--format", "json"])
        assert rc in (0, 1)
        return json.loads(capsys.readouterr().out)

    first, second = run(), run()
    assert first["index_hash"] == second["index_hash"]
    assert [s["content_hash"] for s in first["shards"]] == [s["content_hash"] for s in second["shards"]]
    # the same bytes under another root give the same key
    other = tmp_path / "copy"
    other.mkdir()
    for f in data.iterdir():
        (other / f.name).write_bytes(f.read_bytes())
    assert main(["audit", str(other), "--report-dir", str(tmp_path / "r"), "--format", "json"]) in (0, 1)
    assert json.loads(capsys.readouterr().out)["index_hash"] == first["index_hash"]
    # one changed byte: a new key and a new content hash for that shard only
    b = bytearray((data / "b.parquet").read_bytes())
    b[len(b) // 2] ^= 0x01
    (data / "b.parquet").write_bytes(bytes(b))
    third = run()
    assert third["index_hash"] != first["index_hash"]
    assert third["shards"][0]["content_hash"] == first["shards"][0]["content_hash"]
    assert third["shards"][1]["content_hash"] != first["shards"][1]["content_hash"]
    assert (tmp_path / "r" / first["index_hash"] / "report.json").is_file()
    assert (tmp_path / "r" / third["index_hash"] / "report.json").is_file()


def test_formats(tmp_path, data, capsys):
    reports = str(tmp_path / "r")
    assert main(["audit", str(data), "--report-dir", reports, "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert main(["audit", str(data), "--report-dir", reports, "--format", "markdown"]) == 0
    md = capsys.readouterr().out
    assert "a.parquet" in md and "dup.exact_in_shard" in md and "|" in md
    assert main(["audit", str(data), "--report-dir", reports, "--format", "text"]) == 0
    text = capsys.readouterr().out
    assert "a.parquet" in text and "dup.exact_in_shard" in text
    assert d["index_hash"] in text and d["index_hash"] in md


@pytest.mark.parametrize("args, rc", [
    ([], 0),                                   # only a warning
    (["--fail-on", "warn"], 1),
    (["--fail-on", "never"], 0),
])
def test_exit_codes_follow_fail_on(tmp_path, data, capsys, args, rc):
    assert main(["audit", str(data), "--report-dir", str(tmp_path / "r"), *args]) == rc


@pytest.mark.slow
def test_exit_1_on_error_and_2_on_usage(tmp_path, data):
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text("[labels]\nnum_classes = 1\n")
    p = run_cli_subprocess("audit", str(data), "--config", str(cfg), "--report-dir", str(tmp_path / "r"))
    assert p.returncode == 1
    assert "labels.out_of_range" in p.stdout
    assert "Traceback" not in p.stderr


@pytest.mark.parametrize("argv, words", [(["--format", "yaml"], "invalid choice: 'yaml'"),
                                         (["--fail-on", "sometimes"], "invalid choice: 'sometimes'")])
def test_bad_flags_exit_2(data, capsys, argv, words):
    with pytest.raises(SystemExit) as e:
        main(["audit", str(data), *argv])
    assert e.value.code == 2
    assert words in capsys.readouterr().err


def test_no_path_exits_2(capsys):
    with pytest.raises(SystemExit) as e:
        main(["audit"])
    assert e.value.code == 2
    assert "PATH" in capsys.readouterr().err


def test_policy_threshold_from_config(tmp_path, data, capsys):
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text('[policy]\n"dup.exact_in_shard" = { severity = "error", max_count = 0 }\n')
    assert main(["audit", str(data), "--config", str(cfg), "--report-dir", str(tmp_path / "r"),
                 "--format", "json"]) == 1
    d = json.loads(capsys.readouterr().out)
    (f,) = d["shards"][0]["findings"]
    assert (f["check"], f["severity"], f["fails_policy"]) == ("dup.exact_in_shard", "error", True)
    cfg.write_text('[policy]\n"dup.exact_in_shard" = { severity = "error", max_count = 1 }\n')
    assert main(["audit", str(data), "--config", str(cfg), "--report-dir", str(tmp_path / "r")]) == 0


def test_unwritable_output_is_exit_2(tmp_path, data):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    p = run_cli("audit", str(data), "--report-dir", str(tmp_path / "r"), "--output", str(blocker / "out.json"))
    assert p.returncode == 2
    assert "cannot write" in p.stderr and "Traceback" not in p.stderr


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("script") is None, reason="needs util-linux script(1) for a pseudo-terminal")
def test_progress_bar_on_a_terminal_only(tmp_path, data):
    """On a TTY a progress bar is drawn (on stderr); piped, or with CI set, there is none."""
    cmd = f"{sys.executable} -m datacheck audit {data} --report-dir {tmp_path / 'r'}"
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["TERM"] = "xterm"
    p = subprocess.run(["script", "-qec", cmd, "/dev/null"], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0
    assert "auditing" in p.stdout and "report:" in p.stdout
    p = subprocess.run(["script", "-qec", cmd, "/dev/null"], capture_output=True, text=True,
                       env={**env, "CI": "true"}, timeout=300)
    assert p.returncode == 0 and "auditing" not in p.stdout
    piped = run_cli("audit", str(data), "--report-dir", str(tmp_path / "r"))
    assert "auditing" not in piped.stderr and "\x1b[" not in piped.stderr
