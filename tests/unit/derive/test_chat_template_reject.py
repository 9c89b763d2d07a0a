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


@pytest.mark.parametrize("broken, where", [("{% for m in messages %}{{ m['content'] }", "unexpected '}' (line 1)"),
                                           ("{% for m in messages %}\n{{ m['content'] }}", "(line 2)")])
def test_a_template_that_does_not_compile_is_a_usage_error_not_every_row(tmp_path, broken, where):
    """A chat template with a jinja2 syntax error rejects every conversation alike: the fault is the
    tokenizer's, so the audit stops with exit 2 naming the template's file and the error's line
    (it blamed each row's turn order with sft.role_order); the template as written compiles."""
    from conftest import run_cli

    folder = tokenizer_copy(TOKENIZER, tmp_path / "tok", broken)
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "chat.json").write_text(DATA.read_text())
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text(f'[tokens]\ntokenizer = "{folder}"\n')
    r = run_cli("audit", str(tmp_path / "d"), "--config", str(cfg), "--report-dir", str(tmp_path / "rep"))
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"the chat template in {folder / 'tokenizer_config.json'} does not compile (jinja2: " in r.stderr
    assert where in r.stderr and "sft.role_order" not in r.stdout
    tokenizer_copy(TOKENIZER, folder, MISTRAL_V01)
    tok, why = chat.load_chat_tokenizer(str(folder))
    assert tok is not None and why is None


#: ChatML written with ``range`` over the turns (as several published templates loop), with the
#: generation markers: the same text as the ``for m in messages`` form
CHATML_RANGE = ("{% for i in range(messages|length) %}<|im_start|>{{ messages[i]['role'] }}\n"
                "{% if messages[i]['role'] == 'assistant' %}{% generation %}{{ messages[i]['content'] }}<|im_end|>"
                "{% endgeneration %}{% else %}{{ messages[i]['content'] }}<|im_end|>{% endif %}\n{% endfor %}")


def test_a_template_looping_with_range_renders_as_transformers_renders_it(tmp_path):
    """``range`` inside the bounded sandbox is the sandbox's own ``range`` with the deadline checked:
    it was looked up on the environment class, which has no ``globals``, so every conversation of a
    template using ``range`` was "rejected" with an AttributeError (sft.role_order on every row)."""
    folder = tokenizer_copy(TOKENIZER, tmp_path / "tok", CHATML_RANGE)
    rows = json.loads(DATA.read_text())[:40]
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(rows))
    res = _audit(path, folder)
    assert _rows(res, "sft.role_order") == set()
    t = transformers.AutoTokenizer.from_pretrained(str(folder))
    conv = [{"role": ROLE[m["from"]], "content": m["value"]} for m in rows[0]["conversations"]]
    want = t.apply_chat_template(conv, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
    tok, _why = chat.load_chat_tokenizer(str(folder))
    got = chat.render_chat([conv], tok, None, "right", -100)
    assert got.rejected == [] and got.columns["input_ids"][0].to_list() == list(want["input_ids"])
    assert got.columns["assistant_mask"][0].to_list() == list(want["assistant_masks"])


def _audit_with_endless_loop(tmp_path):
    """``datacheck audit`` (in process, one worker) of 20 FastChat conversations with a chat template
    that loops 10^10 times writing one character a step."""
    from conftest import run_cli

    folder = tokenizer_copy(TOKENIZER, tmp_path / "tok", "{% for i in range(100000) %}{% for j in range(100000) %}x"
                                                         "{% endfor %}{% endfor %}")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "chat.json").write_text(json.dumps(json.loads(DATA.read_text())[:20]))
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text(f'[tokens]\ntokenizer = "{folder}"\n')
    return run_cli("audit", str(tmp_path / "d"), "--config", str(cfg), "--report-dir", str(tmp_path / "rep"),
                   "--workers", "1", "--no-cache")


def test_a_template_too_slow_for_every_conversation_is_a_usage_error(tmp_path, monkeypatch):
    """A template that runs past the per-conversation deadline on each of the first conversations
    and renders none would take days over a dataset (5 s a row): after three it is refused as the
    template's fault, exit 2, instead of an sft.role_order per row."""
    monkeypatch.setattr(chat, "RENDER_SECONDS", 0.3)
    r = _audit_with_endless_loop(tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert (f"the chat template ran past its bounds (0.3 s or {chat.RENDER_MAX_CHARS} characters a conversation) on "
            "each of the first 3 conversations it was given and rendered none (last: RenderLimit: the chat template "
            "ran past 0.3 s on one conversation)") in r.stderr


def test_a_template_too_long_for_every_conversation_is_a_usage_error(tmp_path, monkeypatch):
    """The same loop bounded by size first (one character a step reaches RENDER_MAX_CHARS before
    RENDER_SECONDS on a fast machine): the same template, the same refusal, whichever bound stops it."""
    monkeypatch.setattr(chat, "RENDER_SECONDS", 600.0)
    monkeypatch.setattr(chat, "RENDER_MAX_CHARS", 1 << 16)
    r = _audit_with_endless_loop(tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert ("on each of the first 3 conversations it was given and rendered none (last: RenderLimit: the chat "
            "template rendered over 65536 characters of one conversation)") in r.stderr


def test_a_constant_product_is_not_built_when_the_template_is_compiled():
    """jinja2 folds constant expressions when it compiles; the check that a template compiles uses the
    bounded environment (``*`` intercepted, never folded), so ``{{ 'a' * N }}`` costs nothing there
    (a plain sandbox built the 3 GB string of ``'a' * 3000000000`` before any row was read)."""
    import tracemalloc

    n = 200_000_000
    chat._compile_problem.cache_clear()
    tracemalloc.start()
    try:
        assert chat._compile_problem("{{ 'a' * %d }}" % n) is None
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < n // 10, peak
    assert chat._compile_problem("{% if %}") is not None  # the check still refuses what does not compile
