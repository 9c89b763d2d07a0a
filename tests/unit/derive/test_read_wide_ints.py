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


def _label_findings(rep):
    return sorted((f.check, f.rows) for f in rep.findings if f.column == "label")


def test_a_fractional_decimal_label_is_read_as_the_float_it_holds(tmp_path):
    """``label`` as ``decimal(10, 2)`` with ``num_classes`` set: the class label, judged as the same
    values in a float64 column are (1.50 not a class index, 7.00 out of range); it was no role (the
    label checks skipped as "no label column", the shard passed)."""
    values = ["0.00", "1.50", "2.00", "7.00", "1.00"]
    dec, flt = tmp_path / "dec", tmp_path / "flt"
    dec.mkdir()
    flt.mkdir()
    pq.write_table(pa.table({"text": list("abcde"),
                             "label": pa.array([Decimal(v) for v in values], pa.decimal128(10, 2))}), dec / "d.parquet")
    pq.write_table(pa.table({"text": list("abcde"), "label": pa.array([float(v) for v in values])}), flt / "f.parquet")
    cfg = {"labels": {"num_classes": 3}}
    got = datacheck.audit(str(dec), config=cfg, fail_on="never")
    want = datacheck.audit(str(flt), config=cfg, fail_on="never")
    bad = tuple(i for i, v in enumerate(values) if float(v) != int(float(v)) or not 0 <= float(v) < 3)
    assert bad == (1, 3)
    assert _label_findings(got) == _label_findings(want) and ("labels.out_of_range", bad) in _label_findings(got)
    assert got.roles["label"]["columns"] == "label"


def test_a_fractional_decimal_label_without_classes_is_a_regression_target(tmp_path):
    """Without ``num_classes``/``classes`` a fractional ``label`` is a regression target, as a float one is."""
    pq.write_table(pa.table({"text": ["a", "b"], "label": pa.array([Decimal("0.25"), Decimal("3.75")],
                                                                   pa.decimal128(6, 2))}), tmp_path / "d.parquet")
    rep = datacheck.audit(str(tmp_path), fail_on="never")
    assert "target" in rep.roles and "label" not in rep.roles
    assert rep.roles["target"]["columns"] == ["label"]
