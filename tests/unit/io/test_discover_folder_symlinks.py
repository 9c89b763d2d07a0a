"""Links to folders met while searching a folder or a glob: one that leads outside the audited root is
named under ``ignored`` (or read with ``follow_symlinks``), one inside it is never a second copy of the
same shards, a loop ends and is named, a broken one is named (a mount that is down)."""
from __future__ import annotations

import os
from pathlib import Path

import polars as pl
import pytest

from datacheck.formats.discovery import discover


@pytest.fixture
def tree(tmp_path):
    d = tmp_path / "data"
    (d / "real").mkdir(parents=True)
    (d / "sub").mkdir()
    out = tmp_path / "outside"
    out.mkdir()
    pl.DataFrame({"text": ["a"]}).write_parquet(d / "good.parquet")
    pl.DataFrame({"text": ["b"]}).write_parquet(d / "real" / "r.parquet")
    pl.DataFrame({"text": ["c"]}).write_parquet(out / "bad.parquet")
    os.symlink("../outside", d / "more")  # leads outside the root
    os.symlink("real", d / "alias")  # inside: the same shards as real/
    os.symlink("..", d / "sub" / "loop")  # a loop
    os.symlink(tmp_path / "not-mounted", d / "nfs")  # broken
    return d, out


def _reasons(disc):
    return {i["path"]: i["reason"] for i in disc.ignored_data}


def test_folder_links_found_in_a_folder(tree):
    d, out = tree
    disc = discover([str(d)])
    own = sorted((Path(dp) / f).relative_to(d).as_posix() for dp, _, fs in os.walk(d) for f in fs
                 if f.endswith(".parquet"))  # os.walk does not follow links to folders
    assert own == ["good.parquet", "real/r.parquet"]
    assert [s.rel for s in disc.shards] == own
    why = _reasons(disc)
    assert sorted(why) == ["alias", "more", "nfs", "sub/loop"]
    assert why["more"].startswith(f"a symlink to the folder {out.resolve()}, outside the audited root: not followed")
    assert "--follow-symlinks" in why["more"]
    assert why["alias"].startswith(f"a symlink to the folder {(d / 'real').resolve()}, whose files are audited")
    assert "(a loop)" in why["sub/loop"]
    assert why["nfs"].startswith(f"a broken symlink: its target {os.readlink(d / 'nfs')} does not exist")


def test_follow_symlinks_reads_the_outside_folder_once(tree):
    d, out = tree
    disc = discover([str(d)], follow_symlinks=True)
    expected = sorted(["good.parquet", "real/r.parquet"] + [f"more/{p.name}" for p in out.glob("*.parquet")])
    assert [s.rel for s in disc.shards] == expected
    assert sorted(_reasons(disc)) == ["alias", "nfs", "sub/loop"]


@pytest.mark.parametrize("follow", [False, True])
def test_a_glob_through_folder_links(tree, follow):
    d, out = tree
    disc = discover([str(d / "**" / "*.parquet")], follow_symlinks=follow)
    rels = [s.rel for s in disc.shards]
    assert len(rels) == len(set(rels))
    assert sorted(rels) == sorted(["good.parquet", "real/r.parquet"] + (["more/bad.parquet"] if follow else []))
    why = _reasons(disc)
    if not follow:
        assert "outside the audited root" in why["more/bad.parquet"]
    assert "(a loop)" in why["sub/loop"] and "whose files are audited" in why["alias"]


def test_a_link_inside_the_root_to_a_hidden_folder_is_read(tmp_path):
    d = tmp_path / "data"
    (d / ".store").mkdir(parents=True)
    pl.DataFrame({"text": ["a"]}).write_parquet(d / ".store" / "x.parquet")
    os.symlink(".store", d / "train")
    disc = discover([str(d)])
    assert [s.rel for s in disc.shards] == ["train/x.parquet"] and disc.ignored_data == []


def test_a_glob_over_two_loops_ends(tmp_path):
    # glob.glob follows each loop at every `**` until the path is too long: two loops, 2**40 paths
    d = tmp_path / "data"
    for sub in ("a", "b"):
        (d / sub).mkdir(parents=True)
        os.symlink("..", d / sub / "up")
    pl.DataFrame({"text": ["a"]}).write_parquet(d / "x.parquet")
    disc = discover([str(d / "**" / "*.parquet")])
    assert [s.rel for s in disc.shards] == ["x.parquet"]
    assert {i["path"] for i in disc.ignored_data} == {"a/up", "b/up"}
    assert all("(a loop)" in i["reason"] for i in disc.ignored_data)
