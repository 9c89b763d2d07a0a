"""A mistyped ``[columns]`` role of one column (a name the shard lacks, or a column whose dtype
cannot serve a token, mask or conversation role) beside the role's standard Hugging Face column:
role resolution reads the standard column in the key's place (``Roles.stand_ins``), so the token
checks run on it instead of staying skipped per role, and the mistake is said once
(``schema.missing_column`` or ``schema.dtype``). Real rows: realdata dkhate_mbert."""
from __future__ import annotations

import polars as pl
import pytest
from conftest import REALDATA

import datacheck
from datacheck.model.config import ColumnsSection
from datacheck.model.roles import resolve_roles

MBERT = REALDATA / "dkhate_danish_offensive" / "dkhate_mbert"
CFG = {"tokens": {"vocab_size": 119547, "pad_token_id": 0}}  # PROVENANCE: mBERT vocab 119,547; [PAD] = 0
SCHEMA = {"text": pl.String(), "input_ids": pl.List(pl.Int32()), "attention_mask": pl.List(pl.Int8()),
          "label": pl.Int64()}


def test_a_missing_declared_column_reads_the_standard_one():
    roles = resolve_roles(ColumnsSection(input_ids="ids"), SCHEMA)
    assert roles.input_ids == "input_ids"
    assert roles.missing == (("input_ids", "ids"),)
    assert roles.stand_ins == (("input_ids", "ids", "input_ids"),)


def test_a_declared_column_of_the_wrong_dtype_reads_the_standard_one():
    roles = resolve_roles(ColumnsSection(input_ids="text", attention_mask="label"), SCHEMA)
    assert (roles.input_ids, roles.attention_mask) == ("input_ids", "attention_mask")
    assert roles.missing == ()
    assert set(roles.stand_ins) == {("input_ids", "text", "input_ids"), ("attention_mask", "label", "attention_mask")}
    assert roles.text == ("text",)  # the text is still the text


@pytest.mark.parametrize("given, schema", [
    ({"input_ids": "tok"}, {"tok": pl.List(pl.Int64()), "input_ids": pl.List(pl.Int64())}),  # both serve: the key wins
    ({"input_ids": "ids"}, {"input_ids": pl.String()}),  # the standard column cannot serve either
    ({"input_ids": "text"}, {"text": pl.String()}),  # no standard column
])
def test_no_stand_in_where_the_key_serves_or_nothing_does(given, schema):
    roles = resolve_roles(ColumnsSection(**given), schema)
    assert roles.stand_ins == ()
    assert roles.input_ids == (given["input_ids"] if given["input_ids"] in schema else None)


def _findings(rep) -> list[tuple[str, str, str | None, int]]:
    return sorted((s.path, f.check, f.column, f.count) for s in rep.shards for f in s.findings)


@pytest.mark.parametrize("given, said", [("ids", "schema.missing_column"), ("label", "schema.dtype")])
def test_real_mbert_token_checks_run_on_input_ids_and_the_key_is_said_once(given, said):
    if not MBERT.is_dir():
        pytest.skip("../shared/realdata is not present")
    good = datacheck.audit(str(MBERT), config=CFG, fail_on="never")
    bad = datacheck.audit(str(MBERT), config={**CFG, "columns": {"input_ids": given}}, fail_on="never")
    assert sorted(s.rows for s in bad.shards) == [329, 2960]  # PROVENANCE: test 329, train 2,960
    assert [s.layout for s in bad.shards] == [s.layout for s in good.shards]
    # every check the right config runs runs (no per-role skip names the key) ...
    assert sorted((k["check"], k["reason"]) for k in bad.skipped) == sorted((k["check"], k["reason"]) for k in good.skipped)
    # ... with the same findings, and the key's mistake once per shard
    extra = [x[:3] for x in _findings(bad) if x not in _findings(good)]
    assert extra == sorted((s.path, said, given) for s in bad.shards)
    assert [x for x in _findings(bad) if x[1] != said] == _findings(good)
    # a defect of the standard column is still caught: ids past a smaller vocab (PROVENANCE: max id 110,794)
    small = {"tokens": {"vocab_size": 30522, "pad_token_id": 0}, "columns": {"input_ids": given}}
    rep = datacheck.audit(str(MBERT), config=small, fail_on="never")
    assert {f.check for s in rep.shards for f in s.findings} >= {"tokens.out_of_vocab", said}
