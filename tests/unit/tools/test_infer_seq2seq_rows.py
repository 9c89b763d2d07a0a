"""``datacheck schema infer`` proposes the built-in ``seq2seq`` contract for encoder-decoder rows
without decoder columns (T5-style ``input_ids`` and target ``labels`` of their own length) when the
audit's recognizer takes them for seq2seq: the proposed ``[dataset] schema`` and the layout the audit
then uses agree, so clean rows pass (a ``causal_lm`` contract would fail every row on
``length.mismatch``). Material: AG News prompts (../shared/realdata) tokenized with GPT-2's BPE."""
from __future__ import annotations

import json

import polars as pl
import pytest
from conftest import REALDATA, run_cli

from datacheck.tools.infer import propose_layout

GPT2 = REALDATA / "gpt2_tokenizer"


@pytest.mark.realdata
def test_t5_rows_get_the_seq2seq_contract(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.ByteLevelBPETokenizer(str(GPT2 / "vocab.json"), str(GPT2 / "merges.txt"))
    raw = pl.read_ndjson(REALDATA / "agnews_prompts_jsonl" / "ag_news_classify_question_first.jsonl")
    ids = [tok.encode(x).ids + [50256] for x in raw["inputs"]]
    labels = [tok.encode(" " + x.strip()).ids + [50256] for x in raw["targets"]]
    assert all(len(a) != len(b) for a, b in zip(ids, labels))  # targets of their own length
    data = tmp_path / "data"
    data.mkdir()
    pl.DataFrame({"input_ids": ids, "attention_mask": [[1] * len(x) for x in ids], "labels": labels}
                 ).write_parquet(data / "train.parquet")
    p = propose_layout([str(data)])
    assert p.rows is not None and p.rows.name == "seq2seq"
    assert p.layout == "seq2seq" and p.why == f"encoder-decoder: {p.rows.why}"
    # the proposal, with the vocabulary facts, audits the clean rows as seq2seq with no finding at warn+
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text(p.toml() + "[tokens]\nvocab_size = 50257\neos_token_id = 50256\npad_token_id = 50256\n",
                   encoding="utf-8")
    out = tmp_path / "r.json"
    r = run_cli("audit", str(data), "--config", str(cfg), "--no-cache", "--fail-on", "warn",
                "--report-dir", str(tmp_path / "reports"), "--output", str(out))
    rep = json.loads(out.read_text(encoding="utf-8"))
    assert [(s["layout"], s["layout_source"]) for s in rep["shards"]] == [("seq2seq", "schema")]
    assert [f["check"] for s in rep["shards"] for f in s["findings"] if f["severity"] != "info"] == []
    assert r.returncode == 0, r.stdout
