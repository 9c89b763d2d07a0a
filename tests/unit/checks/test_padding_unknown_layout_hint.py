"""``padding.label_not_ignored`` on a shard of unknown layout: labels unlike ``input_ids`` that sit
where the encoder's mask is 0 may be a decoder's targets. An encoder-decoder set padded to one
length (T5-style ``labels`` = the target sequence) is recognized as seq2seq (no finding); a shard
the recognizer cannot place (half its rows such targets, half token labels) keeps the finding,
which says the way out (``[dataset] layout = "seq2seq"``) besides "the loss trains on padding".
Rows: FastChat's real turns, tokenized by the real SmolLM tokenizer."""
from __future__ import annotations

import json

import polars as pl
from conftest import SHARED
from refs import run
from tokenizers import Tokenizer

PAD, L = 49152, 65


def _seq2seq(mixed: bool = False) -> pl.DataFrame:
    """Decoder targets padded to the encoder's length; ``mixed``: every other row's labels are its
    own ids shifted by one instead (next-token labels)."""
    tok = Tokenizer.from_file(str(SHARED / "chat/tokenizers/smollm_135m/tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    conv = json.loads((SHARED / "chat/fastchat/dummy_conversation.json").read_text())
    rows = []
    for i, c in enumerate(conv[:60]):
        t = c["conversations"]
        src = tok.encode(t[0]["value"]).ids[: L - 1] + [0]
        tgt = tok.encode(t[1]["value"]).ids[: L - 1] + [0]
        if mixed and i % 2:
            tgt = src[1:]
        rows.append({"input_ids": src + [PAD] * (L - len(src)), "attention_mask": [1] * len(src) + [0] * (L - len(src)),
                     "labels": tgt + [-100] * (L - len(tgt))})
    return pl.DataFrame(rows)


def test_unknown_layout_finding_names_the_seq2seq_layout():
    cfg = {"tokens": {"pad_token_id": PAD, "vocab_size": PAD + 1}}
    res = run(_seq2seq(), cfg)
    assert res.layout["name"] == "seq2seq", res.layout
    assert [f for f in res.findings if f.check == "padding.label_not_ignored"] == []
    df = _seq2seq(mixed=True)
    res = run(df, cfg)
    assert res.layout["name"] is None and res.layout["why"].startswith("unsure")
    (f,) = [f for f in res.findings if f.check == "padding.label_not_ignored"]
    assert 'set [dataset] layout = "seq2seq"' in f.message, f.message
    res = run(df, {**cfg, "dataset": {"layout": "seq2seq"}})
    assert [f for f in res.findings if f.check == "padding.label_not_ignored"] == []
