"""padding.token_not_pad / padding.pad_attended / padding.label_not_ignored, the padding_fraction and eos
stats, and padding.eos_unsupervised (dataset level, with ``[labels] shifted``)."""
from __future__ import annotations

import os
from unittest.mock import patch

import polars as pl
import pytest
from checkhelp import audit_df, findings, one, skipped_reason, write_shard
from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st

import datacheck
from datacheck.engine.shard import audit_frame
from datacheck.model.config import config_from_dict


@pytest.mark.parametrize(
    "ids, mask, pad, rows, positions",
    [
        ([[5, 6, 0, 0], [5, 6, 7, 0], [5, 9, 9, 9], [1, 2]], [[1, 1, 0, 0], [1, 1, 0, 0], [1, 0, 0, 0], [1, 1]],
         0, [1, 2], 4),
        ([[1, 1, 5]], [[0, 0, 1]], 1, [], 0),
        # rows whose lists differ in length or whose mask is not binary are left to the other checks
        ([[5, 7, 7], [5, 7]], [[1, 0], [1, 2]], 0, [], 0),
    ],
)
def test_token_not_pad(tmp_path, ids, mask, pad, rows, positions):
    rep = audit_df(tmp_path, {"input_ids": ids, "attention_mask": mask}, {"tokens": {"pad_token_id": pad}})
    got = findings(rep, "padding.token_not_pad", "input_ids")
    assert [(f.rows, f.severity) for f in got] == ([(tuple(rows), "warn")] if rows else [])
    if rows:
        assert f"({positions} positions)" in got[0].message
        assert f"pad_token_id {pad}" in got[0].message


def test_token_not_pad_skipped_without_pad_id(tmp_path):
    rep = audit_df(tmp_path, {"input_ids": [[1]], "attention_mask": [[1]]})
    assert skipped_reason(rep, "padding.token_not_pad") == "needs input_ids and [tokens] pad_token_id"


@pytest.mark.parametrize(
    "labels, mask, ign, rows",
    [
        ([[3, 4, -100], [3, 4, 4], [3, -100, -100]], [[1, 1, 0], [1, 1, 0], [1, 1, 0]], -100, [1]),
        ([[3, -1], [3, -100]], [[1, 0], [1, 0]], -1, [1]),
        ([[0, 5]], [[0, 1]], -100, [0]),
    ],
)
def test_label_not_ignored(tmp_path, labels, mask, ign, rows):
    rep = audit_df(tmp_path, {"labels": labels, "attention_mask": mask}, {"labels": {"ignore_index": ign}})
    f = one(rep, "padding.label_not_ignored", "labels")
    assert (f.rows, f.severity) == (tuple(rows), "error")
    assert "trains on padding" in f.message


def test_label_not_ignored_skipped_without_ignore_index(tmp_path):
    rep = audit_df(tmp_path, {"labels": [[1]], "attention_mask": [[0]]}, {"labels": {"ignore_index": False}})
    assert "ignore_index" in skipped_reason(rep, "padding.label_not_ignored")


def test_padding_fraction_stat(tmp_path):
    rep = audit_df(tmp_path, {"attention_mask": [[1, 1, 0, 0], [1, 1, 1, 1]]})
    assert rep.shards[0].stats["padding_fraction"] == pytest.approx(0.25)



def _eos_shard(tmp_path, name, eos_labels):
    # eos = pad = 2; every row ends with eos then padding; labels at the eos position are ``eos_labels``
    rows = [{"input_ids": [5, 6, 2, 2], "attention_mask": [1, 1, 1, 0], "labels": [5, 6, lab, -100]}
            for lab in eos_labels]
    return write_shard(tmp_path, pl.DataFrame(rows), name)


def test_eos_unsupervised_across_the_dataset(tmp_path):
    _eos_shard(tmp_path, "a.parquet", [-100, -100])
    _eos_shard(tmp_path, "b.parquet", [-100])
    cfg = {"tokens": {"pad_token_id": 2, "eos_token_id": 2}}
    rep = datacheck.audit(str(tmp_path), config=cfg)
    f = one(rep, "padding.eos_unsupervised")
    assert (f.count, f.severity, f.ratio) == (3, "error", 0.0)
    assert f.shards == ("a.parquet", "b.parquet")
    assert "eos-supervision ratio 0" in f.message
    assert f.details == {"eos_tokens": 3, "eos_supervised": 0, "ratio": 0.0}


def test_eos_supervised_in_one_shard_passes(tmp_path):
    _eos_shard(tmp_path, "a.parquet", [-100, -100])
    _eos_shard(tmp_path, "b.parquet", [2])
    rep = datacheck.audit(str(tmp_path), config={"tokens": {"pad_token_id": 2, "eos_token_id": 2}})
    assert findings(rep, "padding.eos_unsupervised") == []


def test_eos_unsupervised_needs_pad_equal_eos(tmp_path):
    _eos_shard(tmp_path, "a.parquet", [-100])
    rep = datacheck.audit(str(tmp_path), config={"tokens": {"pad_token_id": 0, "eos_token_id": 2}})
    assert findings(rep, "padding.eos_unsupervised") == []
    rep = datacheck.audit(str(tmp_path), config={"tokens": {"pad_token_id": 2}})
    assert skipped_reason(rep, "padding.eos_unsupervised") == "needs [tokens] pad_token_id and eos_token_id"


def test_eos_unsupervised_skipped_without_token_labels(tmp_path):
    # a class label per row (text_classification): no token labels, and no collator makes LM labels
    write_shard(tmp_path, {"input_ids": [[5, 2, 2]], "attention_mask": [[1, 1, 0]], "label": [1]}, "a.parquet")
    rep = datacheck.audit(str(tmp_path), config={"tokens": {"pad_token_id": 2, "eos_token_id": 2}})
    assert findings(rep, "padding.eos_unsupervised") == []
    # causal-LM rows without labels: DataCollatorForLanguageModeling(mlm=False) masks the eos at
    # position 1 (pad == eos): tests/unit/checks/test_padding_collator.py
    write_shard(tmp_path, {"input_ids": [[5, 2, 2]], "attention_mask": [[1, 1, 0]]}, "a.parquet")
    rep = datacheck.audit(str(tmp_path), config={"tokens": {"pad_token_id": 2, "eos_token_id": 2}})
    assert one(rep, "padding.eos_unsupervised").details == {"eos_tokens": 1, "eos_supervised": 0, "ratio": 0.0}


# ---------------------------------------------------------------- padding.pad_attended
@pytest.mark.parametrize(
    "ids, mask, rows, positions",
    [
        # a mask of all ones over [PAD] (BERT: pad 0): rows 0 and 2; row 1 is padded correctly
        ([[101, 7, 102, 0, 0], [101, 8, 102, 0], [101, 0, 0]], [[1, 1, 1, 1, 1], [1, 1, 1, 0], [1, 1, 1]], [0, 2], 4),
        ([[101, 102]], [[1, 1]], [], 0),
        # rows whose lists differ in length or whose mask is not binary are left to the other checks
        ([[0, 0, 0], [0, 0]], [[1, 1], [1, 2]], [], 0),
    ],
)
def test_pad_attended(ids, mask, rows, positions):
    df = pl.DataFrame({"input_ids": ids, "attention_mask": mask})
    res = audit_frame(df, config_from_dict({"tokens": {"pad_token_id": 0, "eos_token_id": 102}}))
    got = [f for f in res.findings if f.check == "padding.pad_attended"]
    if not rows:
        assert got == []
        return
    (f,) = got
    assert (f.rows, f.column, f.severity) == (tuple(rows), "input_ids", "error")
    assert f.details["positions"] == positions
    assert "pad_token_id 0" in f.message and "attention_mask 1" in f.message


def test_pad_attended_skipped_when_pad_is_eos_or_unset(tmp_path):
    df = {"input_ids": [[5, 2, 2]], "attention_mask": [[1, 1, 1]]}
    rep = audit_df(tmp_path, df, {"tokens": {"pad_token_id": 2, "eos_token_id": 2}})
    assert findings(rep, "padding.pad_attended") == []
    assert "eos_token_id" in skipped_reason(rep, "padding.pad_attended")
    rep = audit_df(tmp_path, df)
    assert skipped_reason(rep, "padding.pad_attended") == "needs input_ids and [tokens] pad_token_id"


# ---------------------------------------------------------------- [labels] shifted
# nanoGPT/Megatron store labels pre-shifted: labels[i] == input_ids[i+1]; the eos at position i is
# then supervised by labels[i-1]. pad == eos == 2.
_SHIFTED = {"input_ids": [[5, 6, 2, 2], [7, 2, 2]], "attention_mask": [[1, 1, 1, 0], [1, 1, 0]],
            "labels": [[6, 2, -100, -100], [2, -100, -100]]}


def test_preshifted_labels_supervise_eos_when_shifted_is_set():
    cfg = {"tokens": {"pad_token_id": 2, "eos_token_id": 2}}
    df = pl.DataFrame(_SHIFTED)
    # read as unshifted (the Hugging Face convention), the eos carries -100: the alarm is right
    res = audit_frame(df, config_from_dict(cfg))
    assert res.stats["eos"] == {"total": 2, "supervised": 0, "rows_with_eos": 2}
    # declared shifted, each eos is the target of the position before it: supervised
    res = audit_frame(df, config_from_dict({**cfg, "labels": {"shifted": True}}))
    assert res.stats["eos"] == {"total": 2, "supervised": 2, "rows_with_eos": 2}


def test_shifted_eos_unsupervised_end_to_end(tmp_path):
    write_shard(tmp_path, _SHIFTED, "a.parquet")
    cfg = {"tokens": {"pad_token_id": 2, "eos_token_id": 2}, "labels": {"shifted": True}}
    rep = datacheck.audit(str(tmp_path), config=cfg)
    assert findings(rep, "padding.eos_unsupervised") == []
    # shifted, but the label before each eos is ignore_index: the eos is never a target
    bad = {**_SHIFTED, "labels": [[6, -100, -100, -100], [-100, -100, -100]]}
    write_shard(tmp_path, bad, "a.parquet")
    rep = datacheck.audit(str(tmp_path), config=cfg)
    assert one(rep, "padding.eos_unsupervised").details == {"eos_tokens": 2, "eos_supervised": 0, "ratio": 0.0}


def test_token_not_pad_example_with_uint64_ids_beyond_int64():
    """uint64 ids holding uint64 -1 at masked positions: the example counts them and names the first
    (the per-row count cast the ids to Int64, which raised, and the example was lost)."""
    u = 2**64 - 1
    df = pl.DataFrame({"input_ids": [[5, 6, u, u], [5, 6, 0, 0]], "attention_mask": [[1, 1, 0, 0], [1, 1, 0, 0]]},
                      schema={"input_ids": pl.List(pl.UInt64), "attention_mask": pl.List(pl.UInt64)})
    res = audit_frame(df, config_from_dict({"tokens": {"pad_token_id": 0}}))
    f = next(f for f in res.findings if f.check == "padding.token_not_pad")
    assert f.rows == (0,)
    assert f.examples[0].value == f"'2 masked position(s) hold non-pad ids; first at position 2 of 4: id {u} with mask 0'"


def ref_supervised_fraction(labels: list, ign: int) -> float | str:
    """Plain Python: labels other than ``ign`` and null over every label slot (null elements
    included); without any slot 0 / 0, which the report writes as the text ``"nan"``."""
    slots = sum(len(r) for r in labels if r is not None)
    sup = sum(1 for r in labels if r is not None for v in r if v is not None and v != ign)
    return sup / slots if slots else "nan"


_LABEL = st.one_of(st.none(), st.sampled_from([-100, 0, 1, 7]))


@settings(max_examples=examples(200))
@given(labels=st.lists(st.one_of(st.none(), st.lists(_LABEL, max_size=6)), min_size=1, max_size=12),
       dtype=st.sampled_from([pl.Int8, pl.Int16, pl.Int32, pl.Int64]), ign=st.sampled_from([-100, 0, 7]),
       with_am=st.booleans(), batch_rows=st.sampled_from([None, 1, 4]))
def test_supervised_fraction_matches_reference(labels, dtype, ign, with_am, batch_rows):
    """The supervised_fraction stat over null rows, empty rows and null labels, at several label dtypes,
    in one batch or several; with an assistant_mask (the sft family's supervised_tokens stat reads the
    per-row counts too) and without."""
    df = pl.DataFrame({"labels": pl.Series(labels, dtype=pl.List(dtype))})
    if with_am:
        df = df.with_columns(assistant_mask=pl.Series([None if r is None else [1] * len(r) for r in labels],
                                                      dtype=pl.List(pl.Int8)))
    env = {} if batch_rows is None else {"DATACHECK_BATCH_ROWS": str(batch_rows)}
    with patch.dict(os.environ, env):
        res = audit_frame(df, config_from_dict({"labels": {"ignore_index": ign}, "dataset": {"layout": "sft_tokenized"}}))
    assert not [s for s in res.skipped if s.error], res.skipped
    want = ref_supervised_fraction(labels, ign)
    assert res.stats.get("supervised_fraction") == (want if isinstance(want, str) else pytest.approx(want))
