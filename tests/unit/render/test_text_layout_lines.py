"""The text and markdown headers' ``layout:`` lines: shards of one layout recognized by the same
evidence on other row counts share one line (the counts are each shard's, in the JSON report), so
a growing shard set of uneven shards prints one line per layout, not one per shard size."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

import datacheck
from datacheck.render.text import render_markdown, render_text


def _sft(path, rows: int) -> None:
    """``rows`` tokenized SFT rows: a 3-token prompt hidden from the loss (-100), 5 supervised tokens."""
    ids = [[5 + (r + k) % 50 for k in range(8)] for r in range(rows)]
    labels = [[-100] * 3 + x[3:] for x in ids]
    pq.write_table(pa.table({"input_ids": pa.array(ids, pa.list_(pa.int32())),
                             "labels": pa.array(labels, pa.list_(pa.int64()))}), path)


def _layout_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.startswith(("layout: ", "- layout: "))]


def test_uneven_shards_of_one_layout_share_one_line(tmp_path):
    for i, n in enumerate((30, 40, 50)):
        _sft(tmp_path / f"part-{i}.parquet", n)
    rep = datacheck.audit([str(tmp_path)], {}, fail_on="never", workers=1)
    whys = {s.path: s.layout_why for s in rep.shards}
    assert len(set(whys.values())) == 3                        # each shard's own count, in the report
    assert {s.layout for s in rep.shards} == {"sft_tokenized"}
    common = next(iter(whys.values())).split("; ")[0]
    assert all(w.split("; ")[0] == common for w in whys.values())
    want = (f"sft_tokenized (recognized: {common}; the counts differ per shard: each shard's 'layout_why' in "
            "the JSON report)")
    assert _layout_lines(render_text(rep)) == [f"layout: {want}"]
    assert _layout_lines(render_markdown(rep)) == [f"- layout: {want}"]


def test_shards_of_equal_evidence_keep_it_whole(tmp_path):
    for i in range(2):
        _sft(tmp_path / f"part-{i}.parquet", 30)
    rep = datacheck.audit([str(tmp_path)], {}, fail_on="never", workers=1)
    (why,) = {s.layout_why for s in rep.shards}
    assert _layout_lines(render_text(rep)) == [f"layout: sft_tokenized (recognized: {why})"]


def test_other_layouts_stay_apart(tmp_path):
    _sft(tmp_path / "sft.parquet", 30)
    pq.write_table(pa.table({"text": [f"a sentence {i}" for i in range(30)], "label": [i % 2 for i in range(30)]}),
                   tmp_path / "cls.parquet")
    rep = datacheck.audit([str(tmp_path)], {}, fail_on="never", workers=1)
    lines = _layout_lines(render_text(rep))
    assert len(lines) == 2 and lines[0].startswith("layout: text_classification (recognized: ")
    assert lines[0].endswith("(1 shard: cls.parquet)") and lines[1].endswith("(1 shard: sft.parquet)")
