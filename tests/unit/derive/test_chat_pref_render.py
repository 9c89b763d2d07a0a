"""Preference pairs rendered by the tokenizer's chat template: with
[tokens] tokenizer and a messages prompt, prompt + chosen and prompt + rejected are rendered as
TRL's DPOTrainer does and pref.identical_pair / pref.empty_response judge the truncated tokens.

Real material: LLaMA-Factory's dpo_en_demo.json (300 rows: ShareGPT `conversations` prompts,
`chosen`/`rejected` {from, value}; PROVENANCE.md: no row has chosen == rejected) and the
SmolLM-135M tokenizer with SmolLM2's published ChatML template (PROVENANCE.md: no real tokenizer
there ships its template), including its generation prompt."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from checkhelp import CHAT, CHATML, SHAREGPT_ROLE, TOKENIZER, tokenizer_copy
from test_chat_template_reject import MISTRAL_V01  # Mistral-7B-Instruct-v0.1's published template (its source there)

import datacheck
from datacheck.engine.shard import audit_shard
from datacheck.formats.discovery import discover
from datacheck.io.hashing import hash_file
from datacheck.model.config import config_from_dict

transformers = pytest.importorskip("transformers")  # the `chat` extra (in dev)

DPO = CHAT / "llamafactory/dpo_en_demo.json"
HH = CHAT / "hh_rlhf/harmless-base_test.jsonl.gz"

pytestmark = pytest.mark.skipif(not (TOKENIZER.is_dir() and DPO.is_file()), reason="shared chat material not present")


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory) -> Path:
    return tokenizer_copy(TOKENIZER, tmp_path_factory.mktemp("chatml"), CHATML)


def _audit(path: Path, tokens: dict):
    (ds,) = discover([str(path)]).shards
    h, size = hash_file(ds.path)
    res = audit_shard(ds, config_from_dict({"tokens": tokens}), h, size, keep_rows=True)
    assert res.readable and not [s for s in res.skipped if s.error], res.skipped
    return res


def _rows(res, cid: str) -> set[int]:
    return {r for k, v in res.failing_rows.items() if k.split(":")[0] == cid for r in v}


def _reference(tok_dir: Path, max_len: int, side: str) -> tuple[set[int], set[int], set[int]]:
    """Plain Python, the trainer's steps written out: (identical pairs, empty chosen, empty rejected)
    after rendering, tokenizing and truncating each row."""
    tok = transformers.AutoTokenizer.from_pretrained(str(tok_dir))
    same, empty_c, empty_r = set(), set(), set()
    for row, r in enumerate(json.loads(DPO.read_text())):
        prompt = [{"role": SHAREGPT_ROLE[t["from"]], "content": t["value"]} for t in r["conversations"]]
        head = tok.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
        seqs, kept = [], []
        for resp in (r["chosen"], r["rejected"]):
            full = tok.apply_chat_template(prompt + [{"role": "assistant", "content": resp["value"]}], tokenize=False)
            assert full.startswith(head)  # ChatML: the generation prompt opens the answer
            p = tok(head, add_special_tokens=False)["input_ids"]
            ids = p + tok(full[len(head):], add_special_tokens=False)["input_ids"]
            cut = ids[:max_len] if side == "right" else ids[-max_len:]
            seqs.append(cut)
            kept.append(len(cut) - len(p) if side == "right" else min(len(ids) - len(p), len(cut)))
        if seqs[0] == seqs[1]:
            same.add(row)
        if kept[0] <= 0:
            empty_c.add(row)
        if kept[1] <= 0:
            empty_r.add(row)
    return same, empty_c, empty_r


@pytest.mark.slow
def test_real_pairs_rendered_whole_give_no_false_alarm(tok_dir):
    res = _audit(DPO, {"tokenizer": str(tok_dir)})
    assert res.rows == 300
    assert not [f for f in res.findings if f.check.startswith(("pref.", "sft."))], \
        [(f.check, f.count) for f in res.findings]
    assert "pref.identical_pair" not in {s.check for s in res.skipped}


@pytest.mark.slow
@pytest.mark.parametrize(("max_len", "side", "counts"), [(64, "right", (233, 231)), (256, "right", (134, 134)),
                                                         (8, "left", (1, 0)), (2, "left", (300, 0))])
def test_truncation_makes_pairs_identical_exactly_where_the_trainer_sees_them_so(tok_dir, max_len, side, counts):
    """A pair whose cut leaves no response token (the prompt fills the sequence: both sides empty,
    both sequences the prompt alone) is a pref.identical_pair row counted as such (details
    prompt_fills), never also an empty response; the pairs equal with some response token left are
    pref.identical_pair rows too."""
    same, empty_c, empty_r = _reference(tok_dir, max_len, side)
    assert (len(same), len(empty_c)) == counts  # counted independently, as measured when written
    assert empty_c == empty_r  # right truncation: the prompt fills the sequence for both
    assert empty_c <= same  # both sequences are then the prompt's first max_len tokens
    res = _audit(DPO, {"tokenizer": str(tok_dir), "max_seq_len": max_len, "truncation_side": side})
    assert _rows(res, "pref.identical_pair") == same
    assert not _rows(res, "pref.empty_response")
    f = next((f for f in res.findings if f.check == "pref.identical_pair"), None)
    if same:
        assert f.details["prompt_fills"] == len(empty_c)
    if same - empty_c:
        n = len(same - empty_c)
        assert f.details["only_rendered"] == n and f"{n} only as rendered tokens" in f.message
        shown = {e.row: e.value for e in f.examples}
        assert all(v[1:-1] == f"{max_len} tokens, the same ids for chosen and rejected"
                   for r, v in shown.items() if r in same - empty_c)
    assert not _rows(res, "pref.empty_response")


def test_a_pair_the_template_rejects_is_an_sft_role_order_row(tok_dir, tmp_path):
    rows = json.loads(DPO.read_text())[:3]
    rows[1]["conversations"] = [{"from": "system", "value": "be brief"}]  # Mistral's template: roles must alternate
    path = tmp_path / "dpo.json"
    path.write_text(json.dumps(rows))
    mistral = tokenizer_copy(tok_dir, tmp_path / "mistral", MISTRAL_V01)
    res = _audit(path, {"tokenizer": str(mistral)})
    assert _rows(res, "sft.role_order") == {1}
    (f,) = [f for f in res.findings if f.check == "sft.role_order"]
    assert "the chat template rejects it: TemplateError: Conversation roles must alternate" in f.examples[0].value
    assert not _rows(res, "pref.identical_pair") and not _rows(res, "pref.empty_response")


def test_text_transcripts_without_a_prompt_are_not_rendered():
    """HH-RLHF: chosen/rejected are whole transcripts (text), no messages prompt: judged as text,
    not rendered (no pair columns, whatever max_seq_len); the 4 pairs whose chosen transcript ends in
    an empty assistant turn are pref.empty_response once TRL's implicit prompt is cut off
    (tests/unit/derive/test_chat_pref_implicit.py::test_hh_rlhf_empty_answers_after_trls_implicit_prompt)."""
    if not HH.is_file():
        pytest.skip("hh_rlhf not present")
    rep = datacheck.audit(str(HH), {"tokens": {"tokenizer": str(TOKENIZER), "max_seq_len": 8}})
    assert [(f.check, f.count) for f in rep.findings if f.check.startswith("pref.")] == [("pref.empty_response", 4)]
    assert not [f for f in rep.findings if f.check == "pref.identical_pair"]  # PROVENANCE.md: no identical pair
