"""A T5-style encoder-decoder set padded to one length (``tokenizer(inputs, text_target=targets,
padding="max_length")``: ``input_ids`` + ``attention_mask`` for the encoder, ``labels`` = the target
sequence padded to the encoder's length with -100, with or without ``decoder_input_ids``) is
recognized as seq2seq from its rows, and its clean rows raise no ``padding.label_not_ignored``
(it once was "unsure" and the decoder's labels under the encoder's mask 0 were an error). The
same rows with labels padded by the pad id 0 (T5's classic preprocessing: the loss trains on
padding) still raise it. Causal and SFT rows built from the same tokens stay what they are.

Rows: the real T0 prompted AG News inputs/targets (realdata PROVENANCE.md section 5), tokenized by the
real BERT WordPiece tokenizer (section 2: [PAD]=0, [CLS]=101, [SEP]=102), as a BERT2BERT
encoder-decoder's collator gets them."""
from __future__ import annotations

import json

import polars as pl
import pytest
from conftest import REALDATA
from refs import run, skip
from tokenizers import Tokenizer

from datacheck.derive.layout import recognize
from datacheck.model.roles import Roles

PAD, CLS, SEP, VOCAB, IGNORE = 0, 101, 102, 30522, -100


def _pairs() -> tuple[list[list[int]], list[list[int]]]:
    tok = Tokenizer.from_file(str(REALDATA / "minilm_bert_tokenizer/tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    lines = (REALDATA / "agnews_prompts_jsonl/ag_news_classify_question_first.jsonl").read_text().splitlines()
    rows = [json.loads(x) for x in lines]
    assert len(rows) == 100  # PROVENANCE: 100 rows
    assert sorted({r["targets"] for r in rows}) == ["Business", "Science and technology"]
    src = [tok.encode(r["inputs"]).ids for r in rows]
    tgt = [tok.encode(r["targets"]).ids for r in rows]
    assert all(s[0] == CLS and s[-1] == SEP for s in src + tgt)
    return src, tgt


def _t5(label_pad: int, decoder: bool = False, width: int | None = None) -> pl.DataFrame:
    """The rows padded to the longest input (labels too, with ``label_pad``), or to ``width``
    (``padding="max_length", max_length=width``); ``decoder``: with the decoder input (the target
    shifted right after the start id, as T5's ``_shift_right`` makes it)."""
    src, tgt = _pairs()
    width = width or max(len(s) for s in src)
    assert width > max(len(t) for t in tgt)
    out: dict[str, list] = {"input_ids": [], "attention_mask": [], "labels": []}
    if decoder:
        out["decoder_input_ids"] = []
    for s, t in zip(src, tgt):
        out["input_ids"].append(s + [PAD] * (width - len(s)))
        out["attention_mask"].append([1] * len(s) + [0] * (width - len(s)))
        out["labels"].append(t + [label_pad] * (width - len(t)))
        if decoder:
            out["decoder_input_ids"].append([PAD] + t + [PAD] * (width - len(t) - 1))
    return pl.DataFrame(out)


CFG = {"tokens": {"pad_token_id": PAD, "vocab_size": VOCAB}}


@pytest.mark.parametrize("decoder", [False, True])
def test_clean_padded_seq2seq_is_recognized_and_passes(decoder):
    df = _t5(IGNORE, decoder)
    # what makes it clean: the labels ignore every position after the target, whose tokens the ids
    # hold at other places or not at all
    assert all(y[len(t):] == [IGNORE] * (len(y) - len(t)) for y, t in zip(df["labels"].to_list(), _pairs()[1]))
    res = run(df, CFG)
    assert res.layout["name"] == "seq2seq", res.layout
    assert res.findings == [], [(f.check, f.message) for f in res.findings]


def test_labels_padded_with_the_pad_id_still_fail():
    df = _t5(PAD)
    src, tgt = _pairs()
    width = len(df["labels"].to_list()[0])
    expected_rows = [i for i, t in enumerate(tgt) if len(t) < width]
    expected_positions = sum(width - len(t) for t in tgt)
    res = run(df, CFG)
    assert res.layout["name"] == "seq2seq", res.layout
    (f,) = [f for f in res.findings if f.check == "padding.label_not_ignored"]
    assert f.count == len(expected_rows) == 100
    assert f.rows[0] == 0
    assert f"({expected_positions} positions" in f.message, f.message
    assert f.severity == "error"
    # the same under the given layout, and with the decoder input beside it
    for cfg in ({**CFG, "dataset": {"layout": "seq2seq"}}, CFG):
        data = df if "dataset" in cfg else _t5(PAD, decoder=True)
        (g,) = [g for g in run(data, cfg).findings if g.check == "padding.label_not_ignored"]
        assert g.count == 100


def test_labels_padded_with_the_pad_id_to_a_long_width_are_still_seq2seq():
    """Padded to 1,024 (a long ``max_length``) with the pad id 0 in the labels, most positions hold
    label 0 = id 0 under mask 0: counted there, labels and ids agreed on over 90% of the supervised
    positions and the rows were ``causal_lm`` (the error said the causal words). Only attended
    positions tell what the labels are."""
    src, tgt = _pairs()
    width = 1024
    df = _t5(PAD, width=width)
    # what the old count saw: label == id at every padding position (both 0) and where a target
    # token happens to equal the input's token at its position
    agree = sum(sum(1 for y, x in zip(row_y, row_x) if y == x)
                for row_y, row_x in zip(df["labels"].to_list(), df["input_ids"].to_list()))
    assert agree >= 0.9 * 100 * width
    # attended: the input's own tokens, where the labels are the target then pad ids, never the ids
    attended = [(y[:len(s)], s) for y, s in zip(df["labels"].to_list(), src)]
    assert sum(sum(1 for a, b in zip(y, s) if a == b) for y, s in attended) < 0.9 * sum(len(s) for s in src)
    expected_positions = sum(width - len(t) for t in tgt)
    res = run(df, CFG)
    assert res.layout["name"] == "seq2seq", res.layout
    (f,) = [f for f in res.findings if f.check == "padding.label_not_ignored"]
    assert f.count == 100 and f.severity == "error"
    assert f"pad the decoder's labels with pad_token_id {PAD} instead of ignore_index {IGNORE}" in f.message, f.message
    assert f"({expected_positions} positions;" in f.message, f.message
    # the clean rows at that width (labels padded with -100) are seq2seq with no finding
    clean = run(_t5(IGNORE, width=width), CFG)
    assert clean.layout["name"] == "seq2seq", clean.layout
    assert clean.findings == [], [(g.check, g.message) for g in clean.findings]


def test_seq2seq_without_pad_id_says_why_the_padding_is_not_judged():
    res = run(_t5(PAD), {"tokens": {"vocab_size": VOCAB}})
    assert res.layout["name"] == "seq2seq"
    assert "pad_token_id" in (skip(res, "padding.label_not_ignored") or "")


def _roles(df: pl.DataFrame) -> Roles:
    return Roles(input_ids="input_ids", attention_mask="attention_mask", labels="labels")


def _recognize(df: pl.DataFrame) -> str | None:
    return recognize(dict(df.schema), _roles(df), lambda cols: df.select(cols)).name


def test_causal_and_sft_rows_of_the_same_tokens_stay_what_they_are():
    src, tgt = _pairs()
    width = max(len(s) + len(t) for s, t in zip(src, tgt))
    causal: dict[str, list] = {"input_ids": [], "attention_mask": [], "labels": []}
    sft: dict[str, list] = {"input_ids": [], "attention_mask": [], "labels": []}
    for s, t in zip(src, tgt):
        row = s + t
        pad = width - len(row)
        for d in (causal, sft):
            d["input_ids"].append(row + [PAD] * pad)
            d["attention_mask"].append([1] * len(row) + [0] * pad)
        causal["labels"].append(row + [IGNORE] * pad)
        sft["labels"].append([IGNORE] * len(s) + t + [IGNORE] * pad)
    assert _recognize(pl.DataFrame(causal)) == "causal_lm"
    assert _recognize(pl.DataFrame(sft)) == "sft_tokenized"


def test_labels_shifted_or_copied_from_other_rows_are_not_decoder_targets():
    """Token labels gone wrong (shifted by two, or another row's ids) are no target sequence: the
    recognizer stays unsure, so the label checks of the token layouts are not switched off."""
    src, _ = _pairs()
    width = max(len(s) for s in src)
    ids = [s + [PAD] * (width - len(s)) for s in src]
    mask = [[1] * len(s) + [0] * (width - len(s)) for s in src]
    shifted = [s[2:] + [IGNORE] * (width - len(s) + 2) for s in src]
    other = [src[(i + 1) % len(src)] for i in range(len(src))]
    copied = [o[:width] + [IGNORE] * (width - len(o)) for o in other]
    for labels in (shifted, copied):
        df = pl.DataFrame({"input_ids": ids, "attention_mask": mask, "labels": labels})
        assert _recognize(df) is None
