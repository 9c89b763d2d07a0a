"""``datacheck clean`` names the shard-level findings it leaves in the copy, not only the dataset-level
ones: the rows of a row-level check that was not dropped (counted on the kept rows) and a shard-level
check clean cannot drop (``schema.dtype``: not known without auditing the copy). Its verdict on the
copy ("still FAILS the gate" / "may still fail" / nothing) agrees with auditing the copy, and clean
data draws no such line.

The expected rows are computed here from the values written (``math.isnan`` / ``math.isinf``)."""
from __future__ import annotations

import json
import math
import shutil

import polars as pl
from conftest import run_cli

TARGETS = [0.5, float("nan"), float("inf"), 1.0, float("nan"), 2.0]


def _data(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    pl.DataFrame({"text": [f"row {i}" for i in range(len(TARGETS))], "target": TARGETS}).write_parquet(
        data / "train.parquet")
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text('[columns]\ntext = ["text"]\ntarget = "target"\n')
    return data, cfg


def _clean(data, out, cfg, *drop):
    args = ["clean", str(data), "--out", str(out), "--config", str(cfg), *[a for d in drop for a in ("--drop", d)]]
    j = run_cli(*args, "--format", "json")
    assert j.returncode == 0, j.stderr
    shutil.rmtree(out)
    t = run_cli(*args)
    assert t.returncode == 0 and "Traceback" not in t.stderr, t.stderr
    return json.loads(j.stdout)["result"], t.stdout


def _audit_rc(out, cfg, tmp_path):
    return run_cli("audit", str(out), "--config", str(cfg), "--report-dir", str(tmp_path / "reports")).returncode


def test_a_row_check_not_dropped_is_left_with_its_kept_rows(tmp_path):
    data, cfg = _data(tmp_path)
    nan_rows = [i for i, v in enumerate(TARGETS) if math.isnan(v)]
    assert nan_rows == [1, 4]
    res, text = _clean(data, tmp_path / "out", cfg, "finite.inf")
    left = {x["check"]: x for x in res["left_in_place"]}
    assert "finite.inf" not in left  # dropped: none left
    assert left["finite.nan"]["left"] == len(nan_rows) and left["finite.nan"]["fails_policy"] is True
    assert "still FAILS the gate (--fail-on error) on: finite.nan" in text
    assert _audit_rc(tmp_path / "out", cfg, tmp_path) == 1  # the copy does fail


def test_dropping_every_failing_check_leaves_no_line_and_the_copy_passes(tmp_path):
    data, cfg = _data(tmp_path)
    res, text = _clean(data, tmp_path / "out", cfg, "finite.inf,finite.nan")
    assert res["left_in_place"] == []
    assert "FAIL" not in text and "may still fail" not in text
    assert _audit_rc(tmp_path / "out", cfg, tmp_path) == 0


def test_a_shard_level_error_clean_cannot_drop_is_named(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    # 'source' has no role: its string is read as null and no row check drops that row
    lines = ['{"text": "a", "source": 1}', '{"text": "b", "source": "web"}', '{"text": "c", "source": 3}']
    (data / "train.jsonl").write_text("\n".join(lines) + "\n")
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text("")
    res, text = _clean(data, tmp_path / "out", cfg)
    (left,) = [x for x in res["left_in_place"] if x["check"] == "schema.dtype"]
    assert left["left"] is None and left["fails_policy"] is True and "train.jsonl" in left["message"]
    assert "may still fail the gate on: schema.dtype" in text
    assert _audit_rc(tmp_path / "out", cfg, tmp_path) == 1


def test_the_verdict_names_the_checks_that_may_fail_beside_those_that_do(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    same = '{"text": "x", "source": 1}\n{"text": "y", "source": 2}\n'
    (data / "a.jsonl").write_text(same)
    (data / "b.jsonl").write_text(same)  # dup.shard (error): left, since it is not dropped
    (data / "c.jsonl").write_text('{"text": "z", "source": 1}\n{"text": "w", "source": "web"}\n')  # schema.dtype
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text("")
    res, text = _clean(data, tmp_path / "out", cfg)
    verdict = next(ln for ln in text.splitlines() if ln.startswith("the cleaned copy"))
    assert "still FAILS the gate (--fail-on error) on: dup.shard" in verdict and "schema.dtype" in verdict, verdict
    assert _audit_rc(tmp_path / "out", cfg, tmp_path) == 1
