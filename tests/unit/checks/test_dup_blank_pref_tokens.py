"""A preference pair already tokenized (TRL's ``chosen_input_ids`` / ``rejected_input_ids``) whose
responses are only whitespace tokens is blank for the dup.* checks, as the same pair in text (``" "``)
is: both are ``pref.empty_response``'s rows, never repeats of each other within or across shards
(datacheck/checks/dup/blank.py with pref.token_responses_blank). Which ids are whitespace is the
tokenizer's fact: without ``[tokens] tokenizer`` the dup checks say in a skipped entry that such pairs
are compared as content. The tokenized rows are the text rows encoded here by the real SmolLM-135M
tokenizer (../shared/chat, PROVENANCE.md: byte-level BPE, 49152 tokens); the expected repeats are
computed from the text pairs."""
from __future__ import annotations

import polars as pl
import pytest
from conftest import SHARED
from dshelp import by_check, one, run, write

tokenizers = pytest.importorskip("tokenizers")
SMOLLM = SHARED / "chat" / "tokenizers" / "smollm_135m"
pytestmark = pytest.mark.skipif(not (SMOLLM / "tokenizer.json").is_file(), reason="../shared/chat is not present")

PROMPTS = ["Q1", "Q1", "Q2", "Q2", "Q3", "Q3", "Q4", "Q1"]
CHOSEN = [" ", " ", "\n", "\n", "yes", "yes", "  ", " "]
REJECTED = ["  ", "  ", "\t", "\t", "no", "no", " ", "  "]


def _encode(texts: list[str]) -> list[list[int]]:
    tok = tokenizers.Tokenizer.from_file(str(SMOLLM / "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    return [tok.encode(t, add_special_tokens=False).ids for t in texts]


def _frames(prompts, chosen, rejected) -> tuple[pl.DataFrame, pl.DataFrame]:
    ids = pl.List(pl.Int64)
    tok = pl.DataFrame({"prompt_input_ids": _encode(prompts), "chosen_input_ids": _encode(chosen),
                        "rejected_input_ids": _encode(rejected)},
                       schema={"prompt_input_ids": ids, "chosen_input_ids": ids, "rejected_input_ids": ids})
    txt = pl.DataFrame({"prompt": prompts, "chosen": chosen, "rejected": rejected})
    return tok, txt


def _repeats_not_blank(pairs: list[tuple]) -> list[int]:
    """Rows whose pair occurs in an earlier row, leaving out pairs whose responses are both blank text."""
    seen, out = set(), []
    for k, p in enumerate(pairs):
        if p in seen and not all(not t.strip() for t in p[-2:]):
            out.append(k)
        seen.add(p)
    return out


def test_the_encoded_responses_are_whitespace_tokens():
    enc = _encode(CHOSEN + REJECTED)
    assert all(ids for ids in enc)  # no empty list: only the tokenizer tells these ids are blank
    assert [t for t, ids in zip(CHOSEN + REJECTED, enc) if not t.strip()] != []


def test_whitespace_token_pairs_are_blank_as_whitespace_text_pairs_are(tmp_path):
    tok, txt = _frames(PROMPTS, CHOSEN, REJECTED)
    write(tmp_path / "tok", "p.parquet", tok)
    write(tmp_path / "txt", "p.parquet", txt)
    cfg = {"tokens": {"tokenizer": str(SMOLLM)}}
    rep_tok, rep_txt = run(tmp_path / "tok", cfg), run(tmp_path / "txt")
    # text: the prompt conditions the pair, the responses are what is trained on (blank: both responses)
    want = _repeats_not_blank(list(zip(CHOSEN, REJECTED)))
    assert want == [5]  # row 5 repeats row 4's "yes"/"no"; the whitespace pairs are pref.empty_response's
    for rep in (rep_tok, rep_txt):
        assert one(rep, "dup.exact_in_shard").rows == tuple(want)
        blank = {k for k, (c, r) in enumerate(zip(CHOSEN, REJECTED)) if not c.strip()}
        got = {r for f in by_check(rep, "pref.empty_response") for r in f.rows}
        assert got == blank
    assert not [s for s in rep_tok.skipped if s["check"].startswith("dup.")
                and "whitespace" in s["reason"]]


def test_whitespace_token_pairs_are_no_copies_across_shards(tmp_path):
    tok, txt = _frames(PROMPTS, CHOSEN, REJECTED)
    for name, frame in (("tok", tok), ("txt", txt)):
        write(tmp_path / name, "a.parquet", frame.head(4))
        write(tmp_path / name, "b.parquet", frame.slice(4))
    cfg = {"tokens": {"tokenizer": str(SMOLLM)}}
    first = set(zip(CHOSEN[:4], REJECTED[:4]))
    want = [k - 4 for k in range(4, len(CHOSEN)) if (CHOSEN[k], REJECTED[k]) in first
            and (CHOSEN[k].strip() or REJECTED[k].strip())]
    assert want == []  # shard b shares only whitespace pairs with shard a
    for rep in (run(tmp_path / "tok", cfg), run(tmp_path / "txt")):
        assert by_check(rep, "dup.exact_across_shards") == []


def test_without_a_tokenizer_a_skipped_entry_says_whitespace_tokens_are_compared(tmp_path):
    tok, _ = _frames(PROMPTS, CHOSEN, REJECTED)
    write(tmp_path / "tok", "p.parquet", tok)
    rep = run(tmp_path / "tok")
    (s,) = [s for s in rep.skipped if s["check"] == "dup.exact_in_shard"]
    assert "no [tokens] tokenizer is set" in s["reason"] and "whitespace tokens" in s["reason"]
    # what is not judged is compared as content: the repeated whitespace-token pairs are repeats here
    pairs = list(zip(map(tuple, tok["chosen_input_ids"].to_list()), map(tuple, tok["rejected_input_ids"].to_list())))
    seen: set = set()
    want = []
    for k, p in enumerate(pairs):
        if p in seen:
            want.append(k)
        seen.add(p)
    assert one(rep, "dup.exact_in_shard").rows == tuple(want)
