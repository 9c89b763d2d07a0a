"""Small UX rules: exit codes in ``audit --help``, ``num_classes`` that disagrees
with ``classes`` refused, and "did you mean" for a misspelt ``inspect --check``."""
from __future__ import annotations

import polars as pl
import pytest
from conftest import run_cli

from datacheck.model.config import config_from_dict
from datacheck.model.errors import ConfigError


def test_audit_help_lists_the_exit_codes():
    out = run_cli("audit", "--help")
    assert out.returncode == 0
    for line in ("0  pass", "1  the policy failed", "2  usage or config error", "3  internal error"):
        assert line in out.stdout


def test_num_classes_must_agree_with_classes():
    with pytest.raises(ConfigError, match="num_classes = 3 but classes names 2 class"):
        config_from_dict({"labels": {"num_classes": 3, "classes": ["a", "b"]}}, source="t.toml")
    assert config_from_dict({"labels": {"num_classes": 2, "classes": ["a", "b"]}}).labels.num_classes == 2


def test_inspect_check_did_you_mean(tmp_path):
    p = tmp_path / "s.parquet"
    pl.DataFrame({"text": ["a"]}).write_parquet(p)
    out = run_cli("inspect", str(p), "--check", "tokens.out_of_vocb")
    assert out.returncode == 2
    assert "did you mean 'tokens.out_of_vocab'?" in out.stderr
