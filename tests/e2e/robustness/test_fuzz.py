"""The fuzz test of issue 15: seeded mutants of every format the readers accept and every metadata or
user file, one process per input (see :mod:`fuzzlib`): 0 tracebacks, 0 native crashes, 0 hangs, 0 bytes
changed in the inputs. 300 inputs (about 21 per target) here; ``DATACHECK_FUZZ_N=3500`` (or
``benchmarks/fuzz_inputs.py``) runs a larger set."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import ROOT

FUZZLIB = ROOT / "tests" / "helpers" / "fuzzlib.py"


def test_fuzz_every_format_and_metadata_file(tmp_path):
    n = int(os.environ.get("DATACHECK_FUZZ_N", "300"))
    seed = int(os.environ.get("DATACHECK_FUZZ_SEED", "0"))
    out = tmp_path / "fuzz.json"
    p = subprocess.run([sys.executable, str(FUZZLIB), str(n), str(seed), str(out), "120", "2"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=600 + n * 5,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads(out.read_text())
    c = res["counts"]
    assert c["inputs"] == n
    assert (c["traceback"], c["crash"], c["hang"], c["changed"]) == (0, 0, 0, 0), json.dumps(res["failures"][:5], indent=1)
    # every target ran, and the mutants reach past argument checks into the readers (exit 1 = findings)
    assert c["exit"].get("1", 0) > n // 3
