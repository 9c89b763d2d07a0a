"""A split audit (``--num-parts``) over a shard set renumbered between runs: a new shard inserted in
the Hub's numbering renames every later shard, and a shard's part follows its path, so unchanged bytes
land in another part. Per-part cache folders miss all of those; the one cache ``datacheck merge
--cache-dir`` writes from every part's results (restored by each part job of the next run, as
``workflows/nightly-audit.yml`` does) answers them whichever part they land in: only the new shard is
read. Counted from each part's "N shard(s): R read, C from the cache" line, never timed. Real rows:
SST-2 (Vietnamese) train."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import polars as pl
import xxhash
from conftest import run_cli

SST2 = "sst2_vi_glue_parquet/train-00000-of-00001.parquet"
LINE = re.compile(r"^(\d+) shard\(s\): (\d+) read, (\d+) from the cache", re.M)
CFG = '[dataset]\nlayout = "text_classification"\n\n[labels]\nnum_classes = 2\n'
N = 3  # parts
ROWS = 100  # rows a shard


def _part(rel: str) -> int:
    """The part of a shard: xxh3-64 of its relative path, mod N (docs/ci.md)."""
    return xxhash.xxh3_64_intdigest(rel.encode()) % N


def _counts(stdout: str) -> tuple[int, int, int]:
    found = LINE.findall(stdout)
    assert len(found) == 1, stdout
    return tuple(int(x) for x in found[0])  # type: ignore[return-value]


def _names(n: int) -> list[str]:
    return [f"train-{k:05d}-of-{n:05d}.parquet" for k in range(n)]


def _run(tmp: Path, data: Path, night: str, caches: dict[int, Path], merge_cache: Path | None) -> list[tuple]:
    """Every part job (part k with the cache folder ``caches[k]``), then the merge (storing the parts'
    results in ``merge_cache``); each part's counts."""
    parts, counts = tmp / night / "parts", []
    for k in range(N):
        out = parts / f"part-{k}.json"
        r = run_cli("audit", str(data), "--config", str(tmp / "datacheck.toml"), "--num-parts", str(N), "--part",
                    str(k), "--cache-dir", str(caches[k]), "--fail-on", "never", "--workers", "1", "--no-progress",
                    "--report-dir", str(tmp / "r"), "-o", str(out))
        assert r.returncode == 0, r.stderr
        counts.append(_counts(r.stdout))
    extra = ["--cache-dir", str(merge_cache)] if merge_cache is not None else []
    m = run_cli("merge", str(parts), "--report-dir", str(tmp / "r"), "-o", str(tmp / night / "merged.json"), *extra)
    assert m.returncode in (0, 1), m.stderr
    assert "datacheck: warning" not in m.stderr
    return counts


def _restored(shared: Path, to: Path) -> Path:
    """A part job's fresh copy of the shared cache (actions/cache restore)."""
    if to.exists():
        shutil.rmtree(to)
    shutil.copytree(shared, to) if shared.exists() else to.mkdir(parents=True)
    return to


def _report(path: Path) -> dict:
    r = json.loads(path.read_text())
    r.pop("created_at")
    return r


def test_unchanged_shards_are_answered_whichever_part_they_land_in(tmp_path, realdata):
    rows = pl.read_parquet(realdata / SST2)
    contents = [rows.slice(ROWS * k, ROWS) for k in range(7)]
    data = tmp_path / "data"
    data.mkdir()
    (tmp_path / "datacheck.toml").write_text(CFG)
    old, new = _names(6), _names(7)
    for name, frame in zip(old, contents[:6]):
        frame.write_parquet(data / name)

    # night 1: every part job starts from the shared cache (empty), the merge stores all results there
    shared = tmp_path / "shared-cache"
    first = _run(tmp_path, data, "n1", {k: _restored(shared, tmp_path / "n1" / f"c{k}") for k in range(N)}, shared)
    assert [c[1] for c in first] == [sum(_part(n) == k for n in old) for k in range(N)]  # all read once
    per_part = {k: tmp_path / "n1" / f"c{k}" for k in range(N)}  # what per-part cache folders would keep

    # night 2: a shard inserted at position 2; the old shards 2..5 become 3..6, every name says -of-00007
    for k in range(5, 1, -1):
        (data / old[k]).rename(data / new[k + 1])
    for k in range(2):
        (data / old[k]).rename(data / new[k])
    contents[6].write_parquet(data / new[2])
    was = {new[k if k < 2 else k + 1]: old[k] for k in range(6)}  # unchanged bytes: new name -> old name
    moved = [n for n, o in was.items() if _part(n) != _part(o)]
    assert moved  # the test means something: unchanged shards changed part
    expect_read = [int(_part(new[2]) == k) for k in range(N)]  # only the inserted shard is new
    expect_cached = [sum(_part(n) == k for n in new) - expect_read[k] for k in range(N)]

    second = _run(tmp_path, data, "n2", {k: _restored(shared, tmp_path / "n2" / f"c{k}") for k in range(N)}, shared)
    assert [c[1] for c in second] == expect_read, (second, moved)
    assert [c[2] for c in second] == expect_cached
    # the cached results are the ones a fresh audit computes
    fresh = run_cli("audit", str(data), "--config", str(tmp_path / "datacheck.toml"), "--no-cache", "--workers",
                    "1", "--report-dir", str(tmp_path / "r2"), "-o", str(tmp_path / "fresh.json"), "--fail-on", "never")
    assert fresh.returncode == 0, fresh.stderr
    assert _report(tmp_path / "n2" / "merged.json") == _report(tmp_path / "fresh.json")

    # per-part cache folders, as before: the shards that changed part are read again
    third = _run(tmp_path, data, "n3", per_part, None)
    assert sum(c[1] for c in third) == 1 + len(moved)


def test_parts_with_and_without_a_cache_are_stored_alike_and_prune_keeps_only_them(tmp_path, realdata):
    rows = pl.read_parquet(realdata / SST2)
    data = tmp_path / "data"
    data.mkdir()
    for k, name in enumerate(_names(4)):
        rows.slice(ROWS * k, ROWS).write_parquet(data / name)
    (tmp_path / "datacheck.toml").write_text(CFG)
    parts = tmp_path / "parts"
    for k in range(2):
        cache = ["--cache-dir", str(tmp_path / "c")] if k == 0 else ["--no-cache"]
        r = run_cli("audit", str(data), "--config", str(tmp_path / "datacheck.toml"), "--num-parts", "2", "--part",
                    str(k), *cache, "--fail-on", "never", "--workers", "1", "--report-dir", str(tmp_path / "r"),
                    "-o", str(parts / f"part-{k}.json"))
        assert r.returncode == 0, r.stderr
    m = run_cli("merge", str(parts), "--report-dir", str(tmp_path / "r"), "--cache-dir", str(tmp_path / "m"))
    assert m.returncode == 0 and "warning" not in m.stderr, m.stderr
    assert len(list((tmp_path / "m").rglob("*.dcr"))) == 4  # one entry a shard, from both parts
    assert run_cli("merge", str(parts), "--report-dir", str(tmp_path / "r"), "--cache-prune").returncode == 2
    # --cache-prune: the folder then holds this merge's entries only (a stale one planted beside them goes)
    entry = next((tmp_path / "m").rglob("*.dcr"))
    stale = entry.with_name("0" * 32 + ".dcr")
    stale.write_bytes(entry.read_bytes())
    m = run_cli("merge", str(parts), "--report-dir", str(tmp_path / "r"), "--cache-dir", str(tmp_path / "m"),
                "--cache-prune")
    assert m.returncode == 0, m.stderr
    assert not stale.exists() and len(list((tmp_path / "m").rglob("*.dcr"))) == 4
    # and an audit of all four from that folder reads none of them
    r = run_cli("audit", str(data), "--config", str(tmp_path / "datacheck.toml"), "--num-parts", "1", "--part", "0",
                "--cache-dir", str(tmp_path / "m"), "--fail-on", "never", "--workers", "1", "--report-dir",
                str(tmp_path / "r"), "-o", str(tmp_path / "one.json"))
    assert _counts(r.stdout) == (4, 0, 4)
