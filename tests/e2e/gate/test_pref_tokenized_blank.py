"""pref.empty_response on the real HH-RLHF pairs in TRL's tokenized form (../shared/chat/hh_rlhf,
PROVENANCE.md: 2312 rows; tokenized with the real GPT-2 BPE, ../shared/realdata/gpt2_tokenizer, eos
50256 appended, tests/helpers/prefpairs.py). Four chosen answers are blank (" " + eos); the text
form catches them, and with ``[tokens] tokenizer`` so does the tokenized form: exactly the rows
whose response decodes, eos left out, to whitespace only (computed here with the tokenizer)."""
from __future__ import annotations

import pytest
from checkhelp import audit_df
from conftest import REALDATA
from prefpairs import hh_tokenized_all

pytestmark = [pytest.mark.realdata, pytest.mark.slow]

EOS = 50256
GPT2 = REALDATA / "gpt2_tokenizer"


def _blank_rows(ids: list[list[int]], tok) -> list[int]:
    return [r for r, v in enumerate(ids) if tok.decode([i for i in v if i != EOS]).strip() == ""]


def test_hh_rlhf_tokenized_blank_answers(tmp_path):
    df, texts, tok = hh_tokenized_all()
    assert df.height == 2312
    want_c = _blank_rows(df["chosen_input_ids"].to_list(), tok)
    want_r = _blank_rows(df["rejected_input_ids"].to_list(), tok)
    # the tokens say what the text says: the same rows, and a handful of them
    assert want_c == [r for r, (c, _) in enumerate(texts) if not c.strip()] and 0 < len(want_c) < 10
    assert want_r == [r for r, (_, j) in enumerate(texts) if not j.strip()] == []
    assert want_c == [86, 516, 925, 1103]

    rep = audit_df(tmp_path / "tok", df, {"tokens": {"tokenizer": str(GPT2), "eos_token_id": EOS}})
    assert rep.shards[0].layout == "dpo" and rep.shards[0].rows == 2312
    got = {f.column: list(f.rows) for f in rep.findings if f.check == "pref.empty_response"}
    assert got == {"chosen_input_ids": want_c}  # no false alarm on the rejected side or the other rows
    assert not [s for s in rep.skipped if s["check"].startswith("pref.")]
    assert [f.check for f in rep.findings if f.severity in ("warn", "error") and f.check != "pref.empty_response"] == []

    # no tokenizer: the blank answers are not judged, and the report says which fact is missing
    rep = audit_df(tmp_path / "ids", df, {"tokens": {"eos_token_id": EOS}})
    assert not [f for f in rep.findings if f.check == "pref.empty_response"]
    (why,) = [s["reason"] for s in rep.skipped if s["check"] == "pref.empty_response"]
    assert "no [tokens] tokenizer" in why
