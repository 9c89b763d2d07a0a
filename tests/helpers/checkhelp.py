"""Helpers for the check tests: write a small inline frame as a shard and audit it.

Kept as a plain module (not a conftest) so that test files import it by name: pyproject's pytest
``pythonpath`` puts tests/helpers/ on ``sys.path``.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import polars as pl
from conftest import SHARED, write_frame

import datacheck
from datacheck.engine.shard import audit_shard
from datacheck.io.discover import DiscoveredShard
from datacheck.io.hashing import hash_file
from datacheck.model.config import config_from_dict
from datacheck.model.findings import Finding
from datacheck.model.results import ShardResult
from datacheck.report.model import Report


def write_shard(tmp_path: Path, df: pl.DataFrame | dict, name: str = "shard.parquet") -> Path:
    """Write ``df`` into ``tmp_path / name`` in the format its extension names (parquet, jsonl, csv, arrow)."""
    return write_frame(tmp_path / name, df)


def audit_df(tmp_path: Path, df: pl.DataFrame | dict, config: dict | None = None,
             name: str = "shard.parquet") -> Report:
    """Audit one inline frame written as a shard, through the public API."""
    path = write_shard(tmp_path, df, name)
    return datacheck.audit(str(path), config=config or {})


def shard_result(tmp_path: Path, df: pl.DataFrame | dict, config: dict | None = None,
                 name: str = "shard.parquet") -> ShardResult:
    """Audit one inline frame with ``runner.audit_shard(keep_rows=True)`` (every failing row kept)."""
    path = write_shard(tmp_path, df, name)
    chash, size = hash_file(path)
    fmt = {"parquet": "parquet", "jsonl": "jsonl", "csv": "csv", "arrow": "arrow"}[name.rsplit(".", 1)[1]]
    return audit_shard(DiscoveredShard(path=path, rel=name, format=fmt), config_from_dict(config or {}),
                       chash, size, keep_rows=True)


def findings(rep: Report, check: str, column: str | None | Any = ...) -> list[Finding]:
    """Every finding of ``check`` (optionally in ``column``) in the report."""
    return [f for f in rep.findings if f.check == check and (column is ... or f.column == column)]


def one(rep: Report, check: str, column: str | None | Any = ...) -> Finding:
    """The single finding of ``check``; fails the test when there is not exactly one."""
    got = findings(rep, check, column)
    assert len(got) == 1, f"expected one {check} finding, got {[(f.check, f.column, f.count) for f in rep.findings]}"
    return got[0]


def checks_of(rep: Report) -> set[str]:
    return {f.check for f in rep.findings}


def skipped_reason(rep: Report, check: str) -> str | None:
    """The reason ``check`` was skipped, or None when it was not skipped."""
    for s in rep.skipped:
        if s["check"] == check:
            return s["reason"]
    return None


#: the shared chat material: SmolLM2-135M's tokenizer and its published template (ChatML, with
#: the assistant generation prompt), and the ShareGPT roles as Hugging Face names them
CHAT = SHARED / "chat"
TOKENIZER = CHAT / "tokenizers/smollm_135m"
CHATML = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
          "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
SHAREGPT_ROLE = {"human": "user", "gpt": "assistant", "system": "system"}


def tokenizer_copy(src: Path, dest: Path, template: str | None = None) -> Path:
    """A copy of the tokenizer folder ``src`` (e.g. ../shared/chat/tokenizers/smollm_135m) in ``dest``
    (created), its ``tokenizer_config.json`` given ``template`` as ``chat_template`` when one is given:
    the shared material is never modified. Returns ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        shutil.copy(f, dest / f.name)
    if template is not None:
        cfg = json.loads((dest / "tokenizer_config.json").read_text())
        cfg["chat_template"] = template
        (dest / "tokenizer_config.json").write_text(json.dumps(cfg))
    return dest
