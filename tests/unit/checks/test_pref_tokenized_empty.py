"""pref.empty_response on TRL's tokenized pairs (``chosen_input_ids`` / ``rejected_input_ids``): a
response of special ids (pad/eos/bos/eot) and, with ``[tokens] tokenizer``, whitespace tokens only
is empty; without a tokenizer a skipped entry names the missing fact. The check against a
plain-Python reference on random rows, whose whitespace ids are computed here by decoding each
candidate id with the ``tokenizers`` library (GPT-2's real BPE, ../shared/realdata/gpt2_tokenizer)."""
from __future__ import annotations

import polars as pl
import pytest
from conftest import REALDATA
from hypothesis import example, given
from hypothesis import strategies as st
from refs import FRAME_SETTINGS as SETTINGS
from refs import frame_failing, rows, run, skip

tokenizers = pytest.importorskip("tokenizers")
GPT2 = REALDATA / "gpt2_tokenizer"
pytestmark = pytest.mark.skipif(not GPT2.is_dir(), reason="../shared/realdata is not present")

EOS = 50256  # GPT-2's <|endoftext|>
#: ids the random rows draw from: whitespace tokens (" ", "\n", "\n\n", "\t"), eos, words, id 0 ("!")
POOL = [220, 198, 628, 197, EOS, 262, 0, 1212, 50]
KEY = {"chosen": "pref.empty_response:chosen_input_ids", "rejected": "pref.empty_response:rejected_input_ids"}


def _tok():
    return tokenizers.ByteLevelBPETokenizer(str(GPT2 / "vocab.json"), str(GPT2 / "merges.txt"))


def _whitespace(ids) -> set[int]:
    """The ids of ``ids`` whose token decodes (alone) to whitespace only."""
    tok = _tok()
    return {i for i in ids if tok.decode([i]).strip() == "" and tok.decode([i]) != "\ufffd"}


def _frame(chosen, rejected, dtype=pl.Int64) -> pl.DataFrame:
    ids = pl.List(dtype)
    return pl.DataFrame({"prompt_input_ids": [[100, 25]] * len(chosen), "chosen_input_ids": chosen,
                         "rejected_input_ids": rejected},
                        schema={"prompt_input_ids": ids, "chosen_input_ids": ids, "rejected_input_ids": ids})


def _ref_empty(row, allowed: set[int]) -> bool:
    """Plain Python: null, empty, or every id one of ``allowed`` (a null id is not)."""
    return row is None or all(i is not None and i in allowed for i in row)


CONFIGS = {  # name -> (config, the ids a blank response may hold, computed here)
    "tokenizer+eos": ({"tokens": {"tokenizer": str(GPT2), "eos_token_id": EOS}}, lambda: _whitespace(POOL) | {EOS}),
    "tokenizer": ({"tokens": {"tokenizer": str(GPT2)}}, lambda: _whitespace(POOL)),  # GPT-2's folder declares no eos
    "eos+pad": ({"tokens": {"eos_token_id": EOS, "pad_token_id": 0}}, lambda: {EOS, 0}),
    "nothing": ({}, lambda: set()),
}
id_rows = st.one_of(st.none(), st.lists(st.one_of(st.sampled_from(POOL), st.none()), max_size=5))


@SETTINGS
@given(pairs=st.lists(st.tuples(id_rows, id_rows), min_size=1, max_size=8),
       which=st.sampled_from(sorted(CONFIGS)), dtype=st.sampled_from([pl.Int64, pl.Int32, pl.UInt16, pl.UInt32]))
@example(pairs=[([220, EOS], [EOS]), ([628, 198], [262, EOS]), ([None, 220], [])], which="tokenizer+eos", dtype=pl.UInt16)
@example(pairs=[([EOS, 0], [220, EOS]), ([0, 262], [None])], which="eos+pad", dtype=pl.Int32)
def test_tokenized_empty_matches_reference(pairs, which, dtype):
    chosen, rejected = [c for c, _ in pairs], [r for _, r in pairs]
    cfg, allowed = CONFIGS[which]
    got = frame_failing(_frame(chosen, rejected, dtype), cfg)
    ok = allowed()
    assert got.get(KEY["chosen"], set()) == {r for r, v in enumerate(chosen) if _ref_empty(v, ok)}
    assert got.get(KEY["rejected"], set()) == {r for r, v in enumerate(rejected) if _ref_empty(v, ok)}


def test_blank_answer_caught_only_with_the_tokenizer():
    tok = _tok()
    blank = tok.encode(" ").ids + [EOS]  # HH-RLHF's blank answer: " " then eos
    assert blank == [220, EOS]
    df = _frame([blank, tok.encode(" Sure.").ids + [EOS], [EOS]], [tok.encode(" No.").ids + [EOS]] * 3)
    res = run(df, {"tokens": {"tokenizer": str(GPT2), "eos_token_id": EOS}})
    assert rows(res, KEY["chosen"]) == [0, 2] and rows(res, KEY["rejected"]) == []
    assert skip(res, "pref.empty_response") is None
    f = next(f for f in res.findings if f.check == "pref.empty_response")
    assert "only special and whitespace tokens" in f.message

    res = run(df, {"tokens": {"eos_token_id": EOS}})  # no tokenizer: eos alone is judged, " " + eos is not
    assert rows(res, KEY["chosen"]) == [2]
    assert "only special ids" in next(f for f in res.findings if f.check == "pref.empty_response").message
    why = skip(res, "pref.empty_response")
    assert why is not None and "no [tokens] tokenizer" in why and f"special ids [{EOS}]" in why

    res = run(df)  # nothing known: only empty lists
    assert rows(res, KEY["chosen"]) == []
    why = skip(res, "pref.empty_response")
    assert why is not None and "no [tokens] tokenizer" in why and "eos_token_id" in why and "no id" in why


def test_text_pairs_get_no_tokenizer_note():
    res = run({"chosen": ["a", " "], "rejected": ["b", "c"]})
    assert rows(res, "pref.empty_response:chosen") == [1]
    assert skip(res, "pref.empty_response") is None


def test_sentencepiece_only_tokenizer_says_so(tmp_path):
    """A tokenizer folder holding only a SentencePiece model: its vocabulary is not read, so the
    special ids are judged and the skipped entry names the model, not a missing tokenizer."""
    (tmp_path / "tokenizer.model").write_bytes(b"\x00")
    df = _frame([[220, EOS], [EOS]], [[262, EOS]] * 2)
    res = run(df, {"tokens": {"tokenizer": str(tmp_path), "eos_token_id": EOS}})
    assert rows(res, KEY["chosen"]) == [1]
    why = skip(res, "pref.empty_response")
    assert why is not None and "SentencePiece" in why and "no [tokens] tokenizer" not in why
