"""The whole-audit memo's key (:mod:`datacheck.cli.rerun`) holds every ``audit`` option that changes
the report, what is printed or the exit code: each option of the verb's parser, enumerated from the
parser itself (a new option is met here without anyone listing it), either changes the key or makes
the audit one the memo neither answers nor records; only the options that choose how the work runs
(or where an extra copy of the report goes, which a replay writes) leave the key unchanged."""
from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from datacheck.cli import rerun as rerun_cli
from datacheck.cli.auditargs import add_parser
from datacheck.execute.configpath import resolve_config_path

#: the options whose value never changes the report, stdout, stderr or the exit code of an audit,
#: and why (the only ones allowed to leave the key unchanged)
NOT_OUTPUT = {
    "workers": "the report is the same for any number of workers (--help)",
    "executor": "how shards are mapped to workers, not what they give",
    "ray_address": "which Ray cluster runs the tasks",
    "trust_mtime": "whether unchanged files are hashed again; a changed file is hashed either way",
    "no_progress": "the progress bar (stderr of a terminal only)",
    "output": "where an extra copy of the report goes; a replay writes it there",
}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="datacheck")
    return add_parser(p.add_subparsers(dest="command"))


def _variant(action: argparse.Action, tmp: Path) -> list[str]:
    """A command-line fragment that gives ``action`` another value than its default."""
    opt = action.option_strings[0]
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
        return [opt]
    if action.choices:
        return [opt, next(c for c in action.choices if c != action.default)]
    if action.type is int or getattr(action.type, "__name__", "") == "_positive_int":
        return [opt, "2"]
    if action.dest in ("config", "schema"):
        f = tmp / f"{action.dest}.toml"
        f.write_text("[dataset]\n" if action.dest == "config" else "")
        return [opt, str(f)]
    return [opt, str(tmp / f"other-{action.dest}")]


def _key(argv: list[str]) -> dict | None:
    """The memo key's caller part for ``audit ARGV`` (None: the memo neither answers nor records it)."""
    args = rerun_cli.parse_audit(argv)
    if not rerun_cli.eligible(args):
        return None
    return rerun_cli._static(args, resolve_config_path(args.config, args.paths))[0]


@pytest.fixture
def base(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "other-data").mkdir()
    return ["data", "--cache-dir", str(tmp_path / "cache"), "--report-dir", str(tmp_path / "r")]


def test_every_output_changing_option_is_in_the_key(tmp_path, base):
    assert set(NOT_OUTPUT) == set(rerun_cli.RUN_ONLY)
    plain = _key(base)
    assert plain is not None
    seen = set()
    for action in _parser()._actions:
        if not action.option_strings or action.dest == "help":
            continue
        seen.add(action.dest)
        argv = [*base, *_variant(action, tmp_path)]
        got = _key(argv)
        if action.dest in NOT_OUTPUT:
            assert got == plain, action.dest  # a rerun with another --workers is answered
        else:
            assert got != plain, f"{action.option_strings[0]} changes the output but not the memo's key"
    assert {"against", "allow_check_errors", "fail_on", "format", "config", "schema"} <= seen
    assert _key(["other-data", *base[1:]]) != plain  # the PATHs


def test_against_and_allowed_check_errors_never_share_a_record_with_the_audit_without(base, tmp_path):
    plain = _key(base)
    assert _key([*base, "--against", str(tmp_path / "data")]) is None  # not memoized at all
    allowed = _key([*base, "--allow-check-errors"])
    assert allowed is not None and allowed != plain


@pytest.mark.parametrize("name, changes", [("DATACHECK_SPILL_ROWS", True), ("POLARS_MAX_THREADS", True),
                                           ("GITHUB_ACTIONS", True), ("DATACHECK_WORKERS", False)])
def test_the_environment_that_changes_the_output_is_in_the_key(base, monkeypatch, name, changes):
    monkeypatch.delenv(name, raising=False)
    plain = _key(base)
    monkeypatch.setenv(name, "true" if name == "GITHUB_ACTIONS" else "3")
    assert (_key(base) != plain) is changes
