"""sft rules on conversations before tokenization (``messages``): sft.role_order, sft.empty_turn,
sft.no_assistant_turn over HF/OpenAI {role, content}, ShareGPT {from, value} and LLaMA-Factory v1
content parts; NaN inside the turn structs (finite.nan); a plain-Python reference on random data;
the real chat files of ../shared/chat give no false alarm."""
from __future__ import annotations

import json
import math
import os

import polars as pl
import pytest
from conftest import SHARED, examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import datacheck
from datacheck.checks.registry import CHECKS
from datacheck.engine.shard import audit_frame
from datacheck.model.config import config_from_dict

CHAT = (SHARED / "chat")
SETTINGS = settings(max_examples=examples(int(os.environ.get("DATACHECK_HYPOTHESIS_EXAMPLES", "40"))), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
IDS = ("sft.role_order", "sft.empty_turn", "sft.no_assistant_turn")


def _res(df: pl.DataFrame, config: dict | None = None):
    res = audit_frame(df, config_from_dict(config or {}))
    assert res.readable, res.findings
    assert not [s for s in res.skipped if s.error], res.skipped
    return res


def failing(df: pl.DataFrame, config: dict | None = None) -> dict[str, set[int]]:
    res = _res(df, config)
    return {k.split(":")[0]: set(v) for k, v in res.failing_rows.items() if k.split(":")[0] in IDS}


def conv(*turns: tuple[str, str | None]) -> list[dict]:
    return [{"role": r, "content": c} for r, c in turns]


U, A, S = "user", "assistant", "system"
ROWS = [
    conv((U, "hi"), (A, "hello")),                                  # 0 clean
    conv((S, "be brief"), (U, "hi"), (A, "yo"), (U, "x"), (A, "y")),  # 1 clean
    conv((U, "a"), (U, "b"), (A, "c")),                             # 2 two user turns in a row
    conv((A, "hi"), (U, "q"), (A, "a")),                            # 3 assistant before any user
    conv((U, "q"), (S, "late"), (A, "a")),                          # 4 system not first
    conv((U, "q"), ("tool", "42"), (A, "a")),                       # 5 tool result without a call
    conv((U, "q"), ("robot", "x"), (A, "a")),                       # 6 unknown role
    conv((U, "only")),                                              # 7 one turn (also no assistant)
    conv((U, "q"), (A, "  \u200b\n")),                              # 8 assistant blank (zero-width)
    conv((U, ""), (A, "a")),                                        # 9 user empty (warn)
    conv((U, "q"), (A, None)),                                      # 10 assistant null
    conv((S, "s"), (U, "q")),                                       # 11 no assistant
    [],                                                             # 12 empty conversation
    None,                                                           # 13 null row: not judged
]


def test_rules_on_a_table_of_conversations():
    df = pl.DataFrame({"messages": ROWS})
    got = failing(df)
    assert got["sft.role_order"] == {2, 3, 4, 5, 6, 7, 12}
    assert got["sft.empty_turn"] == {8, 9, 10}
    assert got["sft.no_assistant_turn"] == {7, 11, 12}


def test_empty_turn_severity_and_examples_name_the_turn():
    res = _res(pl.DataFrame({"messages": ROWS}))
    by = {(f.check, f.severity): f for f in res.findings if f.check in IDS}
    err, warn = by[("sft.empty_turn", "error")], by[("sft.empty_turn", "warn")]
    assert [e.row for e in err.examples] == [8, 10] and err.count == 2
    assert err.examples[0].value[1:-1] == "turn 1 ('assistant'): content empty or whitespace-only"
    assert [e.row for e in warn.examples] == [9] and "1 system/user/tool turn(s)" in warn.message
    order = {e.row: e.value[1:-1] for e in by[("sft.role_order", "error")].examples}  # shown as a repr
    assert order[2] == "turn 1: two user turns in a row"
    assert order[3] == "turn 0: 'assistant' turn before any user turn"
    assert order[4] == "turn 1: system turn at position 1, not first"
    assert order[5] == "turn 1: tool result ('tool') with no tool call before it"
    assert order[6] == "turn 1: unknown role 'robot'"
    assert order[7] == "1 turn(s): a conversation needs at least two"
    na = by[("sft.no_assistant_turn", "error")]
    assert {e.row: e.value[1:-1] for e in na.examples}[11] == "roles: [system, user]"


def test_sharegpt_layout_and_tool_calls():
    """ShareGPT {from, value} in a ``conversations`` column is the messages role; function_call is a
    tool call, observation its result (LLaMA-Factory's glaive layout)."""
    rows = [
        [{"from": "human", "value": "q"}, {"from": "function_call", "value": "{}"},
         {"from": "observation", "value": "{}"}, {"from": "gpt", "value": "a"}],   # clean
        [{"from": "human", "value": "q"}, {"from": "observation", "value": "{}"}, {"from": "gpt", "value": "a"}],
        [{"from": "gpt", "value": "a"}, {"from": "human", "value": "q"}],
    ]
    df = pl.DataFrame({"id": ["a", "b", "c"], "conversations": rows})
    res = _res(df)
    assert res.roles["messages"]["columns"] == "conversations"
    got = {k.split(":")[0]: set(v) for k, v in res.failing_rows.items() if k.split(":")[0] in IDS}
    assert got == {"sft.role_order": {1, 2}}


def test_openai_tool_calls_field_makes_an_assistant_turn_a_call():
    rows = [conv((U, "q"), (A, ""), ("tool", "1"), (A, "done")), conv((U, "q"), (A, "x"), ("tool", "1"), (A, "y"))]
    calls = [[None, [{"name": "f"}], None, None], [None, None, None, None]]
    msgs = [[{**m, "tool_calls": c} for m, c in zip(r, cs)] for r, cs in zip(rows, calls)]
    got = failing(pl.DataFrame({"messages": msgs}))
    # row 0: the assistant turn with empty content carries the call: a tool call, not an empty turn
    # (OpenAI writes content null beside tool_calls); row 1: a tool answer without a call
    assert got["sft.role_order"] == {1}
    assert "sft.empty_turn" not in got


def test_content_parts_are_read_not_flagged():
    """LLaMA-Factory v1: content as a list of {type, value}; an image part is content."""
    part = lambda t, v: {"type": t, "value": v}  # noqa: E731
    rows = [
        [{"role": U, "content": [part("text", "hi")]}, {"role": A, "content": [part("text", "yo")]}],
        [{"role": U, "content": [part("image", None)]}, {"role": A, "content": [part("text", "a cat")]}],
        [{"role": U, "content": [part("text", "q")]}, {"role": A, "content": [part("text", " "), part("text", "")]}],
        [{"role": U, "content": [part("text", "q")]}, {"role": A, "content": []}],
    ]
    assert failing(pl.DataFrame({"messages": rows})) == {"sft.empty_turn": {2, 3}}


def test_nan_inside_turn_structs_is_finite_nan():
    rows = [[{"role": U, "content": "q", "loss_weight": 0.0}, {"role": A, "content": "a", "loss_weight": 1.0}],
            [{"role": U, "content": "q", "loss_weight": 0.0}, {"role": A, "content": "a", "loss_weight": float("nan")}]]
    res = _res(pl.DataFrame({"messages": rows}))
    f = next(f for f in res.findings if f.check == "finite.nan")
    assert f.column == "messages" and [e.row for e in f.examples] == [1]
    assert "messages[].loss_weight" in f.message
    assert not {k for k in res.failing_rows if k.split(":")[0] in IDS}


def test_wrong_dtype_is_skipped_with_the_reason():
    res = _res(pl.DataFrame({"messages": ['[{"role": "user"}]']}))
    skipped = {s.check: s.reason for s in res.skipped}
    for cid in IDS:
        assert "messages" in skipped[cid]
    assert any(f.check == "schema.dtype" and f.column == "messages" for f in res.findings)


def test_no_messages_column_is_skipped():
    res = _res(pl.DataFrame({"text": ["a"]}), {"dataset": {"layout": "chat_sft"}})
    assert {s.check for s in res.skipped} >= set(IDS)


# --- property test: a plain-Python reference ---------------------------------------------------
_CANON = {"system": "system", "user": "user", "human": "user", "assistant": "assistant", "gpt": "assistant",
          "function_call": "tool_call", "observation": "tool", "tool": "tool"}
_BLANKS = ("", " ", "\n\t", "\u200b", "\ufeff ")


def ref(row: list[dict] | None) -> set[str]:
    if row is None:
        return set()
    out = set()
    roles = [_CANON.get(t["role"]) if t["role"] is not None else None for t in row]
    if len(row) < 2:
        out.add("sft.role_order")
    seen_user = False
    for i, r in enumerate(roles):
        prev = roles[i - 1] if i else None
        if r is None or (r == "system" and i > 0) or (r == "user" and prev == "user") \
                or (r in ("assistant", "tool_call") and not seen_user) \
                or (r == "tool" and prev not in ("tool_call", "tool")):
            out.add("sft.role_order")
        seen_user = seen_user or r == "user"
    blank = [t["content"] is None or not t["content"].replace("\u200b", "").replace("\ufeff", "").strip() for t in row]
    if any(b for b in blank):
        out.add("sft.empty_turn")
    if not any(r in ("assistant", "tool_call") for r in roles):
        out.add("sft.no_assistant_turn")
    return out


turns = st.fixed_dictionaries({
    "role": st.sampled_from([*_CANON, "robot", None]),
    "content": st.one_of(st.none(), st.sampled_from(_BLANKS), st.sampled_from(["hi", " ok ", "x\u200by"])),
})


@SETTINGS
@given(st.lists(st.one_of(st.none(), st.lists(turns, max_size=6)), min_size=1, max_size=8))
def test_property_matches_plain_python(rows):
    df = pl.DataFrame({"messages": rows}, schema={"messages": pl.List(pl.Struct({"role": pl.String, "content": pl.String}))})
    got = failing(df)
    for cid in IDS:
        want = {i for i, r in enumerate(rows) if cid in ref(r)}
        assert got.get(cid, set()) == want, (cid, rows)


# --- real material ------------------------------------------------------------------------------
def _real(rel: str):
    if not (CHAT / rel).exists():
        pytest.skip("shared chat material not present")
    return datacheck.audit(str(CHAT / rel), {})


@pytest.mark.parametrize("rel, rows, column, turns", [
    ("fastchat/dummy_conversation.json", 500, "conversations", None),
    ("llamafactory/glaive_toolcall_en_demo.json", 300, "conversations", {"human": 746, "gpt": 746,
                                                                          "function_call": 211, "observation": 211}),
    ("llamafactory/v1_sft_demo.jsonl", 500, "messages", {"user": 500, "assistant": 500}),
])
def test_real_chat_files_give_no_structural_false_alarm(rel, rows, column, turns):
    """PROVENANCE.md: the rows counts; the files are clean for the structural rules."""
    rep = _real(rel)
    (shard,) = rep.shards
    assert shard.rows == rows
    assert rep.roles["messages"]["columns"] == column
    assert not [f for f in rep.findings if f.check.startswith("sft.") or f.check in ("finite.nan", "schema.dtype")]
    assert not [s for s in rep.skipped if s["check"] in IDS]
    if turns is not None:
        path = CHAT / rel
        data = json.loads(path.read_text()) if rel.endswith(".json") else [json.loads(x) for x in path.read_text().splitlines()]
        seen: dict[str, int] = {}
        for r in data:
            for t in r[column]:
                k = t.get("role", t.get("from"))
                seen[k] = seen.get(k, 0) + 1
        assert seen == turns


def test_real_v1_loss_weights_are_finite_and_a_nan_is_found(tmp_path):
    """v1_sft_demo.jsonl carries per-message loss_weight (0.0 user, 1.0 assistant); one NaN written
    into a copy is finite.nan on exactly that row."""
    src = CHAT / "llamafactory/v1_sft_demo.jsonl"
    if not src.exists():
        pytest.skip("shared chat material not present")
    lines = src.read_text().splitlines()
    rec = json.loads(lines[7])
    rec["messages"][1]["loss_weight"] = math.nan
    lines[7] = json.dumps(rec)
    (tmp_path / "v1.jsonl").write_text("\n".join(lines) + "\n")
    rep = datacheck.audit(str(tmp_path / "v1.jsonl"), {})
    f = next(f for f in rep.findings if f.check == "finite.nan")
    assert [e.row for e in f.examples] == [7] and f.count == 1 and list(f.lines) == [8]


def test_truncated_response_without_an_attention_mask():
    """The row length is its list length when there is no attention_mask (was: a literal that
    summed to 1 per row, so no row ever counted as max_seq_len long)."""
    df = pl.DataFrame({"input_ids": [[5, 6, 7, 2], [5, 6, 7, 8], [5, 6, 8]],
                       "labels": [[-100, 6, 7, 2], [-100, 6, 7, 8], [-100, 6, 8]]})
    res = _res(df, {"tokens": {"max_seq_len": 4, "eot_token_ids": [2]}})
    assert res.failing_rows["sft.truncated_response:labels"] == [1]


def test_alpaca_layout_is_judged_as_a_conversation():
    """instruction/input/output (+ system) is read as the conversation it stands for: user = the
    non-empty ones of instruction and input joined by "\\n", assistant = output; the sft rules
    judge it like chat data."""
    df = pl.DataFrame({"instruction": ["a", "", "b", None, "c"], "input": ["x", None, "", "y", ""],
                       "output": ["o", "o", " ", "o", "o"], "system": [None, None, None, None, "be brief"]})
    res = _res(df)
    assert res.roles["messages"] == {"columns": "messages", "inferred": True}
    got = {k.split(":")[0]: set(v) for k, v in res.failing_rows.items() if k.split(":")[0] in IDS}
    # row 1: empty instruction (user turn, warn); 2: blank output (assistant, error); row 3 (null
    # instruction, input "y") is the user turn "y", as LLaMA-Factory's converter joins the non-empty parts
    assert got == {"sft.empty_turn": {1, 2}}
    sev = {(f.severity, e.row) for f in res.findings if f.check == "sft.empty_turn" for e in f.examples}
    assert sev == {("warn", 1), ("error", 2)}


def test_derived_messages_do_not_break_a_strict_contract(tmp_path):
    (tmp_path / "s.yaml").write_text("strict: true\ncolumns:\n  instruction: {dtype: String}\n"
                                     "  input: {dtype: String}\n  output: {dtype: String}\n")
    df = pl.DataFrame({"instruction": ["a"], "input": [""], "output": ["o"]})
    res = _res(df, {"dataset": {"schema": str(tmp_path / "s.yaml")}})
    assert not [f for f in res.findings if f.check.startswith("schema.")], res.findings


def test_real_alpaca_identity_file_gives_no_structural_false_alarm():
    """identity.json (Alpaca, 91 rows): clean for the structural rules. Its outputs hold unfilled
    {{name}} / {{author}} placeholders (PROVENANCE.md): CHECKS.md has no rule for placeholders, so
    no finding is expected for them."""
    rep = _real("llamafactory/identity.json")
    assert rep.shards[0].rows == 91
    assert rep.roles["messages"]["columns"] == "messages"
    assert not [f for f in rep.findings if f.check.startswith("sft.")]
    assert not [s for s in rep.skipped if s["check"] in IDS]
    rows = json.loads((CHAT / "llamafactory/identity.json").read_text())
    assert sum("{{name}}" in r["output"] for r in rows) == 77  # counted when written
    assert sum("{{author}}" in r["output"] for r in rows) == 60
    assert not any(r["input"] for r in rows)


def test_real_dpo_prompts_are_not_conversations_without_an_answer():
    """dpo_en_demo.json (300 rows): ShareGPT conversations are the prompts (114 are one human turn),
    chosen/rejected the responses: no sft.role_order / sft.no_assistant_turn false alarm."""
    rep = _real("llamafactory/dpo_en_demo.json")
    assert rep.shards[0].rows == 300
    assert not [f for f in rep.findings if f.check.startswith("sft.")], [(f.check, f.count) for f in rep.findings]
    reasons = {s["check"]: s["reason"] for s in rep.skipped}
    # the shard is preference data: the rule for a conversation without an answer does not apply there
    assert rep.shards[0].layout == "dpo"
    assert "sft.no_assistant_turn" in CHECKS and not CHECKS["sft.no_assistant_turn"].applies("dpo")
    assert "sft.no_assistant_turn" not in reasons and "sft.role_order" not in reasons
