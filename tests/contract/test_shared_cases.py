"""Every defect case in ../shared/cases passes, run through the shared case runner."""
from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import CASES, SHARED


@pytest.mark.skipif(not CASES.is_dir(), reason="../shared/cases is not present")
def test_all_shared_cases_pass():
    runner = SHARED / "tools" / "run_cases.py"
    p = subprocess.run([sys.executable, str(runner), str(CASES), "--datacheck", f"{sys.executable} -m datacheck"],
                       capture_output=True, text=True, timeout=1200)
    lines = p.stdout.strip().splitlines()
    assert p.returncode == 0, p.stdout + p.stderr
    n_cases = sum(1 for c in CASES.iterdir() if (c / "expect.json").exists())
    assert lines[-1] == f"{n_cases} passed, 0 failed"
