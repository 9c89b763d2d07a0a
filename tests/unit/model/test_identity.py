"""The run's logged identity: another index_hash is refused, another config_hash (same bytes) is a warning."""
from __future__ import annotations

import contextlib
import io
import json

import polars as pl
import pytest

from datacheck import api
from datacheck.cli.main import main
from datacheck.model.identity import compare_identity, log_data_identity

GATE = {"columns": {"features": ["x1", "x2"], "label": "label"}}


def cli(*args):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(args))
    assert "Traceback" not in err.getvalue()
    return rc, out.getvalue(), err.getvalue()


@pytest.fixture
def run(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    x1 = [float(i) for i in range(40)]
    x1[13] = float("nan")
    pl.DataFrame({"x1": x1, "x2": [1.0] * 40, "label": [i % 2 for i in range(40)]}).write_parquet(data / "t.parquet")
    report = api.audit([str(data)], config=GATE)
    ident = io.StringIO()
    log_data_identity(report, stream=ident)
    log = tmp_path / "train.log"  # 4 rows a step; row 13 is in step 4, whose loss is NaN
    log.write_text(ident.getvalue() + "".join(f"step={s} loss={'nan' if s == 4 else 2.0 - s / 10} lr=0.1\n"
                                              for s in range(1, 9)))
    (tmp_path / "ledger").mkdir()
    (tmp_path / "ledger" / "rank0.tsv").write_text("".join(
        f"{s}\t" + "\t".join(str(r) for r in range(4 * (s - 1), 4 * s)) + "\n" for s in range(1, 9)))
    return tmp_path, data, log, report


def _toml(path, text):
    path.write_text(text)
    return str(path)


def test_same_config_no_warning_other_config_warns_not_refuses(run):
    root, data, log, report = run
    same = _toml(root / "same.toml", '[columns]\nfeatures = ["x1", "x2"]\nlabel = "label"\n')
    rc, out, err = cli("trace", str(log), "--data", str(data), "--config", same, "--ledger", str(root / "ledger"),
                       "--format", "json")
    res = json.loads(out)["result"]
    assert rc == 1 and res["data"]["warning"] is None
    assert res["logs"][0]["identity"] == {"index_hash": report.index_hash, "config_hash": report.config_hash}
    assert res["data"]["rows"]["row_checks"] == {"13": ["finite.nan:x1"]}
    other = _toml(root / "other.toml", '[columns]\nfeatures = ["x1"]\nlabel = "label"\n')  # x2 not audited
    rc, out, err = cli("trace", str(log), "--data", str(data), "--config", other, "--ledger", str(root / "ledger"),
                       "--format", "json")
    res = json.loads(out)["result"]
    assert rc == 1 and err == ""  # traced: a warning, not a refusal
    w = res["data"]["warning"]
    assert f"the data is the bytes the run trained on (index_hash {report.index_hash})" in w
    assert f"audited them under config_hash {report.config_hash} and this trace audits them under" in w
    assert res["data"]["rows"]["row_checks"] == {"13": ["finite.nan:x1"]}
    rc, out, _ = cli("trace", str(log), "--data", str(data), "--config", other, "--ledger", str(root / "ledger"))
    assert rc == 1 and "  warning: the data is the bytes the run trained on" in out


def test_other_bytes_still_refused_and_both_said_when_allowed(run):
    root, data, log, report = run
    df = pl.read_parquet(data / "t.parquet")
    df.with_columns(pl.col("x2") * 2).write_parquet(data / "t.parquet")
    other = _toml(root / "other.toml", '[columns]\nfeatures = ["x1"]\nlabel = "label"\n')
    rc, _, err = cli("trace", str(log), "--data", str(data), "--config", other, "--ledger", str(root / "ledger"))
    assert rc == 2 and "differs from the one the run logged" in err
    rc, out, _ = cli("trace", str(log), "--data", str(data), "--config", other, "--ledger", str(root / "ledger"),
                     "--allow-data-mismatch", "--format", "json")
    w = json.loads(out)["result"]["data"]["warning"]
    assert rc == 1 and w.startswith("the data's index_hash ") and "config_hash" not in w


def test_compare_identity_cases():
    assert compare_identity([], "a", "c") == (None, None)
    assert compare_identity([("a", "c"), ("b", "d")], "a", "c") == (None, None)
    mismatch, warn = compare_identity([("b", "c")], "a", "c")
    assert warn is None and mismatch.startswith("the data's index_hash a differs from the one the run logged (b)")
    mismatch, warn = compare_identity([("a", "d")], "a", "c")
    assert mismatch is None and "config_hash d and this trace audits them under c" in warn
