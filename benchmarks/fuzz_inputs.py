"""The fuzz campaign: seeded mutants of every format and metadata file datacheck reads (the shard
formats, MDS, WebDataset, litdata and Megatron layouts, trace logs, ledgers, a chat template, a
config, schemas, reports and indexes), one forked process per input (:mod:`fuzzlib` in
tests/helpers/), so native crashes (a signal) and hangs (killed after the timeout) are caught besides
tracebacks and changed inputs. Prints the counts (inputs, tracebacks, crashes, hangs, changed inputs,
exit codes, seconds, inputs per target, peak RSS of the children) and the first failures; exits 1
when any input failed. CI runs it bounded in time (.ci/run); the test suite runs the fixed 300-input corpus
(seed 0) in process (tests/e2e/robustness/test_fuzz.py).

    PYTHONPATH=. python benchmarks/fuzz_inputs.py [-n 3500] [--seed 1] [--jobs 2] [--max-seconds S] [--timeout 120]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

# Each child runs under a 4 GiB address-space limit (fuzzlib.CHILD_LIMIT_AS); polars' default pool, a
# thread per core (each with its stack and malloc arena), crosses a limit of that size on a machine
# of a few hundred cores, which would count as a crash of the input. Pinned before polars is imported.
os.environ.setdefault("POLARS_MAX_THREADS", "4")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "helpers"))

from fuzzlib import fuzz  # noqa: E402

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=3500, help="inputs (cycling over the targets)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=2, help="children at a time")
    ap.add_argument("--max-seconds", type=float, default=None, help="start no input after this many seconds")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds before an input counts as a hang")
    a = ap.parse_args()
    wd = Path(tempfile.mkdtemp(prefix="datacheck-fuzz-"))
    res = fuzz(a.n, a.seed, wd, timeout=a.timeout, jobs=a.jobs, max_seconds=a.max_seconds)
    c = res["counts"]
    print(json.dumps(c))
    print(f"inputs {c['inputs']}, tracebacks {c['traceback']}, crashes {c['crash']}, hangs {c['hang']}, "
          f"changed {c['changed']}, peak RSS {c.get('peak_rss_bytes', 0) / 2**20:.0f} MiB, {c['seconds']} s")
    for f in res["failures"][:20]:
        print(f["kind"], f["target"], f["rc"], f.get("kept"), f["stderr"][-300:].replace("\n", " | "))
    failed = bool(c["traceback"] or c["crash"] or c["hang"] or c["changed"])
    if failed:
        print(f"work folder (failing inputs kept): {wd}")
    else:
        shutil.rmtree(wd, ignore_errors=True)
    sys.exit(1 if failed else 0)
