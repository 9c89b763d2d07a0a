"""Long finding messages in the text output: cut with a visible ``…`` (also in the Dataset section),
and the last sentence (what to do) kept whole when it is short."""
from __future__ import annotations

import datacheck
from datacheck.render.text import clip_message, render_text

ADVICE = "Leave it out of training and evaluation, or give it its real labels"


def test_short_message_is_whole():
    assert clip_message("3 rows are bad. Fix them", 330) == "3 rows are bad. Fix them"


def test_long_message_keeps_its_last_sentence():
    msg = "1821 row(s) hold -1. " + "x" * 400 + ". " + ADVICE
    got = clip_message(msg, 330)
    assert got.endswith(" … " + ADVICE) and got.startswith("1821 row(s) hold -1. ")
    assert len(got) <= 330


def test_long_last_sentence_is_cut_with_a_mark():
    msg = "head. " + "y" * 500
    assert clip_message(msg, 330) == msg[:330] + "…"
    assert clip_message("z" * 400, 330) == "z" * 330 + "…"


def test_dataset_section_marks_a_cut_message(tmp_path):
    """A dataset-level message past the limit ends in '…' before the shard list (it was cut silently)."""
    import polars as pl

    for i in range(2):  # the same texts with other labels in two shards: dup.conflicting_labels
        pl.DataFrame({"text": [f"a fairly long sentence number {k} " + "w" * 40 for k in range(30)],
                      "label": [(k + i) % 2 for k in range(30)]}).write_parquet(tmp_path / f"p{i}.parquet")
    rep = datacheck.audit([str(tmp_path)], {}, fail_on="never", workers=1)
    f = next(f for f in rep.findings if f.check == "dup.conflicting_labels")
    line = next(ln for ln in render_text(rep, max_message=20).splitlines() if "dup.conflicting_labels [" in ln)
    assert len(f.message) > 60
    assert clip_message(f.message, 60) in line
