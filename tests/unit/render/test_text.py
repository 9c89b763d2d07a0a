"""Text and markdown views of a report: policy marks, shards of dataset findings and skips, unreadable counts."""
from __future__ import annotations

import polars as pl

import datacheck
from datacheck.render.text import render_markdown, render_text


def _data(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    pl.DataFrame({"text": ["a", "b"], "label": [0, 1]}).write_parquet(d / "a.parquet")
    pl.DataFrame({"text": ["c", ""], "label": [1, 0]}).write_parquet(d / "b.parquet")
    pl.DataFrame({"text": ["e", "f"]}).write_parquet(d / "c.parquet")  # no label column: schema.inconsistent
    (d / "z.parquet").write_bytes(b"")  # unreadable
    return d


def test_text_view(tmp_path):
    # stated as classification rows (c.parquet alone would be a corpus before tokenization, raw_text)
    report = datacheck.audit([str(_data(tmp_path))], {"labels": {"num_classes": 2},
                                                      "dataset": {"layout": "text_classification"}}, fail_on="error")
    text = render_text(report)
    lines = text.splitlines()
    # Findings marks policy failures like the table
    assert "  b.parquet: empty.text [error!] 1 row(s) of 'text' have no text: 1 empty" in text
    assert any(ln.startswith("FAIL    z.parquet") and ln.split()[3:6] == ["decode.unreadable", "error!", "-"]
               for ln in lines), text
    # the dataset finding names the shard that differs
    inc = next(ln for ln in lines if ln.startswith("  schema.inconsistent [error!]"))
    assert inc.endswith("(1 shard: c.parquet)")
    # the skip says which shards it applies to
    sk = next(ln for ln in lines if "labels.out_of_range" in ln.split(":")[0])
    assert sk.startswith("  labels.null, labels.out_of_range") and sk.endswith("(1 shard: c.parquet)")
    md = render_markdown(report)
    assert "(1 shard: c.parquet)" in md
    assert "| `z.parquet` | unreadable | fail | `decode.unreadable` |  | error **(fails)** | - |" in md


def test_many_shards_are_shortened(tmp_path):
    from datacheck.render.text import _shards_txt

    assert _shards_txt([]) == ""
    assert _shards_txt(["a.parquet", "b.parquet"]) == "(2 shards: a.parquet, b.parquet)"
    assert _shards_txt([f"s{i}" for i in range(5)]) == "(5 shards: s0, s1, s2, … 2 more)"


def test_dataset_findings_show_their_rows(tmp_path):
    """A dataset-level finding shows its example rows in the text view, each naming its shard and
    row (they were only in the JSON report: the text said a row repeated, not which)."""
    d = tmp_path / "d"
    d.mkdir()
    a = ["first text", "second text", "third text"]
    b = ["other text", "second text"]
    pl.DataFrame({"text": a}).write_parquet(d / "a.parquet")
    pl.DataFrame({"text": b}).write_parquet(d / "b.parquet")
    text = render_text(datacheck.audit([str(d)], {}, fail_on="error"))
    assert f"      b.parquet row {b.index(a[1])} = a.parquet row {a.index(b[1])}" in text.splitlines()
