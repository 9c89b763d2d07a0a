"""pref.empty_response on tokenized pairs whose response is a white-space character split over byte
tokens: SmolLM-135M's real byte-level BPE (../shared/chat/tokenizers/smollm_135m) writes U+3000 as
``ãĢ`` + ``Ģ`` and U+1680 as three byte tokens; a Llama-style SentencePiece byte-fallback vocabulary
writes U+3000 as ``<0xE3><0x80><0x80>``. Each token alone decodes to no character, so the ids were
judged one by one and such a response was not empty. Expected: the tokenizer's own decoding of the
whole response (computed here with the ``tokenizers`` library) is white space only."""
from __future__ import annotations

import json

import polars as pl
import pytest
from conftest import SHARED
from refs import frame_failing

tokenizers = pytest.importorskip("tokenizers")
SMOLLM = SHARED / "chat" / "tokenizers" / "smollm_135m"
KEY = {"chosen": "pref.empty_response:chosen_input_ids", "rejected": "pref.empty_response:rejected_input_ids"}
#: Unicode White_Space (PropList.txt), the characters an empty response may hold
WHITE_SPACE = set("\t\n\x0b\x0c\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000") | {chr(c) for c in range(0x2000, 0x200B)}
#: texts of white space (blank) and of real characters made of the same lead bytes (not blank):
#: U+3001 and U+3042 share U+3000's first byte E3, U+00E9 shares U+00A0's lead byte class
TEXTS = ["\u3000", "\u3000\u3000", " \u00a0", "\u00a0", "\u1680", "\u205f", "\u2003 ", "\u3001", "\u3042", "\u3000\u3042",
         "\u00e9"]


def _blank(text: str) -> bool:
    return "\ufffd" not in text and all(ch in WHITE_SPACE for ch in text)


def _pairs(tok, eos: int | None) -> tuple[list[list[int]], list[bool]]:
    """Each text encoded by the real tokenizer (an eos after it when given), and whether the
    tokenizer decodes the ids back to white space only."""
    ids, blank = [], []
    for t in TEXTS:
        e = tok.encode(t, add_special_tokens=False).ids
        ids.append(e + ([eos] if eos is not None else []))
        blank.append(_blank(tok.decode(e, skip_special_tokens=False)))
    return ids, blank


def _frame(chosen: list[list[int]]) -> pl.DataFrame:
    ids = pl.List(pl.Int64)
    n = len(chosen)
    return pl.DataFrame({"prompt_input_ids": [[100, 25]] * n, "chosen_input_ids": chosen,
                         "rejected_input_ids": [[100, 200]] * n},
                        schema={"prompt_input_ids": ids, "chosen_input_ids": ids, "rejected_input_ids": ids})


@pytest.mark.skipif(not SMOLLM.is_dir(), reason="../shared/chat is not present")
@pytest.mark.parametrize("eos", [None, 0])  # SmolLM's <|endoftext|> = 0 (PROVENANCE.md: eos = bos)
def test_smollm_byte_split_white_space_is_an_empty_response(eos):
    tok = tokenizers.Tokenizer.from_file(str(SMOLLM / "tokenizer.json"))
    tok.no_padding()  # its tokenizer.json pads and truncates to 192 (PROVENANCE.md)
    tok.no_truncation()
    assert tok.token_to_id("<|endoftext|>") == 0 and tok.token_to_id("<|im_start|>") == 1
    chosen, blank = _pairs(tok, eos)
    # the case at stake: U+3000 is two tokens, neither white space alone
    assert len(chosen[0]) - (eos is not None) == 2 and not any(_blank(tok.decode([i])) for i in chosen[0][:2])
    cfg = {"tokens": {"tokenizer": str(SMOLLM), **({"eos_token_id": eos} if eos is not None else {})}}
    got = frame_failing(_frame(chosen), cfg)
    assert got.get(KEY["chosen"], set()) == {k for k, b in enumerate(blank) if b}
    assert sum(blank) == 7 and not got.get(KEY["rejected"])


def _sentencepiece_byte_fallback(folder) -> tokenizers.Tokenizer:
    """A Llama-style tokenizer.json: BPE with byte_fallback over ``<0x00>``..``<0xFF>``, ``▁`` for a
    space, the decoder Replace(▁, space) + ByteFallback + Fuse + Strip (Llama 2's)."""
    from tokenizers import decoders, models, normalizers

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, **{f"<0x{b:02X}>": 3 + b for b in range(256)}, "\u2581": 259, "a": 260}
    tok = tokenizers.Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>", byte_fallback=True))
    tok.normalizer = normalizers.Replace(" ", "\u2581")
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()])
    tok.add_special_tokens(["<unk>", "<s>", "</s>"])
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({"eos_token": "</s>", "bos_token": "<s>"}))
    return tok


def test_sentencepiece_byte_fallback_white_space_is_an_empty_response(tmp_path):
    tok = _sentencepiece_byte_fallback(tmp_path)
    eos = tok.token_to_id("</s>")
    chosen, blank = _pairs(tok, eos)
    assert tok.encode("\u3000", add_special_tokens=False).tokens == ["<0xE3>", "<0x80>", "<0x80>"]
    got = frame_failing(_frame(chosen), {"tokens": {"tokenizer": str(tmp_path), "eos_token_id": eos}})
    assert got.get(KEY["chosen"], set()) == {k for k, b in enumerate(blank) if b}
    assert sum(blank) == 7
