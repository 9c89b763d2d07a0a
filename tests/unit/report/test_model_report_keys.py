"""Where a report is stored and how it is named again (:mod:`datacheck.report.model`).

Every audit stores its report as ``<report-dir>/<index_hash>/report.json`` (DESIGN.md CLI contract: the
latest audit of that data wins, whatever its config) and also, with the same bytes, as the config-keyed
copy ``<report-dir>/<index_hash>/<config hash hex>[.fail-on-X]/report.json``: two audits of the same data
under a strict and a lenient ``[policy]``, or with ``--fail-on error`` and ``warn``, each keep the report
they were gated on. ``INDEX`` (or a prefix) names the contract file, never refused; ``INDEX/CONFIG
[.fail-on-X]`` names a copy (:func:`datacheck.report.model.find_report`)."""
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


def hexof(report: dict) -> str:
    """The hex digits of a report's ``config_hash`` (``sha256:<hex>``): its copy's folder name."""
    algo, digits = report["config_hash"].split(":", 1)
    assert algo == "sha256"
    return digits


@pytest.fixture
def two_configs(tmp_path):
    """The same data audited under a strict, then a lenient config: (report dir, {name: --output report})."""
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
        h = out[name]["index_hash"]
        assert f"report: {rep / h / 'report.json'}\nconfig copy: {rep / h / hexof(out[name]) / 'report.json'}\n" \
            in r.stdout
    return rep, out


def test_the_contract_file_holds_the_latest_audit_and_each_config_keeps_its_copy(two_configs, tmp_path):
    rep, out = two_configs
    h = out["strict"]["index_hash"]
    assert out["lenient"]["index_hash"] == h  # the same bytes
    assert out["strict"]["summary"]["status"] == "fail" and out["lenient"]["summary"]["status"] == "warn"
    # the contract's file: exactly <report-dir>/<index_hash>/report.json, the latest audit's (lenient) bytes
    assert (rep / h / "report.json").read_bytes() == (tmp_path / "lenient.json").read_bytes()
    for name in ("strict", "lenient"):  # each config's copy: the bytes of that audit
        assert (rep / h / hexof(out[name]) / "report.json").read_bytes() == (tmp_path / f"{name}.json").read_bytes()
    assert len(list(rep.rglob("report.json"))) == 3
    assert not [p for p in rep.rglob("*") if p.is_file() and p.name != "report.json"]  # written atomically


def test_an_index_hash_names_the_contract_file_whatever_copies_are_stored(two_configs, tmp_path):
    rep, out = two_configs
    h = out["strict"]["index_hash"]
    for ref in (h, h[:8], h[:6]):
        assert find_report(ref, rep) == rep / h / "report.json"
    r = run_cli("report", h, "--report-dir", str(rep), "--format", "json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["config_hash"] == out["lenient"]["config_hash"]  # the latest audit's
    # a note names the other config's copy (not the rendered one's) and how to pick it
    strict_ref, lenient_ref = (f"{h}/{hexof(out[n])[:8]}" for n in ("strict", "lenient"))
    assert r.stderr.count("\n") == 1 and "datacheck: note: " in r.stderr and "name one as INDEX/CONFIG" in r.stderr
    assert f"{strict_ref} (config {tmp_path / 'strict.toml'}, fail_on error" in r.stderr
    assert f"{lenient_ref} (" not in r.stderr
    r = run_cli("report", f"{h}/{hexof(out['strict'])[:8]}", "--report-dir", str(rep), "--format", "json")
    assert r.returncode == 0 and json.loads(r.stdout)["config_hash"] == out["strict"]["config_hash"]
    assert f"{lenient_ref} (config {tmp_path / 'lenient.toml'}" in r.stderr and f"{strict_ref} (" not in r.stderr
    r = run_cli("report", str(rep / h / "report.json"))  # a file named: no note
    assert r.returncode == 0 and r.stderr == ""


def test_index_slash_config_names_each_copy(two_configs, tmp_path):
    rep, out = two_configs
    h = out["strict"]["index_hash"]
    for name in ("strict", "lenient"):
        for ref in (f"{h}/{hexof(out[name])}", f"{h[:8]}/{hexof(out[name])[:6]}",
                    f"{h[:8]}/{hexof(out[name])[:8]}.fail-on-error"):
            assert find_report(ref, rep) == rep / h / hexof(out[name]) / "report.json"
        got = read_report(find_report(f"{h[:8]}/{hexof(out[name])[:6]}", rep))
        assert (got.index_hash, got.config_hash, got.summary["status"]) == (
            h, out[name]["config_hash"], out[name]["summary"]["status"])
    # diff of the two copies: the strict one fails the policy where the lenient one warned
    r = run_cli("diff", f"{h}/{hexof(out['lenient'])[:8]}", f"{h}/{hexof(out['strict'])[:8]}", "--report-dir", str(rep))
    assert r.returncode == 1, r.stderr
    assert run_cli("diff", h, f"{h}/{hexof(out['lenient'])[:8]}", "--report-dir", str(rep)).returncode == 0
    other = next(c for c in "0123456789abcdef" if not any(hexof(o).startswith(c) for o in out.values())) * 8
    with pytest.raises(UsageError) as err:
        find_report(f"{h}/{other}", rep)
    msg = str(err.value)  # each stored copy named with the reference that picks it
    assert "no stored report of this data matches" in msg
    for name in ("strict", "lenient"):
        assert f"{h}/{hexof(out[name])[:8]} (config {tmp_path / f'{name}.toml'}" in msg
    r = run_cli("report", f"{h}/{other}", "--report-dir", str(rep))
    assert r.returncode == 2 and "no stored report of this data matches" in r.stderr and "Traceback" not in r.stderr


def test_the_gates_fail_on_is_part_of_the_copys_key(two_configs, tmp_path):
    """The same data and config gated with --fail-on error and warn: the same findings, another verdict."""
    rep, out = two_configs
    h, lenient = out["lenient"]["index_hash"], hexof(out["lenient"])
    r = run_cli("audit", str(tmp_path / "d"), "--config", str(tmp_path / "lenient.toml"), "--no-cache",
                "--report-dir", str(rep), "--fail-on", "warn", "-o", str(tmp_path / "warn.json"))
    assert r.returncode == 1, r.stderr  # the lenient config's warning fails a --fail-on warn gate
    warn = json.loads((tmp_path / "warn.json").read_text())
    assert (warn["config_hash"], warn["fail_on"], warn["summary"]["status"]) == (out["lenient"]["config_hash"],
                                                                                  "warn", "fail")
    assert (rep / h / "report.json").read_bytes() == (tmp_path / "warn.json").read_bytes()  # the latest
    assert (rep / h / f"{lenient}.fail-on-warn" / "report.json").read_bytes() == (tmp_path / "warn.json").read_bytes()
    assert (rep / h / lenient / "report.json").read_bytes() == (tmp_path / "lenient.json").read_bytes()
    assert len(list(rep.rglob("report.json"))) == 4
    with pytest.raises(UsageError) as err:  # the config alone names two copies: both listed, gate spelled out
        find_report(f"{h}/{lenient[:8]}", rep)
    assert f"{h}/{lenient[:8]}.fail-on-warn" in str(err.value) and f"{h}/{lenient[:8]}.fail-on-error" in str(err.value)
    assert find_report(f"{h}/{lenient[:8]}.fail-on-warn", rep) == rep / h / f"{lenient}.fail-on-warn" / "report.json"
    assert find_report(f"{h}/{lenient[:8]}.fail-on-error", rep) == rep / h / lenient / "report.json"
    assert find_report(h, rep) == rep / h / "report.json"  # never refused


def test_a_report_stored_without_copies_is_found_by_its_own_config(two_configs, tmp_path):
    """A report folder of a datacheck that wrote no copies (only ``<index_hash>/report.json``)."""
    rep, out = two_configs
    h = out["strict"]["index_hash"]
    old = tmp_path / "old"
    (old / h).mkdir(parents=True)
    shutil.copy(tmp_path / "strict.json", old / h / "report.json")
    assert find_report(h[:8], old) == old / h / "report.json"
    assert find_report(f"{h[:8]}/{hexof(out['strict'])[:6]}", old) == old / h / "report.json"  # config read from it
    with pytest.raises(UsageError, match="no stored report of this data matches"):
        find_report(f"{h}/{hexof(out['lenient'])[:8]}", old)
    with pytest.raises(UsageError, match="no stored report of this data matches"):
        find_report(f"{h}/{hexof(out['strict'])[:8]}.fail-on-warn", old)  # its gate was error


def test_copies_without_the_contract_file_are_named(two_configs):
    rep, out = two_configs
    h = out["strict"]["index_hash"]
    (rep / h / "report.json").unlink()
    with pytest.raises(UsageError) as err:
        find_report(h, rep)
    for name in ("strict", "lenient"):
        assert f"{h}/{hexof(out[name])[:8]}" in str(err.value)
    assert find_report(f"{h[:8]}/{hexof(out['strict'])[:8]}", rep) == rep / h / hexof(out["strict"]) / "report.json"


def test_the_config_folder_is_the_config_hash_digits(two_configs):
    rep, out = two_configs
    for name in ("strict", "lenient"):
        digits = hexof(out[name])
        assert len(digits) == hashlib.sha256().digest_size * 2
        assert (rep / out[name]["index_hash"] / digits).is_dir()
