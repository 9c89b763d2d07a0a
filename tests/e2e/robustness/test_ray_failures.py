"""``--executor ray`` when Ray itself fails under the audit: the raylet or the dashboard agent
killed while the shards' tasks run. Ray ends its driver process with exit 1 when either dies; the
driver runs in a child process of datacheck (:class:`datacheck.execute.executors.RayExecutor`), so
datacheck itself ends with exit 3 and its own message naming the shards, never exit 1 and never a
traceback. Each case starts a local Ray (tens of seconds): marked slow, skipped without ray."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT

psutil = pytest.importorskip("psutil")
pytest.importorskip("ray", reason="ray is not installed (the datacheck[ray] extra)")


def _shards(d: Path, n: int = 60) -> None:
    d.mkdir()
    for i in range(n):
        (d / f"s{i:03d}.jsonl").write_text("".join(json.dumps({"text": f"row {i} {j}", "label": j % 2}) + "\n"
                                                   for j in range(200)))


def _victim(root: psutil.Process, which: str) -> psutil.Process | None:
    """The Ray process to kill among ``root``'s descendants, once a task is running: the raylet or the
    dashboard agent."""
    try:
        procs = root.children(recursive=True)
        cmds = {p.pid: " ".join(p.cmdline()) for p in procs}
    except psutil.Error:
        return None
    if not any(c.startswith("ray::run_job") for c in cmds.values()):
        return None
    for p in procs:
        c = cmds.get(p.pid, "")
        if which == "raylet" and c.split(" ")[0].endswith("/raylet"):
            return p
        if which == "agent" and "dashboard/agent.py" in c:
            return p
    return None


@pytest.mark.slow
@pytest.mark.parametrize("which", ["raylet", "agent"])
def test_ray_failure_is_exit_3_naming_the_shards(tmp_path, which):
    _shards(tmp_path / "d")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen([sys.executable, "-m", "datacheck", "audit", str(tmp_path / "d"), "--executor", "ray",
                          "--workers", "1", "--no-cache", "--no-progress", "--report-dir", str(tmp_path / "r")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    root = psutil.Process(p.pid)
    killed = None
    deadline = time.monotonic() + 240
    try:
        while p.poll() is None and time.monotonic() < deadline and killed is None:
            v = _victim(root, which)
            if v is not None:
                v.send_signal(signal.SIGKILL)
                killed = v.pid
            time.sleep(0.05)
        out, err = p.communicate(timeout=max(10, deadline - time.monotonic()))
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    if killed is None:
        pytest.skip(f"the audit ended (exit {p.returncode}) before a Ray {which} could be killed under a task")
    assert "Traceback" not in err, err[-3000:]
    assert p.returncode == 3, (p.returncode, err[-3000:])
    assert "datacheck: internal error" in err and "while auditing one of: s" in err, err[-3000:]
