"""TRL's tokenized preference pairs (``DPOTrainer.tokenize_row``: ``prompt_input_ids``,
``chosen_input_ids``, ``rejected_input_ids``) are ``chosen``/``rejected`` roles: the shard is ``dpo``
and the ``pref.*`` rules judge it (it was ``unknown`` and passed with an identical pair and an empty
response in it: a miss).

Material: HH-RLHF harmless-base test pairs (../shared/chat/hh_rlhf, PROVENANCE.md: 2312 rows, no
identical pair) cut at their last ``\\n\\nAssistant:`` into prompt and responses, tokenized with the
real GPT-2 BPE (../shared/realdata/gpt2_tokenizer), eos 50256 appended to each response."""
from __future__ import annotations

import polars as pl
from checkhelp import audit_df
from prefpairs import hh_tokenized_pairs

from datacheck.model.config import ColumnsSection
from datacheck.model.roles import resolve_roles

_pairs = hh_tokenized_pairs


def test_tokenized_pair_columns_are_the_pair_roles():
    ids = pl.List(pl.Int64)
    roles = resolve_roles(ColumnsSection(), {"prompt_input_ids": ids, "chosen_input_ids": ids,
                                             "rejected_input_ids": ids})
    assert (roles.chosen, roles.rejected) == ("chosen_input_ids", "rejected_input_ids")
    # a *_input_ids column of another dtype is no pair role; a text chosen column comes first
    assert resolve_roles(ColumnsSection(), {"chosen_input_ids": pl.String}).chosen is None
    both = resolve_roles(ColumnsSection(), {"chosen": pl.String, "chosen_input_ids": ids})
    assert both.chosen == "chosen"


def test_real_tokenized_pairs_are_dpo_clean_and_planted_defects_are_found(tmp_path):
    df = _pairs(200)
    rep = audit_df(tmp_path / "clean", df)
    assert rep.shards[0].layout == "dpo"
    assert [f.check for f in rep.findings if f.severity in ("warn", "error")] == []
    ch = df["chosen_input_ids"].to_list()
    ch[5] = df["rejected_input_ids"][5].to_list()  # an identical pair
    ch[7] = []  # an empty response
    rep = audit_df(tmp_path / "bad", df.with_columns(pl.Series("chosen_input_ids", ch)))
    got = {f.check: (list(f.rows), f.column) for f in rep.findings}
    assert got["pref.identical_pair"][0] == [5]
    assert got["pref.empty_response"] == ([7], "chosen_input_ids")
