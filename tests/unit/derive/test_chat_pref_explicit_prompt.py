"""Preference pairs in TRL's conversational form with an explicit prompt (``{"prompt": [{"role":
"user", ...}], "chosen": [{"role": "assistant", ...}], "rejected": [...]}``: TRL's documented
"conversational preference, explicit prompt" layout) rendered by the tokenizer's chat template as
DPOTrainer renders them: the ``prompt`` turns with the generation prompt, then prompt + chosen and
prompt + rejected.

With ``[tokens] tokenizer`` set, the pairs were taken for TRL's implicit-prompt layout (chosen and
rejected whole conversations); a one-message response shares no leading turn with the other, so no
pair was rendered and every row of clean data was ``empty.sequence`` (error) on
``chosen_input_ids`` and ``rejected_input_ids`` ("150 of them null"), while the ``pref.*`` rules
judged nothing. Real material: LLaMA-Factory's dpo_en_demo.json (PROVENANCE.md: no row has chosen
== rejected), its ShareGPT prompts written in TRL's explicit form, and the SmolLM-135M tokenizer
with SmolLM2's ChatML template; expected ids from transformers' own ``apply_chat_template``."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from checkhelp import CHAT, CHATML, SHAREGPT_ROLE, TOKENIZER, tokenizer_copy

from datacheck.derive.read import explicit_prompt_column
from datacheck.engine.shard import audit_shard
from datacheck.formats.discovery import discover
from datacheck.io.hashing import hash_file
from datacheck.model.config import ColumnsSection, config_from_dict
from datacheck.model.roles import resolve_roles

transformers = pytest.importorskip("transformers")  # the `chat` extra (in dev)
pl = pytest.importorskip("polars")

DPO = CHAT / "llamafactory/dpo_en_demo.json"
pytestmark = pytest.mark.skipif(not (TOKENIZER.is_dir() and DPO.is_file()), reason="shared chat material not present")

ROWS = 60


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory) -> Path:
    return tokenizer_copy(TOKENIZER, tmp_path_factory.mktemp("chatml"), CHATML)


def _explicit(n: int = ROWS) -> list[dict]:
    """The first ``n`` real pairs in TRL's explicit-prompt form."""
    out = []
    for r in json.loads(DPO.read_text())[:n]:
        prompt = [{"role": SHAREGPT_ROLE[t["from"]], "content": t["value"]} for t in r["conversations"]]
        out.append({"prompt": prompt, "chosen": [{"role": "assistant", "content": r["chosen"]["value"]}],
                    "rejected": [{"role": "assistant", "content": r["rejected"]["value"]}]})
    return out


def _write(tmp_path: Path, rows: list[dict]) -> Path:
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _audit(path: Path, tok_dir: Path):
    (ds,) = discover([str(path)]).shards
    h, size = hash_file(ds.path)
    res = audit_shard(ds, config_from_dict({"tokens": {"tokenizer": str(tok_dir)}}), h, size, keep_rows=True)
    assert res.readable and not [s for s in res.skipped if s.error], res.skipped
    return res


def _rows(res, cid: str) -> set[int]:
    return {r for k, v in res.failing_rows.items() if k.split(":")[0] == cid for r in v}


def test_the_prompt_column_of_messages_is_the_explicit_prompt():
    msgs = pl.List(pl.Struct({"role": pl.String, "content": pl.String}))
    schema = {"prompt": msgs, "chosen": msgs, "rejected": msgs}
    roles = resolve_roles(ColumnsSection(), schema)
    assert (roles.chosen, roles.rejected, roles.messages) == ("chosen", "rejected", None)
    assert explicit_prompt_column(roles, schema) == "prompt"
    # a text prompt, or none, is no conversation to render
    assert explicit_prompt_column(roles, {**schema, "prompt": pl.String}) is None
    assert explicit_prompt_column(roles, {"chosen": msgs, "rejected": msgs}) is None


def test_clean_explicit_prompt_pairs_give_no_finding(tmp_path, tok_dir):
    rows = _explicit()
    res = _audit(_write(tmp_path, rows), tok_dir)
    assert res.rows == ROWS and res.layout["name"] == "dpo"
    # the real pairs hold no defect but repeats (dup.*, which this test does not judge)
    assert [(f.check, f.column, f.count) for f in res.findings if not f.check.startswith("dup.")] == []
    assert not _rows(res, "empty.sequence")


def test_planted_identical_and_empty_pairs_are_found(tmp_path, tok_dir):
    rows = _explicit()
    same, empty = {3, 17}, {8}
    for i in same:
        rows[i]["rejected"] = [dict(rows[i]["chosen"][0])]
    for i in empty:
        rows[i]["chosen"] = [{"role": "assistant", "content": "  "}]
    # the trainer's view: transformers renders each pair (prompt with the generation prompt, then the
    # whole conversation); equal rendered token ids are an identical pair
    tok = transformers.AutoTokenizer.from_pretrained(str(tok_dir))
    rendered_same = set()
    for i, r in enumerate(rows):
        c = tok.apply_chat_template(r["prompt"] + r["chosen"], tokenize=False)
        j = tok.apply_chat_template(r["prompt"] + r["rejected"], tokenize=False)
        head = tok.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True)
        assert c.startswith(head) and j.startswith(head)
        if tok(c, add_special_tokens=False)["input_ids"] == tok(j, add_special_tokens=False)["input_ids"]:
            rendered_same.add(i)
    assert rendered_same == same
    res = _audit(_write(tmp_path, rows), tok_dir)
    assert _rows(res, "pref.identical_pair") == same
    assert _rows(res, "pref.empty_response") == empty
    assert not _rows(res, "empty.sequence")
