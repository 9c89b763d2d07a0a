"""``datacheck schema infer`` takes the facts of ``[tokens] tokenizer`` (``--config``) or
``--tokenizer`` as the audit does: the vocabulary size and the pad id its files declare. Before,
only the vocabulary was read and the pad id was not: left-padded rows without an attention mask had
their padding counted as a prompt hidden from the loss, and infer proposed ``sft_tokenized`` for
language-model rows the audit recognizes otherwise. Rows: FastChat's real turns tokenized by the
real SmolLM-135M tokenizer (PROVENANCE: 49,152 base tokens, an added ``[PAD]`` with id 49152)."""
from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
import yaml
from conftest import SHARED, run_cli

import datacheck
from datacheck.model.config import config_from_dict
from datacheck.tools.infer import infer_config, infer_contract, propose_layout

SMOLLM = SHARED / "chat" / "tokenizers" / "smollm_135m"
L = 48


def _left_padded(tmp_path: Path) -> tuple[Path, int]:
    """Language-model rows left-padded to ``L`` with ``[PAD]`` (labels -100 there), no mask; the pad id."""
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.Tokenizer.from_file(str(SMOLLM / "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    pad = tok.token_to_id("[PAD]")
    assert pad == 49152 and tok.get_vocab_size(with_added_tokens=False) == 49152  # PROVENANCE
    conv = json.loads((SHARED / "chat/fastchat/dummy_conversation.json").read_text())
    rows = []
    for c in conv[:50]:
        ids = tok.encode(c["conversations"][1]["value"]).ids[:L]
        rows.append({"input_ids": [pad] * (L - len(ids)) + ids, "labels": [-100] * (L - len(ids)) + ids})
    assert sum(r["input_ids"][0] == pad for r in rows) > len(rows) // 2  # most rows are padded
    root = tmp_path / "data"
    root.mkdir()
    pl.DataFrame(rows).write_parquet(root / "train.parquet")
    return root, pad


def test_infer_config_fills_the_tokenizers_facts(tmp_path):
    _root, pad = _left_padded(tmp_path)
    cfg = infer_config(config_from_dict({"tokens": {"tokenizer": str(SMOLLM)}}))
    assert cfg.tokens.pad_token_id == pad
    assert cfg.tokens.vocab_size == pad + 1  # the base vocabulary plus the added [PAD]
    # the flag's tokenizer alike; a value the config writes wins
    cfg = infer_config(config_from_dict({"tokens": {"pad_token_id": 7}}), str(SMOLLM))
    assert (cfg.tokens.pad_token_id, cfg.tokens.vocab_size) == (7, pad + 1)


def test_padding_ids_are_no_hidden_prompt_and_the_layout_is_the_audits(tmp_path):
    root, pad = _left_padded(tmp_path)
    cfg = config_from_dict({"tokens": {"tokenizer": str(SMOLLM)}})
    got = propose_layout([str(root)], cfg)
    assert got.layout != "sft_tokenized" and "hide a prompt" not in (got.rows.why if got.rows else ""), got
    rep = datacheck.audit(str(root), cfg, fail_on="never")
    assert got.rows is not None and got.rows.name == rep.shards[0].layout
    # the tokenizer's pad id is what decides: the same id written in the config gives the same proposal
    written = propose_layout([str(root)], config_from_dict({"tokens": {"pad_token_id": pad}}))
    assert (written.layout, written.rows.name if written.rows else None) == (got.layout, got.rows.name)
    # the contract bounds the ids by the tokenizer's vocabulary
    data, _notes = infer_contract([str(root)], cfg)
    assert data["datacheck"]["columns"]["input_ids"]["max_value"] == pad  # vocab_size - 1


def test_cli_schema_infer_reads_the_configs_tokenizer(tmp_path):
    root, pad = _left_padded(tmp_path)
    conf = tmp_path / "datacheck.toml"
    conf.write_text(f'[tokens]\ntokenizer = "{SMOLLM}"\n')
    r = run_cli("schema", "infer", str(root), "--config", str(conf))
    assert r.returncode == 0, r.stderr
    assert "sft_tokenized" not in r.stderr and "hide a prompt" not in r.stderr, r.stderr
    rules = yaml.safe_load(r.stdout)["datacheck"]["columns"]
    assert rules["input_ids"]["max_value"] == pad
