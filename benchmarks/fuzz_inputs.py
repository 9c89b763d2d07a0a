"""Larger fuzz run of issue 15 (the suite runs 300 inputs): seeded mutants of every format and metadata
file, one forked process per input. Prints the counts (inputs, tracebacks, crashes, hangs, changed
inputs, exit codes, seconds).

    PYTHONPATH=. python benchmarks/fuzz_inputs.py [N=3500] [SEED=1] [JOBS=2]
"""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "helpers"))

from fuzzlib import fuzz  # noqa: E402

if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 3500
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    jobs = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    wd = Path(tempfile.mkdtemp(prefix="datacheck-fuzz-"))
    res = fuzz(n, seed, wd, timeout=120, jobs=jobs)
    print(json.dumps(res["counts"]))
    for f in res["failures"][:20]:
        print(f["kind"], f["target"], f["rc"], f.get("kept"), f["stderr"][-300:].replace("\n", " | "))
    print(f"work folder: {wd}")
