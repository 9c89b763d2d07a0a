"""TRL's tokenized preference pairs from real data: HH-RLHF harmless-base test pairs
(../shared/chat/hh_rlhf, PROVENANCE.md: 2312 rows, no identical pair) cut at their last
``\\n\\nAssistant:`` into prompt and responses, tokenized with the real GPT-2 BPE
(../shared/realdata/gpt2_tokenizer), eos 50256 appended to each response."""
from __future__ import annotations

import gzip
import json

import polars as pl
import pytest
from conftest import REALDATA, SHARED

HH = SHARED / "chat" / "hh_rlhf" / "harmless-base_test.jsonl.gz"
GPT2 = REALDATA / "gpt2_tokenizer"
CUT = "\n\nAssistant:"


def hh_tokenized_pairs(n: int) -> pl.DataFrame:
    """The first ``n`` clean pairs (one prompt, two different non-blank responses) as
    ``prompt_input_ids``, ``chosen_input_ids``, ``rejected_input_ids`` (List(Int64)); skips the test
    when the material or ``tokenizers`` is missing."""
    tokenizers = pytest.importorskip("tokenizers")
    if not HH.is_file() or not GPT2.is_dir():
        pytest.skip("../shared is not present")
    tok = tokenizers.ByteLevelBPETokenizer(str(GPT2 / "vocab.json"), str(GPT2 / "merges.txt"))
    rows = []
    with gzip.open(HH, "rt", encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            cut = r["chosen"].rfind(CUT) + len(CUT)
            prompt, chosen, rejected = r["chosen"][:cut], r["chosen"][cut:], r["rejected"][cut:]
            if not r["rejected"].startswith(prompt) or not chosen.strip() or not rejected.strip() or chosen == rejected:
                continue
            rows.append({"prompt_input_ids": tok.encode(prompt).ids, "chosen_input_ids": tok.encode(chosen).ids + [50256],
                         "rejected_input_ids": tok.encode(rejected).ids + [50256]})
            if len(rows) == n:
                break
    return pl.DataFrame(rows)


def hh_tokenized_all() -> tuple[pl.DataFrame, list[tuple[str, str]], object]:
    """All 2312 pairs (PROVENANCE.md), blank responses kept, tokenized as :func:`hh_tokenized_pairs`
    does: each transcript cut at its own last ``\\n\\nAssistant:`` (the prompt is chosen's). Returns
    the frame, each row's (chosen, rejected) response text, and the ``tokenizers`` tokenizer; skips
    the test when the material or ``tokenizers`` is missing."""
    tokenizers = pytest.importorskip("tokenizers")
    if not HH.is_file() or not GPT2.is_dir():
        pytest.skip("../shared is not present")
    tok = tokenizers.ByteLevelBPETokenizer(str(GPT2 / "vocab.json"), str(GPT2 / "merges.txt"))
    rows, texts = [], []
    with gzip.open(HH, "rt", encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            a, b = (r[k].rfind(CUT) + len(CUT) for k in ("chosen", "rejected"))
            prompt, chosen, rejected = r["chosen"][:a], r["chosen"][a:], r["rejected"][b:]
            texts.append((chosen, rejected))
            rows.append({"prompt_input_ids": tok.encode(prompt).ids, "chosen_input_ids": tok.encode(chosen).ids + [50256],
                         "rejected_input_ids": tok.encode(rejected).ids + [50256]})
    return pl.DataFrame(rows), texts, tok
