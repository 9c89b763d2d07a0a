"""tokens.position_out_of_range of datacheck.checks.tokens: without position ids, the input_ids length
against max_position_embeddings; its skip reason."""
from __future__ import annotations

import polars as pl
from refs import rows, run, skip


def test_position_out_of_range_without_position_ids():
    df = pl.DataFrame({"input_ids": [[1] * 5, [1] * 3]})
    res = run(df, {"tokens": {"max_position_embeddings": 4}})
    assert rows(res, "tokens.position_out_of_range:input_ids") == [0]
    assert skip(run(df), "tokens.position_out_of_range") == "[tokens] max_position_embeddings is not set"
