"""The same rows read from parquet, Arrow IPC, JSONL and CSV fail the same checks on the same rows."""
from __future__ import annotations

import tempfile
from pathlib import Path

import polars as pl
from checkhelp import shard_result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from refs import SHARD_SETTINGS as SETTINGS
from refs import int_lists, small_ints, texts
from refs import n_rows as _rows


@settings(max_examples=max(5, SETTINGS.max_examples // 4), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), n=_rows())
def test_formats_give_the_same_failing_rows(data, n):
    """The same rows read from parquet, Arrow IPC and JSONL fail the same checks on the same rows."""
    text = data.draw(st.lists(texts, min_size=n, max_size=n))
    label = data.draw(st.lists(small_ints, min_size=n, max_size=n))
    ids = data.draw(st.lists(int_lists, min_size=n, max_size=n))
    df = pl.DataFrame({"text": text, "label": label, "input_ids": ids},
                      schema={"text": pl.String, "label": pl.Int64, "input_ids": pl.List(pl.Int64)})
    cfg = {"labels": {"num_classes": 3}, "tokens": {"vocab_size": 10, "max_seq_len": 3, "pad_token_id": 0}}
    got = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("s.parquet", "s.arrow", "s.jsonl"):
            got[name] = shard_result(Path(tmp), df, cfg, name=name).failing_rows
    assert got["s.arrow"] == got["s.parquet"]
    assert got["s.jsonl"] == got["s.parquet"]


csv_texts = st.one_of(st.none(), st.text(alphabet=' ,;"\n\tab\u00e912.', max_size=6))


@settings(max_examples=max(5, SETTINGS.max_examples // 4), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), n=_rows())
def test_csv_gives_the_same_failing_rows_as_parquet(data, n):
    """Text with separators, quotes, newlines and whitespace survives the CSV reader: the scalar
    checks fail on the same rows as for parquet (a CSV cannot tell an empty field from a null)."""
    text = data.draw(st.lists(csv_texts, min_size=n, max_size=n))
    label = data.draw(st.lists(small_ints, min_size=n, max_size=n))
    df = pl.DataFrame({"text": text, "label": label}, schema={"text": pl.String, "label": pl.Int64})
    cfg = {"labels": {"num_classes": 3}}
    as_read = df.with_columns(pl.when(pl.col("text") == "").then(None).otherwise(pl.col("text")).alias("text"))
    with tempfile.TemporaryDirectory() as tmp:
        want = shard_result(Path(tmp), as_read, cfg).failing_rows
        got = shard_result(Path(tmp), df, cfg, name="s.csv").failing_rows
    assert got == want
