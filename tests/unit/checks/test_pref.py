"""pref.identical_pair / pref.empty_response on inline frames and on the real hh-rlhf pairs."""
from __future__ import annotations

import polars as pl
from conftest import SHARED
from refs import rows, run

import datacheck
from datacheck.model.findings import show_value


def test_pref_identical_and_empty_text():
    res = run({"chosen": ["a good answer", "same", "  ", None], "rejected": ["bad", "same", "x", "y"]})
    assert rows(res, "pref.identical_pair") == [1]
    assert rows(res, "pref.empty_response:chosen") == [2, 3]
    assert rows(res, "pref.empty_response:rejected") == []


def test_pref_identical_after_truncation():
    df = pl.DataFrame({"chosen": [[1, 2, 3, 4], [1, 2, 3]], "rejected": [[1, 2, 3, 9], [1, 2, 4]]})
    assert rows(run(df), "pref.identical_pair") == []
    res = run(df, {"tokens": {"max_seq_len": 3}})
    assert rows(res, "pref.identical_pair") == [0]
    res = run(df, {"tokens": {"max_seq_len": 2, "truncation_side": "left"}})
    assert rows(res, "pref.identical_pair") == []


def test_pref_on_the_real_hh_rlhf_pairs_gives_no_false_alarm():
    # PROVENANCE.md: 2312 pairs, no identical pair
    rep = datacheck.audit(str(SHARED / "chat/hh_rlhf/harmless-base_test.jsonl.gz"))
    assert [s.rows for s in rep.shards] == [2312]
    assert not [s for s in rep.skipped if s["check"].startswith("pref.")]
    # the only pref finding: 4 chosen transcripts ending in an empty assistant turn, blank once TRL's
    # implicit prompt is cut off (test_pref_implicit.py::test_hh_rlhf_empty_answers_after_trls_implicit_prompt)
    assert [(f.check, f.count, f.details) for f in rep.findings if f.check.startswith("pref.")] == \
        [("pref.empty_response", 4, {"after_prompt": 4})]


def test_message_responses_show_their_text_as_the_example():
    """LLaMA-Factory's sharegpt pairs (``chosen: {from, value}``) and lists of messages: the example of
    an empty or identical pair is the response's text (a new user's trial saw ``row 3: None`` with a
    chat config and no example row at all without one)."""
    answer = "A long answer about preparing for an interview. " * 6
    conv = [{"from": "human", "value": "How do I prepare?"}]
    df = pl.DataFrame({
        "conversations": [conv] * 3,
        "chosen": [{"from": "gpt", "value": answer}, {"from": "gpt", "value": "  "}, {"from": "gpt", "value": "fine"}],
        "rejected": [{"from": "gpt", "value": answer}, {"from": "gpt", "value": "no"}, {"from": "gpt", "value": "bad"}],
    })
    res = run(df)
    assert rows(res, "pref.identical_pair") == [0] and rows(res, "pref.empty_response:chosen") == [1]
    shown = {f.check: [(e.row, e.value) for e in f.examples] for f in res.findings}
    assert shown["pref.identical_pair"] == [(0, show_value(answer[:200]))]
    assert shown["pref.empty_response"] == [(1, show_value("  "))]
    # a list of messages: the last one's text
    msgs = pl.DataFrame({"chosen": [[{"role": "user", "content": "q"}, {"role": "assistant", "content": "same"}]],
                         "rejected": [[{"role": "user", "content": "q"}, {"role": "assistant", "content": "same"}]]})
    res = run(msgs)
    assert [(e.row, e.value) for f in res.findings if f.check == "pref.identical_pair" for e in f.examples] == [
        (0, show_value("same"))]
