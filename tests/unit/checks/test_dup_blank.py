"""Rows whose content is all blank (an empty or whitespace-only text, an empty token sequence, a
conversation with no turn or only blank turns) are the empty checks' findings, once: never
dup.exact_in_shard / dup.exact_across_shards / dup.split_overlap repeats of each other. Real repeats
of non-blank content stay repeats. Expected rows are computed here from the data."""
from __future__ import annotations

import json

import pytest
from dshelp import by_check, one, run, write

import datacheck

#: blank texts both Python's str.strip and Unicode White_Space agree on, U+3000 and U+00A0 included
BLANKS = ["", "  ", "\t\n", "\u3000", "\u00a0 ", "  "]


def _repeats(values: list) -> list[int]:
    """Rows whose (hashable) value occurs in an earlier row."""
    seen, out = set(), []
    for k, v in enumerate(values):
        if v in seen:
            out.append(k)
        seen.add(v)
    return out


def _blank(t: str | None) -> bool:
    return t is None or t.strip() == ""


TEXTS = ["a cat", *BLANKS[:3], "a cat", BLANKS[3], "dog", BLANKS[4], "dog", BLANKS[5], "a cat"]


@pytest.mark.parametrize("labelled", [False, True])  # no label: the fused key path; a label: the row hashes
def test_blank_texts_are_empty_text_only_and_real_repeats_stay(tmp_path, labelled):
    data = {"text": TEXTS, **({"label": [0] * len(TEXTS)} if labelled else {})}
    write(tmp_path, "t.parquet", data)
    rep = run(tmp_path)
    blank = [k for k, t in enumerate(TEXTS) if _blank(t)]
    real = [k for k in _repeats(TEXTS) if not _blank(TEXTS[k])]
    assert one(rep, "empty.text").rows == tuple(blank)
    assert one(rep, "dup.exact_in_shard").rows == tuple(real) == (4, 8, 10)


def test_empty_token_sequences_are_empty_sequence_only(tmp_path):
    ids = [[5, 6], [], [], [7], [5, 6], [], [7]]
    write(tmp_path, "t.parquet", {"input_ids": ids, "attention_mask": [[1] * len(r) for r in ids]})
    rep = run(tmp_path)
    assert one(rep, "empty.sequence").rows == tuple(k for k, r in enumerate(ids) if not r)
    key = [tuple(r) for r in ids]
    assert one(rep, "dup.exact_in_shard").rows == tuple(k for k in _repeats(key) if ids[k]) == (4, 6)


def test_chat_rows_with_no_or_only_blank_turns_are_not_repeats(tmp_path):
    hi = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    blank_turns = [{"role": "user", "content": " "}, {"role": "assistant", "content": "\u3000"}]
    half = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": ""}]
    convs = [hi, [], blank_turns, [], blank_turns, hi, half, half]
    (tmp_path / "c.jsonl").write_text("".join(json.dumps({"messages": m}) + "\n" for m in convs))
    rep = run(tmp_path)
    all_blank = [k for k, m in enumerate(convs) if all(_blank(t["content"]) for t in m)]
    key = [json.dumps(m) for m in convs]
    # a conversation with a real turn (hi + an empty answer) repeated is a repeat as well
    assert one(rep, "dup.exact_in_shard").rows == tuple(k for k in _repeats(key) if k not in all_blank) == (5, 7)
    assert set(all_blank) <= (set(one(rep, "sft.no_assistant_turn").rows) | set(by_check(rep, "sft.empty_turn")[0].rows))


def test_blank_rows_match_nothing_across_shards_and_splits(tmp_path):
    a = ["x1", "", "  ", "x2"]
    b = ["x2", "", "\u3000", "  ", "x3"]
    write(tmp_path / "d", "a.parquet", {"text": a})
    write(tmp_path / "d", "b.parquet", {"text": b})
    rep = run(tmp_path / "d")
    f = one(rep, "dup.exact_across_shards")
    real = [k for k, t in enumerate(b) if t in a and not _blank(t)]
    assert f.count == len(real) == 1 and [e.row for e in f.examples] == real
    assert not by_check(rep, "dup.exact_in_shard")
    # --against: the blank eval rows are no train/eval leak
    e = ["  ", "x3", "", "x2", "\u3000"]
    write(tmp_path / "eval", "e.parquet", {"text": e})
    rep = datacheck.audit(str(tmp_path / "eval"), config={}, against=str(tmp_path / "d"), fail_on="never")
    s = one(rep, "dup.split_overlap")
    leaked = [k for k, t in enumerate(e) if t in a + b and not _blank(t)]
    assert s.count == len(leaked) == 2 and sorted(x.row for x in s.examples) == leaked


def test_a_blank_text_beside_real_tokens_is_content(tmp_path):
    """Not every content column blank: the token ids hold the row's content, so repeats are repeats."""
    write(tmp_path, "t.parquet", {"text": ["", "", " "], "input_ids": [[3, 4], [3, 4], [9]]})
    rep = run(tmp_path)
    assert one(rep, "dup.exact_in_shard").rows == (1,)
