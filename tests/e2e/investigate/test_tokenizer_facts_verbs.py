"""``inspect`` and ``clean`` take the facts of ``[tokens] tokenizer`` as ``audit`` does: the row a
planted id past the tokenizer's count holds is shown, and dropped, with no vocab_size in the config
(SmolLM-135M of ../shared/chat/tokenizers: 49152 base tokens plus the added [PAD] = 49152, read here
from its tokenizer.json)."""
from __future__ import annotations

import json

import polars as pl
import pytest
from conftest import SHARED

from datacheck.model.config import config_from_dict
from datacheck.tools.clean import clean
from datacheck.tools.inspect import inspect_shards

tokenizers = pytest.importorskip("tokenizers")

SMOLLM = SHARED / "chat/tokenizers/smollm_135m"
pytestmark = pytest.mark.skipif(not SMOLLM.is_dir(), reason="shared tokenizer not present")


def _shard(tmp_path):
    tj = json.loads((SMOLLM / "tokenizer.json").read_text())
    count = max([*tj["model"]["vocab"].values(), *(t["id"] for t in tj["added_tokens"])]) + 1
    tok = tokenizers.Tokenizer.from_file(str(SMOLLM / "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    ids = [tok.encode(t).ids for t in ("to be or not to be", "that is the question", "whether tis nobler",
                                       "in the mind to suffer")]
    ids[2] = ids[2] + [count]
    data = tmp_path / "data"
    data.mkdir()
    pl.DataFrame({"input_ids": ids}).write_parquet(data / "s.parquet")
    return data, count


def test_inspect_shows_the_row_past_the_tokenizers_count(tmp_path):
    data, count = _shard(tmp_path)
    (ins,) = inspect_shards([str(data)], config_from_dict({"tokens": {"tokenizer": str(SMOLLM)}}))
    assert ins.failing == {"tokens.out_of_vocab:input_ids": [2]}
    assert [(r.row, r.bad_value) for r in ins.shown] == [(2, str(count))]
    assert ins.notes[0].startswith(f"[tokens] vocab_size = {count}, pad_token_id = ")


def test_clean_drops_the_row_past_the_tokenizers_count(tmp_path):
    data, _ = _shard(tmp_path)
    res = clean([str(data)], tmp_path / "out", config_from_dict({"tokens": {"tokenizer": str(SMOLLM)}}),
                drop=["tokens.out_of_vocab"])
    assert res.kept == 3
    assert pl.read_parquet(tmp_path / "out" / "s.parquet")["input_ids"].to_list() == \
        pl.read_parquet(data / "s.parquet")["input_ids"].to_list()[:2] + \
        pl.read_parquet(data / "s.parquet")["input_ids"].to_list()[3:]
