"""Conversations rendered by the tokenizer's chat template ([tokens] tokenizer) and judged by the
tokenized sft.* rules, on real material: the SmolLM-135M tokenizer of
../shared/chat/tokenizers with SmolLM2's ChatML template set here (PROVENANCE.md: no real
tokenizer there ships its template), over FastChat's dummy_conversation.json (500 rows)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from checkhelp import tokenizer_copy
from conftest import SHARED

import datacheck
from datacheck.derive import chat
from datacheck.engine.shard import audit_shard
from datacheck.formats.discovery import discover
from datacheck.io.hashing import hash_file
from datacheck.model.config import config_from_dict
from datacheck.model.errors import UsageError

transformers = pytest.importorskip("transformers")  # the `chat` extra (in dev)

CHAT = (SHARED / "chat")
TOKENIZER = CHAT / "tokenizers/smollm_135m"
DATA = CHAT / "fastchat/dummy_conversation.json"
IM_START, IM_END, ENDOFTEXT = 1, 2, 0  # PROVENANCE.md
#: SmolLM2's published template is ChatML; the assistant content and its <|im_end|> inside
#: {% generation %} as trainers mark them for assistant-only loss
CHATML_GEN = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' }}"
              "{% if message['role'] == 'assistant' %}{% generation %}{{ message['content'] + '<|im_end|>' }}"
              "{% endgeneration %}{% else %}{{ message['content'] + '<|im_end|>' }}{% endif %}{{ '\n' }}{% endfor %}")
CHATML_PLAIN = CHATML_GEN.replace("{% generation %}", "").replace("{% endgeneration %}", "")
ROLE = {"human": "user", "gpt": "assistant"}

pytestmark = pytest.mark.skipif(not (TOKENIZER.is_dir() and DATA.is_file()), reason="shared chat material not present")


def _folder(base: Path, template: str | None) -> Path:
    return tokenizer_copy(TOKENIZER, base, template)


@pytest.fixture(scope="module")
def toks(tmp_path_factory):
    root = tmp_path_factory.mktemp("tok")
    return {"gen": _folder(root / "gen", CHATML_GEN), "plain": _folder(root / "plain", CHATML_PLAIN)}


def _audit(tokens: dict, path: Path = DATA):
    (ds,) = discover([str(path)]).shards
    cfg = config_from_dict({"tokens": {"eot_token_ids": [IM_END], "bos_token_id": ENDOFTEXT, **tokens}})
    h, size = hash_file(ds.path)
    res = audit_shard(ds, cfg, h, size, keep_rows=True)
    assert res.readable and not [s for s in res.skipped if s.error], res.skipped
    return res


def _rows(res, cid: str) -> set[int]:
    return {r for k, v in res.failing_rows.items() if k.split(":")[0] == cid for r in v}


def _reference(folder: Path, max_len: int | None = None):
    """The tokenizer's own output, called here directly (plain Python over its lists)."""
    tok = transformers.AutoTokenizer.from_pretrained(str(folder))
    convs = [[{"role": ROLE[t["from"]], "content": t["value"]} for t in r["conversations"]]
             for r in json.loads(DATA.read_text())]
    kw = {"truncation": True, "max_length": max_len} if max_len else {}
    out = tok.apply_chat_template(convs, tokenize=True, return_dict=True, return_assistant_tokens_mask=True, **kw)
    return out["input_ids"], out["assistant_masks"]


def test_a_template_with_generation_markers_gives_no_false_alarm(toks):
    res = _audit({"tokenizer": str(toks["gen"])})
    assert res.rows == 500
    assert not [f for f in res.findings if f.check.startswith(("sft.", "empty.", "labels.", "tokens.", "mask."))], \
        [(f.check, f.count) for f in res.findings]
    ran = {"sft.assistant_mask_empty", "sft.prompt_supervised", "sft.eot_unsupervised", "sft.double_bos",
           "sft.role_order", "sft.empty_turn", "sft.no_assistant_turn"}
    assert not ran & {s.check for s in res.skipped}
    ids, masks = _reference(toks["gen"])
    sup = res.stats["supervised_tokens"]
    assert sup["per_row"] == [sum(m) for m in masks]  # every row, in row order
    assert sup["total"] == sum(map(sum, masks)) and sup["zero_rows"] == 0
    # each assistant span ends with <|im_end|> (supervised: the model learns to stop)
    assert all(i[k] == IM_END for i, m in zip(ids, masks) for k in range(len(m)) if m[k] and (k + 1 == len(m) or not m[k + 1]))


def test_the_same_template_without_generation_markers_empties_every_mask(toks):
    res = _audit({"tokenizer": str(toks["plain"])})
    assert _rows(res, "sft.assistant_mask_empty") == set(range(500))
    # one cause, one finding: the rendered labels (all ignore_index) are not judged again row by row
    assert _rows(res, "empty.no_supervised_tokens") == set()
    assert "no {% generation %} markers" in next(s.reason for s in res.skipped if s.check == "empty.no_supervised_tokens")


@pytest.mark.parametrize("max_len", [24, 48])
def test_truncation_flags_exactly_the_rows_whose_response_was_cut(toks, max_len):
    ids, masks = _reference(toks["gen"], max_len)
    want = set()
    for row, (i, m) in enumerate(zip(ids, masks)):
        last = [k for k in range(len(m)) if m[k]]
        if len(i) >= max_len and last and i[last[-1]] != IM_END:
            want.add(row)
    assert len(want) == {24: 333, 48: 178}[max_len]  # counted independently, as measured when written
    res = _audit({"tokenizer": str(toks["gen"]), "max_seq_len": max_len})
    assert _rows(res, "sft.truncated_response") == want
    assert max(len(x) for x in ids) == max_len


def test_no_truncation_without_max_seq_len_despite_the_tokenizer_files_fixed_192(toks, tmp_path):
    """tokenizer.json stores truncation to 192 (PROVENANCE.md quirk): rendering does not apply it."""
    long = [{"conversations": [{"from": "human", "value": "word " * 150}, {"from": "gpt", "value": "ok " * 150}]}]
    (tmp_path / "long.json").write_text(json.dumps(long))
    res = _audit({"tokenizer": str(toks["gen"])}, tmp_path / "long.json")
    assert res.stats["supervised_tokens"]["per_row"][0] >= 150
    assert not _rows(res, "sft.truncated_response")


def test_without_transformers_the_rendered_rules_are_skipped_with_the_install_command(toks, monkeypatch):
    monkeypatch.setattr(chat, "_import_transformers", lambda: None)
    res = _audit({"tokenizer": str(toks["gen"])})
    reasons = {s.check: s.reason for s in res.skipped}
    for cid in ("sft.assistant_mask_empty", "sft.prompt_supervised", "sft.truncated_response", "sft.double_bos"):
        assert chat.CHAT_INSTALL in reasons[cid], reasons.get(cid)
    assert "sft.role_order" not in reasons  # the structural rules need no tokenizer


def test_a_tokenizer_without_chat_template_is_a_skip_reason(tmp_path):
    res = _audit({"tokenizer": str(_folder(tmp_path / "none", None))})
    reasons = {s.check: s.reason for s in res.skipped}
    assert "has no chat template" in reasons["sft.assistant_mask_empty"]


GPT2_VOCAB = SHARED / "realdata/gpt2_tokenizer"  # vocab.json + merges.txt only (PROVENANCE.md)
RENDERED = ("sft.assistant_mask_empty", "sft.prompt_supervised", "sft.truncated_response", "sft.double_bos")


@pytest.mark.skipif(not (GPT2_VOCAB / "merges.txt").is_file(), reason="shared GPT-2 vocabulary not present")
@pytest.mark.parametrize("name", [None, "vocab.json", "merges.txt"])
def test_a_vocabulary_inspect_reads_is_a_tokenizer_without_chat_template(tmp_path, name):
    """A folder ``inspect --tokenizer`` loads (a GPT-2 vocab.json + merges.txt, no tokenizer_config.json),
    named as the folder or as one of its files, is accepted as [tokens] tokenizer as it is there: it
    has no chat template, so the rendered rules are skipped with that reason (it was a usage error)."""
    from datacheck.tools.inspect import load_tokenizer

    folder = tmp_path / "gpt2"
    folder.mkdir()
    for f in ("vocab.json", "merges.txt"):
        (folder / f).write_bytes((GPT2_VOCAB / f).read_bytes())
    given = folder if name is None else folder / name
    assert load_tokenizer(folder).vocab_size == len(json.loads((folder / "vocab.json").read_text()))
    res = _audit({"tokenizer": str(given)})
    reasons = {s.check: s.reason for s in res.skipped}
    for cid in RENDERED:
        assert reasons[cid] == (f"the tokenizer in {folder} (vocab.json) has no chat template (no tokenizer_config.json "
                                "or chat_template.jinja beside it): messages cannot be rendered as the trainer does")


def test_half_a_gpt2_vocabulary_is_still_a_usage_error(tmp_path):
    """A vocab.json without its merges.txt: the audit reads the tokenizer's facts before any shard,
    and the message says what is missing."""
    folder = tmp_path / "half"
    folder.mkdir()
    (folder / "vocab.json").write_text('{"a": 0, "b": 1}')
    with pytest.raises(UsageError) as err:
        datacheck.audit(str(DATA), {"tokens": {"tokenizer": str(folder)}})
    assert str(err.value) == (f"[tokens] tokenizer = {str(folder)!r}: a GPT-2 style vocab.json needs merges.txt "
                              "(merges.txt) in the same folder")


def test_a_missing_tokenizer_folder_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match=r"\[tokens\] tokenizer = .*no such file or folder"):
        datacheck.audit(str(DATA), {"tokens": {"tokenizer": str(tmp_path / "nope")}})


def test_an_unloadable_tokenizer_file_is_named_as_written(tmp_path):
    """``[tokens] tokenizer`` naming a file of a folder that holds no tokenizer: the message names the
    path as written, the folder that was read and what to put there."""
    folder = tmp_path / "tok"
    folder.mkdir()
    given = folder / "merges.txt"
    given.write_text("#version: 0.2\na b\n")
    with pytest.raises(UsageError) as err:
        datacheck.audit(str(DATA), {"tokens": {"tokenizer": str(given)}})
    assert str(err.value) == (f"[tokens] tokenizer = {str(given)!r}: {folder} holds no tokenizer.json, vocab.json + "
                              "merges.txt (nor one PREFIX-vocab.json + PREFIX-merges.txt) or vocab.txt, from which datacheck reads the tokenizer's vocabulary size and "
                              "its pad/eos/bos ids; save the tokenizer there with tokenizer.save_pretrained(folder) "
                              "(it writes tokenizer.json)")


GLAIVE = CHAT / "llamafactory/glaive_toolcall_en_demo.json"  # 300 rows; row 243's prompt > 2048 tokens
GLAIVE_ROLE = {"human": "user", "gpt": "assistant", "function_call": "assistant", "observation": "tool",
               "system": "system"}


def _cut_rows(folder: Path, max_len: int) -> tuple[set[int], set[int]]:
    """Reference (the tokenizer called here, untruncated, over the JSON): (rows whose first
    ``max_len`` tokens hold no assistant token while the whole rendering does, rows with none at all)."""
    tok = transformers.AutoTokenizer.from_pretrained(str(folder))
    rows = json.loads(GLAIVE.read_text())
    convs = [[{"role": GLAIVE_ROLE[t["from"]], "content": t["value"]} for t in r["conversations"]] for r in rows]
    out = tok.apply_chat_template(convs, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
    masks = out["assistant_masks"]
    cut = {i for i, m in enumerate(masks) if any(m) and not any(m[:max_len])}
    return cut, {i for i, m in enumerate(masks) if not any(m)}


@pytest.mark.slow
def test_an_answer_cut_by_truncation_is_not_blamed_on_the_template(toks):
    """Row 243's prompt is longer than 2048 tokens, so right truncation keeps no
    assistant token; the template has {% generation %} and is not blamed."""
    cut, none = _cut_rows(toks["gen"], 2048)
    assert (cut, none) == ({243}, set())
    res = _audit({"tokenizer": str(toks["gen"]), "max_seq_len": 2048}, GLAIVE)
    by = {f.check: f for f in res.findings}
    for cid in ("sft.assistant_mask_empty", "empty.no_supervised_tokens"):
        assert _rows(res, cid) == cut
        msg = by[cid].message
        assert "truncation to max_seq_len 2048 (right) cut the answer off" in msg, msg
        assert "lacks {% generation %}" not in msg
        assert by[cid].examples[0].row == 243
    assert "cut the answer" in by["sft.assistant_mask_empty"].examples[0].value
    assert "1 of them have assistant tokens in the whole rendering" in by["sft.assistant_mask_empty"].message
    assert "(1 of them only because truncation" in by["empty.no_supervised_tokens"].message


def test_the_template_is_blamed_only_for_rows_with_no_assistant_token_untruncated(toks, tmp_path):
    rows = json.loads(GLAIVE.read_text())
    mixed = [rows[243], {"conversations": [{"from": "human", "value": "hello"}]}, rows[0]]
    (tmp_path / "mixed.json").write_text(json.dumps(mixed))
    res = _audit({"tokenizer": str(toks["gen"]), "max_seq_len": 2048}, tmp_path / "mixed.json")
    (f,) = [f for f in res.findings if f.check == "sft.assistant_mask_empty"]
    # row 1 has no assistant turn at all: sft.no_assistant_turn's row, the template is not blamed for it
    assert _rows(res, "sft.assistant_mask_empty") == {0} and _rows(res, "sft.no_assistant_turn") == {1}
    assert "1 of them have assistant tokens in the whole rendering" in f.message
    assert "generation" not in f.message
    # without the markers nothing is cut: every row is the template's
    res = _audit({"tokenizer": str(toks["plain"]), "max_seq_len": 2048}, GLAIVE)
    (f,) = [f for f in res.findings if f.check == "sft.assistant_mask_empty"]
    assert f.count == 300 and "whole rendering" not in f.message and "has no {% generation %}" in f.message
    assert "tokenizer_config.json" in f.message
