"""Helpers for the dataset-level tests: write small multi-shard folders and audit them."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

import datacheck
from datacheck.report import Report


def write(root: Path, rel: str, data: dict | pl.DataFrame) -> Path:
    """Write ``data`` as ``root/rel`` in the format of its extension (parquet, jsonl, arrow stream)."""
    df = data if isinstance(data, pl.DataFrame) else pl.DataFrame(data)
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if rel.endswith(".parquet"):
        df.write_parquet(path)
    elif rel.endswith(".jsonl"):
        df.write_ndjson(path)
    elif rel.endswith(".arrow"):  # Hugging Face save_to_disk writes Arrow IPC *streams*
        import pyarrow as pa

        table = df.to_arrow()
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as w:
            w.write_table(table)
    else:
        raise ValueError(rel)
    return path


def run(paths: Any, config: dict | None = None, **kw: Any) -> Report:
    return datacheck.audit(paths, config or {}, fail_on="never", **kw)


def by_check(rep: Report, check: str) -> list:
    return [f for f in rep.findings if f.check == check]


def one(rep: Report, check: str):
    got = by_check(rep, check)
    assert len(got) == 1, (check, [(f.check, f.message) for f in rep.findings])
    return got[0]
