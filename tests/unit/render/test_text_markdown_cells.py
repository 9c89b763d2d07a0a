"""A ``|`` in a shard name does not break the markdown table (GFM: ``\\|``)."""
from __future__ import annotations

import polars as pl

import datacheck
from datacheck.render.text import render_markdown


def test_pipe_in_a_shard_name_is_escaped(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    pl.DataFrame({"text": ["a", ""]}).write_parquet(d / "a|b.parquet")
    md = render_markdown(datacheck.audit(str(d), config={}, fail_on="never"))
    (row,) = [ln for ln in md.splitlines() if "a\\|b.parquet" in ln]
    # 8 columns: 9 unescaped pipes
    assert row.replace("\\|", "").count("|") == 9
