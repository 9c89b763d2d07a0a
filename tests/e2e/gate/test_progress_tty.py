"""Progress of the verbs that can run for more than a few seconds (audit, clean, index build and
verify, schema infer, plan, trace --data): drawn on stderr when stderr is a terminal, whatever stdout is (here a
pipe), and never when stderr is not a terminal. stdout stays the verb's output, byte for byte.

Each verb runs as a real process with its stderr on a pseudo-terminal (``pty.openpty``) and its
stdout on a pipe, then again with both on pipes.
"""
from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import threading
from pathlib import Path

import polars as pl
import pytest
from conftest import ROOT

pytestmark = pytest.mark.slow  # a Python process per run

#: the bar's own character (rich's BarColumn); never in a verb's plain output
BAR = "\u2501"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "NO_COLOR", "TERM")}
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**env, "TERM": "xterm", "COLUMNS": "160", "PYTHONPATH": path}


def run_stderr_on_tty(args: list[str], cwd: Path) -> tuple[int, str, str]:
    """``python -m datacheck ARGS`` with stderr on a pseudo-terminal and stdout on a pipe:
    (exit code, stdout, what reached the terminal)."""
    master, slave = pty.openpty()
    p = subprocess.Popen([sys.executable, "-m", "datacheck", *args], cwd=cwd, env=_env(), stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    out: list[bytes] = []
    reader = threading.Thread(target=lambda: out.append(p.stdout.read()))  # type: ignore[union-attr]
    reader.start()
    tty = bytearray()
    while True:
        ready, _, _ = select.select([master], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            tty += chunk
        elif p.poll() is not None:
            break
    rc = p.wait(timeout=300)
    reader.join(timeout=60)
    os.close(master)
    return rc, b"".join(out).decode("utf-8", "replace"), tty.decode("utf-8", "replace")


def run_piped(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "datacheck", *args], cwd=cwd, env=_env(), capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    root = tmp_path_factory.mktemp("progress")
    data = root / "data"
    data.mkdir()
    for k in range(3):
        pl.DataFrame({"input_ids": [[1 + (i + k) % 7, 2, 3] for i in range(40)],
                      "labels": [[1 + (i + k) % 7, 2, 3] for i in range(40)]}).write_parquet(data / f"part-{k}.parquet")
    (root / "datacheck.toml").write_text("[tokens]\nvocab_size = 16\n[batch]\nbatch_size = 4\n")
    (root / "metrics.jsonl").write_text("".join(json.dumps({"step": s, "loss": 2.0 if s != 5 else float("nan")}) + "\n"
                                                for s in range(1, 10)).replace("NaN", '"nan"'))
    subprocess.run([sys.executable, "-m", "datacheck", "index", "build", "data", "-o", str(root / "committed.json"),
                    "--config", str(root / "datacheck.toml")], cwd=root, env=_env(), check=True, capture_output=True)
    return root


def _verbs(root: Path) -> dict[str, tuple[list[str], str]]:
    """verb -> (arguments, the label its progress display shows)."""
    cfg = ["--config", str(root / "datacheck.toml")]
    return {
        "audit": (["audit", "data", *cfg, "--no-cache", "--report-dir", str(root / "rep")], "auditing"),
        "clean": (["clean", "data", *cfg, "--out", "OUT"], "cleaning"),
        "index build": (["index", "build", "data", *cfg, "-o", "OUT.json"], "indexing"),
        "index verify": (["index", "verify", "data", *cfg, "--index", str(root / "committed.json")], "verifying"),
        "schema infer": (["schema", "infer", "data", *cfg], "inferring"),
        "plan": (["plan", "data", *cfg, "--step", "2"], "planning"),
        "trace --data": (["trace", "metrics.jsonl", "--data", "data", *cfg, "--step", "3"], "tracing"),
    }


def _fresh(args: list[str], root: Path, tag: str) -> list[str]:
    return [a.replace("OUT", str(root / f"out-{tag}")) for a in args]


@pytest.mark.parametrize("verb", ["audit", "clean", "index build", "index verify", "schema infer", "plan",
                                  "trace --data"])
def test_progress_on_a_terminal_stderr_with_stdout_piped_and_never_without_one(work, verb):
    if verb in ("plan", "trace --data"):
        pytest.importorskip("torch")
    args, label = _verbs(work)[verb]
    rc, stdout, tty = run_stderr_on_tty(_fresh(args, work, "tty"), work)
    assert label in tty and BAR in tty, (verb, rc, tty[-2000:])
    assert BAR not in stdout and "\x1b[" not in stdout  # stdout is the verb's output only
    piped = run_piped(_fresh(args, work, "pipe"), work)
    assert piped.returncode == rc, piped.stderr[-2000:]
    assert BAR not in piped.stderr and "\x1b[" not in piped.stderr and label not in piped.stderr
    assert BAR not in piped.stdout and "\x1b[" not in piped.stdout
    assert _same(piped.stdout, work, "pipe") == _same(stdout, work, "tty")  # the same output, bar or none


def _same(text: str, root: Path, tag: str) -> str:
    """``text`` with the output folder and the times of day (a schema's or report's creation time) blanked."""
    text = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(\+00:00|Z)?", "TIME", text)
    return text.replace(str(root / f"out-{tag}"), "OUT")


def test_no_progress_flag_keeps_the_terminal_clean(work):
    args, label = _verbs(work)["clean"]
    rc, _stdout, tty = run_stderr_on_tty([*_fresh(args, work, "flag"), "--no-progress"], work)
    assert rc == 0 and BAR not in tty and label not in tty
