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
