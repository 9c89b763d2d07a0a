"""``tokens.out_of_vocab`` and ``tokens.dtype_overflow`` judge every token-id list column of the row,
not only ``input_ids``: TRL's tokenized preference pairs (``prompt_input_ids``, ``chosen_input_ids``,
``rejected_input_ids``) are looked up in the same embedding (they were never checked: dpo is not a
tokenized layout). Rows of text only keep the checks not applicable.

Material: HH-RLHF harmless-base test pairs (../shared/chat/hh_rlhf, PROVENANCE.md: 2312 rows) tokenized
with the real GPT-2 BPE (../shared/realdata/gpt2_tokenizer, 50,257 ids), as
tests/unit/model/test_roles_pref_tokenized.py builds them."""
from __future__ import annotations

import polars as pl
from checkhelp import audit_df, findings, one
from prefpairs import hh_tokenized_pairs as _pairs

VOCAB = 50_257  # PROVENANCE.md: GPT-2's vocabulary
CFG = {"tokens": {"vocab_size": VOCAB}}
COLS = ("prompt_input_ids", "chosen_input_ids", "rejected_input_ids")


def test_an_id_past_the_vocabulary_in_rejected_input_ids_is_found(tmp_path):
    df = _pairs(120)
    # the real ids lie inside GPT-2's vocabulary (computed here, not read back)
    assert all(0 <= min(map(min, df[c].to_list())) and max(map(max, df[c].to_list())) < VOCAB for c in COLS)
    rep = audit_df(tmp_path / "clean", df, CFG)
    assert rep.shards[0].layout == "dpo"
    assert findings(rep, "tokens.out_of_vocab") == [] and findings(rep, "tokens.dtype_overflow") == []
    assert not {"tokens.out_of_vocab", "tokens.dtype_overflow"} & {s["check"] for s in rep.skipped}
    rej = df["rejected_input_ids"].to_list()
    rej[17][3] = VOCAB  # one past the last id
    pr = df["prompt_input_ids"].to_list()
    pr[40][0] = -1
    bad = df.with_columns(pl.Series("rejected_input_ids", rej), pl.Series("prompt_input_ids", pr))
    rep = audit_df(tmp_path / "bad", bad, CFG)
    f = one(rep, "tokens.out_of_vocab", "rejected_input_ids")
    assert (f.rows, f.severity, f.details["max_id"]) == ((17,), "error", VOCAB)
    assert one(rep, "tokens.out_of_vocab", "prompt_input_ids").rows == (40,)
    assert findings(rep, "tokens.out_of_vocab", "chosen_input_ids") == []


def test_an_id_column_too_narrow_for_the_vocabulary(tmp_path):
    df = _pairs(20).with_columns(pl.col("chosen_input_ids").cast(pl.List(pl.UInt16)))
    rep = audit_df(tmp_path, df, CFG)
    assert VOCAB - 1 <= 2**16 - 1 and findings(rep, "tokens.dtype_overflow") == []  # GPT-2's ids fit uint16
    rep = audit_df(tmp_path, df, {"tokens": {"vocab_size": 2**16 + 1}})
    f = one(rep, "tokens.dtype_overflow", "chosen_input_ids")
    assert f.details == {"dtype": "UInt16", "dtype_max": 2**16 - 1, "vocab_size": 2**16 + 1}


def test_text_pairs_hold_no_ids_the_checks_do_not_apply(tmp_path):
    rep = audit_df(tmp_path, {"prompt": ["p1", "p2"], "chosen": ["a", "b"], "rejected": ["c", "d"]}, CFG)
    assert rep.shards[0].layout == "dpo"
    assert not {s["check"] for s in rep.skipped} & {"tokens.out_of_vocab", "tokens.dtype_overflow"}
