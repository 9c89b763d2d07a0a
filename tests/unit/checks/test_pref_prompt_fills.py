"""A preference pair whose prompt alone fills the trainer's sequence (both sequences are then the
prompt alone) is one pref.identical_pair row that names that cause (details prompt_fills), not also
pref.empty_response on both sides.

Real material (../shared/chat/PROVENANCE.md): LLaMA-Factory's dpo_en_demo.json (300 pairs, ShareGPT
prompts, no row has chosen == rejected) and the SmolLM-135M tokenizer with SmolLM2's ChatML template.
A new user audited it with ``max_seq_len = 1024`` and got 42 x pref.empty_response on chosen, 42 on
rejected and 42 x pref.identical_pair. Expected rows are worked out here from the tokenized data and
each trainer's arithmetic (benchmarks/trl_pref_peer.py holds the same rows to TRL 1.16's own code:
its DPOTrainer drops exactly these 42 pairs)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from checkhelp import CHAT, CHATML, SHAREGPT_ROLE, TOKENIZER, tokenizer_copy

from datacheck.engine.shard import audit_shard
from datacheck.formats.discovery import discover
from datacheck.io.hashing import hash_file
from datacheck.model.config import config_from_dict

transformers = pytest.importorskip("transformers")  # the `chat` extra (in dev)

DPO = CHAT / "llamafactory/dpo_en_demo.json"

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not (TOKENIZER.is_dir() and DPO.is_file()), reason="shared chat material not present")]


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory) -> Path:
    return tokenizer_copy(TOKENIZER, tmp_path_factory.mktemp("chatml"), CHATML)


@pytest.fixture(scope="module")
def tokens(tok_dir) -> list[tuple[list[int], list[int], list[int]]]:
    """Per row: (prompt ids, chosen ids, rejected ids) as TRL tokenizes a conversational pair: the
    prompt with the generation prompt, each response the rest of prompt + response (ChatML: the
    rendered prompt is a prefix of the rendered whole)."""
    tok = transformers.AutoTokenizer.from_pretrained(str(tok_dir))
    out = []
    for r in json.loads(DPO.read_text()):
        prompt = [{"role": SHAREGPT_ROLE[t["from"]], "content": t["value"]} for t in r["conversations"]]
        head = tok.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
        ids = []
        for resp in (r["chosen"], r["rejected"]):
            full = tok.apply_chat_template(prompt + [{"role": "assistant", "content": resp["value"]}], tokenize=False)
            assert full.startswith(head)
            ids.append(tok(full[len(head):], add_special_tokens=False)["input_ids"])
        out.append((tok(head, add_special_tokens=False)["input_ids"], ids[0], ids[1]))
    return out


def _audit(tokens_cfg: dict, pref: dict | None = None):
    (ds,) = discover([str(DPO)]).shards
    h, size = hash_file(ds.path)
    res = audit_shard(ds, config_from_dict({"tokens": tokens_cfg, **({"pref": pref} if pref else {})}), h, size,
                      keep_rows=True)
    assert res.readable and res.rows == 300
    return res


def _rows(res, cid: str) -> set[int]:
    return {r for k, v in res.failing_rows.items() if k.split(":")[0] == cid for r in v}


def test_a_prompt_that_fills_max_length_is_one_finding_of_its_cause(tok_dir, tokens):
    """TRL >= 0.29 (keep_start, no max_prompt_length): a prompt of >= max_length tokens leaves no
    response token; TRL 1.9+ drops the pair (len(prompt_ids) < max_length), 0.29-1.8 trains it at ln 2."""
    filled = {i for i, (p, _, _) in enumerate(tokens) if len(p) >= 1024}
    assert len(filled) == 42  # the new user's count
    res = _audit({"tokenizer": str(tok_dir), "max_seq_len": 1024})
    assert _rows(res, "pref.identical_pair") == filled
    assert not _rows(res, "pref.empty_response")
    (f,) = [f for f in res.findings if f.check == "pref.identical_pair"]
    assert f.count == 42 and f.severity == "error" and f.column is None
    longest = max(len(tokens[i][0]) for i in filled)
    assert f.details["prompt_fills"] == 42 and f.details["prompt_tokens"] == longest
    assert f.message.startswith("42 pair(s) have chosen equal to rejected (as text, or as the chat template renders "
                                "them cut by TRL's truncation at max_length=1024 (keep_start)), 42 because the "
                                f"prompt fills the sequence (up to {longest} prompt tokens): no token of chosen or "
                                "rejected is left.")
    first = min(filled)
    assert f.examples[0].row == first
    assert str(len(tokens[first][0])) in str(f.examples[0].value)


def test_trl_before_0_29_keeps_the_responses(tok_dir, tokens):
    """TRL <= 0.28's defaults: max_prompt_length 512 (the prompt's last tokens), truncation_mode
    keep_end: every response keeps tokens, and no pair is equal, so nothing is reported."""
    kept = []
    for p, c, r in tokens:
        p = p[-512:]
        for resp in (c, r):  # keep_end: seq[-1024:] keeps min(len(resp), 1024) response tokens
            kept.append(min(len(resp), 1024))
        assert (p + c)[-1024:] != (p + r)[-1024:]
    assert min(kept) > 0
    res = _audit({"tokenizer": str(tok_dir), "max_seq_len": 1024, "truncation_side": "left"},
                 {"max_prompt_length": 512})
    assert not [f for f in res.findings if f.check.startswith("pref.")], [(f.check, f.count) for f in res.findings]


def _llamafactory(s: int, t: int, cutoff: int) -> tuple[int, int]:
    """LLaMA-Factory's infer_seqlen written out (processor_utils.py)."""
    if 2 * t < cutoff:
        mt = cutoff
    elif 2 * s < cutoff:
        mt = cutoff - s
    else:
        mt = int(cutoff * t / (s + t))
    nt = min(mt, t)
    return min(max(cutoff - nt, 0), s), nt


@pytest.mark.parametrize("cutoff", [1024, 64])
def test_llamafactory_gives_the_responses_their_share(tok_dir, tokens, cutoff):
    """LLaMA-Factory's pairwise processor: infer_seqlen splits cutoff_len, so a long prompt leaves
    the responses their share: no pair is emptied; a pair is identical only when the responses
    share their first new_target_len tokens."""
    filled, same = set(), set()
    for i, (p, c, r) in enumerate(tokens):
        src, tgt = _llamafactory(len(p), max(len(c), len(r)), cutoff)
        if tgt == 0:
            filled.add(i)
        elif p[:src] + c[:tgt] == p[:src] + r[:tgt]:
            same.add(i)
    assert not filled
    res = _audit({"tokenizer": str(tok_dir), "max_seq_len": cutoff}, {"trainer": "llamafactory"})
    assert _rows(res, "pref.identical_pair") == same | filled
    assert not _rows(res, "pref.empty_response")
