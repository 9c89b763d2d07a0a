"""A check that does not apply to a shard's form of its layout is counted as not applicable, never
listed as skipped for a missing column (:data:`datacheck.model.layouts.OPTIONAL_ROLES`): token checks
on a text classifier's text-only rows, ``empty.text`` / ``labels.*`` / ``sft.*`` on preference pairs.
A check that applies but lacks a fact stays a named skip.

Material: GLUE SST-2 (Vietnamese) test split (../shared/realdata/sst2_vi_glue_parquet: sentence, label,
idx; PROVENANCE.md: 1,821 rows), dkhate tokenized with mBERT (../shared/realdata/dkhate_danish_offensive/
dkhate_mbert: label, input_ids, token_type_ids, attention_mask; every row padded to 128), HH-RLHF pairs
(../shared/chat/hh_rlhf) as text and as TRL's token ids."""
from __future__ import annotations

import gzip
import json
import shutil

import polars as pl
import pyarrow.parquet as pq
import pytest
from checkhelp import audit_df, findings, skipped_reason
from conftest import REALDATA, ROOT, SHARED
from prefpairs import hh_tokenized_pairs

import datacheck
from datacheck.checks.registry import CHECKS

SST2 = REALDATA / "sst2_vi_glue_parquet" / "test-00000-of-00001.parquet"
MBERT = REALDATA / "dkhate_danish_offensive" / "dkhate_mbert" / "train"
HH = SHARED / "chat" / "hh_rlhf" / "harmless-base_test.jsonl.gz"
#: what a skip for a missing token column names
TOKEN_WORDS = ("input_ids", "attention_mask", "token_type_ids", "token labels", "position_ids")


def _shard_checks() -> set[str]:
    return {cid for cid, spec in CHECKS.items() if spec.shard is not None}


def _accounted(rep) -> None:
    """Every shard-level check either ran, was skipped with a reason, or is counted as not applicable."""
    sh = rep.shards[0]
    skipped = {s["check"] for s in rep.skipped if s["shards"]}
    assert sh.not_applicable + len(skipped & _shard_checks()) <= len(_shard_checks())


def test_text_only_classification_rows_have_no_token_skips(tmp_path):
    if not SST2.is_file():
        pytest.skip("../shared/realdata is not present")
    assert pq.ParquetFile(SST2).metadata.num_rows == 1821  # PROVENANCE.md
    shutil.copy(SST2, tmp_path / "test.parquet")
    rep = datacheck.audit(str(tmp_path), config={"tokens": {"vocab_size": 30_522}, "labels": {"num_classes": 2,
                                                                                              "ignore_index": -100}})
    assert rep.shards[0].layout == "text_classification"
    token_skips = [(s["check"], s["reason"]) for s in rep.skipped if any(w in s["reason"] for w in TOKEN_WORDS)]
    assert token_skips == []
    names = {"tokens.out_of_vocab", "empty.sequence", "mask.non_binary", "padding.token_not_pad",
             "empty.no_supervised_tokens", "content.periodic_tokens", "length.mismatch"}
    assert not names & {s["check"] for s in rep.skipped}
    assert rep.shards[0].not_applicable >= len(names)
    _accounted(rep)


def test_tokenized_classification_rows_keep_token_checks_and_their_named_skips(tmp_path):
    if not MBERT.is_dir():
        pytest.skip("../shared/realdata is not present")
    shutil.copy(MBERT / "data-00000-of-00001.arrow", tmp_path / "train.arrow")
    rep = datacheck.audit(str(tmp_path), config={"tokens": {"vocab_size": 119_547}})  # mBERT's vocabulary
    assert rep.shards[0].layout == "text_classification"
    assert findings(rep, "tokens.out_of_vocab") == []  # PROVENANCE.md: max id 110,794 < 119,547
    assert "tokens.out_of_vocab" not in {s["check"] for s in rep.skipped}
    # the ids judged against MiniLM's 30,522: the real wrong-tokenizer case
    rep = datacheck.audit(str(tmp_path), config={"tokens": {"vocab_size": 30_522}})
    assert findings(rep, "tokens.out_of_vocab")[0].details["max_id"] == 110_794
    # applies, lacks a fact: a named skip
    rep = datacheck.audit(str(tmp_path), config={})
    assert skipped_reason(rep, "tokens.out_of_vocab") == "[tokens] vocab_size is not set"
    # the token form holds no text: empty.text does not apply
    assert "empty.text" not in {s["check"] for s in rep.skipped}


def _hh_text(n: int) -> list[dict]:
    if not HH.is_file():
        pytest.skip("../shared is not present")
    with gzip.open(HH, "rt", encoding="utf-8") as f:
        return [json.loads(line) for _, line in zip(range(n), f)]


@pytest.mark.parametrize("form", ["text", "tokens"])
def test_preference_pairs_have_no_label_text_or_conversation_skips(tmp_path, form):
    rows = pl.DataFrame(_hh_text(50)) if form == "text" else hh_tokenized_pairs(50)
    rep = audit_df(tmp_path, rows, {"tokens": {"vocab_size": 50_257}, "labels": {"ignore_index": -100}})
    assert rep.shards[0].layout == "dpo"
    skipped = {s["check"] for s in rep.skipped}
    assert not skipped & {"empty.text", "labels.null", "labels.out_of_range", "labels.unexpected_sentinel",
                          "sft.empty_turn", "sft.role_order", "length.mismatch"}
    # the token checks: not applicable to strings, run on TRL's ids
    assert ("tokens.out_of_vocab" in skipped) is False
    assert [f.check for f in rep.findings if f.severity != "info"] == []
    _accounted(rep)


def test_sample_data_token_rows_have_no_text_or_delimiter_skips():
    """sample_data's lm_clean (sft_tokenized: ids, mask, labels that hide the prompt) holds no text and no
    assistant mask; tokens/ids_int16.parquet (packed_lm by group_texts) no document delimiters."""

    rep = datacheck.audit(str(ROOT / "sample_data" / "lm_clean"), config=str(ROOT / "sample_data" / "datacheck.toml"))
    assert {s.layout for s in rep.shards} == {"sft_tokenized"}
    assert not {"empty.text", "sft.assistant_mask_empty"} & {s["check"] for s in rep.skipped}
    rep = datacheck.audit(str(ROOT / "sample_data" / "defects" / "tokens" / "ids_int16.parquet"), config={})
    assert rep.shards[0].layout == "packed_lm"
    assert not {"packing.boundary_mismatch", "packing.position_ids_not_reset"} & {s["check"] for s in rep.skipped}
