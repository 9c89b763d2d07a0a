"""What a CI shows for a half-written shard (a truncated upload): the GitHub annotation and the JUnit
failure name the shard and why it cannot be read, and say no "count 0" (``decode.unreadable`` counts
no rows; the text and markdown tables show ``-``), while a finding of counted rows keeps its count.
Real rows: SST-2 (Vietnamese) train."""
from __future__ import annotations

import os
import xml.etree.ElementTree as ET

import polars as pl
from gatehelp import cli

SST2 = "sst2_vi_glue_parquet/train-00000-of-00001.parquet"


def test_a_truncated_shard_is_annotated_without_a_zero_count(tmp_path, realdata, monkeypatch):
    rows = pl.read_parquet(realdata / SST2).slice(0, 1000)
    data = tmp_path / "data"
    data.mkdir()
    good = rows.slice(0, 500).with_columns(label=pl.when(pl.int_range(500) == 3).then(7).otherwise(pl.col("label")))
    good.write_parquet(data / "train-00000.parquet")  # row 3 holds label 7: one counted row
    bad = data / "train-00001.parquet"
    rows.slice(500, 500).write_parquet(bad)
    os.truncate(bad, bad.stat().st_size // 2)
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text('[dataset]\nlayout = "text_classification"\n\n[labels]\nnum_classes = 2\n')
    junit = tmp_path / "junit.xml"
    r = cli("audit", str(data), "--config", str(cfg), "--no-cache", "--report-dir", str(tmp_path / "r"),
            "--junit", str(junit), env={"GITHUB_ACTIONS": "true"}, monkeypatch=monkeypatch)
    assert r.returncode == 1
    ann = [ln for ln in r.stderr.splitlines() if ln.startswith("::error")]
    unread = [ln for ln in ann if "decode.unreadable" in ln]
    assert len(unread) == 1 and "train-00001.parquet" in unread[0] and "truncated" in unread[0], ann
    assert "count 0" not in unread[0] and unread[0].endswith("[error]"), unread[0]
    oor = [ln for ln in ann if "labels.out_of_range" in ln]
    assert len(oor) == 1 and "[error, count 1; first rows 3]" in oor[0], ann

    failures = {(tc.get("classname"), tc.get("name")): tc.find("failure")
                for tc in ET.parse(junit).getroot().iter("testcase") if tc.find("failure") is not None}
    text = failures[("train-00001.parquet", "decode.unreadable")].text or ""
    assert "count 0" not in text and "severity error" in text, text
    assert "severity error, count 1" in (failures[("train-00000.parquet", "labels.out_of_range")].text or "")
