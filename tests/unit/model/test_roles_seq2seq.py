"""In an encoder-decoder (T5/BART) layout ``labels`` are the target sequence: they
align with the decoder columns when present, else with nothing; never with the encoder's input_ids.
Causal-LM and token-classification labels align with input_ids."""
from __future__ import annotations

import polars as pl
import pytest

from datacheck.engine.shard import audit_frame
from datacheck.model.config import config_from_dict

# T5 style: source ids/mask (length 5), target labels padded with -100 (length 3)
T5 = {"input_ids": [[13, 8, 4, 1, 0], [22, 5, 1, 0, 0]], "attention_mask": [[1, 1, 1, 1, 0], [1, 1, 1, 0, 0]],
      "labels": [[31, 1, -100], [7, 9, 1]]}


def _checks(res, check):
    return [f for f in res.findings if f.check == check]


def test_seq2seq_declared_labels_align_with_nothing():
    cfg = config_from_dict({"dataset": {"schema": "seq2seq"}, "tokens": {"pad_token_id": 0}})
    res = audit_frame(pl.DataFrame(T5), cfg)
    assert _checks(res, "length.mismatch") == []
    # the encoder pair still aligns
    bad = {**T5, "attention_mask": [[1, 1, 1, 1], [1, 1, 1, 0, 0]]}
    (f,) = _checks(audit_frame(pl.DataFrame(bad), cfg), "length.mismatch")
    assert f.rows == (0,) and "['input_ids', 'attention_mask']" in f.message
    # labels no longer compared with the encoder's mask position by position: the check judges the
    # decoder's padding (a trailing run of pad_token_id 0 in labels), which these rows do not have
    assert res.layout["name"] == "seq2seq" and "padding.label_not_ignored" not in res.not_applicable
    assert not [s for s in res.skipped if s.check == "padding.label_not_ignored"]
    assert _checks(res, "padding.label_not_ignored") == []


def test_seq2seq_equal_lengths_are_not_compared_with_the_encoder_mask():
    # source and target happen to have the same length: a padded source position is no reason to flag a label
    df = pl.DataFrame({"input_ids": [[5, 6, 0]], "attention_mask": [[1, 1, 0]], "labels": [[8, 9, 1]]})
    res = audit_frame(df, config_from_dict({"dataset": {"schema": "seq2seq"}}))
    assert _checks(res, "padding.label_not_ignored") == []


def test_seq2seq_decoder_columns_align_with_labels():
    df = pl.DataFrame({**T5, "decoder_input_ids": [[0, 31, 1], [0, 7]], "decoder_attention_mask": [[1, 1, 1], [1, 1]]})
    (f,) = _checks(audit_frame(df, config_from_dict({})), "length.mismatch")
    assert f.rows == (1,)
    assert "decoder_input_ids" in f.message and "labels" in f.message and "'input_ids'" not in f.message


def test_undeclared_seq2seq_rows_are_recognized():
    """Labels of another length than input_ids in every row: decoder targets, not a length defect."""
    res = audit_frame(pl.DataFrame(T5), config_from_dict({}))
    assert res.layout["name"] == "seq2seq" and res.layout["source"] == "recognized"
    assert _checks(res, "length.mismatch") == []


@pytest.mark.parametrize("cfg", [{"dataset": {"schema": "causal_lm"}}, {"dataset": {"layout": "causal_lm"}}])
def test_causal_lm_labels_still_align_with_input_ids(cfg):
    (f,) = _checks(audit_frame(pl.DataFrame(T5), config_from_dict(cfg)), "length.mismatch")
    assert f.rows == (0, 1)
    assert "seq2seq" in f.message  # the hint for users whose data is in fact seq2seq
