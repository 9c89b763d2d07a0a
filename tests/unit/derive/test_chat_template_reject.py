"""sft.role_order on conversations the tokenizer's chat template rejects:
a row whose rendering raises (the template's raise_exception, a content it cannot concatenate) is
an sft.role_order failure with the template's own message, and only that row: the batch it was in
is rendered again row by row, so its good rows are rendered and never blamed.

Real material: the SmolLM-135M tokenizer of ../shared/chat/tokenizers with Mistral-7B-Instruct-
v0.1's published chat template (below; it raises on roles that do not alternate and on any role
but user/assistant), over FastChat's dummy_conversation.json (500 ShareGPT rows, all alternating
human/gpt) with bad conversations put in at known rows."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from checkhelp import tokenizer_copy
from conftest import SHARED

from datacheck.checks._expr import counts_to_pairs
from datacheck.derive import chat
from datacheck.engine.shard import audit_shard
from datacheck.formats.discovery import discover
from datacheck.io.hashing import hash_file
from datacheck.model.config import config_from_dict

transformers = pytest.importorskip("transformers")  # the `chat` extra (in dev)

CHAT = SHARED / "chat"
TOKENIZER = CHAT / "tokenizers/smollm_135m"
DATA = CHAT / "fastchat/dummy_conversation.json"
#: Mistral-7B-Instruct-v0.1's chat template, verbatim from the "chat_template" of
#: https://huggingface.co/mistralai/Mistral-7B-Instruct-v0.1/blob/main/tokenizer_config.json
MISTRAL_V01 = ("{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
               "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
               "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
               "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token + ' ' }}"
               "{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}")
ROLE = {"human": "user", "gpt": "assistant", "system": "system", "observation": "tool"}

pytestmark = pytest.mark.skipif(not (TOKENIZER.is_dir() and DATA.is_file()), reason="shared chat material not present")

#: bad conversations and the rows they replace (0-based)
BAD = {
    3: [{"from": "system", "value": "be brief"}, {"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}],
    250: [{"from": "human", "value": "weather?"}, {"from": "observation", "value": "{\"t\": 21}"}],
    499: [{"from": "human", "value": "q"}, {"from": "gpt", "value": None}],
}


@pytest.fixture(scope="module")
def tok(tmp_path_factory) -> Path:
    return tokenizer_copy(TOKENIZER, tmp_path_factory.mktemp("mistral"), MISTRAL_V01)


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> tuple[Path, list]:
    rows = json.loads(DATA.read_text())
    for i, conv in BAD.items():
        rows[i] = {"id": f"bad{i}", "conversations": conv}
    path = tmp_path_factory.mktemp("data") / "mixed.json"
    path.write_text(json.dumps(rows))
    return path, rows


def _audit(path: Path, tok: Path):
    (ds,) = discover([str(path)]).shards
    cfg = config_from_dict({"tokens": {"tokenizer": str(tok), "eot_token_ids": [0]}})
    h, size = hash_file(ds.path)
    res = audit_shard(ds, cfg, h, size, keep_rows=True)
    assert res.readable and not [s for s in res.skipped if s.error], res.skipped
    return res


def _rows(res, cid: str) -> set[int]:
    return {r for k, v in res.failing_rows.items() if k.split(":")[0] == cid for r in v}


def _raises_alone(tok: Path, rows: list) -> dict[int, str]:
    """Plain Python: the rows the template raises on when each is rendered alone, with the message."""
    t = transformers.AutoTokenizer.from_pretrained(str(tok))
    out = {}
    for i, r in enumerate(rows):
        conv = [{"role": ROLE[m["from"]], "content": m["value"]} for m in r["conversations"]]
        try:
            t.apply_chat_template(conv, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
        except Exception as exc:  # noqa: BLE001 - what the template raises
            out[i] = str(exc)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("batch", [512, 64])
def test_only_the_rows_the_template_rejects_fail_with_its_message(tok, data, monkeypatch, batch):
    monkeypatch.setattr(chat, "_BATCH", batch)  # one batch of 500, or 8 batches (3 of them fail)
    path, rows = data
    want = _raises_alone(tok, rows)
    assert set(want) == set(BAD)  # counted independently: the real FastChat rows all render
    res = _audit(path, tok)
    assert _rows(res, "sft.role_order") == set(BAD)
    (f,) = [f for f in res.findings if f.check == "sft.role_order"]
    ex = {e.row: e.value[1:-1] for e in f.examples}  # shown as a repr
    # row 3 passes the structural rules (a system turn first): only the template rejects it
    assert ex[3] == ("the chat template rejects it: TemplateError: Conversation roles must alternate "
                     "user/assistant/user/assistant/...")
    assert ex[250] == "the chat template rejects it: TemplateError: Only user and assistant roles are supported!"
    # a null content: transformers drops the key, the template reads an undefined field
    assert ex[499] == "the chat template rejects it: UndefinedError: 'dict object' has no attribute 'content'"
    assert all(ex[i].endswith(want[i].splitlines()[0]) for i in BAD)
    assert counts_to_pairs(f.details["reasons"]) == [["rejected by the chat template", 3]], f.details
    assert "3 of them the chat template rejects" in f.message and "do not judge them" in f.message
    # the good rows were rendered: the template has no {% generation %}, so every rendered row (and
    # only those) has an all-zero assistant_mask; the rejected rows have no tokens and are not judged
    assert _rows(res, "sft.assistant_mask_empty") == set(range(500)) - set(BAD)
    for cid in ("empty.sequence", "labels.null", "empty.no_supervised_tokens", "sft.double_bos"):
        assert not _rows(res, cid) & set(BAD), cid  # null rendered columns are the rendering's, not the data's
    sup = res.stats["supervised_tokens"]
    assert [i for i, c in enumerate(sup["per_row"]) if c is None] == sorted(BAD)
    assert sup["null_rows"] == 3 and sup["zero_rows"] == 497 and sup["total"] == 0


def test_a_clean_file_has_no_rejection(tok):
    res = _audit(DATA, tok)
    assert not _rows(res, "sft.role_order")
    assert len(_rows(res, "sft.assistant_mask_empty")) == 500


def test_the_error_column_name_is_free_of_the_shards_own_columns():
    assert chat.template_error_column(["messages"]) == "chat_template_error"
    assert chat.template_error_column(["chat_template_error", "_chat_template_error"]) == "__chat_template_error"
