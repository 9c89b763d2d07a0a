"""Details computed over the flat position view name the shard's rows, not positions in the frame of
gathered failing rows (a run in row 243 was reported as "row 0")."""
from __future__ import annotations

import numpy as np
import polars as pl

from datacheck.engine.shard import audit_frame
from datacheck.model.config import Config


def _frame() -> pl.DataFrame:
    rng = np.random.default_rng(0)
    rows = [rng.integers(0, 1000, 64).tolist() for _ in range(300)]
    rows[243] = [7] * 10 + [5] * 40 + [9] * 14
    return pl.DataFrame({"input_ids": rows})


def test_periodic_tokens_details_name_the_shard_row() -> None:
    res = audit_frame(_frame(), Config())
    (f,) = [f for f in res.findings if f.check == "content.periodic_tokens"]
    assert list(f.rows) == [243]
    runs = f.details["runs"]
    assert runs == [{"row": 243, "run": {"start": 10, "period": 1, "repeats": 40}}]
    assert "row 243" in f.message and "row 0" not in f.message
