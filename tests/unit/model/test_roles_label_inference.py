"""A float ``label`` with a class domain is a class label; Hugging Face token
classification (``tokens`` + ``ner_tags``/``pos_tags``/``chunk_tags``) gets its roles inferred."""
from __future__ import annotations

import polars as pl

from datacheck.engine.shard import audit_frame
from datacheck.model.config import ColumnsSection, config_from_dict
from datacheck.model.roles import resolve_roles


def _by_check(res):
    return {f.check: f for f in res.findings}


def test_float_label_with_num_classes_is_a_class_label():
    df = pl.DataFrame({"text": ["a", "b", "c", "d", "e"], "label": [6.0, 2.5, -1.0, 1.0, 0.0]})
    res = audit_frame(df, config_from_dict({"labels": {"num_classes": 3}}))
    assert res.roles["label"] == {"columns": "label", "inferred": True}
    assert "target" not in res.roles
    got = _by_check(res)
    # 6.0 is class 6 (>= num_classes 3); 2.5 is no class index at all
    assert got["labels.out_of_range"].rows == (0, 1)
    assert "2.5" in got["labels.out_of_range"].message or "integer" in got["labels.out_of_range"].message
    assert got["labels.unexpected_sentinel"].rows == (2,)


def test_float_label_with_classes_is_a_class_label():
    df = pl.DataFrame({"text": ["a", "b"], "label": [1.0, 0.5]})
    res = audit_frame(df, config_from_dict({"labels": {"classes": ["neg", "pos"]}}))
    assert _by_check(res)["labels.out_of_range"].rows == (1,)


def test_float_label_without_a_class_domain_stays_a_regression_target():
    roles = resolve_roles(ColumnsSection(), {"label": pl.Float64()})
    assert roles.label is None and roles.target == ("label",)


def test_token_classification_roles_are_inferred():
    schema = {"id": pl.String(), "tokens": pl.List(pl.String()), "pos_tags": pl.List(pl.Int64()),
              "chunk_tags": pl.List(pl.Int64()), "ner_tags": pl.List(pl.Int64())}
    roles = resolve_roles(ColumnsSection(), schema)
    assert roles.text == ("tokens",)
    assert roles.labels == "ner_tags"
    assert roles.aligned == (("tokens", "ner_tags", "pos_tags", "chunk_tags"),)
    assert {"text", "labels", "aligned"} <= roles.inferred


def test_token_classification_checks_run():
    df = pl.DataFrame({"tokens": [["EU", "rejects", "German"], ["Peter", "Blackburn"], ["\u200b"]],
                       "ner_tags": [[3, 0, 7], [1, 2, 9], [0]]})
    res = audit_frame(df, config_from_dict({"labels": {"num_classes": 9}}))
    got = _by_check(res)
    assert got["length.mismatch"].rows == (1,)
    assert got["labels.out_of_range"].rows == (1,) and got["labels.out_of_range"].column == "ner_tags"
    assert got["empty.text"].rows == (2,)
