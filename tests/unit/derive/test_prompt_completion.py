"""TRL's prompt-completion rows (``SFTTrainer``'s "prompt-completion" dataset type: ``prompt`` and
``completion``, both text or both conversations) are judged as the conversation they stand for, as
the Alpaca layout is: a derived ``messages`` column (the prompt's turns, then the completion's).

They were of no layout ("no layout fits the columns prompt (String), completion (String)"): 49 checks
skipped, and a blank completion (the model trained to answer with nothing) passed the gate. Real
material: tinyshakespeare lines; the SmolLM-135M tokenizer with SmolLM2's ChatML template (the
conversational form is rendered by it, as TRL renders it); expected rows computed here."""
from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from checkhelp import CHATML, TOKENIZER, findings, tokenizer_copy
from conftest import REALDATA

import datacheck
from datacheck.derive.alpaca import prompt_completion_messages
from datacheck.derive.read import PLAIN_PROMPT_COMPLETION, open_for_checks
from datacheck.model.config import config_from_dict

SHAKES = REALDATA / "tinyshakespeare" / "input.txt"
#: SmolLM2's ChatML with the generation tags TRL's assistant-only loss needs (the assistant mask)
CHATML_GEN = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' }}"
              "{% if message['role'] == 'assistant' %}{% generation %}{{ message['content'] + '<|im_end|>' }}"
              "{% endgeneration %}{{ '\\n' }}{% else %}{{ message['content'] + '<|im_end|>' + '\\n' }}{% endif %}"
              "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
pytestmark = pytest.mark.skipif(not SHAKES.is_file(), reason="shared real data not present")


def _lines(n: int) -> list[str]:
    seen: dict[str, None] = {}
    for line in SHAKES.read_text(encoding="utf-8").splitlines():
        if len(line.strip()) > 25:
            seen.setdefault(line.strip(), None)
        if len(seen) == n:
            break
    return list(seen)


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _text_rows(n: int = 120) -> list[dict]:
    lines = _lines(2 * n)
    return [{"prompt": lines[2 * i], "completion": lines[2 * i + 1]} for i in range(n)]


def _conv_rows(n: int = 60) -> list[dict]:
    return [{"prompt": [{"role": "user", "content": r["prompt"]}],
             "completion": [{"role": "assistant", "content": r["completion"]}]} for r in _text_rows(n)]


def test_which_schemas_are_prompt_completion():
    msgs = pl.List(pl.Struct({"role": pl.String, "content": pl.String}))
    text = {"prompt": pl.String, "completion": pl.String}
    got = prompt_completion_messages(text)
    assert got is not None and not got.conversational
    got = prompt_completion_messages({"prompt": msgs, "completion": msgs})
    assert got is not None and got.conversational and got.dtype == msgs
    # other layouts: TRL's KTO rows (a Boolean label), DPO's prompt beside a pair, tokenized rows
    assert prompt_completion_messages({**text, "label": pl.Boolean}) is None
    assert prompt_completion_messages({**text, "chosen": pl.String, "rejected": pl.String}) is None
    assert prompt_completion_messages({**text, "input_ids": pl.List(pl.Int64)}) is None
    assert prompt_completion_messages({"prompt": pl.String, "completion": msgs}) is None


def test_clean_text_rows_pass_and_a_blank_completion_is_found(tmp_path):
    rows = _text_rows()
    rep = datacheck.audit([str(_write(tmp_path / "clean.jsonl", rows))])
    assert rep.shards[0].layout == "chat_sft"
    assert rep.findings == [] and rep.passed, [(f.check, f.message) for f in rep.findings]
    rows[7]["completion"] = "   "
    rows[30]["completion"] = None
    rows[44]["prompt"] = ""
    (tmp_path / "bad").mkdir()
    rep = datacheck.audit([str(_write(tmp_path / "bad" / "train.jsonl", rows))])
    blank = sorted(i for i, r in enumerate(rows) if not (r["prompt"] or "").strip() or not (r["completion"] or "").strip())
    assert blank == [7, 30, 44]
    assert sorted(r for f in findings(rep, "sft.empty_turn") for r in f.rows) == blank
    assert not rep.passed


def test_text_rows_are_not_rendered_by_a_chat_template(tmp_path):
    tok_dir = tokenizer_copy(TOKENIZER, tmp_path / "tok", CHATML)
    cfg = config_from_dict({"tokens": {"tokenizer": str(tok_dir)}})
    data = open_for_checks(pl.DataFrame(_text_rows(20)), cfg)
    assert "input_ids" not in data.schema and data.roles.messages == "messages"
    assert dict(data.roles.unavailable)["input_ids"] == PLAIN_PROMPT_COMPLETION


def test_conversational_rows_are_rendered_as_prompt_plus_completion(tmp_path):
    transformers = pytest.importorskip("transformers")
    tok_dir = tokenizer_copy(TOKENIZER, tmp_path / "tok", CHATML_GEN)
    rows = _conv_rows()
    path = _write(tmp_path / "train.jsonl", rows)
    cfg = config_from_dict({"tokens": {"tokenizer": str(tok_dir)}})
    got = open_for_checks(pl.read_ndjson(path), cfg).lf.collect()
    tok = transformers.AutoTokenizer.from_pretrained(str(tok_dir))
    for i in (0, 17, 59):
        text = tok.apply_chat_template(rows[i]["prompt"] + rows[i]["completion"], tokenize=False)
        assert got["input_ids"][i].to_list() == tok(text, add_special_tokens=False)["input_ids"]
    rep = datacheck.audit([str(path)], config={"tokens": {"tokenizer": str(tok_dir)}})
    assert rep.shards[0].layout == "chat_sft"
    assert rep.findings == [] and rep.passed, [(f.check, f.message) for f in rep.findings]
