"""A role ``[columns]`` declares but the shard lacks (a mistyped ``input_ids = "ids"`` over token rows
whose ids are in ``input_ids``) never makes a layout of the columns left: the real mBERT rows were
"tabular (numeric columns only)" and 33 token and LM checks silently did not apply. The layout is
now recognized with the role's standard-name column in its place (the reason says so), the checks
of that layout read that column too (role resolution stands it in), and the key's mistake is said
once, by ``schema.missing_column``. With no column to stand in, the layout is unsure, never tabular."""
from __future__ import annotations

import polars as pl
import pyarrow as pa
import pytest
from conftest import REALDATA

import datacheck
from datacheck.derive.layout import recognize
from datacheck.model.config import ColumnsSection
from datacheck.model.roles import resolve_roles

MBERT = REALDATA / "dkhate_danish_offensive" / "dkhate_mbert"
#: checks of a text classifier's token rows that read the input_ids role
TOKEN_CHECKS = ("tokens.out_of_vocab", "tokens.dtype_overflow", "padding.token_not_pad", "padding.pad_attended",
                "empty.sequence", "empty.all_padding", "length.mismatch")
CFG = {"tokens": {"vocab_size": 119547, "pad_token_id": 0}}  # PROVENANCE: mBERT vocab 119,547; [PAD] = 0


def _skips(rep) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for s in rep.skipped:
        out.setdefault(s["check"], []).append(s["reason"])
    return out


def test_real_mbert_rows_with_a_mistyped_input_ids_keep_their_layout():
    if not MBERT.is_dir():
        pytest.skip("../shared/realdata is not present")
    train = MBERT / "train" / "data-00000-of-00001.arrow"
    if train.is_file():  # PROVENANCE: label int64, input_ids list<int32>, token_type_ids, attention_mask
        with pa.memory_map(str(train)) as src:
            try:
                schema = pa.ipc.open_stream(src).schema
            except pa.ArrowInvalid:
                schema = pa.ipc.open_file(src).schema
        assert schema.field("input_ids").type == pa.list_(pa.int32())
        assert schema.field("label").type == pa.int64()
    good = datacheck.audit(str(MBERT), config=CFG, fail_on="never")
    bad = datacheck.audit(str(MBERT), config={**CFG, "columns": {"input_ids": "ids"}}, fail_on="never")
    assert sorted(s.rows for s in bad.shards) == [329, 2960]  # PROVENANCE: test 329, train 2,960
    # the layout of the rows is the one the right config gives: token ids and a class label
    assert {s.layout for s in good.shards} == {"text_classification"}
    assert [s.layout for s in bad.shards] == [s.layout for s in good.shards]
    assert all("[columns] input_ids names 'ids', which this shard lacks" in s.layout_why for s in bad.shards)
    # the same checks apply (none silently dropped), and they run on the standard column: the
    # findings are the right config's plus the key's one schema.missing_column per shard
    assert [s.not_applicable for s in bad.shards] == [s.not_applicable for s in good.shards]
    skips = _skips(bad)
    for cid in TOKEN_CHECKS:
        assert cid not in _skips(good), cid  # they run on the right config
        assert cid not in skips, (cid, skips.get(cid))  # and on the mistyped one
    assert skips == _skips(good)

    def found(rep) -> list[tuple[str, str, str | None, int]]:
        return sorted((s.path, f.check, f.column, f.count) for s in rep.shards for f in s.findings)

    assert [x for x in found(bad) if x[1] != "schema.missing_column"] == found(good)
    missing = [f for s in bad.shards for f in s.findings if f.check == "schema.missing_column"]
    assert [(f.column, f.severity) for f in missing] == [("ids", "error")] * len(bad.shards)
    assert all("'input_ids' was read in its place" in f.message for f in missing)


def _roles(schema: dict[str, pl.DataType], **given: str):
    return resolve_roles(ColumnsSection(**given), schema)


def test_no_column_to_stand_in_leaves_the_layout_unsure_not_tabular():
    """Token ids under another name than the declared one and than ``input_ids``: only numbers are
    left, which read as tabular rows with a class label; the declared token role says otherwise."""
    df = pl.DataFrame({"tok": [[101, 7, 102], [101, 8, 102]], "attention_mask": [[1, 1, 1], [1, 1, 1]],
                       "label": [0, 1]})
    schema = dict(df.schema)
    roles = _roles(schema, input_ids="ids")
    assert roles.missing == (("input_ids", "ids"),) and roles.input_ids is None
    got = recognize(schema, roles, lambda cols: df.select(cols))
    assert got.name is None and got.source == "unknown", got
    assert got.why.startswith("unsure: [columns] input_ids names 'ids', which this shard lacks"), got.why
    # the declared name fixed: token ids and a class label
    right = recognize(schema, _roles(schema, input_ids="tok"), lambda cols: df.select(cols))
    assert right.name == "text_classification", right


def test_a_missing_role_that_a_tabular_shard_can_hold_changes_nothing_but_the_reason():
    """A declared class label the shard lacks (an unlabeled split of numbers): no token role lost,
    the columns left decide as before and the reason names the key."""
    df = pl.DataFrame({"x": [0.5, 1.5], "target": [1.0, 2.0]})
    schema = dict(df.schema)
    got = recognize(schema, _roles(schema, label="y"), lambda cols: df.select(cols))
    assert got.name == recognize(schema, _roles(schema), lambda cols: df.select(cols)).name == "regression"
    assert "[columns] label names 'y', which this shard lacks" in got.why
