"""The CLI under hostile conditions: special files
and links as outputs, outputs pointing into the audited data, closed pipes, BOMs, empty paths,
SIGTERM. Exit codes matter here, so most cases run ``python -m datacheck`` in a subprocess."""
from __future__ import annotations

import contextlib
import io
import json
import os
import re
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import polars as pl
import pytest
from conftest import ROOT, run_cli, run_cli_subprocess

from datacheck.cli.main import main

BOM = b"\xef\xbb\xbf"


def _in_process(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(args))
    return rc, out.getvalue(), err.getvalue()


def _no_traceback(p) -> None:
    assert "Traceback" not in p.stderr and "Exception ignored" not in p.stderr, p.stderr


@pytest.fixture
def failing(tmp_path) -> Path:
    """A folder whose audit fails the policy: a JSONL line that is not JSON (decode.bad_record)."""
    d = tmp_path / "bad"
    d.mkdir()
    (d / "a.jsonl").write_text("".join(f'{{"text": "row {i}", "label": {i % 2}}}\n' for i in range(200))
                               + "this is not json\n")
    return d


# ----------------------------------------------------------------------------- Special outputs
@pytest.mark.slow
def test_dev_null_outputs_stay_a_character_device(tmp_path, ow):
    """``-o/--junit/--html /dev/null``: written in place. os.replace/os.rename onto /dev is blocked in
    the child, so a regression fails this test instead of replacing the machine's /dev/null."""
    guard = textwrap.dedent("""
        import os, sys
        def _blocked(real):
            def call(src, dst, *a, **k):
                if os.path.abspath(os.fspath(dst)).startswith(("/dev", "/proc")):
                    raise SystemExit(f"BLOCKED: rename onto {dst}")
                return real(src, dst, *a, **k)
            return call
        os.replace, os.rename = _blocked(os.replace), _blocked(os.rename)
        from datacheck.cli.main import main
        sys.exit(main(sys.argv[1:]))
    """)
    p = subprocess.run([sys.executable, "-c", guard, "audit", str(ow), "-o", "/dev/null", "--junit", "/dev/null",
                        "--html", "/dev/null", "--no-cache", "--report-dir", str(tmp_path / "r")],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "BLOCKED" not in p.stderr
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


@pytest.mark.slow
def test_junit_to_dev_stdout_shares_the_redirected_file(tmp_path, ow):
    """``--junit /dev/stdout > file``: the XML goes through the process's own stdout (same offset),
    so neither the XML nor the text report overwrites the other, and nothing is replaced."""
    out = tmp_path / "out.txt"
    with open(out, "w") as f:
        p = subprocess.run([sys.executable, "-m", "datacheck", "audit", str(ow), "--junit", "/dev/stdout",
                            "--no-cache", "--report-dir", str(tmp_path / "r")],
                           stdout=f, stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stderr
    text = out.read_text()
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>\n<testsuites')
    xml_end = text.index("</testsuites>")
    assert re.search(r"^datacheck \S+: PASS", text, re.M).start() > xml_end and text.count("</testsuites>") == 1
    assert text.rstrip().endswith("report.json")


def test_output_symlink_is_written_through(tmp_path, ow):
    (tmp_path / "keep").mkdir()
    link = tmp_path / "linkr.json"
    link.symlink_to(tmp_path / "keep" / "real.json")
    html = tmp_path / "page.html"
    html.symlink_to(tmp_path / "keep" / "page-real.html")
    rc, _, err = _in_process("audit", str(ow), "-o", str(link), "--html", str(html), "--no-cache",
                             "--report-dir", str(tmp_path / "r"))
    assert rc == 0, err
    assert link.is_symlink() and html.is_symlink()
    assert json.loads((tmp_path / "keep" / "real.json").read_text())["summary"]["status"] == "pass"
    assert (tmp_path / "keep" / "page-real.html").read_text().startswith("<!DOCTYPE html>")


def test_fifo_output_is_written_not_replaced(tmp_path, ow):
    fifo = tmp_path / "ff"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    p = run_cli("audit", str(ow), "-o", str(fifo), "--no-cache", "--report-dir", str(tmp_path / "r"))
    got = reader.communicate(timeout=60)[0]
    assert p.returncode == 0, p.stderr
    assert json.loads(got)["summary"]["shards"] == 2
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


# ----------------------------------------------------------------------------- Outputs in data
def test_outputs_into_the_audited_data_are_refused(tmp_path, ow):
    shard = ow / "validation-00000-of-00001.parquet"
    before = {p.name: p.read_bytes() for p in ow.iterdir()}
    cases = [
        (["audit", str(ow), "-o", str(shard)], "--output"),
        (["audit", str(ow), "--html", str(ow / "train.jsonl")], "--html"),
        (["audit", str(ow), "--junit", str(ow / "junit.xml")], "--junit"),
        (["audit", str(tmp_path / "x"), "--against", str(ow), "-o", str(ow / "r.json")], "--output"),
        (["inspect", str(shard), "--export", str(shard)], "--export"),
        (["inspect", str(ow), "--export", str(ow / "rows.jsonl")], "--export"),
        (["index", "build", str(ow), "-o", str(ow / "my-index.json")], "--output"),
        (["schema", "infer", str(ow), "-o", str(ow / "schema.yaml")], "--output"),
    ]
    (tmp_path / "x").mkdir()
    pl.DataFrame({"text": ["q"], "label": [0]}).write_parquet(tmp_path / "x" / "x.parquet")
    for args, flag in cases:
        rc, out, err = _in_process(*args, *(["--report-dir", str(tmp_path / "r")] if args[0] == "audit" else []))
        assert rc == 2, (args, err)
        assert f"datacheck: error: {flag} " in err and "audited" in err, err
    assert {p.name: p.read_bytes() for p in ow.iterdir()} == before  # nothing written, nothing replaced


def test_merge_and_report_never_overwrite_their_input(tmp_path, ow):
    parts = tmp_path / "parts"
    for k in (0, 1):
        rc, _, err = _in_process("audit", str(ow), "--num-parts", "2", "--part", str(k), "--no-cache",
                                 "-o", str(parts / f"part-{k}.json"), "--report-dir", str(tmp_path / "r"))
        assert rc == 0, err
    before = (parts / "part-0.json").read_bytes()
    rc, _, err = _in_process("merge", str(parts), "-o", str(parts / "part-0.json"), "--report-dir", str(tmp_path / "r"))
    assert rc == 2 and "--output" in err and "part-0.json" in err, err
    assert (parts / "part-0.json").read_bytes() == before
    # beside the parts is fine: a merged report has no 'part' object, a later merge skips it
    rc, _, err = _in_process("merge", str(parts), "-o", str(parts / "merged.json"), "--report-dir", str(tmp_path / "r"))
    assert rc == 0, err
    rc, _, err = _in_process("report", str(parts / "merged.json"), "--html", str(parts / "merged.json"))
    assert rc == 2 and "--html" in err, err
    assert json.loads((parts / "merged.json").read_text())["summary"]["shards"] == 2


def test_allowed_outputs_beside_the_data(tmp_path, ow, monkeypatch):
    """The default report folder under the audited cwd (a hidden folder discovery skips) and
    ``index build -o DATA/index.json`` (what ``[dataset] index`` points at) stay allowed."""
    monkeypatch.delenv("DATACHECK_DIR")  # the real default: .datacheck/ under the working directory
    monkeypatch.chdir(ow)
    rc, _, err = _in_process("audit", ".", "--no-cache")
    assert rc == 0, err
    assert len(list((ow / ".datacheck" / "reports").glob("*/report.json"))) == 1
    rc, _, err = _in_process("index", "build", str(ow), "-o", str(ow / "index.json"))
    assert rc == 0, err
    assert json.loads((ow / "index.json").read_text())["shards"][0]["path"] == "train.jsonl"


# ----------------------------------------------------------------------------- No tracebacks
def test_folders_and_non_reports_are_usage_errors(tmp_path, ow):
    d = tmp_path / "adir"
    d.mkdir()
    (tmp_path / "min.json").write_text('{"report_version": 1}')
    cases = [
        (["report", str(ow)], "is a folder; give a report file"),
        (["report", str(tmp_path / "min.json")], "not a datacheck report: missing key 'datacheck_version'"),
        (["diff", str(tmp_path / "min.json"), str(tmp_path / "min.json")], "missing key 'datacheck_version'"),
        (["audit", str(ow), "-o", str(d)], f"--output {d} is a folder; give a file path"),
        (["audit", str(ow), "--html", str(d)], f"--html {d} is a folder; give a file path"),
        (["audit", str(ow), "--junit", str(d)], f"--junit {d} is a folder; give a file path"),
        (["index", "build", str(ow), "-o", str(d)], f"--output {d} is a folder; give a file path"),
        (["schema", "infer", str(ow), "-o", str(d)], f"--output {d} is a folder; give a file path"),
        (["inspect", str(ow), "--export", str(d)], f"--export {d} is a folder; give a file path"),
        (["audit", str(ow), "-o", str(tmp_path / "min.json" / "r.json")], "Not a directory"),
    ]
    for args, message in cases:
        rc, _, err = _in_process(*args, *(["--report-dir", str(tmp_path / "r")] if args[0] == "audit" else []))
        assert rc == 2, (args, err)
        assert message in err and "Traceback" not in err, (args, err)
    assert list(d.iterdir()) == []


def test_export_to_a_folder_named_like_a_file(tmp_path, ow):
    (tmp_path / "DIR.jsonl").mkdir()
    p = run_cli("inspect", str(ow), "--export", str(tmp_path / "DIR.jsonl"), "--rows", "0")
    assert p.returncode == 2 and "DIR.jsonl is a folder; give a file path" in p.stderr
    _no_traceback(p)


# ----------------------------------------------------------------------------- Closed pipe
@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_closed_pipe_keeps_the_policy_exit_code(tmp_path, failing, ow, fmt):
    """stdout is a pipe whose reader is gone before datacheck writes: every write gets EPIPE. The
    exit code is still the policy's (1 fails, 0 passes), with no traceback."""
    for data, want in ((failing, 1), (ow, 0)):
        r, w = os.pipe()
        os.close(r)
        p = subprocess.Popen([sys.executable, "-m", "datacheck", "audit", str(data), "--format", fmt, "--no-cache",
                              "--report-dir", str(tmp_path / "r")], stdout=w, stderr=subprocess.PIPE, cwd=ROOT)
        os.close(w)
        err = p.communicate(timeout=300)[1].decode()
        assert p.returncode == want, err
        assert "Traceback" not in err and "BrokenPipe" not in err and "Exception ignored" not in err, err


@pytest.mark.slow
@pytest.mark.parametrize("closed", [">&-", "2>&-"])
def test_closed_stdout_or_stderr_keeps_the_policy_exit_code(tmp_path, failing, closed):
    """``datacheck audit bad/ >&-``: started with stdout (or stderr) closed, Python has no such
    stream (None); the output is dropped and the exit code is still the policy's."""
    cmd = (f"{sys.executable} -m datacheck audit {failing} --no-cache --report-dir {tmp_path / 'r'} {closed}; "
           "echo \" rc=$?\"")
    p = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert p.stdout.endswith(" rc=1\n"), (p.stdout, p.stderr)
    _no_traceback(p)


@pytest.mark.slow
def test_pipe_closed_by_head_keeps_exit_code_1(tmp_path, failing):
    """``datacheck audit bad/ --format json | head -c 10``: the reader leaves mid-output."""
    cmd = (f"{sys.executable} -m datacheck audit {failing} --format json --no-cache --report-dir {tmp_path / 'r'} "
           "| head -c 10; echo \" rc=${PIPESTATUS[0]}\"")
    p = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert p.stdout.endswith(" rc=1\n"), (p.stdout, p.stderr)
    _no_traceback(p)


# ----------------------------------------------------------------------------- BOM in clean
def test_clean_agrees_with_the_audit_on_a_bom_jsonl(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    (d / "bom.jsonl").write_bytes(BOM + b'{"text": "", "label": 0}\n{"text": "b", "label": 1}\n'
                                  b'{"text": "c", "label": 0}\n')
    audit = run_cli("audit", str(d), "--format", "json", "--no-cache", "--report-dir", str(tmp_path / "r"))
    assert json.loads(audit.stdout)["shards"][0]["rows"] == 3
    p = run_cli("clean", str(d), "--out", str(tmp_path / "out"), "--format", "json")
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)["result"]
    assert (res["input_rows"], res["kept"], res["quarantined"]) == (3, 2, 1)
    assert res["shards"][0]["dropped"] == {"empty.text": 1}
    # the cleaned copy keeps the BOM and the kept lines byte for byte
    assert (tmp_path / "out" / "bom.jsonl").read_bytes() == BOM + b'{"text": "b", "label": 1}\n{"text": "c", "label": 0}\n'
    q = [json.loads(x) for x in (tmp_path / "out" / ".quarantine" / "bom.jsonl").read_text().splitlines()]
    assert [(r["_datacheck_line"], r["text"]) for r in q] == [(1, "")]


def test_clean_agrees_with_the_audit_on_a_bom_csv(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    (d / "b.csv").write_bytes(BOM + b"text,label\na,0\nb,1\n")
    p = run_cli("clean", str(d), "--out", str(tmp_path / "out"), "--format", "json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["result"]["kept"] == 2
    assert (tmp_path / "out" / "b.csv").read_bytes() == BOM + b"text,label\na,0\nb,1\n"


# ----------------------------------------------------------------------------- Empty PATH
@pytest.mark.parametrize("args, name", [
    (["audit", ""], "empty PATH"),
    (["audit", "ok", ""], "empty PATH"),
    (["inspect", ""], "empty PATH"),
    (["schema", "infer", ""], "empty PATH"),
    (["index", "build", "", "-o", "i.json"], "empty PATH"),
    (["clean", "", "--out", "o"], "empty PATH"),
    (["audit", "x", "--against", ""], "empty --against"),
    (["audit", "x", "--config", ""], "empty --config"),
    (["report", ""], "empty REPORT.json"),
])
def test_empty_path_argument_is_a_usage_error(tmp_path, monkeypatch, args, name):
    monkeypatch.chdir(tmp_path)
    pl.DataFrame({"text": ["a"], "label": [0]}).write_parquet(tmp_path / "s.parquet")  # cwd would audit this
    rc, out, err = _in_process(*args)
    assert rc == 2 and err.startswith(f"datacheck: error: {name}"), err
    assert out == "" and not (tmp_path / ".datacheck").exists()


@pytest.mark.slow
def test_empty_path_exit_code_through_the_shell(tmp_path):
    p = run_cli_subprocess("audit", "", cwd=tmp_path)
    assert p.returncode == 2 and "empty PATH" in p.stderr


# ----------------------------------------------------------------------------- SIGTERM in clean
@pytest.mark.slow
def test_sigterm_during_clean_removes_the_temporary_folder(tmp_path, ow):
    """The child blocks inside clean (after the temporary folder exists) until the test sends
    SIGTERM; then the folder must be gone, ``--out`` not created, exit 143, no traceback."""
    marker = tmp_path / "started"
    child = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        import datacheck.tools.clean as c
        real = c.audit_file
        def blocked(*a, **k):
            Path({str(marker)!r}).write_text("in clean")
            time.sleep(120)
            return real(*a, **k)
        c.audit_file = blocked
        from datacheck.cli.main import main
        sys.exit(main(sys.argv[1:]))
    """)
    out = tmp_path / "cleaned"
    p = subprocess.Popen([sys.executable, "-c", child, "clean", str(ow), "--out", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        while not marker.exists():
            if p.poll() is not None:
                raise AssertionError(p.communicate()[1])
            time.sleep(0.05)  # polling for the marker, not a timed assertion
        assert [x.name for x in tmp_path.iterdir() if x.name.startswith(".cleaned.tmp-")] != []
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 128 + signal.SIGTERM, err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == ("datacheck: terminated (SIGTERM): stopped, temporary files removed, "
                                            "no output half-written"), err
    assert [x.name for x in tmp_path.iterdir() if x.name.startswith(".cleaned")] == []
    assert not out.exists()


def test_clean_restores_the_previous_sigterm_handler(tmp_path, ow):
    from datacheck.model.config import Config
    from datacheck.tools.clean import clean

    def mine(signum, frame):  # pragma: no cover - never called
        raise AssertionError("not expected")

    previous = signal.signal(signal.SIGTERM, mine)
    try:
        res = clean([str(ow)], tmp_path / "out", Config())
        assert signal.getsignal(signal.SIGTERM) is mine
        assert res.kept == 5
    finally:
        signal.signal(signal.SIGTERM, previous)
