"""``tokens.out_of_vocab``, ``tokens.dtype_overflow``, ``tokens.position_out_of_range`` and
``empty.sequence`` judge every token-id list column of the row, not only ``input_ids`` (the position
rule as the trainer reads a response: after its prompt): TRL's tokenized preference pairs (``prompt_input_ids``, ``chosen_input_ids``,
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


# ------------------------------------------------ tokens.position_out_of_range and empty.sequence on every id column
def _lens(df: pl.DataFrame, col: str) -> list[int]:
    return [len(x) for x in df[col].to_list()]


def test_positions_of_prompt_plus_response_past_the_table(tmp_path):
    """TRL's DPOTrainer feeds prompt_input_ids + chosen_input_ids (and + rejected_input_ids) as one
    sequence (concatenated_forward), so its positions run to len(prompt) + len(response) - 1: a table
    longer than every column alone can still be too short for the pair."""
    df = _pairs(300)
    p, c, r = _lens(df, "prompt_input_ids"), _lens(df, "chosen_input_ids"), _lens(df, "rejected_input_ids")
    k = max(max(p), max(c), max(r)) + 1  # no column alone runs past the table
    want_c = tuple(i for i in range(df.height) if p[i] + c[i] > k)
    want_r = tuple(i for i in range(df.height) if p[i] + r[i] > k)
    assert want_c and want_r  # the pairs do (computed from the data)
    rep = audit_df(tmp_path / "split", df, {"tokens": {"vocab_size": VOCAB, "max_position_embeddings": k},
                                            "report": {"max_examples": 300}})
    assert rep.shards[0].layout == "dpo"
    fc, fr = one(rep, "tokens.position_out_of_range", "chosen_input_ids"), one(rep, "tokens.position_out_of_range",
                                                                                 "rejected_input_ids")
    assert (fc.rows, fc.count, fr.rows, fr.count) == (want_c, len(want_c), want_r, len(want_r))
    assert fc.details["longest"] == max(p[i] + c[i] for i in range(df.height))
    assert "'prompt_input_ids' + 'chosen_input_ids'" in fc.message
    assert findings(rep, "tokens.position_out_of_range", "prompt_input_ids") == []
    # TRL before 0.12 stored each response with its prompt (chosen_input_ids = prompt + chosen): the
    # prompt is not counted twice
    full = df.with_columns(pl.concat_list("prompt_input_ids", "chosen_input_ids").alias("chosen_input_ids"),
                           pl.concat_list("prompt_input_ids", "rejected_input_ids").alias("rejected_input_ids"))
    rep = audit_df(tmp_path / "full", full, {"tokens": {"vocab_size": VOCAB, "max_position_embeddings": k},
                                             "report": {"max_examples": 300}})
    assert one(rep, "tokens.position_out_of_range", "chosen_input_ids").rows == want_c
    assert one(rep, "tokens.position_out_of_range", "rejected_input_ids").rows == want_r
    # a table as long as the longest pair: nothing
    rep = audit_df(tmp_path / "fits", df, {"tokens": {"vocab_size": VOCAB, "max_position_embeddings":
                                                      max(max(p[i] + c[i], p[i] + r[i]) for i in range(df.height))}})
    assert findings(rep, "tokens.position_out_of_range") == []
    assert "tokens.position_out_of_range" not in {s["check"] for s in rep.skipped}


def test_an_empty_token_id_list_in_any_column_is_an_empty_sequence(tmp_path):
    df = _pairs(60)
    assert min(min(_lens(df, c)) for c in COLS) > 0  # the real pairs hold tokens in every column
    rep = audit_df(tmp_path / "clean", df, CFG)
    assert findings(rep, "empty.sequence") == [] and "empty.sequence" not in {s["check"] for s in rep.skipped}
    rej, pr = df["rejected_input_ids"].to_list(), df["prompt_input_ids"].to_list()
    rej[5], pr[9] = [], []
    bad = df.with_columns(pl.Series("rejected_input_ids", rej, dtype=pl.List(pl.Int64)),
                          pl.Series("prompt_input_ids", pr, dtype=pl.List(pl.Int64)))
    rep = audit_df(tmp_path / "bad", bad, CFG)
    assert one(rep, "empty.sequence", "rejected_input_ids").rows == (5,)
    assert one(rep, "empty.sequence", "prompt_input_ids").rows == (9,)
    assert findings(rep, "empty.sequence", "chosen_input_ids") == []
    assert "rejected_input_ids" in one(rep, "empty.sequence", "rejected_input_ids").message


def test_kto_rows_whose_completion_holds_its_prompt(tmp_path):
    """TRL's KTOTrainer stores completion_input_ids as prompt + completion (the sequence it forwards):
    its length alone is judged, the prompt not counted twice; an empty completion is named."""
    df = _pairs(120)
    kto = pl.DataFrame({"prompt_input_ids": df["prompt_input_ids"],
                        "completion_input_ids": df.select(pl.concat_list("prompt_input_ids", "chosen_input_ids"))
                        .to_series(), "label": [True] * df.height})
    full = _lens(kto, "completion_input_ids")
    k = sorted(full)[-3]  # two rows longer (computed from the data; the real lengths are distinct at the top)
    want = tuple(i for i, n in enumerate(full) if n > k)
    lay: dict = {}  # recognized: completion_input_ids and a boolean label
    rep = audit_df(tmp_path / "kto", kto, {"tokens": {"vocab_size": VOCAB, "max_position_embeddings": k}})
    assert rep.shards[0].layout == "kto" and len(want) >= 2
    assert one(rep, "tokens.position_out_of_range", "completion_input_ids").rows == want
    comp = kto["completion_input_ids"].to_list()
    comp[3] = []
    rep = audit_df(tmp_path / "empty", kto.with_columns(pl.Series("completion_input_ids", comp,
                                                                  dtype=pl.List(pl.Int64))), {**CFG, **lay})
    assert one(rep, "empty.sequence", "completion_input_ids").rows == (3,)


def test_clean_tokenized_kto_rows_are_kto_and_pass(tmp_path):
    """HH-RLHF pairs as TRL's tokenized KTO rows (each chosen response desirable, each rejected one not):
    recognized as kto (they were tabular), no finding with the vocabulary given."""
    df = _pairs(150)
    halves = [pl.DataFrame({"prompt_input_ids": df["prompt_input_ids"], "completion_input_ids": df[c],
                            "label": [good] * df.height}) for c, good in (("chosen_input_ids", True),
                                                                           ("rejected_input_ids", False))]
    rep = audit_df(tmp_path, pl.concat(halves), CFG)
    assert rep.shards[0].layout == "kto" and rep.status == "pass"
    assert [f.check for f in rep.shards[0].findings] == []
