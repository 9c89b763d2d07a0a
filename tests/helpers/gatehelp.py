"""Helpers for the gate tests (policy, cache, parts, diff, CI outputs): small multi-shard folders
and an in-process CLI runner (a subprocess per CLI call would cost a second of imports each).

Kept as a plain module (not a conftest): pyproject's pytest ``pythonpath`` puts tests/helpers/ on ``sys.path``.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import polars as pl
from conftest import CliResult, run_cli


def cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None, monkeypatch=None) -> CliResult:
    """Run ``datacheck ARGS`` in this process (conftest's :func:`run_cli`) in the current folder;
    ``cwd``/``env`` are applied via ``monkeypatch`` first, so they hold for the rest of the test."""
    if cwd is not None:
        monkeypatch.chdir(cwd)
    for k, v in (env or {}).items():
        monkeypatch.setenv(k, v)
    return run_cli(*args, cwd=Path.cwd())


def write_dataset(root: Path, n_shards: int = 6, rows: int = 8) -> Path:
    """A folder of text-classification shards with cross-shard facts: ``shard-0000k-of-0000N``
    names (one missing -> ``index.numbering_gap``), two byte-identical shards (``dup.shard``), an
    empty text in each shard (``empty.text``), a subfolder, a JSONL shard with a bad line and a
    temporary file (``index.temp_file``)."""
    root.mkdir(parents=True, exist_ok=True)
    total = n_shards + 1  # shard number n_shards is missing on purpose
    for k in range(n_shards):
        texts = [f"s{k} row {i}" for i in range(rows)]
        texts[k % rows] = ""
        df = pl.DataFrame({"text": texts, "label": [(i + k) % 3 for i in range(rows)]})
        df.write_parquet(root / f"shard-{k:05d}-of-{total:05d}.parquet")
    (root / "copy").mkdir(exist_ok=True)
    (root / "copy" / "again.parquet").write_bytes((root / f"shard-00000-of-{total:05d}.parquet").read_bytes())
    (root / "extra.jsonl").write_text('{"text": "a", "label": 1}\n{"text": "b", "lab\n{"text": "", "label": 7}\n')
    (root / "half.parquet.tmp").write_bytes(b"partial")
    (root / "datacheck.toml").write_text("[labels]\nnum_classes = 3\n")
    return root


def normalized(text: str) -> str:
    """A report's JSON text with ``created_at`` blanked (the only field allowed to differ) and
    ``config_path`` (where the same config came from: a file for the CLI, in memory for the API)."""
    text = re.sub(r'"config_path": (null|"[^"]*")', '"config_path": null', text)
    return re.sub(r'"created_at": "[^"]*"', '"created_at": ""', text)


def load(p: Path) -> dict[str, Any]:
    return json.loads(Path(p).read_text())


def plan_json(*argv: str) -> dict[str, Any]:
    """``datacheck plan ARGV --format json`` run in this process: the envelope's ``result`` (exit 0 asserted)."""
    r = run_cli("plan", *argv, "--format", "json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["result"]
