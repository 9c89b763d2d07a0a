"""``datacheck checks [ID|FAMILY]`` prints the catalog from the registry that runs the checks, and
the messages point to it (never to "CHECKS.md", which users of the package do not have)."""
from __future__ import annotations

import json

import polars as pl
import pytest
from conftest import ROOT, run_cli  # noqa: E402
from unbuilt import NOT_YET_BUILT

from datacheck.checks.registry import CHECKS
from datacheck.listing import describe_check, list_checks, select_checks
from datacheck.model import catalog
from datacheck.model.config import config_from_dict
from datacheck.model.errors import ConfigError, UsageError


def test_listing_is_the_catalog_with_the_registry_s_needs():
    entries = list_checks()
    assert [e.id for e in entries] == list(catalog.CATALOG)
    assert {e.id for e in entries if not e.built} == NOT_YET_BUILT
    oov = describe_check("tokens.out_of_vocab")
    assert (oov.level, oov.severity, oov.roles, oov.facts, oov.producer) == (
        "row", "error", ("input_ids",), ("tokens.vocab_size",), "datacheck.checks.tokens")
    assert "A row fails when any id is < 0 or >= `vocab_size`" in " ".join(oov.description.split())
    for e in entries:  # roles and facts are the registry's declaration, never a copy
        if e.id in CHECKS:
            assert e.roles == CHECKS[e.id].roles
            assert set(e.facts) == set(CHECKS[e.id].facts + CHECKS[e.id].dataset_facts)
    assert [e.id for e in select_checks("dup")] == [c for c in catalog.CATALOG if c.startswith("dup.")]
    with pytest.raises(UsageError, match="did you mean 'tokens.out_of_vocab'"):
        select_checks("tokens.out_of_vocb")


def test_an_unbuilt_id_is_marked(monkeypatch):
    """Every catalog ID is built in this version; one without a producer is shown as not built."""
    monkeypatch.delitem(CHECKS, "sft.role_order")
    e = describe_check("sft.role_order")
    assert not e.built


def test_cli_checks_text_and_json():
    r = run_cli("checks")
    assert r.returncode == 0
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["check", "level", "severity", "summary"]
    assert f"{len(catalog.CATALOG)} check(s)." in r.stdout
    row = next(ln for ln in lines if ln.startswith("sft.role_order "))
    assert row.split()[1:3] == ["row", "error"]
    unbuilt = [ln.split()[0] for ln in lines if ln.endswith("(not built in this version)")]
    assert set(unbuilt) == NOT_YET_BUILT
    one = run_cli("checks", "padding.pad_attended")
    assert one.returncode == 0
    assert one.stdout.startswith("padding.pad_attended: pad != eos and a position holding pad_token_id has mask 1")
    assert "  needs roles       attention_mask, input_ids" in one.stdout
    assert "  needs facts       [tokens] pad_token_id" in one.stdout
    assert f"  built             yes ({CHECKS['padding.pad_attended'].module})" in one.stdout
    js = run_cli("checks", "--format", "json")
    doc = json.loads(js.stdout)
    assert doc["kind"] == "datacheck.checks" and len(doc["result"]["checks"]) == len(catalog.CATALOG)
    bad = run_cli("checks", "finite.nann")
    assert bad.returncode == 2 and "did you mean 'finite.nan'?" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.slow
def test_messages_point_to_datacheck_checks_not_checks_md(tmp_path):
    with pytest.raises(ConfigError, match="`datacheck checks` lists the IDs"):
        config_from_dict({"policy": {"zzz.qqq": {"severity": "warn"}}})
    p = tmp_path / "s.parquet"
    pl.DataFrame({"text": ["a"]}).write_parquet(p)
    r = run_cli("inspect", str(p), "--check", "zzz.qqq")
    assert r.returncode == 2 and "`datacheck checks` lists the IDs" in r.stderr
    r = run_cli("clean", str(p), "--out", str(tmp_path / "out"), "--drop", "zzz.qqq")
    assert r.returncode == 2 and "`datacheck checks` lists the IDs" in r.stderr
    # no user-facing string of the package names CHECKS.md (docstrings and internal errors may cite it)
    import ast

    for path in (ROOT / "datacheck").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = {id(n.body[0].value) for n in ast.walk(tree)
                if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.body
                and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        internal = {id(c) for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") ==
                    "InternalError" for c in ast.walk(n)}
        for n in ast.walk(tree):
            if (isinstance(n, ast.Constant) and isinstance(n.value, str) and "CHECKS.md" in n.value
                    and id(n) not in docs and id(n) not in internal):
                raise AssertionError(f"{path.relative_to(ROOT)}:{n.lineno}: a message names CHECKS.md")


@pytest.mark.parametrize("typo, meant", [("tokens.oov", "tokens.out_of_vocab"), ("empty.txt", "empty.text"),
                                         ("dup.exact_in_shrd", "dup.exact_in_shard")])
def test_every_place_a_check_id_is_given_suggests_the_same_id(tmp_path, typo, meant):
    """``[policy]``, ``inspect --check`` and ``clean --drop`` name the closest catalog ID alike
    (clean named none; inspect none for ``tokens.oov``)."""
    assert meant in catalog.CATALOG and typo not in catalog.CATALOG
    want = f"(did you mean {meant!r}?)"
    with pytest.raises(ConfigError) as e:
        config_from_dict({"policy": {typo: {"severity": "warn"}}})
    assert want in str(e.value)
    (tmp_path / "d").mkdir()
    p = tmp_path / "d" / "s.parquet"
    pl.DataFrame({"text": ["a"]}).write_parquet(p)
    r = run_cli("inspect", str(p), "--check", typo)
    assert r.returncode == 2 and want in r.stderr
    r = run_cli("clean", str(p), "--out", str(tmp_path / "out"), "--drop", typo)
    assert r.returncode == 2 and want in r.stderr
