"""A stored report is keyed by the data's bytes and by what audited them (the config and the gate's
``--fail-on``): two audits of the same data under a strict and a lenient ``[policy]``, or with
``--fail-on error`` and ``warn``, keep both reports, and an index hash alone names a report only while
one is stored (:func:`datacheck.report.model.find_report`). Reports stored
by earlier versions as ``<report-dir>/<index_hash>/report.json`` are still found."""
from __future__ import annotations

import hashlib
import json
import shutil

import polars as pl
import pytest
from conftest import run_cli  # noqa: E402

from datacheck.model.errors import UsageError
from datacheck.report.model import find_report, read_report

STRICT = '[policy]\n"empty.text" = { severity = "error" }\n'
LENIENT = '[policy]\n"empty.text" = { severity = "warn" }\n'


@pytest.fixture
def two_configs(tmp_path):
    """The same data audited under a strict and a lenient config: (report dir, {name: --output report})."""
    d = tmp_path / "d"
    d.mkdir()
    pl.DataFrame({"text": ["a", "", "b"]}).write_parquet(d / "a.parquet")  # one empty text: empty.text
    rep = tmp_path / "reports"
    out = {}
    for name, text in (("strict", STRICT), ("lenient", LENIENT)):
        cfg = tmp_path / f"{name}.toml"
        cfg.write_text(text)
        r = run_cli("audit", str(d), "--config", str(cfg), "--no-cache", "--report-dir", str(rep),
                    "--fail-on", "error", "-o", str(tmp_path / f"{name}.json"))
        assert r.returncode == (1 if name == "strict" else 0), r.stderr
        out[name] = json.loads((tmp_path / f"{name}.json").read_text())
    return rep, out


def test_two_configs_of_the_same_data_keep_both_reports(two_configs, tmp_path):
    rep, out = two_configs
    assert out["strict"]["index_hash"] == out["lenient"]["index_hash"]  # the same bytes
    assert out["strict"]["summary"]["status"] == "fail" and out["lenient"]["summary"]["status"] == "warn"
    stored = sorted(rep.rglob("report.json"))
    assert len(stored) == 2  # neither overwrote the other
    for name in ("strict", "lenient"):
        cfg_hex = out[name]["config_hash"].split(":", 1)[1]
        path = rep / out[name]["index_hash"] / cfg_hex / "report.json"
        assert path.read_bytes() == (tmp_path / f"{name}.json").read_bytes()
    assert not list(rep.rglob("*.tmp"))  # written atomically


def test_an_index_hash_alone_is_refused_when_several_configs_audited_the_data(two_configs):
    rep, out = two_configs
    h = out["strict"]["index_hash"]
    with pytest.raises(UsageError) as err:
        find_report(h[:8], rep)
    msg = str(err.value)
    assert "2 reports of this data under different configs" in msg
    for name in ("strict", "lenient"):  # each stored config is named with the reference that picks it
        assert f"{h}/{out[name]['config_hash'].split(':', 1)[1][:8]}" in msg
        assert f"{name}.toml" in msg
    r = run_cli("report", h, "--report-dir", str(rep))
    assert r.returncode == 2 and "different configs" in r.stderr
    # INDEX/CONFIG (prefixes) names each one
    for name in ("strict", "lenient"):
        cfg_hex = out[name]["config_hash"].split(":", 1)[1]
        got = read_report(find_report(f"{h[:8]}/{cfg_hex[:6]}", rep))
        assert (got.index_hash, got.config_hash, got.summary["status"]) == (
            h, out[name]["config_hash"], out[name]["summary"]["status"])
    assert run_cli("diff", f"{h}/{out['lenient']['config_hash'][7:15]}",
                   f"{h}/{out['strict']['config_hash'][7:15]}", "--report-dir", str(rep)).returncode == 1
    with pytest.raises(UsageError, match="no stored report of this data matches"):
        find_report(f"{h}/{'0' * 8 if not out['strict']['config_hash'][7:].startswith('0') else 'f' * 8}", rep)


def test_reports_stored_by_earlier_versions_are_found(two_configs, tmp_path):
    rep, out = two_configs
    h = out["strict"]["index_hash"]
    old = tmp_path / "old"
    (old / h).mkdir(parents=True)
    shutil.copy(tmp_path / "lenient.json", old / h / "report.json")  # the layout before config folders
    assert find_report(h[:8], old) == old / h / "report.json"
    lenient_hex = out["lenient"]["config_hash"].split(":", 1)[1]
    assert find_report(f"{h[:8]}/{lenient_hex[:6]}", old) == old / h / "report.json"  # its config read from it
    # a current-layout report of another config beside it: both listed, neither chosen silently
    strict_hex = out["strict"]["config_hash"].split(":", 1)[1]
    (old / h / strict_hex).mkdir()
    shutil.copy(tmp_path / "strict.json", old / h / strict_hex / "report.json")
    with pytest.raises(UsageError, match="2 reports of this data under different configs"):
        find_report(h, old)
    assert find_report(f"{h}/{strict_hex[:6]}", old) == old / h / strict_hex / "report.json"
    assert find_report(f"{h}/{lenient_hex[:6]}", old) == old / h / "report.json"
    # the same config in both layouts is one report: the current layout's file
    shutil.rmtree(old / h / strict_hex)
    (old / h / lenient_hex).mkdir()
    shutil.copy(tmp_path / "lenient.json", old / h / lenient_hex / "report.json")
    assert find_report(h, old) == old / h / lenient_hex / "report.json"


def test_the_config_folder_is_the_config_hash_digits(two_configs):
    rep, out = two_configs
    for name in ("strict", "lenient"):
        algo, digits = out[name]["config_hash"].split(":", 1)
        assert algo == "sha256" and len(digits) == hashlib.sha256().digest_size * 2
        assert (rep / out[name]["index_hash"] / digits).is_dir()


def test_the_gates_fail_on_is_part_of_the_key(two_configs, tmp_path):
    """The same data and config gated with --fail-on error and warn: the same findings, another verdict."""
    rep, out = two_configs
    h, lenient_hex = out["lenient"]["index_hash"], out["lenient"]["config_hash"].split(":", 1)[1]
    r = run_cli("audit", str(tmp_path / "d"), "--config", str(tmp_path / "lenient.toml"), "--no-cache",
                "--report-dir", str(rep), "--fail-on", "warn", "-o", str(tmp_path / "warn.json"))
    assert r.returncode == 1, r.stderr  # the lenient config's warning fails a --fail-on warn gate
    warn = json.loads((tmp_path / "warn.json").read_text())
    assert (warn["config_hash"], warn["fail_on"], warn["summary"]["status"]) == (out["lenient"]["config_hash"],
                                                                                  "warn", "fail")
    assert (rep / h / f"{lenient_hex}.fail-on-warn" / "report.json").read_bytes() == (tmp_path / "warn.json").read_bytes()
    assert (rep / h / lenient_hex / "report.json").read_bytes() == (tmp_path / "lenient.json").read_bytes()
    assert len(list(rep.rglob("report.json"))) == 3
    with pytest.raises(UsageError) as err:  # the config alone names two reports: both listed, gate spelled out
        find_report(f"{h}/{lenient_hex[:8]}", rep)
    assert f"{h}/{lenient_hex[:8]}.fail-on-warn" in str(err.value) and f"{h}/{lenient_hex[:8]}.fail-on-error" in str(err.value)
    assert find_report(f"{h}/{lenient_hex[:8]}.fail-on-warn", rep) == rep / h / f"{lenient_hex}.fail-on-warn" / "report.json"
    assert find_report(f"{h}/{lenient_hex[:8]}.fail-on-error", rep) == rep / h / lenient_hex / "report.json"
