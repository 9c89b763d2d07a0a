"""Markdown output never renders HTML or table syntax from file names or messages."""
from __future__ import annotations

import polars as pl

import datacheck
from datacheck.render.text import render_markdown


def test_hostile_file_names_stay_text(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    name = "<img src=x onerror=alert(1)>|`x`.jsonl"
    (d / name).write_text("not json\n")
    pl.DataFrame({"text": ["a"]}).write_parquet(d / "ok.parquet")
    md = render_markdown(datacheck.audit([str(d)]))
    assert "<img" not in md.replace("``<img", "")  # only inside a code span
    row = next(line for line in md.splitlines() if "onerror" in line)
    assert row.startswith("| ``<img src=x onerror=alert(1)>\\|`x`.jsonl`` |")
    assert row.count(" | ") == 7  # eight cells: the name's | did not add one
    for line in md.splitlines():
        if not line.startswith("| ") and "onerror" in line:
            assert "<img" not in line, line
