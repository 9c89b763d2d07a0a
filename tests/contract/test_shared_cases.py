"""Every defect case in ../shared/cases passes, judged by the shared case runner
(../shared/tools/run_cases.py) on the session's one audit of each case (conftest ``case_audits``)."""
from __future__ import annotations

import importlib.util
import shlex
import subprocess
import sys
import types
from pathlib import Path

import pytest
from conftest import CASES, SHARED


def _runner() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("run_cases", SHARED / "tools" / "run_cases.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not CASES.is_dir(), reason="../shared/cases is not present")
def test_all_shared_cases_pass(case_audits, monkeypatch, capsys):
    runner = _runner()

    def audited(argv: list[str], **_: object) -> subprocess.CompletedProcess:
        """The runner's ``datacheck audit CASE/data ... --output OUT``, answered from the session's audit."""
        case = Path(argv[argv.index("audit") + 1]).parent
        got = case_audits[case.name]
        if got.report:
            Path(argv[argv.index("--output") + 1]).write_text(got.report, encoding="utf-8")
        return subprocess.CompletedProcess(argv, got.returncode, got.stdout, got.stderr)

    monkeypatch.setattr(runner, "subprocess", types.SimpleNamespace(run=audited, TimeoutExpired=subprocess.TimeoutExpired))
    monkeypatch.setattr(sys, "argv", ["run_cases.py", str(CASES), "--datacheck", shlex.join([sys.executable, "-m", "datacheck"])])
    rc = runner.main()
    out = capsys.readouterr()
    lines = out.out.strip().splitlines()
    assert rc == 0, out.out + out.err
    n_cases = sum(1 for c in CASES.iterdir() if (c / "expect.json").exists())
    assert lines[-1] == f"{n_cases} passed, 0 failed"
