"""The check registry: every catalog ID has exactly one producer,
skips are derived from the declared roles and facts, the engine runs checks on an in-memory frame,
and the role table drives roles."""
from __future__ import annotations

import ast
from pathlib import Path

import polars as pl
import pytest
from unbuilt import NOT_YET_BUILT

import datacheck.checks.all  # noqa: F401 - every family registers its checks
from datacheck.checks import registry
from datacheck.checks.registry import (
    CHECKS,
    READER_IDS,
    UNREADABLE,
    RowCheck,
    RowsKey,
    ShardContext,
    check,
    dataset_items,
    finding,
    shard_plan,
)
from datacheck.engine.shard import audit_frame
from datacheck.model import catalog
from datacheck.model.config import config_from_dict
from datacheck.model.errors import InternalError
from datacheck.model.results import DatasetContext
from datacheck.model.roles import ROLE_NAMES, ROLE_TABLE, Roles, null_role_casts, resolve_roles
from datacheck.resume import RESUME_IDS
from datacheck.trace.rules import LOG_RULES


def test_every_catalog_id_has_exactly_one_producer():
    producers: dict[str, list[str]] = {}
    for cid, spec in CHECKS.items():
        producers.setdefault(cid, []).append(spec.module)
    for cid, fn in UNREADABLE.items():
        producers.setdefault(cid, []).append(fn.__module__)
    for cid, module in READER_IDS.items():
        producers.setdefault(cid, []).append(module)
    for cid, rule in LOG_RULES.items():  # training-log checks run on log records (datacheck trace)
        producers.setdefault(cid, []).append(rule.__module__)
    for cid, module in RESUME_IDS.items():  # checkpoint and recorded-order checks (datacheck checkpoint, order)
        producers.setdefault(cid, []).append(module)
    for cid in catalog.CATALOG:
        if cid in NOT_YET_BUILT:
            assert cid not in producers, f"{cid} is built: take it out of tests/helpers/unbuilt.py"
            continue
        assert producers.get(cid) and len(producers[cid]) == 1, f"{cid}: producers {producers.get(cid)}"
    assert set(producers) <= set(catalog.CATALOG)
    assert CHECKS["batch.no_supervised_tokens"].module == "datacheck.checks.batch"
    # each check ID is produced by the module its prefix names, or by a module of the package its
    # prefix names (the dup.* IDs: datacheck.checks.dup.in_shard, .cross, .near, .shard)
    assert CHECKS["tokens.type_id_out_of_range"].module == "datacheck.checks.tokens"
    assert CHECKS["index.empty_shard"].module == "datacheck.checks.index"
    assert CHECKS["padding.eos_unsupervised"].module == "datacheck.checks.padding"
    assert CHECKS["dup.shard"].module == "datacheck.checks.dup.shard"
    owned = {cid: spec.module for cid, spec in CHECKS.items()} | {cid: fn.__module__ for cid, fn in UNREADABLE.items()}
    misplaced = {cid: module for cid, module in owned.items()
                 if module != f"datacheck.checks.{cid.split('.')[0]}"
                 and not module.startswith(f"datacheck.checks.{cid.split('.')[0]}.")}
    assert misplaced == {}
    assert {c for c in catalog.CATALOG if c.startswith("log.")} - NOT_YET_BUILT == set(LOG_RULES)
    assert not set(LOG_RULES) & set(CHECKS)


def test_finding_takes_the_catalog_severity_unless_told_otherwise():
    for cid in ("tokens.dtype_overflow", "dup.near_duplicate", "batch.wraparound"):
        f = finding(cid, message="m", count=3, shards=("a.parquet",))
        assert (f.check, f.severity, f.message, f.count, f.shards) == (cid, catalog.CATALOG[cid].severity, "m", 3,
                                                                        ("a.parquet",))
    assert finding("dup.near_duplicate", "m", severity="info").severity == "info"
    with pytest.raises(InternalError, match="not a catalog ID"):
        finding("tokens.no_such_check", "m")


def test_check_modules_build_findings_through_the_factory():
    """No ``Finding(...)`` literal in the checks package outside the factory itself: the severity is
    the catalog's, written once."""
    pkg = Path(registry.__file__).parent
    literals = []
    for path in sorted(pkg.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        factory = {id(n) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and f.name == "finding"
                   for n in ast.walk(f)}
        literals += [f"{path.relative_to(pkg)}:{n.lineno}" for n in ast.walk(tree)
                     if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "Finding"
                     and id(n) not in factory]
    assert literals == []


def test_registration_refuses_unknown_ids_roles_facts_and_second_producers():
    with pytest.raises(InternalError, match="not in the catalog"):
        check("tokens.no_such_check")(lambda ctx: ())
    with pytest.raises(InternalError, match="unknown role"):
        check("tokens.out_of_vocab", roles=("no_such_role",))(lambda ctx: ())
    with pytest.raises(InternalError, match="section.key"):
        check("tokens.out_of_vocab", facts=("vocab_size",))(lambda ctx: ())
    with pytest.raises(InternalError, match="two producers"):
        check("tokens.out_of_vocab")(lambda ctx: ())  # registered from this test module, not tokens.py


def _ctx(cfg: dict, schema: dict) -> ShardContext:
    c = config_from_dict(cfg)
    return ShardContext(cfg=c, roles=resolve_roles(c.columns, schema), schema=schema, shard="s.parquet")


@pytest.mark.parametrize("cfg, schema, cid, reason", [
    ({}, {"text": pl.String}, "tokens.out_of_vocab", "no input_ids column (set [columns] input_ids)"),
    ({}, {"input_ids": pl.List(pl.Int64)}, "tokens.out_of_vocab", "[tokens] vocab_size is not set"),
    ({"tokens": {"vocab_size": 10}}, {"input_ids": pl.List(pl.Float64)}, "tokens.out_of_vocab",
     "input_ids column 'input_ids' has dtype List(Float64), not a list of integers (reported as schema.dtype)"),
    ({}, {"input_ids": pl.List(pl.Int64)}, "tokens.type_id_out_of_range",
     "no token_type_ids column (set [columns] token_type_ids)"),
    ({}, {"token_type_ids": pl.List(pl.Int8)}, "tokens.type_id_out_of_range", "[tokens] type_vocab_size is not set"),
    ({}, {"x": pl.Int64}, "labels.null", "no label column (set [columns] label or labels)"),
    ({"labels": {"ignore_index": False}}, {"labels": pl.List(pl.Int64), "input_ids": pl.List(pl.Int64)},
     "empty.no_supervised_tokens", "[labels] ignore_index is unset"),
    ({}, {"attention_mask": pl.List(pl.Int8)}, "padding.token_not_pad", "needs input_ids and [tokens] pad_token_id"),
    ({}, {"text": pl.String}, "schema.nullable", "no schema given (set [dataset] schema or --schema)"),
])
def test_skips_are_derived_from_declarations(cfg, schema, cid, reason):
    plan = shard_plan(_ctx(cfg, schema))
    got = {(s.check, s.reason) for s in plan.skipped}
    assert (cid, reason) in got
    assert not [rc for rc in plan.row_checks if rc.check == cid]


def test_dataset_checks_without_their_facts_are_skipped_with_the_derived_reason():
    def skipped(cfg: dict, prefix: str = "batch.") -> dict[str, str]:
        dctx = DatasetContext(cfg=config_from_dict(cfg), shards=[])
        return {s.check: s.reason for s in dataset_items(dctx) if s.check.startswith(prefix)}

    # the batch family is built: without [batch] batch_size each ID is skipped with the derived reason
    assert set(skipped({}).values()) == {"[batch] batch_size is not set"}
    dctx = DatasetContext(cfg=config_from_dict({"sft": {"response_template_ids": [5]}}), shards=[])
    sft = {s.check for s in dataset_items(dctx) if s.check.startswith("sft.")}
    assert sft == set()  # the sft rules on messages are built: none is skipped here


def test_audit_frame_runs_checks_without_a_file():
    df = pl.DataFrame({"x": [1.0, float("nan"), 3.0, float("inf")], "text": ["a", " ", None, "b"]})
    res = audit_frame(df, config_from_dict({}))
    assert res.rows == 4 and res.format == "frame"
    assert res.failing_rows == {"finite.nan:x": [1], "finite.inf:x": [3], "empty.text:text": [1, 2]}
    by_check = {f.check: f for f in res.findings}
    assert by_check["finite.nan"].rows == (1,)
    assert by_check["empty.text"].count == 2
    assert "index.empty_shard" not in by_check


def test_after_query_verdict_and_unreadable_hook():
    empty = audit_frame(pl.DataFrame({"x": pl.Series([], dtype=pl.Float64)}), config_from_dict({}))
    assert [f.check for f in empty.findings] == ["index.empty_shard"]
    assert empty.findings[0].message == "frame is readable but holds 0 rows"
    # a frame whose query fails to decode is unreadable, through the registered hook
    bad = pl.LazyFrame({"x": ["1", "zz"]}).select(pl.col("x").cast(pl.Float64).alias("x"))
    res = audit_frame(bad, config_from_dict({}))
    assert res.rows is None
    assert [f.check for f in res.findings] == ["decode.unreadable"]


def test_a_producer_may_not_emit_another_id(monkeypatch):
    spec = CHECKS["finite.nan"]
    monkeypatch.setitem(CHECKS, "finite.nan", registry.CheckSpec(
        spec.id, shard=lambda ctx: [RowCheck("finite.inf", None, pl.lit(False), lambda n, d: "")],
        module=spec.module))
    with pytest.raises(InternalError, match="one producer per ID"):
        shard_plan(_ctx({}, {"x": pl.Float64}))


def test_rows_key_is_typed_and_prints_the_report_key():
    assert str(RowsKey("finite.nan", "x")) == "finite.nan:x"
    assert str(RowsKey("length.mismatch")) == "length.mismatch"
    assert RowsKey("a.b", "c") == RowsKey("a.b", "c") and hash(RowsKey("a.b", "c")) == hash(RowsKey("a.b", "c"))


def test_role_table_drives_roles_inference_and_null_casts():
    assert ROLE_NAMES == tuple(r.name for r in ROLE_TABLE)
    assert set(ROLE_NAMES) <= set(Roles.__dataclass_fields__)
    schema = {"input_ids": pl.List(pl.Int64), "token_type_ids": pl.Null, "attention_mask": pl.List(pl.Null),
              "text": pl.String}
    roles = resolve_roles(config_from_dict({}).columns, schema)
    assert roles.token_type_ids == "token_type_ids" and "token_type_ids" in roles.inferred
    assert roles.columns() == ["text", "input_ids", "attention_mask", "token_type_ids"]
    assert null_role_casts(roles, schema) == {"token_type_ids": pl.List(pl.Int64), "attention_mask": pl.List(pl.Int64)}
