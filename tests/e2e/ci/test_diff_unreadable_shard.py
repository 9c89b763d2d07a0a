"""``datacheck diff`` of a nightly job whose shard was half-written (a truncated upload): the shard
that NEW could not read resolves none of its OLD findings (they are *unchecked*: not known), its stats
are not compared (its label shares did not move to 0), and its ``decode.unreadable`` finding, which
counts no rows, is never shown as ``0 -> 0``. Real rows: SST-2 (Vietnamese) train, copied into
two parquet shards; the expected duplicates are counted here from the rows."""
from __future__ import annotations

import json
import os

import polars as pl
from gatehelp import cli, load

SST2 = "sst2_vi_glue_parquet/train-00000-of-00001.parquet"


def _in_shard_repeats(df: pl.DataFrame) -> int:
    """Rows whose (sentence, label) repeats an earlier row of the same shard."""
    seen: set[tuple[str, int]] = set()
    n = 0
    for s, lab in zip(df["sentence"], df["label"]):
        n += (s, lab) in seen
        seen.add((s, lab))
    return n


def test_a_truncated_shard_resolves_nothing_and_moves_no_stat(tmp_path, realdata, monkeypatch):
    rows = pl.read_parquet(realdata / SST2).slice(0, 4000)
    data = tmp_path / "data"
    data.mkdir()
    a, b = rows.slice(0, 2000), rows.slice(2000, 2000)
    a.write_parquet(data / "train-00000.parquet")
    b.write_parquet(data / "train-00001.parquet")
    repeats_b = _in_shard_repeats(b)
    in_a = set(zip(a["sentence"], a["label"]))
    across = sum((k in in_a) for k in zip(b["sentence"], b["label"]))  # shard 1's rows that repeat shard 0
    labels: dict[str, set[int]] = {}
    for s, lab in zip(rows["sentence"], rows["label"]):
        labels.setdefault(s, set()).add(lab)
    conflicting = sum(len(v) > 1 for v in labels.values())
    assert across > 0
    assert repeats_b > 0  # the real rows repeat: shard 1 has OLD findings to lose
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text('[dataset]\nlayout = "text_classification"\n\n[labels]\nnum_classes = 2\n')
    common = ("--config", str(cfg), "--report-dir", str(tmp_path / "reports"), "--no-cache")
    r1 = cli("audit", str(data), *common, "-o", str(tmp_path / "old.json"), monkeypatch=monkeypatch)
    assert r1.returncode == 0, r1.stdout
    old = load(tmp_path / "old.json")
    dup_b = [f for s in old["shards"] if s["path"] == "train-00001.parquet" for f in s["findings"]
             if f["check"] == "dup.exact_in_shard"]
    assert [f["count"] for f in dup_b] == [repeats_b]

    shard = data / "train-00001.parquet"
    os.truncate(shard, shard.stat().st_size // 2)  # the upload was cut off half-way
    r2 = cli("audit", str(data), *common, "-o", str(tmp_path / "new.json"), monkeypatch=monkeypatch)
    assert r2.returncode == 1, r2.stdout

    r = cli("diff", str(tmp_path / "old.json"), str(tmp_path / "new.json"), monkeypatch=monkeypatch)
    assert r.returncode == 1, r.stdout  # the unreadable shard is a new policy failure
    out = r.stdout
    assert "0 -> 0" not in out, out
    assert "  new      train-00001.parquet: decode.unreadable [error] FAILS POLICY" in out, out
    # the shard's rows were not read: neither its own findings nor the dataset-level ones that named it
    # (its rows repeated in shard 0 or conflicting with it) are resolved
    assert "0 resolved" in out and "  resolved " not in out, out
    assert f"  unchecked train-00001.parquet: dup.exact_in_shard [warn] {repeats_b} -> ? (shard unreadable)" in out
    assert "unreadable in NEW: 1" in out and "  ! train-00001.parquet" in out
    assert "train-00001.parquet: labels.share" not in out and "train-00001.parquet: lengths." not in out, out

    md = cli("diff", str(tmp_path / "old.json"), str(tmp_path / "new.json"), "--format", "markdown",
             monkeypatch=monkeypatch).stdout
    assert "| new | `train-00001.parquet` | `decode.unreadable` |  | - | - | yes |" in md, md
    assert f"| unchecked | `train-00001.parquet` | `dup.exact_in_shard` |  | {repeats_b} | - |  |" in md, md
    assert "| `train-00001.parquet` | labels.share" not in md

    js = cli("diff", str(tmp_path / "old.json"), str(tmp_path / "new.json"), "--format", "json",
             monkeypatch=monkeypatch).stdout
    data_ = json.loads(js)["result"]
    assert data_["shards"]["unreadable"] == ["train-00001.parquet"]
    assert data_["findings"]["resolved"] == []
    unchecked = {(u["where"], u["check"]): u["old_count"] for u in data_["findings"]["unchecked"]}
    assert unchecked.pop(("train-00001.parquet", "dup.exact_in_shard")) == repeats_b
    assert unchecked.pop(("dataset", "dup.exact_across_shards")) == across
    assert set(unchecked) == ({("dataset", "dup.conflicting_labels")} if conflicting else set())
