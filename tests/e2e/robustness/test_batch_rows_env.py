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
