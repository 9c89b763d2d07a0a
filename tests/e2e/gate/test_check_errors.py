"""An internal failure of a check never looks like a clean pass.

A check whose polars expression raises, a shard check function that raises, or a dataset-level
check function that raises is reported as a check error (a ``skipped`` entry with ``error: true``,
counted in ``summary.check_errors``), the report status is ``fail`` and the CLI exits 3, unless
the user opts out (``--allow-check-errors`` / ``allow_check_errors=True``): then the exit code
follows the policy and the entries are still reported.
"""
from __future__ import annotations

import dataclasses
import json

import jsonschema
import polars as pl
import pytest
from conftest import ROOT
from gatehelp import cli

import datacheck.checks.all  # noqa: F401 - every family registers its checks
from datacheck.checks.registry import CHECKS, RowCheck
from datacheck.execute.audit import audit
from datacheck.model.constants import EXIT_INTERNAL, EXIT_OK, EXIT_POLICY_FAILED
from datacheck.render.junit import junit_xml
from datacheck.render.text import render_text


def _data(tmp_path, texts=("a", "b", "c")):
    d = tmp_path / "data"
    d.mkdir()
    pl.DataFrame({"text": list(texts)}).write_parquet(d / "s.parquet")
    return d


#: the registered producer each kind of planted function replaces for one test
_STAND_IN = {"expression": "finite.inf", "shard": "finite.nan", "dataset": "dup.shard"}


@pytest.fixture
def extra_checks(monkeypatch):
    """Swap a registered check's function for a planted one, for one test (restored afterwards):
    ``add("shard", fn)`` replaces the shard function of ``finite.nan`` (``"expression"``: of
    ``finite.inf``), ``add("dataset", fn)`` the dataset function of ``dup.shard``."""

    def add(kind: str, fn) -> None:
        cid = _STAND_IN[kind]
        field = "dataset" if kind == "dataset" else "shard"
        monkeypatch.setitem(CHECKS, cid, dataclasses.replace(CHECKS[cid], **{field: fn}))

    return add


def _bad_expression(ctx):
    # strict string -> integer conversion of "a": raises InvalidOperationError when collected
    yield RowCheck(check="finite.inf", column="text", fails=pl.col("text").cast(pl.Int64, strict=True) > 0,
                   message=lambda n, d: f"{n} rows")


def _raising_function(ctx):
    raise RuntimeError("boom in a shard check function")


def _raising_dataset_function(dctx):
    raise ValueError("boom in a dataset check function")
    yield  # pragma: no cover - makes this a generator, as the families are


def _errors(rep):
    return [s for s in rep.skipped if s.get("error")]


def test_failing_expression_fails_the_api_gate(tmp_path, extra_checks):
    extra_checks("expression", _bad_expression)
    rep = audit(_data(tmp_path))
    assert rep.summary["check_errors"] == 1
    assert rep.status == "fail"
    assert rep.passed is False
    (e,) = _errors(rep)
    assert e["check"] == "finite.inf"
    assert e["shards"] == ["s.parquet"]
    assert "could not run on this shard (text)" in e["reason"]
    with pytest.raises(Exception, match="check error"):
        rep.raise_for_policy()
    # the other checks still ran: the shard's stats are there
    assert rep.shards[0].rows == 3


def test_allow_check_errors_keeps_the_entries(tmp_path, extra_checks):
    extra_checks("expression", _bad_expression)
    rep = audit(_data(tmp_path), allow_check_errors=True)
    assert rep.summary["check_errors"] == 1
    assert rep.status == "pass"
    assert rep.passed is True
    assert len(_errors(rep)) == 1
    rep.raise_for_policy()  # does not raise


def test_failing_expression_cli_exit_3(tmp_path, extra_checks, monkeypatch):
    extra_checks("expression", _bad_expression)
    d = _data(tmp_path)
    r = cli("audit", str(d), "--no-cache", "--report-dir", str(tmp_path / "rep"), "--format", "json",
            monkeypatch=monkeypatch)
    assert r.returncode == EXIT_INTERNAL, r.stderr
    body = json.loads(r.stdout)
    assert body["summary"]["check_errors"] == 1
    assert body["summary"]["status"] == "fail"
    assert "check error" in r.stderr
    r = cli("audit", str(d), "--no-cache", "--report-dir", str(tmp_path / "rep"), "--allow-check-errors",
            monkeypatch=monkeypatch)
    assert r.returncode == EXIT_OK, r.stderr


def test_allowed_check_errors_exit_per_policy(tmp_path, extra_checks, monkeypatch):
    extra_checks("expression", _bad_expression)
    d = _data(tmp_path, texts=("a", "", "c"))  # a planted empty text: the policy fails (exit 1)
    r = cli("audit", str(d), "--no-cache", "--report-dir", str(tmp_path / "rep"), "--allow-check-errors",
            monkeypatch=monkeypatch)
    assert r.returncode == EXIT_POLICY_FAILED, r.stderr


def test_raising_shard_function_is_caught_per_check(tmp_path, extra_checks):
    extra_checks("shard", _raising_function)
    rep = audit(_data(tmp_path, texts=("a", "", "c")))
    assert rep.summary["check_errors"] == 1
    (e,) = _errors(rep)
    assert e["check"] == "finite.nan"
    assert "RuntimeError: boom in a shard check function" in e["reason"]
    # the built-in checks still ran and found the planted empty text
    assert [f.count for f in rep.findings if f.check == "empty.text"] == [1]
    assert rep.status == "fail"


def test_raising_dataset_function_is_a_check_error(tmp_path, extra_checks, monkeypatch):
    extra_checks("dataset", _raising_dataset_function)
    d = _data(tmp_path)
    rep = audit(d)
    assert rep.summary["check_errors"] == 1
    (e,) = _errors(rep)
    assert e["check"] == "dup.shard"
    assert e["shards"] == []
    assert "ValueError: boom in a dataset check function" in e["reason"]
    assert rep.passed is False
    r = cli("audit", str(d), "--no-cache", "--report-dir", str(tmp_path / "rep"), monkeypatch=monkeypatch)
    assert r.returncode == EXIT_INTERNAL


def test_merge_of_parts_with_check_errors(tmp_path, extra_checks, monkeypatch):
    extra_checks("expression", _bad_expression)
    d = tmp_path / "data"
    d.mkdir()
    for k in range(3):
        pl.DataFrame({"text": [f"r{k}", f"q{k}"]}).write_parquet(d / f"s{k}.parquet")
    outs = []
    for k in range(2):
        out = tmp_path / f"part{k}.json"
        r = cli("audit", str(d), "--no-cache", "--report-dir", str(tmp_path / "rep"), "--num-parts", "2",
                "--part", str(k), "-o", str(out), "--allow-check-errors", monkeypatch=monkeypatch)
        assert r.returncode == EXIT_OK, r.stderr
        outs.append(str(out))
    r = cli("merge", *outs, "--report-dir", str(tmp_path / "rep"), "--format", "json", monkeypatch=monkeypatch)
    assert r.returncode == EXIT_INTERNAL, r.stderr
    assert json.loads(r.stdout)["summary"]["check_errors"] == 3  # one per shard
    r = cli("merge", *outs, "--report-dir", str(tmp_path / "rep"), "--allow-check-errors", monkeypatch=monkeypatch)
    assert r.returncode == EXIT_OK, r.stderr


def test_clean_audit_has_no_check_errors_key(tmp_path):
    rep = audit(_data(tmp_path))
    assert "check_errors" not in rep.summary
    assert not _errors(rep)
    assert "error" not in json.dumps(rep.to_dict()["skipped"])


def test_check_error_report_matches_the_schema_and_renders(tmp_path, extra_checks, monkeypatch):
    extra_checks("expression", _bad_expression)
    extra_checks("shard", _raising_function)
    rep = audit(_data(tmp_path))
    assert rep.summary["check_errors"] == 2
    jsonschema.validate(json.loads(rep.to_json()), json.loads((ROOT / "schemas" / "report.schema.json").read_text()))
    text = render_text(rep)
    assert "2 CHECK ERROR(S)" in text
    assert "finite.inf [CHECK ERROR]: could not run on this shard (text)" in text
    xml = junit_xml(rep)
    assert 'errors="2"' in xml
    assert xml.count('type="datacheck.check_error"') == 2
    assert 'name="finite.nan"' in xml
