"""``datacheck report`` and ``datacheck diff`` take a report file or an index hash: both resolve a
report reference with one function (:func:`datacheck.report.model.find_report`)."""
from __future__ import annotations

import polars as pl
import pytest
from conftest import run_cli  # noqa: E402

from datacheck.model.errors import UsageError
from datacheck.report.model import find_report, report_path


@pytest.fixture
def stored(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    pl.DataFrame({"text": ["a", ""]}).write_parquet(d / "a.parquet")
    rep = tmp_path / "reports"
    r = run_cli("audit", str(d), "--no-cache", "--report-dir", str(rep), "--fail-on", "never")
    assert r.returncode == 0, r.stderr
    (h,) = [p.name for p in rep.iterdir()]
    return rep, h


def test_report_accepts_an_index_hash_and_a_prefix(stored, tmp_path):
    rep, h = stored
    by_file = run_cli("report", str(report_path(rep, h)))
    for ref in (h, h[:8]):
        r = run_cli("report", ref, "--report-dir", str(rep))
        assert r.returncode == 0, r.stderr
        assert r.stdout == by_file.stdout and f"index_hash {h}" in r.stdout
    r = run_cli("report", h[:8], "--report-dir", str(rep), "--html", str(tmp_path / "r.html"))
    assert r.returncode == 0 and (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")
    # diff resolves the same way (one resolver)
    assert run_cli("diff", h[:8], h, "--report-dir", str(rep)).returncode == 0


def test_unknown_and_ambiguous_references(stored, tmp_path):
    rep, h = stored
    other = rep / (h[:6] + ("0" if h[6] != "0" else "1") + "f" * 25)  # shares 6 digits, not 7
    other.mkdir()
    (other / "report.json").write_text((rep / h / "report.json").read_text())
    with pytest.raises(UsageError, match="ambiguous index hash prefix"):
        find_report(h[:6], rep)
    assert find_report(h[:7], rep) == rep / h / "report.json"
    r = run_cli("report", "abcdef01", "--report-dir", str(rep))
    assert r.returncode == 2 and "no report file, and no report" in r.stderr and "Traceback" not in r.stderr
