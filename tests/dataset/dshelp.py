"""Helpers for the dataset-level tests: write small multi-shard folders and audit them."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
from conftest import write_frame

import datacheck
from datacheck.report.model import Report


def write(root: Path, rel: str, data: dict | pl.DataFrame) -> Path:
    """Write ``data`` as ``root/rel`` in the format of its extension (parquet, jsonl, arrow stream)."""
    return write_frame(root / rel, data, arrow_stream=True)


def run(paths: Any, config: dict | None = None, **kw: Any) -> Report:
    return datacheck.audit(paths, config or {}, fail_on="never", **kw)


def by_check(rep: Report, check: str) -> list:
    return [f for f in rep.findings if f.check == check]


def one(rep: Report, check: str):
    got = by_check(rep, check)
    assert len(got) == 1, (check, [(f.check, f.message) for f in rep.findings])
    return got[0]
