"""Small UX rules: exit codes in ``audit --help``, ``num_classes`` that disagrees
with ``classes`` refused, "did you mean" for a misspelt ``inspect --check``, and a bug's traceback."""
from __future__ import annotations

import traceback

import polars as pl
import pytest
from conftest import run_cli

from datacheck.cli import main as cli_main
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


def test_a_bug_prints_its_traceback_and_exits_3(monkeypatch, capsys):
    """An unexpected exception: exit 3, the line asking for a report, then the traceback as
    ``traceback.print_exc`` prints it (the frames, the exception and its message)."""
    def broken(argv):
        raise RuntimeError("boom in the replay")

    monkeypatch.setattr(cli_main, "replay_audit", broken)
    assert cli_main.main(["audit", "data"]) == 3
    err = capsys.readouterr().err
    head, _, tb = err.partition("\n")
    assert head == "datacheck: internal error (a bug; please report it with this traceback):"
    try:
        broken([])
    except RuntimeError:
        want = traceback.format_exc()
    assert tb.startswith("Traceback (most recent call last):\n")
    assert tb.endswith("".join(want.splitlines(True)[-3:]))  # broken's frame, its line, the exception
