"""The ids whose token decodes to whitespace only (:func:`datacheck.derive.tokenizer.blank_token_ids`),
on the real tokenizers of ../shared (PROVENANCE.md): GPT-2's vocab.json + merges.txt (byte-level
BPE), SmolLM-135M's tokenizer.json (byte-level BPE, an added [PAD]) and MiniLM's BERT WordPiece.
The expected ids are computed here: every id decoded alone by the ``tokenizers`` library's own
decoder, blank when each character is Unicode White_Space (the characters polars'
``str.strip_chars`` strips, as ``pref.empty_response`` does for text)."""
from __future__ import annotations

import shutil

import pytest
from conftest import SHARED

from datacheck.derive.tokenizer import blank_token_ids

tokenizers = pytest.importorskip("tokenizers")

GPT2 = SHARED / "realdata/gpt2_tokenizer"
SMOLLM = SHARED / "chat/tokenizers/smollm_135m"
MINILM = SHARED / "realdata/minilm_bert_tokenizer"

pytestmark = pytest.mark.skipif(not (GPT2.is_dir() and SMOLLM.is_dir() and MINILM.is_dir()),
                                reason="shared tokenizers not present")

#: Unicode's White_Space property (PropList.txt, Unicode 15): the characters Rust's
#: ``char::is_whitespace`` (polars' ``str.strip_chars``) strips
WHITE_SPACE = {*map(chr, range(0x09, 0x0E)), " ", "\x85", "\xa0", "\u1680", *map(chr, range(0x2000, 0x200B)),
               "\u2028", "\u2029", "\u202f", "\u205f", "\u3000"}


def _reference(tok) -> tuple[int, ...]:
    ids = sorted(tok.get_vocab(with_added_tokens=True).values())
    return tuple(i for i in ids if all(ch in WHITE_SPACE for ch in tok.decode([i], skip_special_tokens=False)))


def test_gpt2_whitespace_tokens():
    tok = tokenizers.ByteLevelBPETokenizer(str(GPT2 / "vocab.json"), str(GPT2 / "merges.txt"))
    want = _reference(tok)
    assert blank_token_ids(str(GPT2), str(GPT2)) == want
    # the tokens the HH-RLHF blank answers are made of; eos (<|endoftext|>) decodes to its text
    assert {tok.token_to_id("Ġ"), tok.token_to_id("Ċ"), tok.token_to_id("ĊĊ")} <= set(want)
    assert tok.token_to_id("<|endoftext|>") not in want
    assert tok.token_to_id("Ġthe") not in want


def test_smollm_tokenizer_json_whitespace_tokens():
    tok = tokenizers.Tokenizer.from_file(str(SMOLLM / "tokenizer.json"))
    want = _reference(tok)
    assert blank_token_ids(str(SMOLLM / "tokenizer.json"), "smollm") == want
    assert tok.token_to_id("Ġ") in want and tok.token_to_id("[PAD]") not in want


def test_wordpiece_whitespace_tokens():
    tok = tokenizers.BertWordPieceTokenizer(str(MINILM / "vocab.txt"), lowercase=True) \
        if not (MINILM / "tokenizer.json").is_file() else tokenizers.Tokenizer.from_file(str(MINILM / "tokenizer.json"))
    assert blank_token_ids(str(MINILM), "minilm") == _reference(tok)


def test_sentencepiece_model_only_gives_none(tmp_path):
    """A folder whose only tokenizer file is a SentencePiece model: no vocabulary is read, so the
    whitespace ids are unknown (None), not an empty set."""
    (tmp_path / "tokenizer.model").write_bytes(b"\x00")
    assert blank_token_ids(str(tmp_path), "sp") is None


def test_edited_folder_is_read_again(tmp_path):
    """The set is cached per folder and its files' stamps: a folder whose vocabulary changed is read again."""
    folder = tmp_path / "tok"
    shutil.copytree(GPT2, folder)
    first = blank_token_ids(str(folder), "t")
    vocab = (folder / "vocab.json").read_text(encoding="utf-8")
    (folder / "vocab.json").write_text(vocab.replace('"\\u0120": 220', '"\\u0120": 220, "\\u0120\\u0120": 50257'),
                                       encoding="utf-8")
    assert 50257 not in first and 50257 in blank_token_ids(str(folder), "t")
