"""``padding.label_not_ignored`` on encoder-decoder rows without an ``attention_mask`` column (T5
rows tokenized unpadded, or saved without the mask the collator rebuilds): in seq2seq the check
reads the decoder's labels and ``[tokens] pad_token_id``, never the encoder's mask, so it runs on
what is there. It used to count as "not applicable" (the mask is optional in seq2seq): labels
padded with the pad id instead of -100 passed silently. Without a pad id it is a skipped entry
that says why. Rows: FastChat's real turns tokenized by the real SmolLM tokenizer."""
from __future__ import annotations

import json

import polars as pl
from conftest import SHARED
from refs import rows, run, skip
from tokenizers import Tokenizer

EOS = 0  # SmolLM's <|endoftext|>
PAD = 49152  # one past SmolLM's 49,152 ids: a pad id of the collator's, as in test_padding_unknown_layout_hint
T = 40  # the decoder's padded length


def _pairs(pad_labels_with: int, mask: bool = False) -> pl.DataFrame:
    """A user turn as the encoder's ids (unpadded), the assistant turn + eos as the decoder's labels,
    padded to ``T`` with ``pad_labels_with`` (the pad id: the defect; -100: the collator's way)."""
    tok = Tokenizer.from_file(str(SHARED / "chat/tokenizers/smollm_135m/tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    conv = json.loads((SHARED / "chat/fastchat/dummy_conversation.json").read_text())
    out = []
    for c in conv[:40]:
        t = c["conversations"]
        src = tok.encode(t[0]["value"]).ids[:60] + [EOS]
        tgt = tok.encode(t[1]["value"]).ids[: T - 1] + [EOS]
        row = {"input_ids": src, "labels": tgt + [pad_labels_with] * (T - len(tgt))}
        if mask:
            row["attention_mask"] = ["1"] * len(src)  # a mask of the wrong dtype (schema.dtype): seq2seq never reads it
        out.append(row)
    return pl.DataFrame(out)


CFG = {"dataset": {"layout": "seq2seq"}, "tokens": {"pad_token_id": PAD, "eos_token_id": EOS, "vocab_size": PAD + 1}}


def test_decoder_labels_padded_with_the_pad_id_are_found_without_an_attention_mask():
    df = _pairs(PAD)
    assert "attention_mask" not in df.columns
    # expected: rows whose labels end in a run of the pad id, and the run's length summed
    runs = []
    for y in df["labels"].to_list():
        k = 0
        while k < len(y) and y[len(y) - 1 - k] == PAD:
            k += 1
        runs.append(k)
    want = [i for i, k in enumerate(runs) if k > 0]
    assert want, "the real turns must leave some targets shorter than T"
    res = run(df, CFG)
    assert res.layout["name"] == "seq2seq"
    assert skip(res, "padding.label_not_ignored") is None
    assert "padding.label_not_ignored" not in res.not_applicable
    assert rows(res, "padding.label_not_ignored:labels") == want
    (f,) = [f for f in res.findings if f.check == "padding.label_not_ignored"]
    assert f.count == len(want) and f.details["positions"] == sum(runs)


def test_clean_decoder_labels_without_a_mask_pass_and_the_check_ran():
    res = run(_pairs(-100), CFG)
    assert [f for f in res.findings if f.check == "padding.label_not_ignored"] == []
    assert skip(res, "padding.label_not_ignored") is None
    assert "padding.label_not_ignored" not in res.not_applicable


def test_an_encoder_mask_of_the_wrong_dtype_does_not_stop_the_decoder_rule():
    df = _pairs(PAD, mask=True)
    res = run(df, CFG)
    assert skip(res, "padding.label_not_ignored") is None
    assert rows(res, "padding.label_not_ignored:labels") == [i for i, y in enumerate(df["labels"].to_list())
                                                              if y[-1] == PAD]


def test_without_a_pad_id_the_check_is_skipped_naming_what_it_needs():
    cfg = {"dataset": {"layout": "seq2seq"}, "tokens": {"eos_token_id": EOS, "vocab_size": PAD + 1}}
    res = run(_pairs(PAD), cfg)
    why = skip(res, "padding.label_not_ignored")
    assert why is not None and "[tokens] pad_token_id" in why and "attention_mask" in why, why
    assert "padding.label_not_ignored" not in res.not_applicable


def test_other_layouts_still_need_the_encoder_mask():
    """Token labels of a classifier's rows without a mask: the rule reads the mask there, and the
    mask is optional in token_classification: not applicable, as before."""
    df = pl.DataFrame({"input_ids": [[5, 6, 7], [8, 9]], "labels": [[1, 0, 1], [0, 0]]})
    res = run(df, {"dataset": {"layout": "token_classification"}, "tokens": {"pad_token_id": 0}})
    assert "padding.label_not_ignored" in res.not_applicable
    res = run(df, {"dataset": {"layout": "causal_lm"}, "tokens": {"pad_token_id": 0}})
    assert "attention_mask" in (skip(res, "padding.label_not_ignored") or "")
