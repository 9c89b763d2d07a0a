"""Shared test fixtures: paths to ../shared (cases, real data) and a CLI runner."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
CASES = SHARED / "cases"
REALDATA = SHARED / "realdata"


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run ``python -m datacheck ARGS`` and return the completed process (text output)."""
    return subprocess.run([sys.executable, "-m", "datacheck", *args], capture_output=True, text=True,
                          cwd=cwd or ROOT, timeout=600)


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture
def realdata() -> Path:
    if not REALDATA.is_dir():
        pytest.skip("../shared/realdata is not present")
    return REALDATA


def load_json(p: Path) -> dict:
    return json.loads(Path(p).read_text())
