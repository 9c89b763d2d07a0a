"""Token rows of one length WITHOUT an attention mask: the pad id tells padded rows (``causal_lm``)
from packed ones (``packed_lm``; datacheck.derive.layout._padded_or_ragged). Left-padded causal-LM
rows were ``packed_lm`` because the recognizer read only the row lengths. With pad == eos (GPT-2) a
packed row may start or end with one eos, so only runs of 2+ count there, and not when such runs
also occur inside rows (eos of empty documents). Real text and real tokenizers: AG News prompts
(realdata #5) under GPT-2's BPE (realdata #1, eos 50256) and SmolLM-135M (chat tokenizers, eos 0,
an added [PAD] 49152)."""
from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from tokenizers import ByteLevelBPETokenizer, Tokenizer

from datacheck.engine.shard import audit_frame
from datacheck.model.config import config_from_dict

GPT2_EOS = 50256  # realdata PROVENANCE #1: "EOS id 50256"; GPT-2 pads with it (pad == eos)
SMOL_EOS, SMOL_PAD = 0, 49152  # chat PROVENANCE: eos = <|endoftext|>, an added [PAD] with id 49152
BLOCK = 64


def _texts(realdata: Path) -> list[str]:
    path = realdata / "agnews_prompts_jsonl" / "ag_news_classify_question_first.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    assert len(rows) == 100  # PROVENANCE #5: 100 rows
    return [r["inputs"] for r in rows]


def _gpt2(realdata: Path) -> list[list[int]]:
    tok = ByteLevelBPETokenizer(str(realdata / "gpt2_tokenizer" / "vocab.json"),
                                str(realdata / "gpt2_tokenizer" / "merges.txt"))
    return [tok.encode(t).ids + [GPT2_EOS] for t in _texts(realdata)]


def _pad(docs: list[list[int]], pad: int, side: str) -> list[list[int]]:
    width = max(map(len, docs))
    return [[pad] * (width - len(d)) + d if side == "left" else d + [pad] * (width - len(d)) for d in docs]


def _group_texts(docs: list[list[int]]) -> list[list[int]]:
    """HF run_clm's group_texts: concatenate, cut into blocks of BLOCK, drop the remainder."""
    flat = [t for d in docs for t in d]
    return [flat[i:i + BLOCK] for i in range(0, len(flat) - BLOCK + 1, BLOCK)]


def _layout(rows: list[list[int]], pad: int, eos: int | None) -> dict:
    cfg = {"tokens": {"pad_token_id": pad, **({"eos_token_id": eos} if eos is not None else {})}}
    return audit_frame(pl.DataFrame({"input_ids": rows}), config_from_dict(cfg)).layout


@pytest.mark.parametrize("side", ["left", "right"])
def test_gpt2_rows_padded_with_eos_are_causal_lm(realdata, side):
    docs = _gpt2(realdata)
    rows = _pad(docs, GPT2_EOS, side)
    assert len({len(r) for r in rows}) == 1  # one length: only the pad ids tell padding
    # rows padded by 2+ pad ids: every document shorter than the longest by 2 tokens or more
    runs = sum(max(map(len, docs)) - len(d) >= 2 for d in docs)
    assert runs > 0
    got = _layout(rows, GPT2_EOS, GPT2_EOS)
    assert got["name"] == "causal_lm", got
    assert f"{runs} of {len(rows)} sample rows padded on the {side}" in got["why"]


def test_gpt2_group_texts_rows_ending_in_eos_stay_packed_lm(realdata):
    rows = _group_texts(_gpt2(realdata))
    # some block ends with the eos of a document: one pad id (== eos) at a row's end is no padding
    assert any(r[-1] == GPT2_EOS for r in rows)
    assert _layout(rows, GPT2_EOS, GPT2_EOS)["name"] == "packed_lm"
    # a block that starts with the eos of the document before it (shift the cut by one block's worth)
    shifted = _group_texts([[GPT2_EOS]] + _gpt2(realdata))
    assert _layout(shifted, GPT2_EOS, GPT2_EOS)["name"] == "packed_lm"
    assert _layout(shifted, GPT2_EOS, None)["name"] == "packed_lm"  # eos unknown: as if pad == eos


def test_gpt2_group_texts_with_empty_documents_stay_packed_lm(realdata):
    """Empty texts tokenized with an eos appended give runs of eos inside blocks (wikitext's blank
    lines); a block that ends in such a run is no padded row when the same runs occur inside rows."""
    docs = _gpt2(realdata)
    with_blank = [d for k, d in enumerate(docs) for d in ([d, [GPT2_EOS]] if k % 3 == 0 else [d])]
    rows = _group_texts(with_blank)

    def inner_run(r: list[int]) -> bool:
        core = r[next(i for i, t in enumerate(r) if t != GPT2_EOS):len(r) - next(
            i for i, t in enumerate(reversed(r)) if t != GPT2_EOS)]
        return any(a == b == GPT2_EOS for a, b in zip(core, core[1:]))
    assert any(inner_run(r) for r in rows)
    # make sure one block ends with a run of two eos, the ambiguous case
    cut = next(i for i in range(1, len(with_blank)) if with_blank[i] == [GPT2_EOS]
               and sum(map(len, with_blank[:i + 1])) >= BLOCK)
    edge = [t for d in with_blank[:cut + 1] for t in d][-BLOCK:]
    assert edge[-2:] == [GPT2_EOS, GPT2_EOS]
    assert _layout(rows + [edge], GPT2_EOS, GPT2_EOS)["name"] == "packed_lm"


def test_smollm_left_padded_with_its_own_pad_id(realdata):
    """pad != eos: one leading pad id already marks a padded row; the packed blocks of the same
    tokenizer (documents ending in eos 0) stay packed_lm."""
    tok = Tokenizer.from_file(str(realdata.parent / "chat" / "tokenizers" / "smollm_135m" / "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    assert tok.token_to_id("[PAD]") == SMOL_PAD and tok.token_to_id("<|endoftext|>") == SMOL_EOS
    docs = [tok.encode(t, add_special_tokens=False).ids + [SMOL_EOS] for t in _texts(realdata)]
    rows = _pad(docs, SMOL_PAD, "left")
    padded = sum(len(d) < max(map(len, docs)) for d in docs)
    got = _layout(rows, SMOL_PAD, SMOL_EOS)
    assert got["name"] == "causal_lm", got
    assert f"{padded} of {len(rows)} sample rows padded on the left with pad id {SMOL_PAD}" in got["why"]
    assert _layout(_group_texts(docs), SMOL_PAD, SMOL_EOS)["name"] == "packed_lm"
