"""``tokens.dtype_overflow`` states what the storage type cannot hold, and the wrapping only as a condition."""
from __future__ import annotations

import polars as pl

import datacheck


def test_message_is_conditional(tmp_path):
    pl.DataFrame({"input_ids": pl.Series([[1, 2], [3]], dtype=pl.List(pl.Int16))}).write_parquet(tmp_path / "s.parquet")
    report = datacheck.audit([str(tmp_path)], {"tokens": {"vocab_size": 50257}}, fail_on="error")
    f = next(f for s in report.shards for f in s.findings if f.check == "tokens.dtype_overflow")
    assert f.message == ("'input_ids' stores ids as Int16 (max 32767) but vocab_size is 50257: ids above 32767 "
                         "cannot be stored: if the data was tokenized with vocab_size 50257 they were wrapped or "
                         "clipped. Store ids as int32 (or uint32).")
