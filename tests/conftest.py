"""Shared test fixtures: paths to ../shared (cases, real data) and a CLI runner.

Test hygiene: no test writes into the repository's own ``.datacheck/``. ``DATACHECK_DIR`` (the base
folder of the CLI's default report and cache folders, :mod:`datacheck.cli.defaults`) points at a
temporary folder for the whole run, so in-process CLI calls and subprocesses (which inherit the
environment) that rely on the defaults write there; the session fails when the repository's
``.datacheck/`` listing changed during the run.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
CASES = SHARED / "cases"
REALDATA = SHARED / "realdata"
REPO_STATE = ROOT / ".datacheck"

#: one temporary base folder per pytest process (each xdist worker imports this module itself)
_TEST_STATE = tempfile.mkdtemp(prefix="datacheck-tests-")
os.environ["DATACHECK_DIR"] = _TEST_STATE
#: audits in the suite run in the test's own process unless a test asks for workers (the suite
#: already runs under xdist, and tests that patch datacheck's functions must see their own calls);
#: tests/unit/execute/test_executors.py runs the process pool explicitly
os.environ.setdefault("DATACHECK_WORKERS", "1")


def _listing(folder: Path) -> dict[str, tuple[int, int]]:
    """Relative path -> (size, mtime_ns) of every file and folder under ``folder`` ({} when absent)."""
    out: dict[str, tuple[int, int]] = {}
    if not folder.exists():
        return out
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            try:
                st = p.lstat()
            except FileNotFoundError:
                continue
            out[p.relative_to(folder).as_posix()] = (0 if p.is_dir() else st.st_size, st.st_mtime_ns)
    return out


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_sessionstart(session: pytest.Session) -> None:
    if not _is_worker(session.config):
        session.config.stash[_BEFORE] = _listing(REPO_STATE)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    shutil.rmtree(_TEST_STATE, ignore_errors=True)
    if _is_worker(session.config) or _BEFORE not in session.config.stash:
        return
    before, after = session.config.stash[_BEFORE], _listing(REPO_STATE)
    if before != after:
        changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        sys.stderr.write(f"\nERROR: the test run wrote into {REPO_STATE} ({len(changed)} path(s) changed, e.g. "
                         f"{', '.join(changed[:5])}); tests must use tmp paths (DATACHECK_DIR is set to a temporary "
                         "folder for the run: pass no explicit .datacheck path)\n")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


_BEFORE = pytest.StashKey[dict]()


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


def write_frame(path: Path, df, arrow_stream: bool = False) -> Path:
    """Write ``df`` (a polars DataFrame or a dict of columns) to ``path`` in the format its extension
    names: .parquet, .jsonl, .csv, or .arrow (an IPC file; an IPC stream, as Hugging Face
    ``save_to_disk`` writes, with ``arrow_stream=True``). Creates parent folders."""
    import polars as pl

    if isinstance(df, dict):
        df = pl.DataFrame(df)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    name = path.name
    if name.endswith(".parquet"):
        df.write_parquet(path)
    elif name.endswith(".jsonl"):
        df.write_ndjson(path)
    elif name.endswith(".csv"):
        df.write_csv(path)
    elif name.endswith(".arrow") and arrow_stream:
        import pyarrow as pa

        table = df.to_arrow()
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as w:
            w.write_table(table)
    elif name.endswith(".arrow"):
        df.write_ipc(path)
    else:
        raise ValueError(f"no writer for {name}")
    return path


def load_json(p: Path) -> dict:
    return json.loads(Path(p).read_text())
