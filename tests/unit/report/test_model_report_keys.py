"""Where a report is stored and how it is named again (:mod:`datacheck.report.model`).

Every audit stores its report as ``<report-dir>/<index_hash>/report.json`` (DESIGN.md CLI contract: the
latest audit of that data wins, whatever its config) and also, with the same bytes, as the config-keyed
copy ``<report-dir>/<index_hash>/<config hash hex>[.fail-on-X][.against-K][.allow-check-errors]/report.json``:
two audits of the same data under a strict and a lenient ``[policy]``, with ``--fail-on error`` and
``warn``, with and without ``--against``, or with and without ``--allow-check-errors`` where a check
failed internally, each keep the report they were gated on. ``INDEX`` (or a prefix) names the contract file, never refused; ``INDEX/CONFIG
[.fail-on-X]`` names a copy (:func:`datacheck.report.model.find_report`)."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil

import polars as pl
import pytest
import xxhash
from conftest import run_cli  # noqa: E402

import datacheck.checks.all  # noqa: F401 - every family registers its checks
from datacheck.checks.registry import CHECKS, RowCheck
from datacheck.io import reportcopies
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


def against_key(tmp_path, *names: str) -> str:
    """The copy's ``--against`` part for the datasets ``names`` (folders under ``tmp_path``): the first
    16 hex digits of the xxh3-128 of their absolute paths, sorted and joined by NUL."""
    return xxhash.xxh3_128_hexdigest("\0".join(sorted(str(tmp_path / n) for n in names)).encode())[:16]


def test_against_is_part_of_the_copys_key(tmp_path, monkeypatch):
    """The same data and config audited alone, against one training set and against another: three
    reports (no overlap; one row found in ``t1``; two rows in ``t2``), three copies, none overwritten;
    ``INDEX/CONFIG`` names the audit without ``--against``, ``INDEX/CONFIG.against-K`` each other one."""
    monkeypatch.chdir(tmp_path)
    texts = ["the quick brown fox", "jumps over", "the lazy dog"]
    for name, rows in (("d", texts), ("t1", [texts[0], "something else"]), ("t2", [texts[1], texts[2]])):
        (tmp_path / name).mkdir()
        pl.DataFrame({"text": rows}).write_parquet(tmp_path / name / f"{name}.parquet")
    rep = tmp_path / "reports"
    runs = {"alone": [], "t1": ["--against", "t1"], "t2": ["--against", "./t2/"]}
    for name, extra in runs.items():
        r = run_cli("audit", "d", "--no-cache", "--report-dir", str(rep), "-o", f"{name}.json", *extra,
                    cwd=tmp_path)
        assert r.returncode == (0 if name == "alone" else 1), r.stderr
    out = {n: json.loads((tmp_path / f"{n}.json").read_text()) for n in runs}
    overlap = {n: sum(f["count"] for f in o["findings"] if f["check"] == "dup.split_overlap") for n, o in out.items()}
    assert overlap == {"alone": 0, "t1": 1, "t2": 2}  # rows of d found in each training set, by the data above
    h, digits = out["alone"]["index_hash"], hexof(out["alone"])
    assert {o["index_hash"] for o in out.values()} == {h} and {hexof(o) for o in out.values()} == {digits}
    folders = {"alone": digits, "t1": f"{digits}.against-{against_key(tmp_path, 't1')}",
               "t2": f"{digits}.against-{against_key(tmp_path, 't2')}"}
    for name, folder in folders.items():
        assert (rep / h / folder / "report.json").read_bytes() == (tmp_path / f"{name}.json").read_bytes()
    assert len(list(rep.rglob("report.json"))) == 4  # three copies and the contract file (the latest: t2)
    assert (rep / h / "report.json").read_bytes() == (tmp_path / "t2.json").read_bytes()
    assert find_report(f"{h[:8]}/{digits[:8]}", rep) == rep / h / digits / "report.json"
    for name in ("t1", "t2"):
        assert find_report(f"{h[:8]}/{folders[name][:8]}{folders[name][64:]}", rep) == \
            rep / h / folders[name] / "report.json"
    r = run_cli("report", f"{h}/{digits[:8]}", "--report-dir", str(rep))  # the other two are named
    assert r.returncode == 0 and f"{h}/{digits[:8]}.against-{against_key(tmp_path, 't1')} (" in r.stderr
    assert f"{h}/{digits[:8]}.against-{against_key(tmp_path, 't2')} (" in r.stderr
    # again against t1, spelled another way: the same copy replaced, no fourth
    r = run_cli("audit", "d", "--no-cache", "--report-dir", str(rep), "--against", str(tmp_path / "t1"), cwd=tmp_path)
    assert r.returncode == 1 and len(list(rep.rglob("report.json"))) == 4


def test_allowed_check_errors_key_the_copy_only_when_the_report_has_some(tmp_path, monkeypatch):
    """A check that fails internally: without ``--allow-check-errors`` the report's status is fail
    (exit 3), with it pass (exit 0): two reports, two copies. Without a check error the flag changes
    no byte of the report: one copy."""
    d = tmp_path / "d"
    d.mkdir()
    pl.DataFrame({"text": ["a", "b", "c"]}).write_parquet(d / "a.parquet")
    rep = tmp_path / "reports"

    def audit(name: str, *extra: str) -> dict:
        r = run_cli("audit", str(d), "--no-cache", "--report-dir", str(rep), "-o", str(tmp_path / f"{name}.json"),
                    *extra)
        out = json.loads((tmp_path / f"{name}.json").read_text())
        out["_exit"] = r.returncode
        return out

    clean, clean_allowed = audit("clean"), audit("clean_allowed", "--allow-check-errors")
    assert clean["_exit"] == clean_allowed["_exit"] == 0 and "check_errors" not in clean["summary"]
    h, digits = clean["index_hash"], hexof(clean)
    assert sorted(p.parent.name for p in rep.rglob("report.json")) == sorted([h, digits])  # one copy

    def bad(ctx):  # strict string -> integer cast of "a": the query raises when collected
        yield RowCheck(check="finite.inf", column="text", fails=pl.col("text").cast(pl.Int64, strict=True) > 0,
                       message=lambda n, _d: f"{n} rows")

    monkeypatch.setitem(CHECKS, "finite.inf", dataclasses.replace(CHECKS["finite.inf"], shard=bad))
    strict, allowed = audit("strict"), audit("allowed", "--allow-check-errors")
    assert (strict["_exit"], strict["summary"]["status"], strict["summary"]["check_errors"]) == (3, "fail", 1)
    assert (allowed["_exit"], allowed["summary"]["status"], allowed["summary"]["check_errors"]) == (0, "pass", 1)
    assert (rep / h / digits / "report.json").read_bytes() == (tmp_path / "strict.json").read_bytes()
    assert (rep / h / f"{digits}.allow-check-errors" / "report.json").read_bytes() == \
        (tmp_path / "allowed.json").read_bytes()
    assert find_report(f"{h}/{digits[:8]}", rep) == rep / h / digits / "report.json"
    assert find_report(f"{h}/{digits[:8]}.allow-check-errors", rep) == rep / h / f"{digits}.allow-check-errors" / \
        "report.json"


def test_copies_are_bounded_per_index_hash(tmp_path, monkeypatch):
    """Audits of one data under more configs than :data:`~datacheck.io.reportcopies.MAX_COPIES` (3
    here): the 3 most recent copies are kept, the contract file always (the latest audit's bytes)."""
    monkeypatch.setattr(reportcopies, "MAX_COPIES", 3)
    d = tmp_path / "d"
    d.mkdir()
    pl.DataFrame({"text": ["a", "b"]}).write_parquet(d / "a.parquet")
    rep = tmp_path / "reports"
    digits = []
    for i in range(5):
        cfg = tmp_path / f"c{i}.toml"
        cfg.write_text(f"[dup]\nnear_threshold = 0.8{i + 1}\n")  # five configs: five config hashes
        r = run_cli("audit", str(d), "--config", str(cfg), "--no-cache", "--report-dir", str(rep),
                    "-o", str(tmp_path / f"{i}.json"))
        assert r.returncode == 0, r.stderr
        out = json.loads((tmp_path / f"{i}.json").read_text())
        digits.append(hexof(out))
        copy = rep / out["index_hash"] / digits[-1] / "report.json"
        os.utime(copy, (1_000_000 + i, 1_000_000 + i))  # written in this order, whatever the clock's step
    h = out["index_hash"]
    assert len(set(digits)) == 5
    assert sorted(p.name for p in (rep / h).iterdir()) == sorted([*digits[2:], "report.json"])
    assert (rep / h / "report.json").read_bytes() == (tmp_path / "4.json").read_bytes()
    for i in (2, 3, 4):
        assert (rep / h / digits[i] / "report.json").read_bytes() == (tmp_path / f"{i}.json").read_bytes()


def test_garbage_in_the_report_folder_is_said_never_a_traceback(two_configs, tmp_path):
    """A truncated contract file and a copy holding garbage: ``report`` refuses the one asked for with
    exit 2 and what is wrong, describes the garbage copy with ``?``; the next audit writes over both."""
    rep, out = two_configs
    h, strict, lenient = out["strict"]["index_hash"], hexof(out["strict"]), hexof(out["lenient"])
    contract = rep / h / "report.json"
    contract.write_bytes(contract.read_bytes()[:50])
    (rep / h / strict / "report.json").write_bytes(b"\x00garbage")
    r = run_cli("report", h, "--report-dir", str(rep))
    assert r.returncode == 2 and f"{contract}: not a JSON report" in r.stderr and "Traceback" not in r.stderr
    r = run_cli("report", f"{h}/{strict[:8]}", "--report-dir", str(rep))
    assert r.returncode == 2 and "not a JSON report" in r.stderr and "Traceback" not in r.stderr
    r = run_cli("report", f"{h}/{lenient[:8]}", "--report-dir", str(rep))
    assert r.returncode == 0 and f"{h}/{strict[:8]} (config defaults, fail_on ?, created ?, status ?)" in r.stderr
    r = run_cli("audit", str(tmp_path / "d"), "--config", str(tmp_path / "strict.toml"), "--no-cache",
                "--report-dir", str(rep), "-o", str(tmp_path / "again.json"))
    assert r.returncode == 1
    for p in (contract, rep / h / strict / "report.json"):
        assert p.read_bytes() == (tmp_path / "again.json").read_bytes()


def test_a_part_holding_every_shard_keeps_its_own_copy(tmp_path):
    """One shard split in two parts: the part that holds it has the whole audit's index hash (its
    shards are all the shards), yet its report (dataset checks skipped, a ``part`` object) is stored
    as ``<config>.part-K-of-N``, never over the whole audit's copy."""
    d = tmp_path / "d"
    d.mkdir()
    pl.DataFrame({"text": ["a", "b"]}).write_parquet(d / "a.parquet")
    rep = tmp_path / "reports"
    r = run_cli("audit", str(d), "--no-cache", "--report-dir", str(rep), "-o", str(tmp_path / "whole.json"))
    assert r.returncode == 0, r.stderr
    whole = json.loads((tmp_path / "whole.json").read_text())
    h, digits = whole["index_hash"], hexof(whole)
    holders = []
    for k in (0, 1):
        r = run_cli("audit", str(d), "--no-cache", "--report-dir", str(rep), "--num-parts", "2", "--part", str(k),
                    "--format", "json")
        assert r.returncode == 0, r.stderr
        if json.loads(r.stdout)["summary"]["shards"] == 1:
            holders.append(k)
    assert len(holders) == 1  # the one shard lies in one part
    (k,) = holders
    assert (rep / h / digits / "report.json").read_bytes() == (tmp_path / "whole.json").read_bytes()
    part = json.loads((rep / h / f"{digits}.part-{k}-of-2" / "report.json").read_text())
    assert part["part"]["part"] == k and part["part"]["num_parts"] == 2 and part["index_hash"] == h
    assert find_report(f"{h}/{digits[:8]}", rep) == rep / h / digits / "report.json"
    assert find_report(f"{h}/{digits[:8]}.part-{k}-of-2", rep) == rep / h / f"{digits}.part-{k}-of-2" / "report.json"
