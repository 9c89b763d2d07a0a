"""``datacheck plan`` and ``batch.no_supervised_tokens`` on chat rows tokenized with an assistant mask
and no labels column (``input_ids`` and ``assistant_masks`` as transformers'
``apply_chat_template(..., return_assistant_tokens_mask=True)`` returns them, the form TRL's
SFTTrainer stores with ``assistant_only_loss=True``): the supervised tokens are the assistant-mask
ones (TRL's collator: ``labels = input_ids``, ``labels[assistant_masks == 0] = -100``), and the plan
prints that rule; it said "unknown".

Material: FastChat's dummy_conversation.json (../shared/chat, PROVENANCE.md: 500 ShareGPT rows)
rendered by transformers with the real SmolLM-135M tokenizer and SmolLM2's ChatML template with
``{% generation %}`` markers (set on a copy: PROVENANCE.md, no real tokenizer there ships its
template). Expected counts are the masks' own sums over the plan's micro-batches, in plain Python."""
from __future__ import annotations

import json

import polars as pl
import pytest
from checkhelp import tokenizer_copy
from conftest import SHARED
from gatehelp import plan_json

pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import datacheck  # noqa: E402

CHAT = SHARED / "chat"
TOKENIZER = CHAT / "tokenizers/smollm_135m"
DATA = CHAT / "fastchat/dummy_conversation.json"
CHATML_GEN = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' }}"
              "{% if message['role'] == 'assistant' %}{% generation %}{{ message['content'] + '<|im_end|>' }}"
              "{% endgeneration %}{% else %}{{ message['content'] + '<|im_end|>' }}{% endif %}{{ '\n' }}{% endfor %}")
ROLE = {"human": "user", "gpt": "assistant"}

pytestmark = pytest.mark.skipif(not (TOKENIZER.is_dir() and DATA.is_file()), reason="shared chat material not present")


def _rows(tmp_path, n: int) -> tuple[list[list[int]], list[list[int]]]:
    tok = transformers.AutoTokenizer.from_pretrained(str(tokenizer_copy(TOKENIZER, tmp_path / "tok", CHATML_GEN)))
    convs = [[{"role": ROLE[t["from"]], "content": t["value"]} for t in r["conversations"]]
             for r in json.loads(DATA.read_text())[:n]]
    if n > 7:
        convs[6], convs[7] = convs[6][:1], convs[7][:1]  # two rows cut before the answer: no assistant token
    out = tok.apply_chat_template(convs, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
    return out["input_ids"], out["assistant_masks"]


def test_assistant_mask_rows_without_labels_count_the_assistant_tokens(tmp_path):
    ids, masks = _rows(tmp_path, 10)
    d = tmp_path / "data"
    d.mkdir()
    pl.DataFrame({"input_ids": ids, "assistant_masks": masks}).write_parquet(d / "train.parquet")
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text("[batch]\nbatch_size = 2\nshuffle = false\n")
    # TRL's collator: labels = input_ids with every position of assistant_masks 0 set to -100
    expected = [sum(t != -100 for m in masks[k:k + 2] for t in [1 if v else -100 for v in m])
                for k in range(0, len(ids), 2)]
    assert expected[3] == 0 and all(expected[:3]) and all(expected[4:])
    res = plan_json(str(d), "--config", str(cfg))
    sup = res["plan"]["supervised"]
    assert sup is not None, "supervision unknown"
    assert (sup["min"], sup["zero"], sup["count"]) == (min(expected), expected.count(0), len(expected))
    assert sup["zero_micro_batches"] == [[0, 3, 0, 0]]
    assert any("'assistant_masks'" in r and "assistant_only_loss" in r for r in sup["rule"]), sup["rule"]
    for step, want in enumerate(expected):
        assert plan_json(str(d), "--config", str(cfg), "--step", str(step))["step"]["supervised_tokens"] == want
    rep = datacheck.audit([str(d)], config=str(cfg))
    assert rep.shards[0].layout == "sft_tokenized"
    f = next(f for f in rep.findings if f.check == "batch.no_supervised_tokens")
    assert f.details["micro_batches"] == [[0, 3, 0, 0]]


def test_the_rule_keeps_truncation_to_max_seq_len(tmp_path):
    ids, masks = _rows(tmp_path, 4)
    d = tmp_path / "data"
    d.mkdir()
    pl.DataFrame({"input_ids": ids, "assistant_masks": masks}).write_parquet(d / "train.parquet")
    cut = 40
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text(f"[tokens]\nmax_seq_len = {cut}\n[batch]\nbatch_size = 1\nshuffle = false\n")
    expected = [sum(m[:cut]) for m in masks]  # truncation_side right (default): the first max_seq_len tokens
    assert expected != [sum(m) for m in masks]
    res = plan_json(str(d), "--config", str(cfg))
    for step, want in enumerate(expected):
        assert plan_json(str(d), "--config", str(cfg), "--step", str(step))["step"]["supervised_tokens"] == want
    assert any(f"max_seq_len {cut}" in r for r in res["plan"]["supervised"]["rule"])


def test_the_audit_asks_for_no_column_the_collator_makes(tmp_path):
    """TRL's rows hold input_ids and assistant_masks only: the labels and the attention mask are the
    collator's, so no check waits for them to be named; the assistant-mask rules run."""
    ids, masks = _rows(tmp_path, 10)
    d = tmp_path / "data"
    d.mkdir()
    pl.DataFrame({"input_ids": ids, "assistant_masks": masks}).write_parquet(d / "train.parquet")
    rep = datacheck.audit([str(d)], config={"tokens": {"vocab_size": 49152}})
    assert rep.shards[0].layout == "sft_tokenized"
    reasons = {s["check"]: s["reason"] for s in rep.skipped}
    assert not {c: r for c, r in reasons.items() if "[columns] labels" in r or "[columns] attention_mask" in r}, reasons
    f = next(f for f in rep.findings if f.check == "sft.assistant_mask_empty")
    assert f.column == "assistant_masks" and set(f.rows) == {r for r, m in enumerate(masks) if not any(m)} == {6, 7}
