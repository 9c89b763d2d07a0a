"""A check whose facts are missing is listed under ``skipped`` with its reason (never a silent pass)."""
from __future__ import annotations

import json

import polars as pl
from checkhelp import audit_df, findings, one


def test_missing_facts_are_reported_per_shard(tmp_path):
    df = pl.DataFrame({"input_ids": [[1, 2, 999999], [0, 0]], "attention_mask": [[1, 1, 1], [0, 0]],
                       "labels": [[1, 2, 3], [-100, -100]], "label": [0, 7]})
    rep = audit_df(tmp_path, df)
    reasons = {s["check"]: s for s in rep.skipped}
    pairs = {(s["check"], s["reason"]) for s in rep.skipped}
    assert ("labels.out_of_range", "token labels 'labels': no [tokens] vocab_size or [labels] num_classes") in pairs
    want = {
        "tokens.out_of_vocab": "[tokens] vocab_size is not set",
        "tokens.dtype_overflow": "[tokens] vocab_size is not set",
        "length.over_max": "[tokens] max_seq_len is not set",
        "labels.out_of_range": "no [labels] num_classes or classes for label column 'label'",
        "labels.unseen_class": "no [labels] num_classes or classes",
        "padding.token_not_pad": "needs input_ids and [tokens] pad_token_id",
        "padding.eos_unsupervised": "needs [tokens] pad_token_id and eos_token_id",
        "empty.text": "no text column (set [columns] text)",
    }
    for cid, reason in want.items():
        assert (cid, reason) in pairs, cid
        assert findings(rep, cid) == [], cid
    # shard-level skips name the shard; dataset-level ones have no shard
    assert reasons["tokens.out_of_vocab"]["shards"] == ["shard.parquet"]
    assert reasons["labels.unseen_class"]["shards"] == []
    # the checks that had their facts ran
    assert {f.check for f in rep.findings} >= {"empty.all_padding", "empty.no_supervised_tokens"}


def test_skipped_is_in_the_json_report(tmp_path):
    # causal-LM rows are token ids: a text-only shard declared so lacks them (a named skip)
    rep = audit_df(tmp_path, {"text": ["a"]}, {"dataset": {"layout": "causal_lm"}})
    d = json.loads(rep.to_json())
    checks = [s["check"] for s in d["skipped"]]
    assert "tokens.out_of_vocab" in checks and "empty.sequence" in checks
    assert checks == sorted(checks)
    assert all(set(s) == {"check", "reason", "shards"} for s in d["skipped"])


def test_a_class_label_of_list_dtype_is_a_dtype_finding(tmp_path):
    # semantics changed: the wrong dtype is a schema.dtype error, not only a skip;
    # labels.null still runs (a missing label is missing whatever the dtype)
    df = pl.DataFrame({"y": [[1], [2]]})
    rep = audit_df(tmp_path, df, {"columns": {"label": "y"}, "labels": {"num_classes": 2}})
    f = one(rep, "schema.dtype", "y")
    assert f.severity == "error" and not rep.passed
    assert f.details["role"] == "label" and f.details["actual"] == "List(Int64)"
    reasons = {s["check"]: s["reason"] for s in rep.skipped}
    for cid in ("labels.unexpected_sentinel", "labels.out_of_range"):
        assert reasons[cid] == ("label column 'y' has dtype List(Int64), not a scalar class label "
                                "(token labels belong in [columns] labels) (reported as schema.dtype)")
    assert "labels.null" not in reasons
    assert reasons["labels.unseen_class"] == ("label column 'y' has a dtype that cannot serve a class label "
                                              "(reported as schema.dtype)")


def test_an_expression_that_fails_on_a_shard_is_skipped(tmp_path):
    # a text role on a struct column: empty.text cannot run, and says so
    df = pl.DataFrame({"t": [{"a": 1}]})
    rep = audit_df(tmp_path, df, {"columns": {"text": "t"}})
    assert "not a string" in {s["check"]: s["reason"] for s in rep.skipped}["empty.text"]
