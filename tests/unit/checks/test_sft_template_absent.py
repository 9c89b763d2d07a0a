"""``sft.prompt_supervised`` with spans from ``[sft] response_template_ids``: when the template occurs
nowhere in a failing row, the row has no assistant span at all, and the finding says so (the ids do not
match the template as the tokenizer encodes it in context: TRL's "Could not find response key"), rather
than only "system/user tokens are trained on". Rows are FastChat's real turns in ChatML, tokenized by
the real SmolLM tokenizer, prompt tokens labelled -100."""
from __future__ import annotations

import json

import polars as pl
from conftest import SHARED
from refs import run
from tokenizers import Tokenizer

TOK = SHARED / "chat/tokenizers/smollm_135m/tokenizer.json"


def _tok() -> Tokenizer:
    tok = Tokenizer.from_file(str(TOK))
    tok.no_padding()  # the file pads and truncates to 192 (chat/PROVENANCE.md)
    tok.no_truncation()
    return tok


def _rows() -> tuple[pl.DataFrame, list[int]]:
    tok = _tok()
    head = tok.encode("<|im_start|>assistant\n").ids  # the template as it is encoded in the rows
    conv = json.loads((SHARED / "chat/fastchat/dummy_conversation.json").read_text())
    ids, labels = [], []
    for c in conv[:40]:
        t = c["conversations"]
        prompt = tok.encode(f"<|im_start|>user\n{t[0]['value']}<|im_end|>\n").ids + head
        answer = tok.encode(f"{t[1]['value']}<|im_end|>").ids
        ids.append(prompt + answer)
        labels.append([-100] * len(prompt) + answer)
    return pl.DataFrame({"input_ids": ids, "labels": labels}), head


def _cfg(template: list[int]) -> dict:
    return {"dataset": {"layout": "sft_tokenized"}, "sft": {"response_template_ids": template},
            "tokens": {"eot_token_ids": [2], "vocab_size": 49153}}


def test_the_template_as_encoded_in_the_rows_passes():
    df, head = _rows()
    res = run(df, _cfg(head))
    assert [f for f in res.findings if f.check == "sft.prompt_supervised"] == []


def test_a_template_found_in_no_row_is_named_as_such():
    df, head = _rows()
    wrong = _tok().encode(" Assistant:").ids  # another spelling: in no row
    assert not any(wrong == r[i:i + len(wrong)] for r in df["input_ids"].to_list() for i in range(len(r)))
    res = run(df, _cfg(wrong))
    (f,) = [f for f in res.findings if f.check == "sft.prompt_supervised"]
    assert f.count == df.height
    assert f.message.startswith(f"{df.height} row(s) hold no match of [sft] response_template_ids {wrong}: no "
                                "assistant span"), f.message


def test_rows_without_a_match_among_rows_with_one_are_counted():
    df, head = _rows()
    ids, labels = df["input_ids"].to_list(), df["labels"].to_list()
    # rows 0..4 lose the template's first id (the span is never opened); rows 5..9 supervise their
    # prompt's first token (a span exists, the prompt is trained on)
    for i in range(5):
        k = next(j for j in range(len(ids[i])) if ids[i][j:j + len(head)] == head)
        ids[i][k] = 28
    for i in range(5, 10):
        labels[i][0] = ids[i][0]
    res = run(pl.DataFrame({"input_ids": ids, "labels": labels}), _cfg(head))
    (f,) = [f for f in res.findings if f.check == "sft.prompt_supervised"]
    assert list(f.rows) == list(range(10))
    assert f.message.startswith("10 row(s) supervise tokens outside the assistant spans")
    assert f"; 5 of them hold no match of [sft] response_template_ids {head}" in f.message, f.message
