"""The CLI ended from outside or by its environment: SIGTERM during ``audit`` (exit 143, the spill
folder removed, nothing half-written, one line on stderr), a report written to a full disk (exit 2
naming the output and the OS reason, no traceback, no temporary file left) and a
``POLARS_MAX_THREADS`` polars cannot use (exit 2 naming the variable, before polars panics)."""
from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
from conftest import ROOT, run_cli, run_cli_subprocess

import datacheck.io.hashspill as hashspill
import datacheck.io.outputs as outputs
from datacheck.cli.main import check_polars_threads
from datacheck.model.constants import EXIT_TERMINATED, EXIT_USAGE
from datacheck.model.errors import UsageError


def _spill_folders(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("datacheck-spill-"))


def _no_traceback(err: str) -> None:
    assert "Traceback" not in err and "Exception ignored" not in err and "panicked" not in err, err


# ----------------------------------------------------------------------------- SIGTERM during audit
def test_sigterm_in_process_removes_the_spill_folder(tmp_path, ow, monkeypatch):
    """SIGTERM arrives (sent by the process to itself) right after the audit spilled its first
    row-hash payload: the spill folder is gone, no report or ``--output`` exists, exit 143."""
    tmpd = tmp_path / "tmpd"
    tmpd.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmpd))
    seen: list[list[str]] = []
    real = hashspill.SpillFolder.spill

    def spill_then_sigterm(self, df):
        real(self, df)
        seen.append(_spill_folders(tmpd))
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:  # the default action would end pytest itself
            raise AssertionError("SIGTERM has its default action (kill the process) while the audit runs")
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises in the main thread at the next bytecode, well before this ends
        raise AssertionError("SIGTERM did not end the audit")

    monkeypatch.setattr(hashspill.SpillFolder, "spill", spill_then_sigterm)
    out = tmp_path / "out" / "report.json"
    p = run_cli("audit", str(ow), "--no-cache", "--no-progress", "--workers", "1", "--report-dir",
                str(tmp_path / "reports"), "-o", str(out), env={"DATACHECK_SPILL_ROWS": "0"})
    assert p.returncode == EXIT_TERMINATED == 128 + signal.SIGTERM, p.stderr
    assert len(seen) == 1 and len(seen[0]) == 1, seen  # the folder existed when the signal came
    assert _spill_folders(tmpd) == []
    assert not out.exists() and not (tmp_path / "reports").exists()
    assert p.stderr.strip().splitlines() == [p.stderr.strip()] and "terminated (SIGTERM)" in p.stderr
    _no_traceback(p.stderr)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # main() put the default back


# every verb that reads shards (all read them through derive/read.open_for_checks -> open_shard):
# (arguments after the data folder, the output it must not leave behind)
_READING_VERBS = {
    "audit": (["--no-cache", "--workers", "1", "--output", "{out}/report.json", "--report-dir", "{out}/reports"],
              "report.json"),
    "clean": (["--out", "{out}/cleaned"], "cleaned"),
    "inspect": (["--export", "{out}/rows.parquet"], "rows.parquet"),
    "index build": (["--output", "{out}/index.json"], "index.json"),
    "schema infer": (["-o", "{out}/schema.yaml"], "schema.yaml"),
}


@pytest.mark.parametrize("verb", sorted(_READING_VERBS))
def test_sigterm_while_a_verb_reads_a_shard_is_one_terminated_line(tmp_path, ow, monkeypatch, verb):
    """SIGTERM arrives (sent by the process to itself) while the verb reads its first shard: exit
    143, a last line "terminated (SIGTERM)", no output and no temporary folder left, no traceback;
    the same for every verb."""
    import datacheck.derive.read as read

    real = read.open_shard
    out = tmp_path / "out"
    out.mkdir()

    def open_then_sigterm(*a, **k):
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:  # the default action would end pytest itself
            raise AssertionError("SIGTERM has its default action (kill the process) while the verb runs")
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises in the main thread at the next bytecode, well before this ends
        return real(*a, **k)

    monkeypatch.setattr(read, "open_shard", open_then_sigterm)
    args, made = _READING_VERBS[verb]
    data = ow / "train.jsonl" if verb == "inspect" else ow
    p = run_cli(*verb.split(), str(data), *[a.format(out=out) for a in args], "--no-progress")
    assert p.returncode == EXIT_TERMINATED, (p.stdout, p.stderr)
    # the last line (a verb may have said which config it read before)
    assert p.stderr.strip().splitlines()[-1:] == [
        "datacheck: terminated (SIGTERM): stopped, temporary files removed, no output half-written"], p.stderr
    assert sorted(x.name for x in out.iterdir()) == [], made  # nothing written, no staging folder
    _no_traceback(p.stderr)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_ctrl_c_in_process_stays_exit_130(tmp_path, ow, monkeypatch):
    """Ctrl-C (KeyboardInterrupt) after the first spill: exit 130 "interrupted", the spill folder removed."""
    tmpd = tmp_path / "tmpd"
    tmpd.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmpd))
    real = hashspill.SpillFolder.spill

    def spill_then_ctrl_c(self, df):
        real(self, df)
        assert len(_spill_folders(tmpd)) == 1
        raise KeyboardInterrupt

    monkeypatch.setattr(hashspill.SpillFolder, "spill", spill_then_ctrl_c)
    p = run_cli("audit", str(ow), "--no-cache", "--no-progress", "--workers", "1", "--report-dir",
                str(tmp_path / "reports"), env={"DATACHECK_SPILL_ROWS": "0"})
    assert p.returncode == 128 + signal.SIGINT, p.stderr
    assert p.stderr.strip() == "datacheck: interrupted"
    assert _spill_folders(tmpd) == [] and not (tmp_path / "reports").exists()


@pytest.mark.parametrize("workers", ["1", "2"])
def test_kill_during_audit_removes_the_spill_folder(tmp_path, ow, workers):
    """A real ``kill PID`` while ``python -m datacheck audit`` holds its spill folder (blocked in its
    second spill): exit 143, one line "terminated", no spill folder, no report, no traceback."""
    tmpd = tmp_path / "tmpd"
    tmpd.mkdir()
    marker = tmp_path / "spilled"
    child = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        import datacheck.io.hashspill as h
        real = h.SpillFolder.spill
        def blocked(self, df):
            ref = real(self, df)
            Path({str(marker)!r}).write_text("spilled")
            time.sleep(120)
            return ref
        h.SpillFolder.spill = blocked
        from datacheck.cli.main import main
        sys.exit(main(sys.argv[1:]))
    """)
    out = tmp_path / "report.json"
    env = {**os.environ, "TMPDIR": str(tmpd), "DATACHECK_SPILL_ROWS": "0"}
    p = subprocess.Popen([sys.executable, "-c", child, "audit", str(ow), "--no-cache", "--no-progress",
                          "--workers", workers, "--report-dir", str(tmp_path / "reports"), "-o", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    try:
        while not marker.exists():
            if p.poll() is not None:
                raise AssertionError(p.communicate()[1])
            time.sleep(0.05)  # polling for the marker, not a timed assertion
        assert len(_spill_folders(tmpd)) == 1
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 143, err
    assert err.strip().splitlines() == ["datacheck: terminated (SIGTERM): stopped, temporary files removed, "
                                        "no output half-written"], err
    assert _spill_folders(tmpd) == []
    assert not out.exists() and not (tmp_path / "reports").exists()


# ----------------------------------------------------------------------------- Full disk
@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs Linux's /dev/full")
def test_output_to_dev_full_names_the_path_and_the_reason(tmp_path, ow):
    p = run_cli_subprocess("audit", str(ow), "--no-cache", "--no-progress", "--report-dir", str(tmp_path / "r"),
                           "-o", "/dev/full")
    assert p.returncode == EXIT_USAGE, p.stderr
    assert "/dev/full" in p.stderr and "no space left" in p.stderr.lower(), p.stderr
    _no_traceback(p.stderr)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs Linux's /dev/full")
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_stdout_to_dev_full_names_the_standard_output(tmp_path, ow, fmt):
    """``datacheck audit data/ > /dev/full``: the printed report cannot be written."""
    with open("/dev/full", "w") as full:
        p = subprocess.run([sys.executable, "-m", "datacheck", "audit", str(ow), "--no-cache", "--no-progress",
                            "--format", fmt, "--report-dir", str(tmp_path / "r")],
                           stdout=full, stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=300)
    assert p.returncode == EXIT_USAGE, p.stderr
    assert "standard output" in p.stderr and "no space left" in p.stderr.lower(), p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    _no_traceback(p.stderr)


def test_full_disk_leaves_no_temporary_file(tmp_path, ow, monkeypatch):
    """A regular file on a full disk (ENOSPC at fsync): exit 2 naming the report's path, and the
    atomic write's ``.NAME.*.tmp`` file is removed."""
    def enospc(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(outputs.os, "fsync", enospc)
    reports = tmp_path / "reports"
    p = run_cli("audit", str(ow), "--no-cache", "--no-progress", "--report-dir", str(reports))
    assert p.returncode == EXIT_USAGE, p.stderr
    assert str(reports) in p.stderr and "no space left" in p.stderr.lower(), p.stderr
    _no_traceback(p.stderr)
    assert [f for f in reports.rglob("*") if f.is_file()] == []


# ----------------------------------------------------------------------------- POLARS_MAX_THREADS
# beyond the bound polars starts that many threads (u64's maximum hung `import polars`) or ignores it
BAD_THREADS = ["0", "00", "abc", "-1", "", "2.5", "65537", "18446744073709551615", "99999999999999999999"]


@pytest.mark.parametrize("value", BAD_THREADS)
def test_unusable_polars_max_threads_is_refused(value):
    with pytest.raises(UsageError, match="POLARS_MAX_THREADS"):
        check_polars_threads({"POLARS_MAX_THREADS": value})


@pytest.mark.parametrize("value", ["1", "4", "64", " 4", "+4", "65536"])
def test_usable_polars_max_threads_is_accepted(value):
    check_polars_threads({"POLARS_MAX_THREADS": value})
    check_polars_threads({})


@pytest.mark.parametrize("value", ["0", "abc"])
def test_polars_max_threads_usage_error_before_polars_panics(tmp_path, ow, value):
    """In a fresh process polars would panic at its first query (``--workers 1``: in this process)."""
    p = run_cli_subprocess("audit", str(ow), "--no-cache", "--no-progress", "--workers", "1", "--report-dir",
                           str(tmp_path / "r"), env={"POLARS_MAX_THREADS": value})
    assert p.returncode == EXIT_USAGE, p.stderr
    assert f"POLARS_MAX_THREADS={value!r}" in p.stderr and "unset it" in p.stderr, p.stderr
    _no_traceback(p.stderr)
    assert not (tmp_path / "r").exists()


def test_kill_ends_workers_busy_with_a_shard(tmp_path, ow):
    """``kill PID`` while a pool worker is inside a long shard (it would sleep 600 s): the audit ends
    at once (exit 143, well before the shard would finish), its workers end and the spill folder is
    removed, instead of the pool's shutdown waiting for the running shard. The slow shard is made by
    a ``sitecustomize`` module, which every process of the audit runs at start (forked, fork-server
    and spawned workers alike)."""
    tmpd = tmp_path / "tmpd"
    tmpd.mkdir()
    marker = tmp_path / "in-shard"
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(textwrap.dedent(f"""
        import os, time
        from pathlib import Path
        import datacheck.execute.audit as a
        real = a.audit_one
        def slow(shard, *args, **kwargs):
            if str(shard.path).endswith(".parquet"):
                Path({str(marker)!r}).write_text(str(os.getpid()))
                time.sleep(600)
            return real(shard, *args, **kwargs)
        a.audit_one = slow
    """))
    env = {**os.environ, "TMPDIR": str(tmpd), "DATACHECK_SPILL_ROWS": "0",
           # ROOT too: sitecustomize imports datacheck before ``-m`` puts the working folder on sys.path
           "PYTHONPATH": os.pathsep.join([str(site), str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    p = subprocess.Popen([sys.executable, "-m", "datacheck", "audit", str(ow), "--no-cache", "--no-progress",
                          "--workers", "2", "--report-dir", str(tmp_path / "reports")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    try:
        while not marker.exists() or not marker.read_text():
            if p.poll() is not None:
                raise AssertionError(p.communicate()[1])
            time.sleep(0.05)  # polling for the marker, not a timed assertion
        worker = int(marker.read_text())
        assert worker != p.pid  # the shard runs in a pool worker
        assert len(_spill_folders(tmpd)) == 1
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=120)  # the shard alone would take 600 s
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 143, err
    assert "terminated (SIGTERM)" in err, err
    assert _spill_folders(tmpd) == []
    with pytest.raises(ProcessLookupError):
        for _ in range(200):  # the worker is gone (reaped by the pool, or dying with its parent)
            os.kill(worker, 0)
            time.sleep(0.05)
