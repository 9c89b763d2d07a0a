"""Preference pairs in TRL's implicit-prompt layout: ``chosen`` and ``rejected``
whole conversations with no prompt column (LLaMA-Factory v1: ``chosen_messages`` /
``rejected_messages``). The prompt is cut as TRL's ``maybe_extract_prompt`` cuts it, then the pair is
rendered and judged like an explicit-prompt pair.

Real material (PROVENANCE.md): LLaMA-Factory's v1_dpo_demo.jsonl (10 rows, system prompts, content
as [{type, value}] parts) and dpo_en_demo.json (300 rows, ShareGPT prompts, no row has chosen ==
rejected), rendered with the SmolLM-135M tokenizer and SmolLM2's published ChatML template."""
from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path

import polars as pl
import pytest
from checkhelp import CHAT, CHATML, SHAREGPT_ROLE, TOKENIZER, tokenizer_copy
from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from datacheck.derive import chat
from datacheck.derive.pairs import extract_prompt, response_turns, split_implicit_pairs
from datacheck.engine.shard import audit_frame
from datacheck.model.config import config_from_dict

V1 = CHAT / "llamafactory/v1_dpo_demo.jsonl"
DPO = CHAT / "llamafactory/dpo_en_demo.json"


def trl_extract_prompt(chosen, rejected):
    """TRL's ``extract_prompt`` written out plainly (trl/data_utils.py @ 00cc012a): the loop
    variable survives the loop, and is unbound (UnboundLocalError) when either side is empty."""
    for idx in range(min(len(chosen), len(rejected))):
        if chosen[idx] != rejected[idx]:
            if chosen[idx - 1] == " ":
                idx -= 1
            break
    return chosen[:idx], chosen[idx:], rejected[idx:]  # noqa: F821 - unbound on empty input, as in TRL


_turn = st.fixed_dictionaries({"role": st.sampled_from(["system", "user", "assistant"]),
                               "content": st.sampled_from(["", " ", "a", "b"])})


@settings(max_examples=examples(400), deadline=None)
@given(st.one_of(st.tuples(st.lists(_turn, max_size=5), st.lists(_turn, max_size=5)),
                 st.tuples(st.text(alphabet="ab ", max_size=20), st.text(alphabet="ab ", max_size=20))))
def test_extract_prompt_is_trls_rule(pair):
    c, r = pair
    if not c or not r:
        with pytest.raises(UnboundLocalError):
            trl_extract_prompt(c, r)
        assert extract_prompt(c, r) is None
        return
    assert extract_prompt(c, r) == trl_extract_prompt(c, r)


def test_extract_prompt_quirks_are_kept():
    u, a, b = {"role": "user", "content": "q"}, {"role": "assistant", "content": "A"}, {"role": "assistant", "content": "B"}
    assert extract_prompt([u, a], [u, b]) == ([u], [a], [b])  # TRL's docstring example
    assert extract_prompt([u, a], [u, a]) == ([u], [a], [a])  # equal: the last turn stays a response
    assert extract_prompt("x b", "x a") == ("x", " b", " a")  # the space goes to the responses
    assert extract_prompt("ab ", "ba") == ("ab", " ", "a")  # k = 0 reads chosen[-1]: the cut is -1, as in TRL


pytestmark = pytest.mark.skipif(not (TOKENIZER.is_dir() and V1.is_file() and DPO.is_file()),
                                reason="shared chat material not present")


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory) -> Path:
    return tokenizer_copy(TOKENIZER, tmp_path_factory.mktemp("chatml"), CHATML)


def _v1() -> list[dict]:
    return [json.loads(line) for line in V1.read_text().splitlines() if line.strip()]


def _audit(rows_or_df, tokens: dict):
    df = rows_or_df if isinstance(rows_or_df, pl.DataFrame) else pl.DataFrame(rows_or_df)
    return audit_frame(df, config_from_dict({"tokens": tokens}))


def _rows(res, key: str) -> set[int]:
    return {r for k, v in res.failing_rows.items() if k == key or k.split(":")[0] == key for r in v}


def _pref(res) -> dict[str, set[int]]:
    """Failing rows of the pref rules, keyed by check and side (chosen/rejected, whatever the column)."""
    out: dict[str, set[int]] = {}
    for k, v in res.failing_rows.items():
        if k.startswith("pref."):
            cid, _, col = k.partition(":")
            side = "rejected" if "rejected" in col else "chosen" if col else ""
            out.setdefault(f"{cid}:{side}", set()).update(v)
    return out


def test_v1_dpo_demo_is_recognized_and_cut_at_the_system_and_user_turns(tok_dir):
    rows = _v1()
    assert len(rows) == 10  # PROVENANCE.md
    assert all(r["chosen_messages"][0]["role"] == "system" for r in rows)  # "with system prompts"
    df = pl.DataFrame(rows)
    turns = df.select(response_turns("chosen_messages", df.schema["chosen_messages"]).alias("c"),
                      response_turns("rejected_messages", df.schema["rejected_messages"]).alias("r"))
    split = split_implicit_pairs(turns["c"].to_list(), turns["r"].to_list())
    assert not split.no_prefix and not split.diverged
    assert [[t["role"] for t in p] for p in split.prompts] == [["system", "user"]] * 10
    assert all(len(c) == 1 and len(r) == 1 and c != r for c, r in zip(split.chosen, split.rejected))
    res = _audit(df, {"tokenizer": str(tok_dir)})
    assert res.roles["chosen"]["columns"] == "chosen_messages" and res.roles["rejected"]["columns"] == "rejected_messages"
    assert not [f for f in res.findings if f.check.startswith("pref.")], [(f.check, f.count) for f in res.findings]
    assert not [s for s in res.skipped if s.check.startswith("pref.")], res.skipped


def _explicit(rows: list[dict]) -> pl.DataFrame:
    """The same pairs in the explicit-prompt layout: the shared turns as ``messages``, the last turn
    of each side as its response."""
    return pl.DataFrame({"messages": [r["chosen_messages"][:-1] for r in rows],
                         "chosen": [r["chosen_messages"][-1:] for r in rows],
                         "rejected": [r["rejected_messages"][-1:] for r in rows]})


@pytest.mark.parametrize(("max_len", "side"), [(None, "right"), (64, "right"), (40, "left"), (150, "right")])
def test_implicit_and_explicit_layouts_give_the_same_findings_v1(tok_dir, max_len, side):
    rows = _v1()
    tokens = {"tokenizer": str(tok_dir), "truncation_side": side, **({"max_seq_len": max_len} if max_len else {})}
    imp, exp = _audit(rows, tokens), _audit(_explicit(rows), tokens)
    assert _pref(imp) == _pref(exp)
    if max_len is not None and side == "right":
        # plain reference: the rows whose rendered system + user turns (+ the generation prompt)
        # fill max_len tokens: nothing of either answer is left, and the two sequences are equal
        transformers = pytest.importorskip("transformers")
        tok = transformers.AutoTokenizer.from_pretrained(str(tok_dir))
        full = [tok.apply_chat_template([{"role": t["role"], "content": t["content"][0]["value"]}
                                         for t in r["chosen_messages"][:-1]], tokenize=False, add_generation_prompt=True)
                for r in rows]
        cut = {i for i, text in enumerate(full) if len(tok(text, add_special_tokens=False)["input_ids"]) >= max_len}
        # one cause, one finding (pref.identical_pair: both sequences the prompt alone), not also both
        # responses empty
        assert _pref(imp) == {"pref.identical_pair:": cut}
        assert len(cut) == {64: 8, 150: 1}[max_len]  # measured when written (rows 0-1, 3, 5-9 at 64; row 9 at 150)


@pytest.mark.slow
@pytest.mark.parametrize(("max_len", "side"), [(None, "right"), (64, "right"), (8, "left")])
def test_implicit_and_explicit_layouts_give_the_same_findings_dpo_en(tok_dir, max_len, side):
    """dpo_en_demo in both layouts: the explicit one as shipped (ShareGPT ``conversations`` prompt,
    ``chosen``/``rejected`` {from, value}); the implicit one built from it as TRL's implicit layout
    (``{role, content}`` conversations, the prompt repeated on both sides)."""
    raw = json.loads(DPO.read_text())
    assert len(raw) == 300 and not any(r["chosen"] == r["rejected"] for r in raw)  # PROVENANCE.md
    conv = [[{"role": SHAREGPT_ROLE[t["from"]], "content": t["value"]} for t in r["conversations"]] for r in raw]
    implicit = pl.DataFrame({"chosen": [c + [{"role": "assistant", "content": r["chosen"]["value"]}] for c, r in zip(conv, raw)],
                             "rejected": [c + [{"role": "assistant", "content": r["rejected"]["value"]}] for c, r in zip(conv, raw)]})
    tokens = {"tokenizer": str(tok_dir), "truncation_side": side, **({"max_seq_len": max_len} if max_len else {})}
    imp = _audit(implicit, tokens)
    exp = _audit(pl.read_json(DPO), tokens)
    assert _pref(imp) == _pref(exp)
    if max_len is None:
        assert _pref(imp) == {}  # no false alarm on the 300 real pairs
    if max_len == 64:  # as test_pref_render measures for the explicit layout: 233 pairs equal once cut, 231 of
        # them because the prompt fills the 64 tokens (no response token left), 2 with some response token left
        assert len(_pref(imp)["pref.identical_pair:"]) == 233


def test_planted_defects_are_found_on_exactly_the_planted_rows(tok_dir):
    rows = copy.deepcopy(_v1())
    rows[2]["rejected_messages"] = copy.deepcopy(rows[2]["chosen_messages"])  # identical pair
    rows[4]["rejected_messages"][-1]["content"][0]["value"] = " \n "  # empty rejected answer
    rows[6]["rejected_messages"][1]["content"][0]["value"] = "another question"  # differs before the answer
    rows[8]["rejected_messages"][0]["content"][0]["value"] = "another system prompt"  # no shared turn
    res = _audit(rows, {"tokenizer": str(tok_dir)})
    assert _pref(res) == {"pref.identical_pair:": {2}, "pref.empty_response:rejected": {4}}
    skipped = {s.check: s.reason for s in res.skipped if s.check.startswith("pref.")}
    assert set(skipped) == {"pref.identical_pair", "pref.empty_response"}
    reason = skipped["pref.identical_pair"]
    assert "1 of 10 row(s) (0-based: 8): 'chosen_messages' and 'rejected_messages' share no leading message" in reason
    assert "1 of 10 row(s) (0-based: 6): 'chosen_messages' and 'rejected_messages' differ before the last assistant turn" in reason
    assert not any(s.error for s in res.skipped)


def test_without_transformers_the_rendered_pairs_are_a_skipped_entry(tok_dir, monkeypatch):
    monkeypatch.setattr(chat, "_import_transformers", lambda: None)
    rows = copy.deepcopy(_v1())
    rows[3]["rejected_messages"] = copy.deepcopy(rows[3]["chosen_messages"])
    res = _audit(rows, {"tokenizer": str(tok_dir)})
    reasons = {s.check: s.reason for s in res.skipped}
    for cid in ("pref.identical_pair", "pref.empty_response"):
        assert "the pairs as the chat template renders them are not judged" in reasons[cid]
        assert chat.CHAT_INSTALL in reasons[cid]
    assert _pref(res) == {"pref.identical_pair:": {3}}  # the conversations are still judged as data


HH = CHAT / "hh_rlhf/harmless-base_test.jsonl.gz"


def test_hh_rlhf_empty_answers_after_trls_implicit_prompt():
    """Anthropic HH-RLHF (PROVENANCE.md: 2312 rows {chosen, rejected}, whole transcripts, no
    identical pair): with no prompt column TRL cuts the shared start off as the prompt; 4 chosen
    transcripts end in an empty assistant turn ("...\\n\\nAssistant: "), so what is left is " "."""
    if not HH.is_file():
        pytest.skip("hh_rlhf not present")
    rows = [json.loads(line) for line in gzip.open(HH, "rt", encoding="utf-8")]
    assert len(rows) == 2312 and not any(r["chosen"] == r["rejected"] for r in rows)
    want = {side: {i for i, r in enumerate(rows) if not trl_extract_prompt(r["chosen"], r["rejected"])[k].strip()}
            for k, side in ((1, "chosen"), (2, "rejected"))}
    assert want == {"chosen": {86, 516, 925, 1103}, "rejected": set()}  # measured when written
    assert all(rows[i]["chosen"].endswith("\n\nAssistant: ") for i in want["chosen"])
    res = audit_frame(pl.DataFrame(rows), config_from_dict({}))
    assert _pref(res) == {"pref.empty_response:chosen": want["chosen"]}
    (f,) = [f for f in res.findings if f.check == "pref.empty_response"]
    assert f.details == {"after_prompt": 4}
    assert f.examples[0].row == 86 and "'chosen' blank after TRL's implicit prompt: ..." in f.examples[0].value


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), st.text(alphabet="ab \n", max_size=6)),
                          st.one_of(st.none(), st.text(alphabet="ab \n", max_size=6))), min_size=1, max_size=8))
def test_text_pairs_empty_response_matches_trls_cut(pairs):
    """Text pairs without a prompt column: a side fails when it is null/blank, or blank once TRL's
    implicit prompt is cut off (plain-Python reference)."""
    df = pl.DataFrame({"chosen": [c for c, _ in pairs], "rejected": [r for _, r in pairs]},
                      schema={"chosen": pl.String, "rejected": pl.String})
    res = audit_frame(df, config_from_dict({}))
    want: dict[str, set[int]] = {}
    for i, (c, r) in enumerate(pairs):
        cut = trl_extract_prompt(c, r) if c and r else None
        for k, side, v in ((1, "chosen", c), (2, "rejected", r)):
            if v is None or not v.strip() or (cut is not None and not cut[k].strip()):
                want.setdefault(f"pref.empty_response:{side}", set()).add(i)
        if c is not None and c == r:
            want.setdefault("pref.identical_pair:", set()).add(i)
    assert _pref(res) == want
