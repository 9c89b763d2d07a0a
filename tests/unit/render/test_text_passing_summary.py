"""3,000 passing shards do not print 3,000 lines. The text and markdown views list the
shards that have findings and sum up the rest in one line; ``--show-passing`` lists every shard."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import polars as pl
from conftest import run_cli  # noqa: E402

import datacheck
from datacheck.render.text import render_markdown, render_text

N_GOOD = 1200


def _report(tmp_path: Path):
    """A real audit of one passing and one failing shard, with the passing shard repeated N_GOOD
    times under other names (auditing 1,200 files would only slow the test)."""
    d = tmp_path / "d"
    d.mkdir()
    pl.DataFrame({"text": ["row"]}).write_parquet(d / "good.parquet")
    pl.DataFrame({"text": ["x", ""]}).write_parquet(d / "bad.parquet")
    rep = datacheck.audit([str(d)], config={}, fail_on="never")
    (good,) = [sh for sh in rep.shards if sh.path == "good.parquet"]
    assert not good.findings
    many = [replace(good, path=f"good-{i:05d}.parquet") for i in range(N_GOOD)]
    return replace(rep, shards=tuple(sh for sh in rep.shards if sh is not good) + tuple(many))


def test_passing_shards_are_one_line(tmp_path):
    rep = _report(tmp_path)
    text = render_text(rep)
    assert "good-00000.parquet" not in text
    assert "1,200 shards passed with no findings (--show-passing lists them)" in text
    assert "bad.parquet" in text and len(text.splitlines()) < 40
    full = render_text(rep, show_passing=True)
    assert sum("good-" in ln for ln in full.splitlines()) == N_GOOD
    md = render_markdown(rep)
    assert "good-00000" not in md and "1,200 shards passed with no findings (`--show-passing` lists them)" in md
    assert sum("good-" in ln for ln in render_markdown(rep, show_passing=True).splitlines()) == N_GOOD


def test_all_passing_prints_no_empty_table(tmp_path):
    d = tmp_path / "ok"
    d.mkdir()
    pl.DataFrame({"text": ["a"]}).write_parquet(d / "a.parquet")
    text = render_text(datacheck.audit([str(d)], config={}))
    assert "1 shard passed with no findings" in text and "status  shard" not in text


def test_cli_show_passing(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    for i in range(3):
        pl.DataFrame({"text": [f"r{i}"]}).write_parquet(d / f"s{i}.parquet")
    r = run_cli("audit", str(d), "--no-cache", "--report-dir", str(tmp_path / "r"))
    assert r.returncode == 0 and "3 shards passed with no findings" in r.stdout
    assert not [ln for ln in r.stdout.splitlines() if ln.startswith("PASS")]
    r = run_cli("audit", str(d), "--no-cache", "--report-dir", str(tmp_path / "r"), "--show-passing")
    assert r.returncode == 0 and "passed with no findings" not in r.stdout
    assert [ln.split()[1] for ln in r.stdout.splitlines() if ln.startswith("PASS")] == [f"s{i}.parquet" for i in range(3)]
    help_ = run_cli("audit", "--help").stdout
    assert "--show-passing" in help_


def test_quiet_shards_named_by_a_dataset_finding_are_not_said_to_pass(tmp_path):
    """Shards with no finding of their own that a dataset-level finding names (here: byte-identical
    shards, dup.shard) are not summed up as 'passed'."""
    d = tmp_path / "d"
    d.mkdir()
    pl.DataFrame({"text": ["one row", "another row"]}).write_parquet(d / "a.parquet")
    (d / "b.parquet").write_bytes((d / "a.parquet").read_bytes())
    pl.DataFrame({"text": ["a third row", "a fourth row"]}).write_parquet(d / "c.parquet")
    rep = datacheck.audit([str(d)], config={}, fail_on="never", workers=1)
    dup = next(f for f in rep.dataset_findings if f.check == "dup.shard")
    quiet = [sh.path for sh in rep.shards if not sh.findings]
    named = sum(p in set(dup.shards) for p in quiet)
    assert len(quiet) == 3 and named == 2
    text = render_text(rep)
    assert ("3 shards without shard-level findings (--show-passing lists them); 2 of them named by the "
            "dataset-level findings below") in text
    assert "passed with no findings" not in text
    assert "named by the dataset-level findings below" in render_markdown(rep)
