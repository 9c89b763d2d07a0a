"""The ledger reader holds row indices as int64 arrays (8 bytes an index, not a tuple of Python ints
at about 36), streamed; and a number of a ledger line is ASCII digits only (``int()`` alone takes
``1_0`` and Arabic-Indic digits)."""
from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import datacheck
from datacheck.io.ledger import LEDGER_HEADER, read_ledger, step_indices

ROOT = Path(__file__).resolve().parents[3]

_CHILD = r"""
import sys
from datacheck.io import ledger
ledger._BLOCK = 1 << 20  # 1 MiB blocks in both children, so the transient buffers are alike and small
led = ledger.read_ledger(sys.argv[1])
steps = ledger.step_indices(led)  # what order verify builds from the whole ledger
n = sum(len(b.indices) for per in led.batches.values() for bs in per.values() for b in bs)
assert n == int(sys.argv[2]) and sum(len(v) for per in steps.values() for v in per.values()) == n, n
print(next(int(ln.split()[1]) for ln in open("/proc/self/status") if ln.startswith("VmHWM:")))
"""  # VmHWM (KiB): the peak of this process' own memory


def _ledger(folder: Path, steps: int, per_batch: int, grad_accum: int) -> int:
    """A record_batches ledger of one rank: ``steps`` x ``grad_accum`` micro-batches of ``per_batch``
    distinct large indices (none a cached small int); returns the index count."""
    n = steps * grad_accum * per_batch
    rows = (np.arange(n, dtype=np.int64) * 7_919) % n + 1_000_000  # a permutation, shifted past small ints
    lines = [LEDGER_HEADER, '#state\t{"epoch": 0, "start_step": 0, "grad_accum": %d}' % grad_accum]
    k = 0
    for s in range(steps):
        for mb in range(grad_accum):
            lines.append(f"{s}\t0\t{mb}\t0\t" + "\t".join(map(str, rows[k:k + per_batch].tolist())))
            k += per_batch
    d = folder / "data-indices"
    d.mkdir(parents=True)
    (d / "rank0.tsv.gz").write_bytes(gzip.compress(("\n".join(lines) + "\n").encode(), 1))
    return n


def _peak_kib(folder: Path, n: int) -> int:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-c", _CHILD, str(folder), str(n)], capture_output=True, text=True,
                       env=env, timeout=600)
    assert p.returncode == 0, p.stderr
    return int(p.stdout.split()[-1])


@pytest.mark.slow  # about 3 s: two child processes, one reading 2,000,000 indices
def test_reading_a_ledger_costs_at_most_16_bytes_an_index(tmp_path):
    """Peak RSS (VmHWM) of a child reading a ledger of 2,000,000 indices (1,000 steps x 2 micro-batches
    of 1,000), and ``step_indices`` of it, less that of a child reading one of 2 micro-batches: at most
    16 bytes an index (8 for the int64 arrays, 8 for the concatenated steps) plus 24 MiB for the
    blocks, lines and per-batch objects. Python ints in tuples cost about 36 bytes an index (28 a
    distinct int, 8 a pointer): about 69 MiB for the batches alone, past the bound's 54.5 MiB."""
    small_n = _ledger(tmp_path / "small", 1, 1_000, 2)
    big_n = _ledger(tmp_path / "big", 1_000, 1_000, 2)
    assert big_n == 2_000_000
    small, big = _peak_kib(tmp_path / "small", small_n), _peak_kib(tmp_path / "big", big_n)
    bound_kib = (16 * (big_n - small_n)) // 1024 + 24 * 1024
    assert big - small <= bound_kib, (small, big, bound_kib)


def test_read_indices_are_int64_and_equal_the_recorded_ints(tmp_path):
    n = _ledger(tmp_path, 3, 4, 2)
    led = read_ledger(tmp_path)
    rows = ((np.arange(n) * 7_919) % n + 1_000_000).tolist()
    b = led.batches[0][1][1]
    assert np.asarray(b.indices).dtype == np.int64 and b.indices == tuple(rows[12:16]) == b.indices
    assert list(b.indices) == rows[12:16] and all(type(x) is int for x in b.indices) and rows[13] in b.indices
    assert step_indices(led)[2][0] == rows[16:24] and hash(b.indices) == hash(tuple(rows[12:16]))


@pytest.mark.parametrize("bad", ["1_0", "\u0661\u0662", "\uff11", str(2**63)],
                         ids=["underscore", "arabic-indic", "fullwidth", "2**63"])
@pytest.mark.parametrize("where", ["index", "step"])
def test_a_number_not_in_ascii_digits_is_refused_naming_file_and_line(tmp_path, bad, where):
    line = f"0\t0\t0\t0\t{bad}" if where == "index" else f"{bad}\t0\t0\t0\t5"
    d = tmp_path / "data-indices"
    d.mkdir()
    (d / "rank0.tsv.gz").write_bytes(gzip.compress(f"{LEDGER_HEADER}\n0\t0\t0\t0\t1\n{line}\n".encode()))
    with pytest.raises(datacheck.UsageError, match=r"rank0\.tsv\.gz:3: not a ledger line \(expected tab-separated"):
        read_ledger(tmp_path)


def test_the_largest_int64_index_is_read(tmp_path):
    d = tmp_path / "data-indices"
    d.mkdir()
    (d / "rank0.tsv").write_text(f"1\t{2**63 - 1},0\n")  # OLMo's format, plain, commas
    assert read_ledger(tmp_path).batches[0][1][0].indices == (2**63 - 1, 0)
