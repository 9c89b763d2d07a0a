"""workflows/: valid against the GitHub workflow schema (check-jsonschema's vendored schema, offline)
and free of zizmor findings of medium severity or higher (zizmor --offline); actions pinned by SHA."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

WORKFLOWS = sorted((ROOT / "workflows").glob("*.yml"))
BIN = Path(sys.executable).parent


def _tool(name: str) -> str:
    exe = BIN / name
    if exe.exists():
        return str(exe)
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: pip install -e '.[dev]'")
    return found


def _zizmor(*paths: Path) -> subprocess.CompletedProcess:
    return subprocess.run([_tool("zizmor"), "--offline", "--no-progress", "--min-severity", "medium",
                           "--format", "json", *map(str, paths)], capture_output=True, text=True, timeout=120)


def test_both_workflows_exist():
    assert [p.name for p in WORKFLOWS] == ["data-gate.yml", "nightly-audit.yml"]


def test_github_workflow_schema():
    r = subprocess.run([_tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows",
                        *map(str, WORKFLOWS)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ok -- validation done" in r.stdout


def test_zizmor_offline_no_medium_or_higher():
    r = _zizmor(*WORKFLOWS)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip() in ("[]", "")


def test_zizmor_catches_the_faults_it_guards_against(tmp_path):
    """Negative control: the same audit flags an unpinned action and a template injection."""
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "name: bad\non: pull_request_target\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n"
        "      - uses: actions/checkout@v4\n"
        "      - run: echo \"${{ github.event.pull_request.title }}\"\n")
    r = _zizmor(bad)
    assert r.returncode != 0
    assert "template-injection" in r.stdout and "unpinned-uses" in r.stdout


@pytest.mark.parametrize("wf", WORKFLOWS, ids=lambda p: p.name)
def test_actions_pinned_by_full_sha_with_version_comment(wf):
    uses = re.findall(r"uses:\s*(\S+)(.*)", wf.read_text())
    assert uses
    for ref, rest in uses:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+(/[\w.-]+)*@[0-9a-f]{40}", ref), ref
        assert re.search(r"#\s*v\d+\.\d+\.\d+", rest), f"{ref}: no version comment"
    text = wf.read_text()
    assert text.count("persist-credentials: false") == text.count("actions/checkout@")
    assert "permissions: {}" in text  # least privilege at the top; jobs ask for contents: read only
    assert "write" not in re.sub(r"#.*", "", text).split("jobs:")[0]


def test_nightly_has_cache_diff_upload_and_matrix():
    text = (ROOT / "workflows" / "nightly-audit.yml").read_text()
    for needle in ("schedule:", "actions/cache/restore@", "actions/cache/save@", "--num-parts", "datacheck merge",
                   "--cache-dir .datacheck/cache --format markdown", "datacheck diff",
                   "actions/upload-artifact@", "actions/download-artifact@", "fromJSON(needs.plan.outputs.parts)"):
        assert needle in text, needle
    gate = (ROOT / "workflows" / "data-gate.yml").read_text()
    for needle in ("pull_request:", "paths:", "--format markdown >> \"$GITHUB_STEP_SUMMARY\"", "--junit",
                   "actions/upload-artifact@", "exit 1"):
        assert needle in gate, needle
