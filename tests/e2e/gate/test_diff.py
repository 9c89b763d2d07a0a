"""``datacheck diff`` of two data versions of sample_data/: shards added/removed/changed, findings
new/resolved/grown, stats moved, exit 1 on new policy failures, index-hash lookup, bad input."""
from __future__ import annotations

import json
import shutil

import polars as pl
import pytest
from conftest import ROOT
from gatehelp import cli, load

from datacheck.report.model import read_report
from datacheck.tools.diff import STATS_REL_TOL, _stats_moved, diff_reports

SAMPLE = ROOT / "sample_data"


@pytest.fixture
def versions(tmp_path, monkeypatch):
    """v1: sample_data's clean sets plus two defect shards; v2: one shard removed, one added, two changed."""
    if not (SAMPLE / "cls_clean").is_dir():
        pytest.skip("sample_data/ is not generated")
    v1 = tmp_path / "v1"
    for sub in ("lm_clean", "cls_clean"):
        shutil.copytree(SAMPLE / sub, v1 / sub)
    (v1 / "defects").mkdir()
    shutil.copy(SAMPLE / "defects/empty/text.jsonl", v1 / "defects/text.jsonl")
    shutil.copy(SAMPLE / "defects/mask/batch.parquet", v1 / "defects/batch.parquet")
    cfg = SAMPLE / "datacheck.toml"
    reports = tmp_path / "reports"
    r1 = cli("audit", str(v1), "--config", str(cfg), "--no-cache", "--report-dir", str(reports),
             "-o", str(tmp_path / "old.json"), monkeypatch=monkeypatch)
    assert r1.returncode == 1
    v2 = tmp_path / "v2"
    shutil.copytree(v1, v2)
    (v2 / "defects/batch.parquet").unlink()  # removed: its mask/padding findings are resolved
    shutil.copy(SAMPLE / "defects/labels/classes.parquet", v2 / "defects/classes.parquet")  # added
    with open(v2 / "defects/text.jsonl", "a", encoding="utf-8") as f:  # changed: 2 more empty texts
        f.write('{"text": "", "label": 0}\n{"text": "   ", "label": 1}\n')
    train = pl.read_ndjson(v2 / "cls_clean/train.jsonl")  # changed: every label becomes 0
    train.with_columns(pl.lit(0, dtype=train["label"].dtype).alias("label")).write_ndjson(v2 / "cls_clean/train.jsonl")
    r2 = cli("audit", str(v2), "--config", str(cfg), "--no-cache", "--report-dir", str(reports),
             "-o", str(tmp_path / "new.json"), monkeypatch=monkeypatch)
    assert r2.returncode == 1
    return tmp_path, reports


def test_diff_of_two_data_versions(versions, monkeypatch):
    tmp, _ = versions
    old, new = read_report(tmp / "old.json"), read_report(tmp / "new.json")
    d = diff_reports(old, new)
    assert d.added == ["defects/classes.parquet"]
    assert d.removed == ["defects/batch.parquet"]
    assert [c[0] for c in d.changed] == ["cls_clean/train.jsonl", "defects/text.jsonl"]
    old_text = {f.check: f.count for s in old.shards if s.path == "defects/text.jsonl" for f in s.findings}
    assert [(x.where, x.check, x.old_count, x.new_count) for x in d.grown] == [
        ("defects/text.jsonl", "empty.text", old_text["empty.text"], old_text["empty.text"] + 2)]
    new_keys = {(x.where, x.check) for x in d.new}
    assert {("defects/classes.parquet", "labels.out_of_range"), ("defects/classes.parquet", "labels.null"),
            ("defects/classes.parquet", "labels.unexpected_sentinel")} <= new_keys
    resolved = {(x.where, x.check) for x in d.resolved}
    assert {("defects/batch.parquet", "mask.non_binary"), ("defects/batch.parquet", "mask.not_contiguous"),
            ("defects/batch.parquet", "padding.label_not_ignored")} <= resolved
    assert all(x.where == "defects/batch.parquet" or x.where == "dataset" for x in d.resolved)
    # label shares of the changed shard: every label is 0 now
    moved = {(m["scope"], m["stat"]): (m["old"], m["new"]) for m in d.stats_moved}
    train_old = next(s for s in old.shards if s.path == "cls_clean/train.jsonl").stats["labels"]["counts"]
    n = sum(c for _, c in train_old)
    share0 = dict((str(v), c) for v, c in train_old)["0"] / n
    assert moved[("cls_clean/train.jsonl", "labels.share[0]")] == (round(share0, 6), 1.0)
    assert moved[("cls_clean/train.jsonl", "labels.share[1]")][1] == 0.0
    assert ("dataset", "labels.share[0]") in moved
    # new policy failures: the added shard's label errors and the grown empty.text
    fails = {(x.where, x.check) for x in d.new_policy_failures}
    assert ("defects/classes.parquet", "labels.out_of_range") in fails
    assert ("defects/text.jsonl", "empty.text") in fails
    assert not any(x.where == "defects/batch.parquet" for x in d.new_policy_failures)

    r = cli("diff", str(tmp / "old.json"), str(tmp / "new.json"), monkeypatch=monkeypatch)
    assert r.returncode == 1
    assert "shards: 1 added, 1 removed, 2 changed" in r.stdout
    assert "  + defects/classes.parquet" in r.stdout and "  - defects/batch.parquet" in r.stdout
    assert f"grown    defects/text.jsonl: empty.text (text) [error] {old_text['empty.text']} -> {old_text['empty.text'] + 2} FAILS POLICY" in r.stdout
    md = cli("diff", str(tmp / "old.json"), str(tmp / "new.json"), "--format", "markdown", monkeypatch=monkeypatch)
    assert md.returncode == 1 and md.stdout.startswith("## ❌ datacheck diff")
    assert "| grown | `defects/text.jsonl` | `empty.text` | `text` |" in md.stdout  # a column name from the data: a code span, as in audit's markdown
    js = json.loads(cli("diff", str(tmp / "old.json"), str(tmp / "new.json"), "--format", "json",
                        monkeypatch=monkeypatch).stdout)["result"]
    assert js["shards"]["added"] == ["defects/classes.parquet"]


def test_diff_by_index_hash_and_no_new_failure(versions, monkeypatch):
    tmp, reports = versions
    old, new = load(tmp / "old.json"), load(tmp / "new.json")
    r = cli("diff", old["index_hash"], new["index_hash"][:10], "--report-dir", str(reports), monkeypatch=monkeypatch)
    assert r.returncode == 1 and "1 added, 1 removed" in r.stdout
    same = cli("diff", str(tmp / "new.json"), str(tmp / "new.json"), monkeypatch=monkeypatch)
    assert same.returncode == 0
    assert "findings: 0 new, 0 resolved, 0 grown, 0 reduced" in same.stdout
    back = cli("diff", str(tmp / "new.json"), str(tmp / "old.json"), monkeypatch=monkeypatch)
    assert back.returncode == 1  # going back brings batch.parquet's failures back


def test_diff_bad_input_is_exit_2(versions, monkeypatch):
    tmp, reports = versions
    old = load(tmp / "old.json")
    old["report_version"] = 0
    (tmp / "v0.json").write_text(json.dumps(old))
    r = cli("diff", str(tmp / "v0.json"), str(tmp / "new.json"), monkeypatch=monkeypatch)
    assert r.returncode == 2
    assert "cannot diff reports of different report_version (OLD 0, NEW 1)" in r.stderr
    old["report_version"] = 99
    (tmp / "v99.json").write_text(json.dumps(old))
    r = cli("diff", str(tmp / "new.json"), str(tmp / "v99.json"), monkeypatch=monkeypatch)
    assert r.returncode == 2 and "report_version 99 is newer" in r.stderr
    r = cli("diff", str(tmp / "nope.json"), str(tmp / "new.json"), monkeypatch=monkeypatch)
    assert r.returncode == 2 and "no such report file" in r.stderr
    r = cli("diff", "abcdef12", str(tmp / "new.json"), "--report-dir", str(reports), monkeypatch=monkeypatch)
    assert r.returncode == 2 and "abcdef12" in r.stderr
    for err in (r.stderr,):
        assert "Traceback" not in err


# ---------------------------------------------------------------- Float noise is no move
def test_float_noise_in_stats_is_not_a_move():
    old = {"lengths": {"min": 3, "p50": 80, "p90": 120, "p99": 200, "max": 512, "mean": 80.5992}}
    new = {"lengths": {"min": 3, "p50": 80, "p90": 120, "p99": 200, "max": 512, "mean": 80.59951905059337}}
    assert STATS_REL_TOL == 1e-4
    assert _stats_moved("dataset", old, new, 0.01) == []
    # a real move of the mean, and any change of an integer quantile, still count
    new2 = {"lengths": {**new["lengths"], "mean": 81.0, "max": 513}}
    got = {m["stat"] for m in _stats_moved("dataset", old, new2, 0.01)}
    assert got == {"lengths.mean", "lengths.max"}


def test_an_error_and_a_warning_of_one_check_and_column_are_two_deltas(tmp_path):
    """finite.fp16_overflow gives the regression shard's ``target`` an error row and a warning row: the
    diff keeps them apart (two deltas, their own counts), and only the error fails the policy."""
    import shutil

    import polars as pl

    import datacheck
    from datacheck.tools.diff import diff_reports

    src = ROOT / "sample_data" / "defects" / "finite" / "regression.parquet"
    cfg = {"numeric": {"compute_dtype": "fp16"}}
    fp16 = [f for f in datacheck.audit(str(src), cfg, fail_on="never").findings
            if f.check == "finite.fp16_overflow" and f.column == "target"]
    assert sorted(f.severity for f in fp16) == ["error", "warn"]  # the shard's own two findings on target
    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir()
    new.mkdir()
    pl.DataFrame({"target": [1.0, 2.0]}).write_parquet(old / "keep.parquet")
    shutil.copy(old / "keep.parquet", new / "keep.parquet")
    shutil.copy(src, new / "regression.parquet")
    d = diff_reports(datacheck.audit(str(old), cfg, fail_on="never"), datacheck.audit(str(new), cfg))
    got = sorted((x.severity, x.new_count, x.new_fails) for x in d.new
                 if x.check == "finite.fp16_overflow" and x.column == "target")
    assert got == sorted((f.severity, f.count, f.severity == "error") for f in fp16)
    assert [x.severity for x in d.new_policy_failures if x.check == "finite.fp16_overflow"
            and x.column == "target"] == ["error"]
