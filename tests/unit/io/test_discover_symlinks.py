"""Shard symlinks that lead outside the audited root are not read by default: their
content (an example value from another folder, a system file's first line as a column name) would be
shown in the report. ``--follow-symlinks`` reads them (a Hugging Face hub cache snapshot)."""
from __future__ import annotations

import json
import os

import polars as pl
import pytest
from conftest import run_cli

import datacheck


@pytest.fixture
def linked(tmp_path):
    secret = tmp_path / "elsewhere"
    secret.mkdir()
    (secret / "private.csv").write_text("SECRET_HOSTNAME\nvalue-from-another-folder\n")
    d = tmp_path / "data"
    (d / "sub").mkdir(parents=True)
    pl.DataFrame({"text": ["a", "b"]}).write_parquet(d / "own.parquet")
    pl.DataFrame({"text": ["c"]}).write_parquet(d / "sub" / "inside.parquet")
    os.symlink(secret / "private.csv", d / "leak.csv")
    os.symlink(d / "sub" / "inside.parquet", d / "alias.parquet")  # inside the root: read
    return d


def test_links_out_of_root_are_not_read(tmp_path, linked):
    p = run_cli("audit", str(linked), "--report-dir", str(tmp_path / "r"), "--format", "json", cwd=tmp_path)
    assert p.returncode in (0, 1), p.stderr
    assert "SECRET_HOSTNAME" not in p.stdout and "value-from-another-folder" not in p.stdout
    rep = json.loads(p.stdout)
    assert sorted(s["path"] for s in rep["shards"]) == ["alias.parquet", "own.parquet", "sub/inside.parquet"]
    (ign,) = [i for i in rep["ignored"] if i["path"] == "leak.csv"]
    assert "outside the audited root" in ign["reason"] and "--follow-symlinks" in ign["reason"]


def test_follow_symlinks_reads_them(tmp_path, linked):
    rep = datacheck.audit([str(linked)], follow_symlinks=True)
    assert "leak.csv" in [s.path for s in rep.shards]
    p = run_cli("audit", str(linked), "--follow-symlinks", "--report-dir", str(tmp_path / "r"), "--format", "json",
                cwd=tmp_path)
    assert "leak.csv" in [s["path"] for s in json.loads(p.stdout)["shards"]]


def test_a_named_link_is_read(tmp_path, linked):
    p = run_cli("audit", str(linked / "leak.csv"), "--report-dir", str(tmp_path / "r"), "--format", "json", cwd=tmp_path)
    assert [s["path"] for s in json.loads(p.stdout)["shards"]] == ["leak.csv"]


def test_a_broken_link_out_of_root_is_named_broken(tmp_path, linked):
    # a dangling link (a shard missing or not downloaded): nothing --follow-symlinks could read
    gone = tmp_path / "elsewhere" / "gone.parquet"
    os.symlink(gone, linked / "missing.parquet")
    assert not gone.exists()
    p = run_cli("audit", str(linked), "--report-dir", str(tmp_path / "r"), "--format", "json", cwd=tmp_path)
    assert p.returncode in (0, 1), p.stderr
    rep = json.loads(p.stdout)
    (ign,) = [i for i in rep["ignored"] if i["path"] == "missing.parquet"]
    assert ign["reason"].startswith(f"a broken symlink: its target {gone}, outside the audited root, does not exist")
    assert "--follow-symlinks` reads it" not in ign["reason"]
    (leak,) = [i for i in rep["ignored"] if i["path"] == "leak.csv"]  # a link whose target exists: as before
    # only audit takes the flag (plan, inspect, clean... refuse it): the hint names the verb
    assert "`datacheck audit --follow-symlinks` reads it" in leak["reason"] and "other verbs: give the link's target" \
        in leak["reason"]
    followed = datacheck.audit([str(linked)], follow_symlinks=True)
    (f,) = [f for f in followed.findings if f.check == "decode.unreadable"]
    assert f.shards == ("missing.parquet",)


@pytest.mark.parametrize("verb", [["audit"], ["inspect"], ["clean", "--out", "copy"]])
def test_a_broken_link_named_as_path_says_so(tmp_path, verb):
    # `ls` lists the link, so "no such file or folder" would contradict what the user sees: the
    # message names the link and its missing target; exit 2, no traceback
    gone = tmp_path / "not-downloaded" / "train-00000.parquet"
    link = tmp_path / "train-00000.parquet"
    os.symlink(gone, link)
    p = run_cli(verb[0], str(link), *verb[1:], "--report-dir", str(tmp_path / "r"), cwd=tmp_path) if verb[0] == "audit" \
        else run_cli(verb[0], str(link), *verb[1:], cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert f"{link}: a broken symlink: its target {gone} does not exist" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr


def test_a_link_loop_named_as_path_says_so(tmp_path):
    loop = tmp_path / "a.parquet"
    os.symlink(loop, loop)
    p = run_cli("audit", str(loop), "--report-dir", str(tmp_path / "r"), cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert f"{loop}: a symlink loop" in p.stderr, p.stderr
