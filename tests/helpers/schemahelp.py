"""Helpers for the schema tests: write inline frames as shards, audit them against a contract."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
from conftest import write_frame

import datacheck
from datacheck.model.findings import Finding
from datacheck.report.model import Report


def write(tmp_path: Path, df: pl.DataFrame | dict, name: str = "shard.parquet") -> Path:
    """Write ``df`` as ``tmp_path/name`` (parquet, jsonl or arrow by extension)."""
    return write_frame(tmp_path / name, df)


def audit(paths: Any, schema: str | None, **sections: dict) -> Report:
    """Audit ``paths`` with ``[dataset] schema = schema`` plus the given config sections."""
    cfg: dict[str, Any] = {k: dict(v) for k, v in sections.items()}
    if schema is not None:
        cfg.setdefault("dataset", {})["schema"] = str(schema)
    return datacheck.audit(paths, cfg, fail_on="error")


def found(report: Report, prefix: str = "schema.") -> list[Finding]:
    """Findings whose check ID starts with ``prefix``, in report order."""
    return [f for f in report.findings if f.check.startswith(prefix)]


def summary(report: Report, prefix: str = "schema.") -> set[tuple]:
    """``{(check, column, count, rows)}`` of the findings starting with ``prefix``."""
    return {(f.check, f.column, f.count, tuple(f.rows)) for f in found(report, prefix)}
