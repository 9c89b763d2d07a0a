"""The fuzz corpus as a regression test: 300 seeded mutants (seed 0, about 21 per target; see
:mod:`fuzzlib`) of every format the readers accept and every metadata or user file, each run through
the CLI in this process: 0 tracebacks, 0 bytes changed in the inputs, and the mutants reach past
argument checks into the readers. The campaign with a process per input (native crashes and hangs
too, more inputs, any seed) is ``benchmarks/fuzz_inputs.py``, which CI runs bounded in time."""
from __future__ import annotations

import json
import os

import pytest
from conftest import run_cli
from fuzzlib import fuzz_in_process


def _run(argv: list[str]) -> tuple[int, str]:
    p = run_cli(*argv)
    return p.returncode, p.stderr


@pytest.mark.slow
def test_fuzz_every_format_and_metadata_file(tmp_path):
    n = int(os.environ.get("DATACHECK_FUZZ_N", "300"))
    seed = int(os.environ.get("DATACHECK_FUZZ_SEED", "0"))
    res = fuzz_in_process(n, seed, tmp_path, _run)
    c = res["counts"]
    assert c["inputs"] == n
    assert (c["traceback"], c["crash"], c["hang"], c["changed"]) == (0, 0, 0, 0), json.dumps(res["failures"][:5], indent=1)
    # every target ran, and the mutants reach past argument checks into the readers (exit 1 = findings)
    assert c["exit"].get("1", 0) > n // 3
