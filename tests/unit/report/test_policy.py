"""[policy] thresholds at their edges, severity override, ignore, --fail-on, unknown check IDs."""
from __future__ import annotations

import polars as pl
import pytest
from gatehelp import cli

from datacheck.execute.audit import audit
from datacheck.model.config import config_from_dict
from datacheck.model.findings import Finding
from datacheck.report.policy import apply_policy


def _texts(tmp_path, n_rows: int, n_empty: int):
    d = tmp_path / "data"
    d.mkdir()
    texts = [""] * n_empty + [f"t{i}" for i in range(n_rows - n_empty)]
    pl.DataFrame({"text": texts}).write_parquet(d / "s.parquet")
    return d


def _empty_text(rep):
    (f,) = [f for sh in rep.shards for f in sh.findings if f.check == "empty.text"]
    return f


@pytest.mark.parametrize("n_empty, max_count, fails", [(2, 2, False), (3, 2, True), (0, 0, None), (1, 0, True)])
def test_max_count_edge(tmp_path, n_empty, max_count, fails):
    d = _texts(tmp_path, 10, n_empty)
    rep = audit(d, {"policy": {"empty.text": {"max_count": max_count}}})
    if fails is None:
        assert not [f for sh in rep.shards for f in sh.findings if f.check == "empty.text"]
        assert rep.passed
        return
    f = _empty_text(rep)
    assert f.count == n_empty
    assert f.fails_policy is fails
    assert rep.passed is (not fails)
    assert rep.summary["policy_failures"] == int(fails)


@pytest.mark.parametrize("n_empty, max_ratio, fails", [(1, 0.1, False), (2, 0.1, True), (5, 0.5, False), (6, 0.5, True)])
def test_max_ratio_edge(tmp_path, n_empty, max_ratio, fails):
    d = _texts(tmp_path, 10, n_empty)
    rep = audit(d, {"policy": {"empty.text": {"max_ratio": max_ratio}}})
    f = _empty_text(rep)
    assert f.ratio == n_empty / 10
    assert f.fails_policy is fails


def test_apply_policy_count_equal_passes_one_more_fails():
    cfg = config_from_dict({"policy": {"finite.nan": {"max_count": 5, "max_ratio": 0.5}}})
    at = Finding(check="finite.nan", severity="error", message="m", count=5, ratio=0.5)
    assert apply_policy(at, cfg, "error", 10).fails_policy is False
    # both thresholds must be exceeded for the finding to fail (each one is a tolerance)
    assert apply_policy(at.with_(count=6, ratio=0.6), cfg, "error", 10).fails_policy is True
    assert apply_policy(at.with_(count=6, ratio=0.5), cfg, "error", 10).fails_policy is False
    # a ratio computed from the rows when the finding has none
    no_ratio = Finding(check="finite.nan", severity="error", message="m", count=6)
    assert apply_policy(no_ratio, cfg, "error", 12).fails_policy is False
    assert apply_policy(no_ratio, cfg, "error", 11).fails_policy is True


def test_severity_override_ignore_and_fail_on(tmp_path):
    d = _texts(tmp_path, 4, 1)
    rep = audit(d, {"policy": {"empty.text": {"severity": "warn"}}})
    f = _empty_text(rep)
    assert (f.severity, f.fails_policy, rep.status) == ("warn", False, "warn")
    rep = audit(d, {"policy": {"empty.text": {"severity": "warn"}}}, fail_on="warn")
    assert (_empty_text(rep).fails_policy, rep.status) == (True, "fail")
    rep = audit(d, {}, fail_on="never")
    assert (_empty_text(rep).fails_policy, rep.passed) == (False, True)
    rep = audit(d, {"policy": {"empty.text": {"ignore": True}}})
    assert [f.check for sh in rep.shards for f in sh.findings] == []
    assert rep.status == "pass"


def test_cli_exit_codes_at_the_edge(tmp_path, monkeypatch):
    d = _texts(tmp_path, 10, 2)
    cfg = tmp_path / "c.toml"
    cfg.write_text('[policy]\n"empty.text" = { max_count = 2 }\n')
    args = ["audit", str(d), "--config", str(cfg), "--no-cache", "--report-dir", str(tmp_path / "r")]
    assert cli(*args, monkeypatch=monkeypatch).returncode == 0
    cfg.write_text('[policy]\n"empty.text" = { max_count = 1 }\n')
    r = cli(*args, monkeypatch=monkeypatch)
    assert r.returncode == 1
    assert "error!" in r.stdout  # the text view marks the failing finding


def test_unknown_check_id_is_exit_2(tmp_path, monkeypatch):
    d = _texts(tmp_path, 3, 0)
    cfg = tmp_path / "c.toml"
    cfg.write_text('[policy]\n"dup.exact_in_shrd" = { severity = "warn" }\n')
    r = cli("audit", str(d), "--config", str(cfg), "--no-cache", "--report-dir", str(tmp_path / "r"),
            monkeypatch=monkeypatch)
    assert r.returncode == 2
    assert "unknown check ID 'dup.exact_in_shrd'" in r.stderr
    assert "policy" in r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "r").exists()  # nothing was audited
