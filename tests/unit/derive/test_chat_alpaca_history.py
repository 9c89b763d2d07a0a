"""Alpaca ``history`` (LLaMA-Factory's alpaca format: ``[[instruction, response], ...]``, the rounds
before the current one) folded into the derived messages in order, as LLaMA-Factory's
AlpacaDatasetConverter does: system, then each history pair as a user and an assistant turn, then
the current user turn (instruction + "\\n" + input) and the output. No real alpaca file of
../shared/chat has a history column (identity.json: instruction/input/output only), so the file
here follows the format LLaMA-Factory's data/README.md documents; a hypothesis property test holds
the derivation against a plain-Python transcription of the converter."""
from __future__ import annotations

import json
import os

import polars as pl
import pytest
from checkhelp import tokenizer_copy
from conftest import SHARED, examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from datacheck.derive.read import open_for_checks
from datacheck.engine.shard import audit_frame, audit_shard
from datacheck.formats.discovery import discover
from datacheck.io.hashing import hash_file
from datacheck.model.config import config_from_dict

SETTINGS = settings(max_examples=examples(int(os.environ.get("DATACHECK_HYPOTHESIS_EXAMPLES", "40"))), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
CHAT = SHARED / "chat"

#: LLaMA-Factory data/README.md, "Alpaca Format": {instruction, input, output, system, history}
ROWS = [
    {"instruction": "And in French?", "input": "", "output": "Bonjour", "system": "You translate.",
     "history": [["Say hello in German", "Hallo"], ["And in Spanish?", "Hola"]]},
    {"instruction": "Sum these", "input": "1 2", "output": "3", "system": "", "history": []},
    {"instruction": "Next?", "input": "", "output": "ok", "system": "", "history": [["first", ""]]},
    {"instruction": "Go on", "input": "", "output": "done", "system": "", "history": [["only a prompt"]]},
    {"instruction": "No history", "input": "", "output": "fine", "system": "", "history": None},
]


def converter(row: dict) -> list[dict]:
    """LLaMA-Factory's AlpacaDatasetConverter, written out in plain Python (system first, as its
    templates place it; a pair that is not two strings gives None for what it lacks)."""
    turns = []
    if row.get("system"):
        turns.append({"role": "system", "content": row["system"]})
    for pair in row.get("history") or []:
        turns.append({"role": "user", "content": pair[0] if len(pair) > 0 else None})
        turns.append({"role": "assistant", "content": pair[1] if len(pair) > 1 else None})
    query = [x for x in (row["instruction"], row.get("input")) if x]
    turns.append({"role": "user", "content": "\n".join(query)})
    turns.append({"role": "assistant", "content": row["output"]})
    return turns


def _messages(source) -> list:
    data = open_for_checks(source, config_from_dict({}))
    assert "messages" in data.roles.derived
    return data.lf.select("messages").collect()["messages"].to_list()


def test_history_pairs_come_first_in_order(tmp_path):
    path = tmp_path / "alpaca.json"
    path.write_text(json.dumps(ROWS))
    (ds,) = discover([str(path)]).shards
    got = _messages(ds)
    assert got[0] == [
        {"role": "system", "content": "You translate."},
        {"role": "user", "content": "Say hello in German"}, {"role": "assistant", "content": "Hallo"},
        {"role": "user", "content": "And in Spanish?"}, {"role": "assistant", "content": "Hola"},
        {"role": "user", "content": "And in French?"}, {"role": "assistant", "content": "Bonjour"},
    ]
    assert got == [converter(r) for r in ROWS]


def test_sft_rules_see_the_history_turns(tmp_path):
    path = tmp_path / "alpaca.json"
    path.write_text(json.dumps(ROWS))
    (ds,) = discover([str(path)]).shards
    h, size = hash_file(ds.path)
    res = audit_shard(ds, config_from_dict({}), h, size, keep_rows=True)
    empty = {(f.severity, e.row, e.value[1:-1]) for f in res.findings if f.check == "sft.empty_turn" for e in f.examples}
    # row 2: the history's response is empty; row 3: the history pair has no response (null)
    assert empty == {("error", 2, "turn 1 ('assistant'): content empty or whitespace-only"),
                     ("error", 3, "turn 1 ('assistant'): content empty or whitespace-only")}
    assert not [f for f in res.findings if f.check in ("sft.role_order", "sft.no_assistant_turn")]


def test_a_history_of_another_dtype_is_not_the_alpaca_layout():
    df = pl.DataFrame({"instruction": ["a"], "output": ["b"], "history": ["not a list"]})
    res = audit_frame(df, config_from_dict({}))
    assert res.roles.get("messages") is None or res.roles["messages"].get("columns") is None
    assert "sft.role_order" in {s.check for s in res.skipped}


text = st.text(alphabet="ab \n", max_size=4)


@SETTINGS
@given(st.lists(st.fixed_dictionaries({
    "instruction": text, "input": text, "output": text, "system": text,
    "history": st.one_of(st.none(), st.lists(st.lists(text, min_size=2, max_size=2), max_size=3))}), min_size=1, max_size=8))
def test_property_history_matches_the_converter(rows):
    df = pl.DataFrame(rows, schema={"instruction": pl.String, "input": pl.String, "output": pl.String,
                                    "system": pl.String, "history": pl.List(pl.List(pl.String))})
    assert _messages(df) == [converter(r) for r in rows]




@pytest.mark.slow
def test_rendered_history_supervises_every_assistant_turn(tmp_path):
    """With [tokens] tokenizer (SmolLM-135M + ChatML with {% generation %}, as test_sft_render.py):
    the history's assistant turns are rendered and supervised like the current one."""
    tf = pytest.importorskip("transformers")
    tok_src = CHAT / "tokenizers/smollm_135m"
    if not tok_src.is_dir():
        pytest.skip("shared chat material not present")
    from test_chat_sft_render import CHATML_GEN  # noqa: PLC0415 - the template of the sibling test
    folder = tokenizer_copy(tok_src, tmp_path / "tok", CHATML_GEN)
    rows = ROWS[:2]
    res = audit_frame(pl.DataFrame(rows), config_from_dict({"tokens": {"tokenizer": str(folder)}}))
    tok = tf.AutoTokenizer.from_pretrained(str(folder))
    out = tok.apply_chat_template([converter(r) for r in rows], tokenize=True, return_dict=True,
                                  return_assistant_tokens_mask=True)
    assert res.stats["supervised_tokens"]["per_row"] == [sum(m) for m in out["assistant_masks"]]
    # row 0 supervises three answers: Hallo, Hola, Bonjour (each with its <|im_end|>)
    ids, mask = out["input_ids"][0], out["assistant_masks"][0]
    spans = tok.decode([t for t, m in zip(ids, mask) if m])
    assert spans == "Hallo<|im_end|>Hola<|im_end|>Bonjour<|im_end|>"
