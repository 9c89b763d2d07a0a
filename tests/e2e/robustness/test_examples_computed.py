"""Every finding's details and example values are computed on hostile role dtypes: token columns
and labels of every integer width (uint64 and 128-bit values beyond Int64, a null element), floats
with NaN, strings, booleans, nested lists and fixed-size arrays, class labels of 128-bit, decimal,
categorical, enum, temporal, binary and struct dtypes. A details or example expression that raised
would be said in the finding's message ("could not be computed"); none may."""
from __future__ import annotations

import datetime
import decimal
import itertools

import polars as pl
import pytest

from datacheck.engine.shard import audit_frame
from datacheck.model.config import config_from_dict

BIG = 2**63 + 5
TOKENS = {
    "i32": pl.Series([[1, 2, 3, 50256], [5, 6, 7, 8], [], None, [9, 9, 9, 9], [1, 2, 3, 4]], dtype=pl.List(pl.Int32)),
    "u64_big": pl.Series([[1, 2, BIG, 4], [5, 6, 7, 8], [], None, [9, 9, 9, 9], [1, 2, 3, 4]], dtype=pl.List(pl.UInt64)),
    "i128_big": pl.Series([[1, 2, 2**100], [3], [], None, [5, -100], [1]], dtype=pl.List(pl.Int128)),
    "null_element": pl.Series([[1, None, 3, 4], [5, 6, 7, 8], [], None, [9, 9, 9, 9], [1, 2, 3, 4]],
                              dtype=pl.List(pl.Int64)),
    "f64_nan": pl.Series([[1.0, 2.5, 3, 4], [5, 6, 7, 8], [], None, [float("nan"), 9, 9, 9], [1, 2, 3, 4]],
                         dtype=pl.List(pl.Float64)),
    "str": pl.Series([["a", "b", "c", "d"], ["a"] * 4, [], None, ["x"] * 4, ["1", "2", "3", "4"]],
                     dtype=pl.List(pl.String)),
    "array": pl.Series([[1, 2, 3, 4], [5, 6, 7, 8], [0, 0, 0, 0], [1, 1, 1, 1], [9, 9, 9, 9], [1, 2, 3, 4]],
                       dtype=pl.Array(pl.Int64, 4)),
    "nested": pl.Series([[[1, 2]], [[3]], [], None, [[1]], [[2, 3]]], dtype=pl.List(pl.List(pl.Int64))),
    "bool": pl.Series([[True, False, True, True], [True] * 4, [], None, [False] * 4, [True] * 4],
                      dtype=pl.List(pl.Boolean)),
    "ignore": pl.Series([[-100] * 4, [-100, 6, -1, 8], [], None, [None, None, -100, -100], [1, 2, 3, 99999]],
                        dtype=pl.List(pl.Int64)),
}
MASKS = {
    "i8": pl.Series([[1, 1, 1, 0], [1, 1, 0, 0], [], None, [1, 0, 1, 1], [2, 1, 1, 1]], dtype=pl.List(pl.Int8)),
    "bool_null": pl.Series([[True, True, True, False], [True] * 4, [], None, [False, True, False, True],
                            [True, None, True, True]], dtype=pl.List(pl.Boolean)),
    "u64_big": pl.Series([[1, 1, BIG, 0], [1] * 4, [], None, [0] * 4, [1] * 4], dtype=pl.List(pl.UInt64)),
}
CLASS_LABELS = {
    "i128": pl.Series([0, 1, 2, 2**100, -1, None], dtype=pl.Int128),
    "u64": pl.Series([0, 1, 2, BIG, 1, None], dtype=pl.UInt64),
    "decimal": pl.Series([decimal.Decimal(x) if x is not None else None for x in ("0", "1", "2", "99999999999999999999",
                                                                                 None, "-1")],
                         dtype=pl.Decimal(30, 0)),
    "decimal_fraction": pl.Series([decimal.Decimal(x) if x is not None else None for x in ("0.5", "1", None, "1e20", "2",
                                                                                          "-1")],
                                  dtype=pl.Decimal(30, 2)),
    "categorical": pl.Series(["a", "b", None, "", "c", "a"], dtype=pl.Categorical),
    "enum": pl.Series(["a", "b", None, "b", "c", "a"], dtype=pl.Enum(["a", "b", "c"])),
    "date": pl.Series([datetime.date(2020, 1, i) for i in range(1, 6)] + [None]),
    "binary": pl.Series([b"a", b"", None, b"\xff", b"x", b"y"]),
    "struct": pl.Series([{"a": 1}, {"a": None}, None, {"a": 3}, {"a": 4}, {"a": 5}]),
    "f32": pl.Series([0.0, 1.0, float("inf"), float("nan"), 1e30, None], dtype=pl.Float32),
    "bool": pl.Series([True, False, None, True, True, True]),
}
TEXT = pl.Series(["hello world", "", "  ", None, "\u200b", "a" * 50])
CONFIGS = [
    {"tokens": {"vocab_size": 100, "pad_token_id": 0, "eos_token_id": 9, "max_seq_len": 3},
     "labels": {"ignore_index": -100, "num_classes": 3}},
    {"tokens": {"vocab_size": 100, "pad_token_id": 0, "truncation_side": "left", "max_seq_len": 2},
     "labels": {"ignore_index": -100, "shifted": True, "classes": ["a", "b"]}},
]


def _frames(full: bool):
    tokens = TOKENS if full else {k: TOKENS[k] for k in ("i32", "u64_big", "null_element", "ignore")}
    masks = MASKS if full else {"bool_null": MASKS["bool_null"]}
    for (ik, ids), (lk, lab), (mk, mask) in itertools.product(tokens.items(), tokens.items(), masks.items()):
        yield f"ids={ik} labels={lk} mask={mk}", pl.DataFrame({"input_ids": ids, "labels": lab, "attention_mask": mask})
    for lk, lab in CLASS_LABELS.items():
        yield f"text label={lk}", pl.DataFrame({"text": TEXT, "label": lab})
        yield f"regression target={lk}", pl.DataFrame({"text": TEXT, "target": lab, "x": [1.0] * 6})


def _not_computed(full: bool) -> list[str]:
    said = []
    for name, df in _frames(full):
        for i, cfg in enumerate(CONFIGS):
            for f in audit_frame(df, config_from_dict(cfg)).findings:
                if "could not be computed" in f.message:
                    said.append(f"{name} cfg {i}: {f.check}: {f.message}")
    return said


def test_details_and_examples_are_computed_on_hostile_dtypes():
    assert _not_computed(full=False) == []


@pytest.mark.slow
def test_details_and_examples_are_computed_on_every_hostile_dtype():
    assert _not_computed(full=True) == []
