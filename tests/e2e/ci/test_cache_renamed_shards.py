"""A growing shard set renumbered as the Hugging Face Hub names shards (``train-00000-of-00003`` becomes
``-of-00004`` when a shard is added) or holding a copied shard: the same bytes under a new name in the
same folder are answered from the result cache (no shard data read), and the report is the one a fresh
audit (``--no-cache``) writes, byte for byte but ``created_at``. A result that names its path
(``decode.unreadable``) is read again under the new name, whose message then names the new path. Real
rows: SST-2 (Vietnamese) train."""
from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import polars as pl
from conftest import run_cli

OLD = time.time() - 3600  # settled files (docs/ci.md)
SST2 = "sst2_vi_glue_parquet/train-00000-of-00001.parquet"
LINE = re.compile(r"^(\d+) shard\(s\): (\d+) read, (\d+) from the cache", re.M)
CFG = '[dataset]\nlayout = "text_classification"\n\n[labels]\nnum_classes = 2\n'


def _age(root: Path) -> None:
    for f in root.rglob("*"):
        if f.is_file():
            os.utime(f, (OLD, OLD))


def _counts(stdout: str) -> tuple[int, int, int]:
    found = LINE.findall(stdout)
    assert len(found) == 1, stdout
    return tuple(int(x) for x in found[0])  # type: ignore[return-value]


def _report(path: Path) -> dict:
    r = json.loads(path.read_text())
    r.pop("created_at")
    return r


def test_renumbered_and_copied_shards_are_answered_from_the_cache(tmp_path, realdata):
    rows = pl.read_parquet(realdata / SST2).slice(0, 1500)
    data = tmp_path / "data"
    data.mkdir()
    for k in range(3):
        rows.slice(500 * k, 500).write_parquet(data / f"train-{k:05d}-of-00003.parquet")
    _age(data)
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text(CFG)
    flags = ["--config", str(cfg), "--cache-dir", str(tmp_path / "cache"), "--report-dir", str(tmp_path / "r"),
             "--no-progress"]
    first = run_cli("audit", str(data), *flags, "--cache-prune")
    assert _counts(first.stdout) == (3, 3, 0)

    # a fourth shard arrives: the Hub's numbering renames the three others; one more is a copy of shard 0
    for k in range(3):
        (data / f"train-{k:05d}-of-00003.parquet").rename(data / f"train-{k:05d}-of-00005.parquet")
    pl.read_parquet(realdata / SST2).slice(1500, 500).write_parquet(data / "train-00003-of-00005.parquet")
    (data / "train-00004-of-00005.parquet").write_bytes((data / "train-00000-of-00005.parquet").read_bytes())
    _age(data)
    second = run_cli("audit", str(data), *flags, "--cache-prune", "-o", str(tmp_path / "cached.json"))
    assert _counts(second.stdout) == (5, 1, 4)  # only the new rows were read
    fresh = run_cli("audit", str(data), "--config", str(cfg), "--no-cache", "--report-dir", str(tmp_path / "r2"),
                    "-o", str(tmp_path / "fresh.json"))
    assert second.returncode == fresh.returncode == 1  # the copied shard: dup.shard fails the gate
    assert _report(tmp_path / "cached.json") == _report(tmp_path / "fresh.json")

    # --cache-prune kept what the renamed shards use: a third run reads nothing
    third = run_cli("audit", str(data), *flags, "--format", "json")
    assert third.returncode == 1
    assert "from the cache" not in third.stdout  # json: the report only; read counts come from a text run
    again = run_cli("audit", str(data), *flags, "--fail-on", "never")
    assert _counts(again.stdout) == (5, 0, 5)


def test_a_result_that_names_its_path_is_read_again_under_a_new_name(tmp_path, realdata):
    data = tmp_path / "data"
    data.mkdir()
    pl.read_parquet(realdata / SST2).slice(0, 500).write_parquet(data / "train-00000-of-00002.parquet")
    bad = data / "train-00001-of-00002.parquet"
    pl.read_parquet(realdata / SST2).slice(500, 500).write_parquet(bad)
    os.truncate(bad, bad.stat().st_size // 2)  # a half-written upload: decode.unreadable names the shard
    _age(data)
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text(CFG)
    flags = ["--config", str(cfg), "--cache-dir", str(tmp_path / "cache"), "--report-dir", str(tmp_path / "r"),
             "--no-progress"]
    first = run_cli("audit", str(data), *flags)
    assert _counts(first.stdout) == (2, 2, 0)
    bad.rename(data / "train-00001-of-00003.parquet")
    (data / "train-00000-of-00002.parquet").rename(data / "train-00000-of-00003.parquet")
    _age(data)
    second = run_cli("audit", str(data), *flags, "-o", str(tmp_path / "new.json"))
    assert _counts(second.stdout) == (2, 1, 1)  # the unreadable one is read again, the good one is not
    report = json.loads((tmp_path / "new.json").read_text())
    msgs = [f["message"] for s in report["shards"] for f in s["findings"] if f["check"] == "decode.unreadable"]
    assert len(msgs) == 1 and "train-00001-of-00003.parquet" in msgs[0] and "-of-00002" not in msgs[0], msgs
