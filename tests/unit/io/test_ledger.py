"""trace reads ledgers through the one reader (datacheck.io.ledger.read_ledger): record_batches'
format (micro-batches, resumes) and OLMo's data-indices (gzip'd or plain, tab- or comma-separated)."""
from __future__ import annotations

import gzip

import pytest

import datacheck
from datacheck.io.ledger import LEDGER_HEADER
from datacheck.trace.data import ledger_rows


def _write(path, text, gz=True):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(text.encode()) if gz else text.encode())


def test_datacheck_ledger_micro_batches_and_resume(tmp_path):
    d = tmp_path / "run" / "data-indices"
    st0 = '#state\t{"epoch": 0, "start_step": 0}\n'
    st1 = '#state\t{"epoch": 0, "start_step": 1}\n'  # resumed from step 1: the later records replace it
    _write(d / "rank0.tsv.gz", LEDGER_HEADER + "\n" + st0 + "0\t0\t0\t0\t4\t5\n0\t0\t1\t0\t6\n1\t0\t0\t0\t99\n"
           + st1 + "1\t0\t0\t0\t7\t8\n1\t0\t1\t0\t9\n")
    _write(d / "rank1.tsv.gz", LEDGER_HEADER + "\n" + st0 + "0\t1\t0\t0\t1\n0\t1\t1\t0\t2\t3\n1\t1\t0\t0\t10\n")
    assert ledger_rows(tmp_path / "run", [0, 1, 5])[0] == {0: {0: [4, 5, 6], 1: [1, 2, 3]}, 1: {0: [7, 8, 9], 1: [10]}}
    assert ledger_rows(tmp_path / "run", [1])[0] == {1: {0: [7, 8, 9], 1: [10]}}


def test_olmo_ledger_gzip_plain_and_commas(tmp_path):
    _write(tmp_path / "data-indices" / "rank0.tsv.gz", "1\t4\t0\t7\n2\t1\t2\t3\n2\t11\t12\n")  # step 2 again: a resume
    _write(tmp_path / "data-indices" / "rank1.tsv", "1\t5,6,8\n2\t9\t10\n", gz=False)
    assert ledger_rows(tmp_path, [1, 2])[0] == {1: {0: [4, 0, 7], 1: [5, 6, 8]}, 2: {0: [11, 12], 1: [9, 10]}}


def test_bad_ledgers_are_usage_errors(tmp_path):
    with pytest.raises(datacheck.UsageError, match="no rank<r>.tsv.gz file"):
        ledger_rows(tmp_path, [1])
    _write(tmp_path / "rank0.tsv.gz", "1\t4\tx\n")
    with pytest.raises(datacheck.UsageError, match=r"rank0.tsv.gz:1: not a ledger line"):
        ledger_rows(tmp_path, [1])
