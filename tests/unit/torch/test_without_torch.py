"""``import datacheck`` and the CLI work with torch hidden; a torch verb names the install command
(``pip install "torch>=2.2"``, or ``pip install -e ".[torch]"`` in the source: the PyPI name ``datacheck``
is another project's, see tests/contract/test_install_instructions.py)."""
from __future__ import annotations

import re
import subprocess
import sys

import pytest
from conftest import ROOT

#: tests/contract/test_install_instructions.py's pattern of "install datacheck from PyPI"
_PYPI_DATACHECK = re.compile(r"""pip\s+install\s+(?:-U\s+|--upgrade\s+)?["']?datacheck(?:\[|==|>=|["'\s)]|$)""")

BLOCK = """
import sys
sys.modules["torch"] = None  # `import torch` raises ImportError; find_spec("torch") answers None
"""


def _run(code: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCK + code], cwd=cwd, capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=300)


@pytest.mark.slow
def test_import_and_cli_without_torch(tmp_path):
    import polars as pl
    d = tmp_path / "d"
    d.mkdir()
    pl.DataFrame({"labels": [[1, 2]] * 5}).write_parquet(d / "a.parquet")
    (tmp_path / "dc.toml").write_text("[batch]\nbatch_size = 2\n")
    code = f"""
import datacheck, datacheck.torch, datacheck.cli.main as m
assert sys.modules["torch"] is None
r = datacheck.audit([{str(d)!r}], config={str(tmp_path / 'dc.toml')!r})
sk = {{s["check"]: s["reason"] for s in r.skipped}}
print("SKIP", sk["batch.small_tail"])
rc = m.main(["plan", {str(d)!r}, "--config", {str(tmp_path / 'dc.toml')!r}])
print("RC", rc)
import gzip, pathlib
led = pathlib.Path({str(tmp_path / 'run' / 'data-indices')!r})
led.mkdir(parents=True)
led.joinpath("rank0.tsv.gz").write_bytes(gzip.compress(b"1\\t3\\t0\\n"))
from datacheck.trace.data import ledger_rows
print("LEDGER", ledger_rows(led.parent, [1])[0])
print("PLANRC", m.main(["plan", "--ledger", str(led.parent), "--step", "1", "--format", "json"]))
try:
    datacheck.torch.BatchGuard()
except datacheck.UsageError as e:
    print("GUARD", e)
"""
    p = _run(code, tmp_path)
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr
    assert 'SKIP the batch plan needs torch' in p.stdout and 'pip install "torch>=2.2"' in p.stdout
    assert "the datacheck[torch] extra is not installed" in p.stdout  # the extra named, in words
    assert "RC 2" in p.stdout and 'pip install -e ".[torch]"' in p.stderr
    assert "the datacheck[torch] extra is not installed" in p.stderr
    assert "LEDGER {1: {0: [3, 0]}}" in p.stdout and "PLANRC 0" in p.stdout  # ledgers are read without torch
    assert 'GUARD datacheck.torch.BatchGuard needs torch' in p.stdout
    assert "datacheck[torch] extra" in p.stdout.split("GUARD", 1)[1]
    assert not _PYPI_DATACHECK.search(p.stdout + p.stderr)  # never "pip install datacheck..." (another project)


def test_the_guards_error_is_importable_from_datacheck_torch_without_torch():
    """docs/torch.md says the guard raises ``BatchValidationError``: a caller catches it by that name
    from ``datacheck.torch`` (the one error class, defined in datacheck.model.errors), torch not imported."""
    import subprocess
    import sys

    code = ("import sys, datacheck.torch as t, datacheck.model.errors as e\n"
            "print(t.BatchValidationError is e.BatchValidationError, 'BatchValidationError' in t.__all__, "
            "'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "True", "False"]
