"""File and folder names holding the glob characters ``[``, ``]``, ``*`` and ``?`` (``train[1].parquet``,
``run[2]/``, a TMPDIR such as ``/scratch/job[7]``) are names, not patterns, wherever datacheck opens
them: a clean parquet shard named ``train[1].parquet`` was ``decode.unreadable`` (polars expanded the
path as a glob and found nothing), a PATH naming an existing ``train[1].parquet`` or ``run[1]`` found
"no shard files", and spill files under such a TMPDIR made the cross-shard checks fail internally."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import polars as pl
import pytest
from conftest import ROOT

import datacheck

ROWS = {"text": [f"sentence {i}" for i in range(12)], "label": [i % 3 for i in range(12)]}


@pytest.fixture
def bracketed(tmp_path):
    d = tmp_path / "run[1]"
    d.mkdir()
    pl.DataFrame(ROWS).write_parquet(d / "train[1].parquet")
    pl.DataFrame(ROWS).head(5).write_parquet(d / "b*?.parquet")
    (d / "c[0].jsonl").write_text("".join(json.dumps({"text": t, "label": x}) + "\n"
                                          for t, x in zip(ROWS["text"][:7], ROWS["label"][:7])))
    return d


def test_a_folder_of_bracketed_names_is_read(bracketed):
    rep = datacheck.audit([str(bracketed)], fail_on="never")
    got = {s.path: s.rows for s in rep.shards}
    assert got == {"train[1].parquet": 12, "b*?.parquet": 5, "c[0].jsonl": 7}
    assert not [f for f in rep.findings if f.check == "decode.unreadable"]


@pytest.mark.parametrize("name", ["train[1].parquet", "b*?.parquet"])
def test_a_path_naming_an_existing_file_is_that_file(bracketed, name):
    rep = datacheck.audit([str(bracketed / name)], fail_on="never")
    assert [(s.path, s.rows) for s in rep.shards] == [(name, 12 if name.startswith("train") else 5)]


def test_a_pattern_is_still_a_pattern(tmp_path):
    for i in (1, 2):
        pl.DataFrame(ROWS).write_parquet(tmp_path / f"train{i}.parquet")
    rep = datacheck.audit([str(tmp_path / "train[12].parquet")], fail_on="never")
    assert sorted(s.path for s in rep.shards) == ["train1.parquet", "train2.parquet"]


def test_spill_files_under_a_bracketed_tmpdir(tmp_path):
    # the cross-shard checks spill row hashes to TMPDIR above DATACHECK_SPILL_ROWS rows
    d = tmp_path / "data"
    d.mkdir()
    for i in range(2):
        pl.DataFrame(ROWS).write_parquet(d / f"train-0000{i}-of-00002.parquet")
    tmp = tmp_path / "job[7]"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "DATACHECK_SPILL_ROWS": "3", "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-m", "datacheck", "audit", str(d), "--no-cache", "--format", "json",
                        "--report-dir", str(tmp_path / "r")], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert p.returncode == 1, p.stderr  # the second shard repeats the first: a policy failure, no check error
    rep = json.loads(p.stdout)
    assert not [s for s in rep["skipped"] if s.get("error")], rep["skipped"]
    (f,) = [f for f in rep["findings"] if f["check"] == "dup.exact_across_shards"]
    assert f["count"] == 12
