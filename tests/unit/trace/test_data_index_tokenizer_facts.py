"""trace's row audit checks the rows of a step with the facts the audit takes from ``[tokens]
tokenizer`` (the dataset index holds the config they fill): SmolLM-135M of ../shared/chat/tokenizers,
its id count (base plus added tokens) and pad/eos/bos read here from its files."""
from __future__ import annotations

import json

import polars as pl
import pytest
from conftest import SHARED

from datacheck.model.config import config_from_dict
from datacheck.trace.data import DatasetIndex

pytest.importorskip("tokenizers")
SMOLLM = SHARED / "chat/tokenizers/smollm_135m"


@pytest.mark.skipif(not SMOLLM.is_dir(), reason="shared tokenizer not present")
def test_the_index_config_holds_the_tokenizers_facts(tmp_path):
    tj = json.loads((SMOLLM / "tokenizer.json").read_text())
    every = {**tj["model"]["vocab"], **{t["content"]: t["id"] for t in tj["added_tokens"]}}
    data = tmp_path / "data"
    data.mkdir()
    pl.DataFrame({"input_ids": [[1, 2, 3], [4, 5]]}).write_parquet(data / "a.parquet")
    cfg = config_from_dict({"tokens": {"tokenizer": str(SMOLLM), "bos_token_id": 1}})
    tokens = DatasetIndex.build([str(data)], cfg).cfg.tokens
    assert (tokens.vocab_size, tokens.pad_token_id, tokens.eos_token_id, tokens.bos_token_id) == \
        (max(every.values()) + 1, every["[PAD]"], every["<|endoftext|>"], 1)
