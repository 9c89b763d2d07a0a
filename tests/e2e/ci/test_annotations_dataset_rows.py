"""A GitHub annotation of a dataset-level finding over several shards (rows of one shard repeating rows
of another, a text labelled both ways across shards) lists no bare "first rows": each row number is
some shard's row, and the annotation cannot say whose (the JUnit text names the shard of each
example). A finding of one shard keeps its rows. Real rows: SST-2 (Vietnamese) train."""
from __future__ import annotations

import polars as pl
from gatehelp import cli

SST2 = "sst2_vi_glue_parquet/train-00000-of-00001.parquet"


def test_rows_of_several_shards_are_not_listed_bare(tmp_path, realdata, monkeypatch):
    rows = pl.read_parquet(realdata / SST2)
    data = tmp_path / "data"
    data.mkdir()
    a = rows.slice(0, 300)
    b = pl.concat([rows.slice(300, 300), a.slice(0, 5)])  # b's rows 300..304 repeat a's rows 0..4
    a.write_parquet(data / "train-00000.parquet")
    b.write_parquet(data / "train-00001.parquet")
    seen = set(zip(a["sentence"], a["label"]))
    across = sum(k in seen for k in zip(b["sentence"], b["label"]))
    assert across >= 5
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text('[dataset]\nlayout = "text_classification"\n\n[labels]\nnum_classes = 2\n')
    r = cli("audit", str(data), "--config", str(cfg), "--no-cache", "--report-dir", str(tmp_path / "r"),
            env={"GITHUB_ACTIONS": "true"}, monkeypatch=monkeypatch)
    assert r.returncode == 0, r.stderr  # warnings only: annotated, not failing
    ann = [ln for ln in r.stderr.splitlines() if ln.startswith("::")]
    cross = [ln for ln in ann if "dup.exact_across_shards" in ln]
    assert len(cross) == 1, ann
    assert f"count {across}" in cross[0] and "first rows" not in cross[0], cross[0]
    assert "train-00000.parquet" in cross[0] and "train-00001.parquet" in cross[0]
