"""What an audit over a growing shard set read: the text summary says how many shards were read and
how many were answered from the result cache (``--cache-dir``), counted here from the shards the test
added, changed and removed; the report itself stays the same for the same data, cache or not."""
from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path

import polars as pl
from conftest import ROOT, run_cli

OLD = time.time() - 3600  # settled files: the whole-audit memo records only those (docs/ci.md)
LINE = re.compile(r"^(\d+) shard\(s\): (\d+) read, (?:(\d+) from the cache|(the whole audit answered from the memo))",
                  re.M)


def age(root: Path) -> None:
    for f in root.rglob("*"):
        if f.is_file():
            os.utime(f, (OLD, OLD))


def write_shard(path: Path, k: int, variant: str = "") -> None:
    """A text shard of 5 rows, unique to ``k`` (and ``variant``): no cross-shard duplicate."""
    pl.DataFrame({"text": [f"shard {k}{variant} sentence {i} about topic {k * 7 + i}" for i in range(5)]}
                 ).write_parquet(path)


def counts(stdout: str) -> tuple[int, int, int | None]:
    """(shards, read, from the cache) of the summary's line; from the cache None on a memo replay."""
    found = LINE.findall(stdout)
    assert len(found) == 1, stdout
    n, read, cached, memo = found[0]
    return int(n), int(read), None if memo else int(cached)


def blank(text: str) -> str:
    return re.sub(r'"created_at": "[^"]*"', '"created_at": ""', text)


def test_a_growing_folder_rereads_only_its_changed_shards(tmp_path):
    d = tmp_path / "shards"
    d.mkdir()
    for src in sorted((ROOT / "sample_data" / "lm_clean").glob("*.parquet")):  # two real shards, copied
        shutil.copy(src, d / src.name)
    for k in range(4):
        write_shard(d / f"extra-{k}.parquet", k)
    age(d)
    flags = ["--cache-dir", str(tmp_path / "cache"), "--report-dir", str(tmp_path / "r"), "--no-progress"]
    first = run_cli("audit", str(d), *flags)
    n0 = len(list(d.glob("*.parquet")))
    assert counts(first.stdout) == (n0, n0, 0)  # an empty cache: every shard read

    added = [d / "extra-4.parquet", d / "extra-5.parquet"]
    for k, p in enumerate(added, start=4):
        write_shard(p, k)
    changed = [d / "extra-1.parquet"]
    write_shard(changed[0], 1, variant="b")
    removed = [d / "extra-2.parquet"]
    removed[0].unlink()
    n1 = n0 + len(added) - len(removed)
    second = run_cli("audit", str(d), *flags, "-o", str(tmp_path / "second.json"))
    assert counts(second.stdout) == (n1, len(added) + len(changed), n1 - len(added) - len(changed))

    # the report is the same as a fresh audit's, byte for byte but created_at, and holds no count
    fresh = run_cli("audit", str(d), "--no-cache", "--report-dir", str(tmp_path / "p"), "--no-progress",
                    "-o", str(tmp_path / "fresh.json"))
    assert not LINE.search(fresh.stdout)  # no cache: nothing to say beside "N shard(s)" of the summary
    assert blank((tmp_path / "second.json").read_text()) == blank((tmp_path / "fresh.json").read_text())
    assert set(json.loads((tmp_path / "second.json").read_text())["summary"]) == \
        set(json.loads((tmp_path / "fresh.json").read_text())["summary"])
    assert second.stdout.count("\n") == fresh.stdout.count("\n") + 1  # the one added line

    age(d)
    third = run_cli("audit", str(d), *flags)  # nothing changed: all from the cache (and the memo recorded)
    assert counts(third.stdout) == (n1, 0, n1)
    fourth = run_cli("audit", str(d), *flags, "-o", str(tmp_path / "fourth.json"))  # answered by the memo
    assert counts(fourth.stdout) == (n1, 0, None)
    assert blank((tmp_path / "fourth.json").read_text()) == blank((tmp_path / "fresh.json").read_text())
    assert fourth.returncode == third.returncode == fresh.returncode


def test_json_output_is_the_report_without_counts(tmp_path):
    """``--format json`` prints the report itself: no run-dependent count joins it."""
    d = tmp_path / "shards"
    d.mkdir()
    for k in range(3):
        write_shard(d / f"s-{k}.parquet", k)
    flags = ["--cache-dir", str(tmp_path / "cache"), "--report-dir", str(tmp_path / "r"), "--no-progress",
             "--format", "json"]
    a, b = run_cli("audit", str(d), *flags), run_cli("audit", str(d), *flags)
    assert blank(a.stdout) == blank(b.stdout)
    assert "from_cache" not in a.stdout and "reading" not in json.loads(a.stdout)


def test_each_part_of_a_split_audit_says_what_it_read(tmp_path):
    """``--num-parts 2 --part K``: each part's text summary has the cache line of its own shards; over
    both parts the counts add up to the folder's (every shard read once, then only the changed one),
    and each part report is the same with the cache as without (``created_at`` aside)."""
    d = tmp_path / "shards"
    d.mkdir()
    n = 5
    for k in range(n):
        write_shard(d / f"s-{k}.parquet", k)
    flags = ["--cache-dir", str(tmp_path / "cache"), "--report-dir", str(tmp_path / "r"), "--no-progress",
             "--num-parts", "2"]

    def parts(run: int, *extra: str) -> list[tuple[int, int, int | None]]:
        got = []
        for part in (0, 1):
            p = run_cli("audit", str(d), *flags, "--part", str(part), "-o", str(tmp_path / f"p{part}-{run}.json"),
                        *extra)
            assert p.returncode == 0, p.stderr
            got.append(counts(p.stdout))
        return got

    first = parts(1)
    assert sum(s for s, _r, _c in first) == n and all(s >= 1 for s, _r, _c in first)
    assert [(r, c) for s, r, c in first] == [(s, 0) for s, _r, _c in first]  # an empty cache: all read
    write_shard(d / "s-3.parquet", 3, variant="b")  # one shard changed
    second = parts(2)
    assert [s for s, _r, _c in second] == [s for s, _r, _c in first]
    assert sum(r for _s, r, _c in second) == 1 and sum(c or 0 for _s, _r, c in second) == n - 1
    (tmp_path / "fresh").mkdir()
    for part in (0, 1):  # the part report holds no count: the same as a part audit without a cache
        fresh = tmp_path / "fresh" / f"p{part}-2.json"  # the same name: the report names its sidecar
        nocache = run_cli("audit", str(d), "--no-cache", "--report-dir", str(tmp_path / "q"), "--no-progress",
                          "--num-parts", "2", "--part", str(part), "-o", str(fresh))
        assert not LINE.search(nocache.stdout)
        assert blank((tmp_path / f"p{part}-2.json").read_text()) == blank(fresh.read_text())
