"""Helpers for the dataset-level tests: write small multi-shard folders and audit them."""
from __future__ import annotations

import json
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


def hf_split(root: Path, split: str, files: list[str], num_examples: int, listed: list[str],
             rows: dict | None = None) -> None:
    """Write ``root/split`` as ``Dataset.save_to_disk`` does: ``files`` as Arrow IPC streams (each
    ``rows``, default three rows ``text``/``label`` unique to the file), ``state.json`` listing
    ``listed`` and ``dataset_info.json`` declaring ``num_examples``."""
    for i, f in enumerate(files):
        write(root / split, f, rows if rows is not None else
              {"text": [f"{split}{i}-{k}" for k in range(3)], "label": [0, 1, 0]})
    (root / split / "state.json").write_text(json.dumps({"_data_files": [{"filename": f} for f in listed],
                                                         "_split": split}))
    (root / split / "dataset_info.json").write_text(json.dumps({"splits": {split: {"num_examples": num_examples}}}))
