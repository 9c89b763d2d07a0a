"""The peak memory of one ``datacheck.audit`` of a file, in a child process of its own (the byte-budget
tests of tests/unit/formats: Arrow IPC, JSONL, CSV, text)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

_RSS = r"""
import sys
import datacheck
rep = datacheck.audit([sys.argv[1]], workers=1, cache_dir=None)
print(rep.shards[0].rows, sorted({f.check for s in rep.shards for f in s.findings}))
print(next(int(ln.split()[1]) for ln in open("/proc/self/status") if ln.startswith("VmHWM:")) // 1024)
"""  # VmHWM: the peak of this process' own memory (ru_maxrss is inherited from the forking parent)


def audit_peak(path: Path) -> tuple[str, int]:
    """``datacheck.audit([path], workers=1, cache_dir=None)`` in a child process (this checkout's package,
    ``POLARS_MAX_THREADS=2``, no ``$DATACHECK_BATCH_ROWS``, run in the file's folder): (the line
    ``"ROWS [CHECK IDS WITH FINDINGS]"`` it printed, its peak RSS in MiB: ``VmHWM``). Fails the test when the
    child fails."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "POLARS_MAX_THREADS": "2"}
    env.pop("DATACHECK_BATCH_ROWS", None)
    p = subprocess.run([sys.executable, "-c", _RSS, str(path)], capture_output=True, text=True, env=env,
                       timeout=600, cwd=path.parent)
    assert p.returncode == 0, p.stderr[-3000:]
    out = p.stdout.strip().splitlines()
    return out[-2], int(out[-1])
