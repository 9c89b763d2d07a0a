"""[policy] thresholds at their edges, severity override, ignore, --fail-on, unknown check IDs."""
from __future__ import annotations

import polars as pl
import pytest
from gatehelp import cli

from datacheck.execute.audit import audit
from datacheck.model.config import config_from_dict
from datacheck.model.findings import Finding
from datacheck.report.policy import CheckTotal, apply_policy, check_totals


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


def _sharded_texts(tmp_path, empties: list[int], rows: int = 10):
    """One parquet shard per entry of ``empties``, each of ``rows`` texts, that many of them empty."""
    d = tmp_path / "sharded"
    d.mkdir()
    for k, n_empty in enumerate(empties):
        texts = [""] * n_empty + [f"s{k}t{i}" for i in range(rows - n_empty)]
        pl.DataFrame({"text": texts}).write_parquet(d / f"part-{k:03d}.parquet")
    return d


@pytest.mark.parametrize("empties, max_count", [([2, 2, 2], 5), ([2, 2, 2], 6), ([1] * 12, 11), ([1] * 12, 12),
                                                ([3, 0, 4], 6), ([3, 0, 4], 7)])
def test_max_count_is_held_to_the_dataset_total_not_each_shard(tmp_path, empties, max_count):
    """Every shard under the threshold, the dataset over it: the gate fails (the shards' counts add up);
    at the threshold it passes. The verdict is the one-shard verdict of the same rows."""
    d = _sharded_texts(tmp_path, empties)
    total = sum(empties)
    rep = audit(d, {"policy": {"empty.text": {"max_count": max_count}}})
    found = [f for sh in rep.shards for f in sh.findings if f.check == "empty.text"]
    assert sorted(f.count for f in found) == sorted(n for n in empties if n)
    fails = total > max_count
    assert {f.fails_policy for f in found} == {fails}
    assert rep.passed is (not fails)
    assert rep.summary["policy_failures"] == (len(found) if fails else 0)
    (tmp_path / "one").mkdir()
    one = audit(_texts(tmp_path / "one", len(empties) * 10, total), {"policy": {"empty.text": {"max_count": max_count}}})
    assert one.passed is rep.passed  # resharding the same rows does not change the verdict


@pytest.mark.parametrize("empties, max_ratio", [([2, 0], 0.1), ([2, 0], 0.09), ([2, 1, 0, 0], 0.075),
                                                ([2, 1, 0, 0], 0.07)])
def test_max_ratio_is_the_dataset_count_over_the_dataset_rows(tmp_path, empties, max_ratio):
    """A shard at 20% empty in a dataset at 10% passes max_ratio = 0.1 (the shard's own ratio stays in
    its finding); the ratio held to the threshold is the dataset's."""
    d = _sharded_texts(tmp_path, empties)
    rep = audit(d, {"policy": {"empty.text": {"max_ratio": max_ratio}}})
    found = [f for sh in rep.shards for f in sh.findings if f.check == "empty.text"]
    assert [f.ratio for f in found] == [n / 10 for n in empties if n]  # each finding keeps its shard's ratio
    fails = sum(empties) / (10 * len(empties)) > max_ratio
    assert {f.fails_policy for f in found} == {fails}
    assert rep.passed is (not fails)


def test_check_totals_sum_shards_and_columns_and_keep_dataset_only_ratios():
    nan_a = Finding(check="finite.nan", severity="error", message="m", column="a", count=3, ratio=0.3)
    nan_b = Finding(check="finite.nan", severity="error", message="m", column="b", count=4, ratio=0.4)
    across = Finding(check="dup.exact_across_shards", severity="warn", message="m", count=5, ratio=0.25)
    got = check_totals([nan_a, nan_b], [across], 20)
    assert got == {"finite.nan": CheckTotal(7, 7 / 20), "dup.exact_across_shards": CheckTotal(5, None)}
    cfg = config_from_dict({"policy": {"dup.exact_across_shards": {"max_ratio": 0.25},
                                       "finite.nan": {"max_count": 6}}})
    assert apply_policy(across, cfg, "warn", 20, got["dup.exact_across_shards"]).fails_policy is False
    assert apply_policy(nan_a, cfg, "error", 10, got["finite.nan"]).fails_policy is True  # 3 alone would pass
    assert check_totals([], [], 0) == {}
