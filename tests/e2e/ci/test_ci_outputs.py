"""CI outputs: --junit (validated against tests/e2e/ci/junit.xsd and parsed back with junitparser),
GitHub Actions annotations under GITHUB_ACTIONS=true, --format markdown for the job summary."""
from __future__ import annotations

import json
from pathlib import Path

import junitparser
import polars as pl
import xmlschema
from gatehelp import cli

from datacheck.model.catalog import CATALOG
from datacheck.render.annotations import annotation_lines
from datacheck.report.model import read_report

XSD = Path(__file__).with_name("junit.xsd")


def _data(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    pl.DataFrame({"text": ["a", "", "b", " ", "c"], "label": [0, 1, 5, 1, 0]}).write_parquet(d / "a.parquet")
    pl.DataFrame({"text": ["x", "y"], "label": [1, 0]}).write_parquet(d / "b.parquet")
    (d / "c.jsonl").write_text('{"text": "ok", "label": 1}\n{"text": "bad, 50%\n')
    (d / "datacheck.toml").write_text('[labels]\nnum_classes = 2\n[policy]\n"empty.text" = { max_count = 5 }\n')
    return d


def test_junit_validates_and_parses_back(tmp_path, monkeypatch):
    d = _data(tmp_path)
    junit = tmp_path / "out" / "junit.xml"
    r = cli("audit", str(d), "--no-cache", "--junit", str(junit), "-o", str(tmp_path / "rep.json"),
            "--report-dir", str(tmp_path / "r"), monkeypatch=monkeypatch)
    assert r.returncode == 1
    xmlschema.XMLSchema(XSD).validate(junit)
    xml = junitparser.JUnitXml.fromfile(str(junit))
    (suite,) = list(xml)
    rep = read_report(tmp_path / "rep.json")
    per_shard = [c for c in CATALOG.values() if c.level in ("row", "shard")]
    per_dataset = [c for c in CATALOG.values() if c.level == "dataset"]
    assert suite.tests == 3 * len(per_shard) + len(per_dataset)
    cases = {(c.classname, c.name): c for c in suite}
    assert len(cases) == suite.tests
    failing = {k for k, c in cases.items() if any(isinstance(x, junitparser.Failure) for x in c.result)}
    assert failing == {("a.parquet", "labels.out_of_range"), ("c.jsonl", "decode.bad_record")}
    assert suite.failures == 2 and xml.failures == 2
    (fail,) = [x for x in cases[("a.parquet", "labels.out_of_range")].result if isinstance(x, junitparser.Failure)]
    assert fail.type == "labels.out_of_range"
    assert "outside [0, 2)" in fail.message
    assert "row 2: 5" in fail.text  # the first rows and their values
    # a finding the policy lets pass is a passing case that carries the finding in system-out
    empty = cases[("a.parquet", "empty.text")]
    assert empty.is_passed and "count 2" in empty.system_out
    # a check that could not run here (it applies, a fact is missing) is a skipped case; one that does
    # not apply to the rows (text-only classification rows hold no token ids) is not
    skipped = cases[("a.parquet", "schema.check")]
    assert skipped.is_skipped
    assert not cases[("a.parquet", "tokens.out_of_vocab")].is_skipped
    assert suite.skipped == sum(1 for c in cases.values() if c.is_skipped)
    props = {p.name: p.value for p in suite.properties()}
    assert props["index_hash"] == rep.index_hash and props["status"] == "fail"


def test_annotations_under_github_actions(tmp_path, monkeypatch):
    d = _data(tmp_path)
    r = cli("audit", str(d), "--no-cache", "--format", "json", "--report-dir", str(tmp_path / "r"), cwd=tmp_path,
            env={"GITHUB_ACTIONS": "true"}, monkeypatch=monkeypatch)
    assert r.returncode == 1
    json.loads(r.stdout)  # stdout stays the report
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("::")]
    assert lines[0].startswith("::error file=data/a.parquet,title=datacheck labels.out_of_range (label)::a.parquet: ")
    bad = [ln for ln in lines if "decode.bad_record" in ln]
    assert bad[0].startswith("::error file=data/c.jsonl,line=2,title=datacheck decode.bad_record::")
    warn = [ln for ln in lines if "empty.text" in ln]
    assert warn[0].startswith("::warning file=data/a.parquet,title=datacheck empty.text (text)::")
    assert len(lines) == 3
    quiet = cli("audit", str(d), "--no-cache", "--format", "json", "--report-dir", str(tmp_path / "r"), cwd=tmp_path,
                env={"GITHUB_ACTIONS": "false"}, monkeypatch=monkeypatch)
    assert not [ln for ln in quiet.stderr.splitlines() if ln.startswith("::")]


def test_annotation_escaping_and_limit(tmp_path, monkeypatch):
    d = _data(tmp_path)
    cli("audit", str(d), "--no-cache", "-o", str(tmp_path / "rep.json"), "--report-dir", str(tmp_path / "r"),
        monkeypatch=monkeypatch)
    rep = read_report(tmp_path / "rep.json")
    from dataclasses import replace

    sh = rep.shards[0]
    f = replace(sh.findings[0], message="50% of\nrows, a:b", fails_policy=True)
    rep2 = replace(rep, shards=(replace(sh, path="we,ird:name.parquet", findings=(f,) * 60),))
    lines = annotation_lines(rep2)
    assert len(lines) == 51 and lines[-1].startswith("::notice title=datacheck::10 more finding(s)")
    assert lines[0].startswith("::error file=we%2Cird%3Aname.parquet,")
    assert "50%25 of%0Arows, a:b" in lines[0]


def test_markdown_job_summary(tmp_path, monkeypatch):
    d = _data(tmp_path)
    r = cli("audit", str(d), "--no-cache", "--format", "markdown", "--report-dir", str(tmp_path / "r"),
            monkeypatch=monkeypatch)
    assert r.returncode == 1
    assert r.stdout.startswith("## ❌ datacheck: fail")
    assert "| `a.parquet` | 5 | fail | `labels.out_of_range` | `label` | error **(fails)** | 1 | rows 2 |" in r.stdout


def test_a_dataset_finding_that_names_its_shard_is_annotated_with_it_once(tmp_path, monkeypatch):
    """dist.length_drift's message starts with its shard's name: the annotation said it twice
    ("train.parquet: train.parquet: lengths ...")."""
    d = _data(tmp_path)
    cli("audit", str(d), "--no-cache", "-o", str(tmp_path / "rep.json"), "--report-dir", str(tmp_path / "r"),
        monkeypatch=monkeypatch)
    rep = read_report(tmp_path / "rep.json")
    from dataclasses import replace

    base = rep.shards[0].findings[0]
    named = replace(base, check="dist.length_drift", shards=("b.parquet",), message="b.parquet: lengths (chars) differ")
    other = replace(base, check="dup.conflicting_labels", shards=("b.parquet",), message="2 distinct content(s)")
    lines = annotation_lines(replace(rep, shards=(), dataset_findings=(named, other)))
    by = {ln.split("title=datacheck ")[1].split(" ")[0].split("::")[0]: ln.split("::", 2)[2] for ln in lines}
    assert by["dist.length_drift"].startswith("b.parquet: lengths (chars) differ [")
    assert by["dup.conflicting_labels"].startswith("b.parquet: 2 distinct content(s) [")
