"""The text and markdown tables say which column a finding is about, so the same
check on two columns (``finite.nan`` on ``x`` and on ``y``) reads as two different rows."""
from __future__ import annotations

import polars as pl

import datacheck
from datacheck.render.text import MAX_COLUMN_CELL, render_markdown, render_text


def _report(tmp_path, columns: dict[str, list[float]]):
    d = tmp_path / "d"
    d.mkdir()
    pl.DataFrame(columns).write_parquet(d / "a.parquet")
    return datacheck.audit([str(d)], {"columns": {"features": list(columns)}}, fail_on="never")


def test_text_table_names_the_column_of_each_finding(tmp_path):
    rep = _report(tmp_path, {"x": [1.0, float("nan"), 3.0], "y": [float("nan"), 2.0, float("nan")]})
    lines = render_text(rep).splitlines()
    header = next(ln for ln in lines if ln.startswith("status"))
    assert header.split() == ["status", "shard", "rows", "check", "column", "severity", "count", "first"]
    table = lines[lines.index(header) + 2:]
    nan = sorted(ln.split()[-6:] for ln in table[: table.index("")] if "finite.nan" in ln)
    assert nan == [["finite.nan", "x", "error", "1", "rows", "1"], ["finite.nan", "y", "error", "2", "rows", "0,2"]]


def test_markdown_table_names_the_column(tmp_path):
    rep = _report(tmp_path, {"x": [1.0, float("nan")], "y": [float("nan"), 2.0]})
    md = render_markdown(rep)
    assert "| shard | rows | status | check | column | severity | count | first rows |" in md
    assert "| `finite.nan` | `x` | error | 1 | rows 1 |" in md
    assert "| `finite.nan` | `y` | error | 1 | rows 0 |" in md


def test_long_or_multiline_column_names_do_not_break_the_table(tmp_path):
    name = "a\nb" + "c" * 100
    rep = _report(tmp_path, {name: [float("nan"), 1.0]})
    lines = render_text(rep).splitlines()
    (row,) = [ln for ln in lines if "finite.nan" in ln and "[" not in ln]
    cell = "a\\nb" + "c" * (MAX_COLUMN_CELL - 5) + "…"
    assert cell in row


def test_shard_names_with_line_breaks_or_escapes_keep_the_table_aligned(tmp_path):
    # a file name holding a newline or ESC: one table line per finding, the columns aligned (the
    # width counted on the text as shown, escapes written out)
    d = tmp_path / "d"
    d.mkdir()
    names = ["train\nx.parquet", "a\x1b[2Jb.parquet", "plain.parquet"]
    for n in names:
        pl.DataFrame({"x": [1.0, float("nan")]}).write_parquet(d / n)
    rep = datacheck.audit([str(d)], {"columns": {"features": ["x"]}}, fail_on="never")
    lines = render_text(rep).splitlines()
    header = next(ln for ln in lines if ln.startswith("status"))
    table = lines[lines.index(header) + 2:]
    table = table[: table.index("")]
    assert len(table) == len(names)
    shown = {"train\\nx.parquet", "a\\x1b[2Jb.parquet", "plain.parquet"}
    assert {ln.split()[1] for ln in table} == shown
    check_at = {ln.index("finite.nan") for ln in table}
    assert check_at == {header.index("check")}
