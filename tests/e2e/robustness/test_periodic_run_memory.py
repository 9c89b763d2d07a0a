"""A shard holding one row of 4 million copies of one token id (a period-1 run of
``content.periodic_tokens``) among a few ordinary rows, parquet and JSONL, audited in a child process:
the peak RSS stays under the promise of 1.5 GB (before, the check's details held 13 periods of
per-position expressions over the row: 3.7 GB peak on the parquet shard; about 0.55 GB now), and the
finding names the row, position 0, period 1 and the repeats computed here from the row."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import ROOT

#: the row of one id repeated: 16 MB of int32 ids, 8 MB of JSON text ("7, " per id)
N = 4_000_000
#: the promise: peak RSS at most 1.5 GB whatever the input (MiB)
BOUND_MIB = 1536

_RSS = r"""
import sys
from datacheck.cli.main import main
try:
    code = main(sys.argv[1:])
except SystemExit as e:
    code = e.code
print("exit", code)
print(next(int(ln.split()[1]) for ln in open("/proc/self/status") if ln.startswith("VmHWM:")) // 1024)
"""  # VmHWM: the peak of this process' own memory (ru_maxrss is inherited from the forking parent)


def _rows() -> list[list[int]]:
    """Five ordinary rows, the run row (index 5), three more ordinary rows."""
    return [list(range(10 * i, 10 * i + 50)) for i in range(5)] + [[7] * N] + [[9, 8, 6, 5] * 25, [1, 2, 3], [4]]


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_a_row_of_millions_of_one_id_is_audited_within_the_memory_promise(tmp_path: Path, fmt: str) -> None:
    rows = _rows()
    data = tmp_path / "data"
    data.mkdir()
    if fmt == "parquet":
        pq.write_table(pa.table({"input_ids": pa.array(rows, pa.list_(pa.int32()))}), data / "a.parquet")
    else:
        (data / "a.jsonl").write_text("".join(json.dumps({"input_ids": r}) + "\n" for r in rows))
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text(f"[dataset]\nmax_row_bytes = {64 << 20}\n")
    out = tmp_path / "report.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-c", _RSS, "audit", str(data), "--config", str(cfg), "--no-progress",
                        "--no-cache", "--format", "json", "--output", str(out)],
                       capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path)
    lines = p.stdout.strip().splitlines()
    assert lines and lines[-2].startswith("exit"), p.stdout[-2000:] + p.stderr[-2000:]
    peak = int(lines[-1])
    assert peak < BOUND_MIB, peak
    report = json.loads(out.read_text())
    found = [f for s in report["shards"] for f in s["findings"] if f["check"] == "content.periodic_tokens"]
    assert len(found) == 1, found
    run_row = next(i for i, r in enumerate(rows) if len(r) == N)
    # one id repeated N times: N - 1 equal neighbours from position 0, so (N - 1) // 1 + 1 repeats of period 1
    assert found[0]["details"]["runs"] == [{"row": run_row, "run": {"start": 0, "period": 1, "repeats": (N - 1) // 1 + 1}}]
    assert f"period 1 x {N}" in found[0]["message"]
