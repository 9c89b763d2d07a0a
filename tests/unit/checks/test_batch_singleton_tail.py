"""batch.singleton_tail with batch_size 1: every micro-batch holds 1 row by design, so the last one is
no tail (a new user's clean data failed the gate on it); a skipped entry says so. Rows a rank's last
micro-batch holds are computed here from the row count."""
from __future__ import annotations

import polars as pl
import pytest

import datacheck

pytest.importorskip("torch")


def _audit(tmp_path, rows: int, batch: dict):
    p = tmp_path / f"s{rows}.parquet"
    pl.DataFrame({"input_ids": [[1, 2, 3 + i] for i in range(rows)], "attention_mask": [[1, 1, 1]] * rows,
                  "labels": [[1, 2, 3 + i] for i in range(rows)]}).write_parquet(p)
    return datacheck.audit([str(p)], config={"tokens": {"vocab_size": 32000}, "batch": batch}, workers=1)


def test_batch_size_one_is_no_singleton_tail(tmp_path):
    rep = _audit(tmp_path, 100, {"batch_size": 1})
    assert "batch.singleton_tail" not in [f.check for f in rep.findings] and rep.passed
    (why,) = [s["reason"] for s in rep.skipped if s["check"] == "batch.singleton_tail"]
    assert why.startswith("[batch] batch_size = 1: every micro-batch holds 1 row by design")


@pytest.mark.parametrize(("rows", "bs", "ws"), [(101, 4, 1), (9, 4, 2), (100, 4, 1)])
def test_a_one_row_tail_of_a_larger_batch_size_is_found(tmp_path, rows, bs, ws):
    per_rank = -(-rows // ws)
    tail = per_rank % bs or bs
    rep = _audit(tmp_path, rows, {"batch_size": bs, "world_size": ws})
    found = [f for f in rep.findings if f.check == "batch.singleton_tail"]
    assert [f.count for f in found] == ([ws] if tail == 1 else [])
