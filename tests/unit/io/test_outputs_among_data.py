"""Outputs that would land among the audited data are refused, exit 2, before any
shard is read: report and cache folders inside it, any output next to a single-file or glob PATH, and a
MosaicML ``index.json`` that ``index build -o`` would overwrite. Unwritable report folders are found
before the audit, not after it."""
from __future__ import annotations

import ctypes
import json
import os

import polars as pl
import pytest
from conftest import run_cli, run_cli_subprocess


@pytest.fixture
def data(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    pl.DataFrame({"text": ["a", "b"], "label": [0, 1]}).write_parquet(d / "t.parquet")
    (d / "u.jsonl").write_text('{"text": "x", "label": 1}\n')
    return d


def _refused(p, *words):
    assert p.returncode == 2 and "Traceback" not in p.stderr, (p.returncode, p.stderr)
    for w in words:
        assert w in p.stderr, p.stderr


@pytest.mark.parametrize("flag", ["--report-dir", "--cache-dir"])
def test_report_and_cache_dir_inside_the_data(tmp_path, data, flag):
    rd = [] if flag == "--report-dir" else ["--report-dir", str(tmp_path / "r")]
    p = run_cli("audit", str(data), flag, str(data / "out"), *rd, cwd=tmp_path)
    _refused(p, flag, "inside the audited data")
    assert sorted(x.name for x in data.iterdir()) == ["t.parquet", "u.jsonl"]


def test_hidden_report_dir_inside_the_data_is_fine(tmp_path, data):
    p = run_cli("audit", str(data), "--report-dir", str(data / ".datacheck" / "r"), cwd=tmp_path)
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize("args", [
    ["audit", "DATA/t.parquet", "--output", "DATA/report.json"],
    ["audit", "DATA/*.parquet", "--html", "DATA/report.html"],
    ["inspect", "DATA/t.parquet", "--export", "DATA/rows.jsonl"],
    ["schema", "infer", "DATA/t.parquet", "-o", "DATA/schema.yaml"],
    ["index", "build", "DATA/t.parquet", "-o", "DATA/idx.json"],
])
def test_outputs_next_to_a_file_or_glob_path(tmp_path, data, args):
    argv = [a.replace("DATA", str(data)) for a in args]
    if argv[0] == "audit":
        argv += ["--report-dir", str(tmp_path / "r")]
    p = run_cli(*argv, cwd=tmp_path)
    _refused(p, "audited")
    assert sorted(x.name for x in data.iterdir()) == ["t.parquet", "u.jsonl"]


def test_index_build_never_overwrites_a_mosaic_index(tmp_path, data):
    mosaic = {"version": 2, "shards": [{"raw_data": {"basename": "u.jsonl", "bytes": 26}, "samples": 1}]}
    (data / "index.json").write_text(json.dumps(mosaic))
    p = run_cli("index", "build", str(data), "-o", str(data / "index.json"), cwd=tmp_path)
    _refused(p, "MosaicML")
    assert json.loads((data / "index.json").read_text()) == mosaic
    (data / "index.json").unlink()
    p = run_cli("index", "build", str(data), "-o", str(data / "index.json"), cwd=tmp_path)  # its own index: fine
    assert p.returncode == 0, p.stderr
    p = run_cli("index", "build", str(data), "-o", str(data / "index.json"), cwd=tmp_path)  # and rebuilt
    assert p.returncode == 0, p.stderr


def _held_to_file_permissions() -> None:
    """In the child before exec: drop CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH from the capability
    bounding set, so a CLI started by root is held to file permissions as any user is."""
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH (linux/capability.h)
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def test_unwritable_report_dir_is_found_before_the_audit(tmp_path, data):
    """As root (CI) the CLI runs in a process without the capabilities that let root write anywhere."""
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    args = ("audit", str(data), "--report-dir", str(ro / "r"))
    p = run_cli_subprocess(*args, cwd=tmp_path, preexec_fn=_held_to_file_permissions) if os.geteuid() == 0 \
        else run_cli(*args, cwd=tmp_path)
    _refused(p, "--report-dir")


def test_report_dir_under_a_file_is_found_before_the_audit(tmp_path, data):
    f = tmp_path / "afile"
    f.write_text("x")
    p = run_cli("audit", str(data), "--report-dir", str(f / "r"), "--no-cache", cwd=tmp_path)
    _refused(p, "--report-dir")
    assert "shards" not in p.stdout
