"""Integer role columns stored wider than 64 bits or as integral decimals, as the audit reads
them (:func:`datacheck.model.roles.cast_expr`): each value checked by the role's rules, a value
beyond Int64 at its nearest bound, never a null and never an unchecked column."""
from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq

import datacheck


def _by(rep, check):
    return [f for f in rep.findings if f.check == check]


def test_a_decimal_class_label_is_a_class_label(tmp_path):
    """``label`` as ``decimal(38, 0)`` (how Snowflake/Oracle ``NUMBER(38, 0)`` reaches parquet): the
    class label, 7 outside ``[0, 3)``; it was no role, and the shard passed unchecked."""
    path = tmp_path / "cls.parquet"
    labels = [0, 1, 7, 1]
    pq.write_table(pa.table({"text": ["a", "b", "c", "d"],
                             "label": pa.array([Decimal(v) for v in labels], pa.decimal128(38, 0))}), path)
    rep = datacheck.audit(str(path), config={"labels": {"num_classes": 3}}, fail_on="never")
    (f,) = _by(rep, "labels.out_of_range")
    assert f.column == "label" and f.rows == tuple(i for i, v in enumerate(labels) if not 0 <= v < 3)
    assert f.examples[0].value == "7"
    (unseen,) = _by(rep, "labels.unseen_class")
    assert unseen.details["unseen"] == sorted(set(range(3)) - set(labels))


def test_decimal_token_ids_are_token_ids(tmp_path):
    path = tmp_path / "ids.parquet"
    rows = [[1, 2], [3, 10**30]]
    pq.write_table(pa.table({"input_ids": pa.array([[Decimal(v) for v in r] for r in rows],
                                                   pa.list_(pa.decimal128(38, 0)))}), path)
    rep = datacheck.audit(str(path), config={"tokens": {"vocab_size": 100}}, fail_on="never")
    (f,) = _by(rep, "tokens.out_of_vocab")
    assert f.rows == (1,) and f.examples[0].value == f"'first at position 1 of 2: {2**63 - 1}'"
