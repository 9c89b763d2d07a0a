"""Finding the config: one rule for every entry point (``datacheck.api.resolve_config_path``), used by
``audit``, ``inspect``, ``schema infer``, ``index build/verify`` and the Python API with
``config=None``; every output says which config was used."""
from __future__ import annotations

import json
import os

import polars as pl
import pytest
from conftest import run_cli

import datacheck
from datacheck.execute.setup import resolve_config_path
from datacheck.report.model import Report

BAD = {"text": ["a", "b", "c"], "label": [0, 1, 5]}  # 5 is out of range only with num_classes = 2
CFG = "[labels]\nnum_classes = 2\n"


@pytest.fixture
def sd(tmp_path):
    """tmp/work (the working folder, no config) and tmp/sd (data + its datacheck.toml)."""
    work = tmp_path / "work"
    work.mkdir()
    d = tmp_path / "sd"
    d.mkdir()
    pl.DataFrame(BAD).write_parquet(d / "a.parquet")
    pl.DataFrame({"text": ["x"], "label": [0]}).write_parquet(d / "b.parquet")
    (d / "datacheck.toml").write_text(CFG)
    return work, d


def _checks(doc: dict) -> set[str]:
    return {f["check"] for s in doc["shards"] for f in s["findings"]}


def test_resolution_order(sd, monkeypatch):
    work, d = sd
    monkeypatch.chdir(work)
    own = str(d / "datacheck.toml")
    assert resolve_config_path("x.toml", [str(d)]) == "x.toml"  # --config first
    assert resolve_config_path(None, [str(d)]) == own  # a folder PATH
    assert resolve_config_path(None, [str(d / "a.parquet")]) == own  # a file: its folder
    assert resolve_config_path(None, [str(d / "a.parquet"), str(d / "b.parquet")]) == own  # files of one folder
    assert resolve_config_path(None, [str(d / "*.parquet")]) == own  # a glob: the folder before the wildcard
    (work / "other").mkdir()
    assert resolve_config_path(None, [str(d), str(work / "other")]) is None  # two folders: none
    (d / "data").mkdir()
    assert resolve_config_path(None, [str(d / "data")]) == own  # a case folder with data/ inside
    (work / "datacheck.toml").write_text("")
    assert resolve_config_path(None, [str(d)]) == "datacheck.toml"  # ./datacheck.toml before the data's own


@pytest.mark.parametrize("target", ["folder", "file"])
def test_audit_cli_and_python_api_agree(sd, target):
    work, d = sd
    path = str(d if target == "folder" else d / "a.parquet")
    p = run_cli("audit", path, "--format", "json", "--no-cache", "--no-progress", "--report-dir", str(work / "r"),
                cwd=work)
    doc = json.loads(p.stdout)
    assert doc["config_path"] == str(d / "datacheck.toml")
    assert "labels.out_of_range" in _checks(doc) and p.returncode == 1
    cwd = os.getcwd()
    try:
        os.chdir(work)
        rep = datacheck.audit([path])
    finally:
        os.chdir(cwd)
    assert rep.config_path == str(d / "datacheck.toml")
    assert "labels.out_of_range" in {f.check for f in rep.findings}
    text = run_cli("audit", path, "--no-cache", "--no-progress", "--report-dir", str(work / "r"), cwd=work).stdout
    assert text.splitlines()[1] == f"config: {d / 'datacheck.toml'}"


def test_defaults_are_named(sd):
    work, d = sd
    (d / "datacheck.toml").unlink()
    text = run_cli("audit", str(d), "--no-cache", "--no-progress", "--report-dir", str(work / "r"), cwd=work).stdout
    assert text.splitlines()[1] == "config: none (defaults)"
    assert datacheck.audit(str(d), {}).config_path is None
    from datacheck.render.text import render_text

    rep = datacheck.audit(str(d), {"labels": {"num_classes": 2}})
    assert rep.config_path is None and render_text(rep).splitlines()[1] == (
        "config: none (the defaults changed by a config given in memory)")
    # read back from its JSON, the report no longer knows what changed them: every possibility is named
    assert render_text(Report.from_dict(json.loads(rep.to_json()))).splitlines()[1] == (
        "config: none (the defaults changed by --schema, a DatasetDict's declared splits, the splits the dataset "
        "card's configs declare or the Hub's file names give, the classes the data's ClassLabel declares or a config "
        "given in memory)")


def test_schema_flag_without_a_config_does_not_claim_a_config_in_memory(sd):
    """`datacheck audit DATA --schema NAME` with no datacheck.toml printed "config: none (given in memory)":
    the user gave none; the line now names what changes the defaults."""
    work, d = sd
    (d / "datacheck.toml").unlink()
    text = run_cli("audit", str(d), "--schema", "text_classification", "--no-cache", "--no-progress",
                   "--report-dir", str(work / "r"), cwd=work).stdout
    assert text.splitlines()[1] == "config: none (the defaults changed by --schema)"


def test_a_stray_working_folder_config_is_named(sd):
    work, d = sd
    (work / "datacheck.toml").write_text("[labels]\nnum_classes = 9\n")
    p = run_cli("audit", str(d), "--format", "json", "--no-cache", "--no-progress", "--report-dir", str(work / "r"),
                cwd=work)
    doc = json.loads(p.stdout)
    assert doc["config_path"] == "datacheck.toml" and "labels.out_of_range" not in _checks(doc)


def test_other_commands_use_the_same_rule(sd):
    work, d = sd
    own = str(d / "datacheck.toml")
    p = run_cli("inspect", str(d / "a.parquet"), "--format", "json", cwd=work)
    assert f"config: {own}" in p.stderr
    assert p.returncode == 1 and "labels.out_of_range:label" in json.loads(p.stdout)["result"]["shards"][0]["failing"]
    p = run_cli("schema", "infer", str(d), cwd=work)
    assert p.returncode == 0 and f"config: {own}" in p.stderr
    (d / "datacheck.toml").write_text('[dataset]\nformat = "parquet"\n[policy]\n"index.extra_shard" = { ignore = true }\n')
    p = run_cli("index", "build", str(d), "-o", str(work / "idx.json"), cwd=work)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[0] == f"config: {own}"
    pl.DataFrame({"text": ["n"], "label": [1]}).write_parquet(d / "new.parquet")
    p = run_cli("index", "verify", str(d), "--index", str(work / "idx.json"), "--format", "json", cwd=work)
    doc = json.loads(p.stdout)["result"]
    assert doc["config_path"] == own and doc["findings"] == [] and p.returncode == 0  # the folder's [policy] applied
