"""``--follow-symlinks`` holds for a split audit as for the single job: the merge of ``--num-parts 2``
parts lists the same shards (one reached through a symlink leading outside the audited folder, one
through a symlink inside it) and the same report, ``created_at`` aside (the merge's own time)."""
from __future__ import annotations

import json
import os

import polars as pl
import pytest
from conftest import run_cli

from datacheck.execute.parts import part_of

pytestmark = pytest.mark.skipif(os.name == "nt", reason="symlinks need privileges on Windows")


def _data(tmp_path):
    root, outside = tmp_path / "data", tmp_path / "elsewhere"
    root.mkdir()
    outside.mkdir()
    for i in range(5):
        pl.DataFrame({"text": [f"s{i}-{k}" for k in range(4)] + [""], "label": [0, 1, 0, 1, i % 2]}).write_parquet(
            root / f"train-{i:05d}.parquet")
    pl.DataFrame({"text": ["far", "away"], "label": [1, 0]}).write_parquet(outside / "extra.parquet")
    os.symlink(outside / "extra.parquet", root / "linked-out.parquet")  # leads outside the audited root
    os.symlink("train-00000.parquet", root / "linked-in.parquet")  # inside: read with or without the flag
    return root


def _report(path):
    doc = json.loads(path.read_text())
    for k in ("created_at", "config_path"):
        doc.pop(k)
    return doc


def test_parts_follow_symlinks_like_the_single_job(tmp_path):
    d = _data(tmp_path)
    assert {part_of(n, 2) for n in ("linked-out.parquet", "linked-in.parquet", "train-00001.parquet")} == {0, 1}
    common = ["--no-cache", "--no-progress", "--fail-on", "never", "--report-dir", str(tmp_path / "r")]
    single = run_cli("audit", str(d), "--follow-symlinks", "-o", str(tmp_path / "single.json"), *common)
    assert single.returncode == 0, single.stderr
    parts = []
    for k in range(2):
        out = tmp_path / "parts" / f"part-{k}.json"
        r = run_cli("audit", str(d), "--follow-symlinks", "--num-parts", "2", "--part", str(k), "-o", str(out), *common)
        assert r.returncode == 0, r.stderr
        parts.append(out)
    m = run_cli("merge", *map(str, parts), "-o", str(tmp_path / "merged.json"), "--report-dir", str(tmp_path / "r"))
    assert m.returncode == 0, m.stderr
    want, got = _report(tmp_path / "single.json"), _report(tmp_path / "merged.json")
    shards = sorted(s["path"] for s in want["shards"])
    assert "linked-out.parquet" in shards and "linked-in.parquet" in shards
    assert sorted(s["path"] for s in got["shards"]) == shards
    assert got == want
    # without the flag the link out is not read (listed as ignored) in the single job and the parts alike
    plain = run_cli("audit", str(d), "--format", "json", *common)
    assert "linked-out.parquet" not in [s["path"] for s in json.loads(plain.stdout)["shards"]]
