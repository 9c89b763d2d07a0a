"""A ``DATACHECK_BATCH_ROWS`` that is not a whole number >= 1 is a usage error said before any shard
is read (CLI exit 2 naming the variable; ``datacheck.ConfigError`` from ``datacheck.audit``), never
per-shard ``decode.unreadable`` findings: those were stored in the cache and replayed by the next,
correctly set run, which then failed the gate on clean data."""
from __future__ import annotations

import pytest
from conftest import ROOT, run_cli_subprocess

import datacheck
from datacheck.model.errors import ConfigError

CLEAN = ROOT / "sample_data" / "cls_clean"
CFG = ROOT / "sample_data" / "datacheck.toml"


@pytest.mark.parametrize("value", ["0", "-3", "abc", "1.5"])
def test_a_bad_value_is_refused_and_the_next_run_passes(tmp_path, value):
    args = ["audit", str(CLEAN), "--config", str(CFG), "--report-dir", str(tmp_path / "r"),
            "--cache-dir", str(tmp_path / "c")]
    bad = run_cli_subprocess(*args, env={"DATACHECK_BATCH_ROWS": value})
    assert bad.returncode == 2, (bad.stdout, bad.stderr)
    assert f"DATACHECK_BATCH_ROWS={value!r}" in bad.stderr and "decode.unreadable" not in bad.stdout
    good = run_cli_subprocess(*args)
    assert good.returncode == 0, (good.stdout, good.stderr)
    assert good.stdout.startswith("datacheck") and " PASS " in good.stdout.splitlines()[0]


def test_the_library_refuses_it_too(tmp_path, monkeypatch):
    monkeypatch.setenv("DATACHECK_BATCH_ROWS", "0")
    with pytest.raises(ConfigError, match="DATACHECK_BATCH_ROWS='0'"):
        datacheck.audit([str(CLEAN)], str(CFG), cache_dir=tmp_path / "c", workers=1)
    monkeypatch.setenv("DATACHECK_BATCH_ROWS", "7")  # a good value: the same report as one batch
    assert datacheck.audit([str(CLEAN)], str(CFG), cache_dir=tmp_path / "c2", workers=1).summary["status"] == "pass"


@pytest.mark.parametrize("value", ["-1", "abc"])
def test_a_bad_spill_rows_is_a_usage_error_not_an_internal_one(tmp_path, value):
    # DATACHECK_SPILL_ROWS (rows of row hashes held before spilling, >= 0) is read by the cross-shard
    # pass: a bad value said as exit 2 before any shard is read, not a traceback (exit 3)
    r = run_cli_subprocess("audit", str(CLEAN), str(ROOT / "sample_data" / "lm_clean"), "--config", str(CFG),
                           "--report-dir", str(tmp_path / "r"), "--no-cache", env={"DATACHECK_SPILL_ROWS": value})
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert f"DATACHECK_SPILL_ROWS={value!r}" in r.stderr and "Traceback" not in r.stderr
    assert run_cli_subprocess("audit", str(CLEAN), "--config", str(CFG), "--report-dir", str(tmp_path / "r"),
                              "--no-cache", env={"DATACHECK_SPILL_ROWS": "0"}).returncode == 0
