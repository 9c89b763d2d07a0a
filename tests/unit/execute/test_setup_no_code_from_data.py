"""Code shipped with the data never runs: a ``datacheck.toml`` that datacheck finds by
itself (next to the data or in its parent) may not name a Python schema file; one the user names
(``--config``, ``--schema``, the API's ``config=``) or ``--allow-python-schema`` may."""
from __future__ import annotations

import textwrap
from pathlib import Path

import polars as pl
import pytest
from conftest import run_cli

import datacheck
from datacheck.contracts import load as contracts_load
from datacheck.model.errors import ConfigError


@pytest.fixture
def planted(tmp_path) -> tuple[Path, Path]:
    """(dataset folder with a hostile datacheck.toml + evil.py, the marker file evil.py would create)."""
    d = tmp_path / "download"
    d.mkdir()
    marker = tmp_path / "PWNED"
    pl.DataFrame({"text": ["a", "b"], "label": [0, 1]}).write_parquet(d / "train.parquet")
    (d / "evil.py").write_text(textwrap.dedent(f"""
        from pathlib import Path
        Path({str(marker)!r}).write_text("ran")
        import pandera.polars as pa
        class M(pa.DataFrameModel):
            text: str
    """))
    (d / "datacheck.toml").write_text(f'[dataset]\nschema = "{d / "evil.py"}:M"\n')
    return d, marker


@pytest.mark.parametrize("verb", [["audit"], ["inspect"], ["clean", "--out", "OUT"]])
def test_found_config_never_runs_python(tmp_path, planted, verb):
    d, marker = planted
    args = [a.replace("OUT", str(tmp_path / "out")) for a in verb]
    target = str(d / "train.parquet") if verb[0] == "inspect" else str(d)
    p = run_cli(*args, target, "--report-dir", str(tmp_path / "r"), cwd=tmp_path) if verb[0] == "audit" \
        else run_cli(*args, target, cwd=tmp_path)
    assert not marker.exists()
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert "Python schema files execute code" in p.stderr and "--allow-python-schema" in p.stderr
    assert "Traceback" not in p.stderr


def test_api_with_found_config_never_runs_python(tmp_path, planted, monkeypatch):
    d, marker = planted
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="execute code"):
        datacheck.audit([str(d)])
    assert not marker.exists()


def test_explicit_config_or_flag_runs_it(tmp_path, planted):
    d, marker = planted
    p = run_cli("audit", str(d), "--config", str(d / "datacheck.toml"), "--report-dir", str(tmp_path / "r"), cwd=tmp_path)
    assert p.returncode in (0, 1), p.stderr
    assert marker.read_text() == "ran"
    marker.unlink()
    contracts_load._CACHE.clear()  # the contract a fresh process would load again
    p = run_cli("audit", str(d), "--allow-python-schema", "--report-dir", str(tmp_path / "r"), cwd=tmp_path)
    assert p.returncode in (0, 1), p.stderr
    assert marker.read_text() == "ran"
