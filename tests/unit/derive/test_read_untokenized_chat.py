"""Conversations before tokenization (a ``messages`` column, no ``input_ids``): the token checks'
skip reasons name the fact that is really missing, ``[tokens] tokenizer`` (its chat template renders
and tokenizes the conversations: derive/read.py), never "set [columns] input_ids" (no column of the
rows could be named there). The hint is held to its word: with the tokenizer set, every check it was
given for runs.

Material: FastChat's dummy_conversation.json (../shared/chat, PROVENANCE.md: 500 ShareGPT rows), the
SmolLM-135M tokenizer with SmolLM2's ChatML template set on a copy (PROVENANCE.md: no real tokenizer
there ships its template), as tests/unit/derive/test_chat_sft_render.py uses them."""
from __future__ import annotations

import pytest
from checkhelp import tokenizer_copy
from conftest import SHARED

from datacheck.derive.chat import RENDERED_COLUMNS
from datacheck.engine.shard import audit_shard
from datacheck.formats.discovery import discover
from datacheck.io.hashing import hash_file
from datacheck.model.config import config_from_dict

CHAT = SHARED / "chat"
TOKENIZER = CHAT / "tokenizers/smollm_135m"
DATA = CHAT / "fastchat/dummy_conversation.json"
IM_END = 2  # PROVENANCE.md: <|im_end|> = 2
CHATML_GEN = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' }}"
              "{% if message['role'] == 'assistant' %}{% generation %}{{ message['content'] + '<|im_end|>' }}"
              "{% endgeneration %}{% else %}{{ message['content'] + '<|im_end|>' }}{% endif %}{{ '\n' }}{% endfor %}")

pytestmark = pytest.mark.skipif(not (TOKENIZER.is_dir() and DATA.is_file()), reason="shared chat material not present")


def _audit(tokens: dict):
    (ds,) = discover([str(DATA)]).shards
    cfg = config_from_dict({"tokens": {"eot_token_ids": [IM_END], "vocab_size": 49152, "max_position_embeddings": 2048,
                                       **tokens}})
    h, size = hash_file(ds.path)
    res = audit_shard(ds, cfg, h, size)
    assert res.readable and not [s for s in res.skipped if s.error], res.skipped
    return res


def _waiting_on_the_tokenizer() -> set[str]:
    """The checks skipped on the untokenized conversations for the tokenizer (asserted here)."""
    res = _audit({})
    assert res.layout["name"] == "chat_sft"
    reasons = {s.check: s.reason for s in res.skipped}
    for role in RENDERED_COLUMNS:  # input_ids, assistant_mask, labels: what the rendering gives
        assert not [c for c, r in reasons.items() if f"set [columns] {role}" in r], reasons
    tokenizer_hint = {c for c, r in reasons.items() if "[tokens] tokenizer" in r}
    # the checks of token ids, of token labels and of the assistant mask all wait on the tokenizer
    assert {"tokens.out_of_vocab", "tokens.position_out_of_range", "empty.sequence", "empty.no_supervised_tokens",
            "length.over_max", "sft.assistant_mask_empty", "labels.shift_mismatch",
            "content.periodic_tokens"} <= tokenizer_hint, reasons
    return tokenizer_hint


def test_untokenized_chat_names_the_tokenizer_not_a_column():
    assert _waiting_on_the_tokenizer()


def test_setting_the_named_fact_gives_every_check_it_was_named_for_its_columns(tmp_path):
    waiting = _waiting_on_the_tokenizer()
    tok = tokenizer_copy(TOKENIZER, tmp_path / "tok", CHATML_GEN)
    res = _audit({"tokenizer": str(tok), "max_seq_len": 4096})
    # each either runs now or waits on another fact it names (bos_token_id, [dup] near, ...), never on
    # the tokenizer or on a token column again
    still = {s.check: s.reason for s in res.skipped if s.check in waiting and (
        "[tokens] tokenizer" in s.reason or any(f"no {c} column" in s.reason for c in RENDERED_COLUMNS))}
    assert not still, still
    ran = waiting - {s.check for s in res.skipped}
    assert {"tokens.out_of_vocab", "empty.sequence", "sft.assistant_mask_empty", "length.over_max"} <= ran


@pytest.mark.parametrize("tokens", [{}, {"tokenizer": "gen"}], ids=["conversations", "rendered"])
def test_conversations_hold_no_attention_mask_in_either_form(tmp_path, tokens):
    """A conversation, and its rendering (one unpadded sequence per row: the collator pads and builds
    the attention mask), hold no attention_mask, token_type_ids or position_ids: the checks of those
    do not apply (counted, not run); none is listed as waiting for a column to be named."""
    if tokens:
        tokens = {"tokenizer": str(tokenizer_copy(TOKENIZER, tmp_path / "tok", CHATML_GEN))}
    res = _audit(tokens)
    reasons = {s.check: s.reason for s in res.skipped}
    assert not {c: r for c, r in reasons.items() if "[columns] attention_mask" in r
                or "[columns] token_type_ids" in r}, reasons
    assert {"mask.non_binary", "mask.not_contiguous", "padding.token_not_pad", "padding.pad_attended",
            "padding.label_not_ignored", "tokens.type_id_out_of_range"} <= set(res.not_applicable)
