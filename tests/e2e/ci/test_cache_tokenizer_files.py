"""The files of the ``[tokens] tokenizer`` folder that transformers loads are inputs of every shard's
result: an edit of any of them must never be answered from the per-shard result cache (a stale cached
answer). transformers (>= 4.5x, ``tokenization_utils_base``: ``CHAT_TEMPLATE_DIR``) also loads the
``additional_chat_templates/*.jinja`` files of the folder; ``default.jinja`` there is the template that
renders ``messages`` when the folder has no other. Real tokenizer: ``shared/chat/tokenizers/smollm_135m``
(its ``tokenizer_config.json`` holds no chat template)."""
from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import polars as pl
from checkhelp import CHATML, TOKENIZER, tokenizer_copy
from conftest import run_cli

OLD = time.time() - 3600  # settled files (docs/ci.md)
TEMPLATE_DIR = "additional_chat_templates"  # transformers' CHAT_TEMPLATE_DIR


def _age(root: Path, when: float) -> None:
    for f in root.rglob("*"):
        if f.is_file():
            os.utime(f, (when, when))


def _blank(text: str) -> str:
    return re.sub(r'"created_at": "[^"]*"', '"created_at": ""', text)


def test_an_edited_chat_template_in_the_templates_subfolder_is_never_answered_from_the_cache(tmp_path):
    tok = tokenizer_copy(TOKENIZER, tmp_path / "tok")
    assert "chat_template" not in json.loads((tok / "tokenizer_config.json").read_text())
    (tok / TEMPLATE_DIR).mkdir()
    (tok / TEMPLATE_DIR / "default.jinja").write_text(CHATML)
    # the folder passes datacheck's "a template beside the tokenizer" test by tokenizer_config.json
    d = tmp_path / "data"
    d.mkdir()
    conv = [[{"role": "user", "content": f"question {i}"}, {"role": "assistant", "content": f"answer {i}"}]
            for i in range(6)]
    pl.DataFrame({"messages": conv}).write_parquet(d / "train.parquet")
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text(f'[tokens]\ntokenizer = "{tok}"\nmax_seq_len = 64\n')
    for p in (tok, d):
        _age(p, OLD)
    os.utime(cfg, (OLD, OLD))
    flags = ["--config", str(cfg), "--report-dir", str(tmp_path / "r"), "--format", "json", "--no-progress"]
    cache = ["--cache-dir", str(tmp_path / "cache")]
    first = run_cli("audit", str(d), *flags, *cache)

    # the template now renders no conversation: all 6 rows fail to render
    (tok / TEMPLATE_DIR / "default.jinja").write_text("{{ raise_exception('this template renders no conversation') }}")
    _age(tok, OLD - 60)  # settled, and another time than before (the loader keeps a tokenizer per time)
    after = run_cli("audit", str(d), *flags, *cache)
    fresh = run_cli("audit", str(d), "--no-cache", *flags[:-3], "--report-dir", str(tmp_path / "p"), "--format",
                    "json", "--no-progress")
    assert fresh.returncode == 1, fresh.stdout + fresh.stderr
    assert _blank(fresh.stdout) != _blank(first.stdout)  # the edit changes the result
    assert after.returncode == fresh.returncode
    assert _blank(after.stdout) == _blank(fresh.stdout)
