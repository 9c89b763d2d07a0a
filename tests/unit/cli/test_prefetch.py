"""``datacheck audit`` of one parquet shard starts decoding its first batches before the verb is
imported (cli/prefetch.py): only where the audit surely reads that one file in this process, with
the same report, and with nothing left running or open after the command, however it ends."""
from __future__ import annotations

import contextlib
import re
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import run_cli
from fdhelp import open_fds
from spyhelp import record_calls

from datacheck.cli import prefetch as cli_prefetch
from datacheck.cli.prefetch import one_parquet_shard
from datacheck.execute import audit as audit_mod
from datacheck.formats import batches
from datacheck.formats import parquetdecode as pd

CONFIG = ("[tokens]\nvocab_size = 100\npad_token_id = 0\neos_token_id = 0\nmax_seq_len = 12\n"
          "[labels]\nignore_index = -100\n")


def _shard(path: Path, n: int = 600) -> Path:
    ids, mask, labels = [], [], []
    for i in range(n):
        k = i % 11 + 1
        row = [(i * 7 + j) % 99 + 1 for j in range(k)]
        if i % 97 == 5:
            row[-1] = 150  # out of the vocabulary: a finding with examples across batches
        ids.append(row + [0] * (12 - k))
        mask.append([1] * k + [0] * (12 - k))
        labels.append([-100] + row[1:] + [-100] * (12 - k))
    table = pa.table({"input_ids": pa.array(ids, pa.list_(pa.int32())),
                      "attention_mask": pa.array(mask, pa.list_(pa.int8())),
                      "labels": pa.array(labels, pa.list_(pa.int64()))})
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, row_group_size=128)
    return path


def _threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name == "datacheck-parquet-prefetch"]




def test_only_one_local_parquet_file_is_prefetched(tmp_path):
    one = _shard(tmp_path / "one" / "train.parquet")
    (tmp_path / "one" / ".complete").write_text("ok\n")  # hidden: never a shard
    (tmp_path / "one" / ".cache").mkdir()
    (tmp_path / "one" / ".cache" / "x.parquet").write_bytes(b"")
    assert one_parquet_shard([str(one)]) == one
    assert one_parquet_shard([str(one.parent)]) == one
    assert one_parquet_shard([str(one.parent), "--config", "c.toml", "--workers", "2"]) == one
    assert one_parquet_shard([str(one), "--executor", "local"]) == one
    nested = _shard(tmp_path / "nested" / "a" / "b" / "x.PQ")
    assert one_parquet_shard([str(tmp_path / "nested")]) == nested
    two = _shard(tmp_path / "two" / "a.parquet")
    (tmp_path / "two" / "README.md").write_text("a dataset\n")
    link = tmp_path / "link.parquet"
    link.symlink_to(one)
    text = tmp_path / "t.jsonl"
    text.write_text('{"text": "a"}\n')
    for argv in ([str(two.parent)], [str(two)] * 2, [str(one), str(two)], [str(one), "--against", str(two)],
                 [str(one), "--executor", "process"], [str(one), "--num-parts", "2", "--part", "0"],
                 [str(tmp_path / "*.parquet")], ["s3://bucket/a.parquet"], [str(link)], [str(text)],
                 [str(tmp_path / "missing.parquet")], [str(tmp_path / "empty_dir")], ["--bogus-flag", str(one)],
                 [str(one), "--help"], []):
        (tmp_path / "empty_dir").mkdir(exist_ok=True)
        assert one_parquet_shard(argv) is None, argv


def test_a_folder_too_large_to_list_is_not_prefetched(tmp_path, monkeypatch):
    shard = _shard(tmp_path / "d" / "a.parquet")
    for i in range(5):
        (tmp_path / "d" / f".hidden{i}").write_text("")
    monkeypatch.setattr(cli_prefetch, "MAX_LISTED", 4)
    assert one_parquet_shard([str(shard.parent)]) is None
    monkeypatch.setattr(cli_prefetch, "MAX_LISTED", 6)
    assert one_parquet_shard([str(shard.parent)]) == shard


def _dated(text: str) -> str:
    return re.sub(r'"created_at": "[^"]*"', "", text)


def _audit(tmp_path: Path, data: Path, tag: str, *extra: str):
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text(CONFIG)
    out = tmp_path / f"{tag}.json"
    r = run_cli("audit", str(data), "--config", str(cfg), "--format", "json", "-o", str(out), "--report-dir",
                str(tmp_path / "reports"), "--no-progress", *(extra if "--cache-dir" in extra else ("--no-cache", *extra)))
    return r, (_dated(out.read_text()) if out.exists() else "")


@pytest.mark.parametrize("target", [1500, 4000])
def test_the_prefetched_audit_reports_what_the_plain_one_does(tmp_path, monkeypatch, target):
    """A shard read in many batches (small batch targets): the prefetch is taken by the engine's read
    and the report is the same, byte for byte, as without it (examples of a finding in several
    batches included)."""
    shard = _shard(tmp_path / "data" / "train.parquet")
    monkeypatch.setattr(batches, "BATCH_TARGET_BYTES", target)
    monkeypatch.setattr(pd, "BATCH_TARGET_BYTES", target)
    monkeypatch.delenv("DATACHECK_BATCH_ROWS", raising=False)
    taken = record_calls(monkeypatch, pd.Prefetch, "take")
    started = record_calls(monkeypatch, cli_prefetch, "prefetch")
    fast, fast_report = _audit(tmp_path, shard.parent, "fast")
    assert started == [shard] and len(taken) == 1  # the command line's, started before the verb's imports
    assert fast.returncode == 1 and '"tokens.out_of_vocab"' in fast_report
    real = cli_prefetch.shard_prefetch
    monkeypatch.setattr(cli_prefetch, "shard_prefetch", lambda argv: real([]))
    monkeypatch.setattr(audit_mod, "prefetch", lambda path: contextlib.nullcontext())  # the library's own
    plain, plain_report = _audit(tmp_path, shard.parent, "plain")
    assert len(taken) == 1 and plain.returncode == fast.returncode
    assert plain_report == fast_report and _dated(plain.stdout) == _dated(fast.stdout) == fast_report
    assert not _threads() and not pd._started and open_fds(shard) == 0


def test_an_audit_that_fails_early_leaves_no_thread_or_open_file(tmp_path, monkeypatch):
    shard = _shard(tmp_path / "data" / "train.parquet")
    monkeypatch.setattr(pd, "BATCH_TARGET_BYTES", 1500)
    started = record_calls(monkeypatch, pd.Prefetch, "start")
    bad = tmp_path / "bad.toml"
    bad.write_text("[tokens]\nvocab_size = -3\n")
    r = run_cli("audit", str(shard), "--config", str(bad), "--no-cache", "--no-progress",
                "--report-dir", str(tmp_path / "reports"))
    assert r.returncode == 2 and "vocab_size" in r.stderr
    assert len(started) == 1 and not started[0].taken and started[0]._read is None
    assert not _threads() and not pd._started and open_fds(shard) == 0


def test_a_shard_the_cache_answers_releases_its_prefetch(tmp_path, monkeypatch):
    """A second audit of the same file with the result cache: the shard is answered from the cache,
    the prefetch is released (never taken) and the report is the first audit's."""
    shard = _shard(tmp_path / "data" / "train.parquet")
    monkeypatch.setattr(batches, "BATCH_TARGET_BYTES", 1500)
    monkeypatch.setattr(pd, "BATCH_TARGET_BYTES", 1500)
    started = record_calls(monkeypatch, pd.Prefetch, "start")
    released = record_calls(monkeypatch, pd, "release", at="datacheck.execute.audit.release")
    cache = str(tmp_path / "cache")
    first, first_report = _audit(tmp_path, shard, "first", "--cache-dir", cache)
    assert len(started) == 1 and started[0].taken and [Path(p) for p in released] == []
    again, again_report = _audit(tmp_path, shard, "again", "--cache-dir", cache)
    assert len(started) == 2 and not started[1].taken and started[1].asked and [Path(p) for p in released] == [shard]
    assert again.returncode == first.returncode == 1 and again_report == first_report
    assert not _threads() and not pd._started and open_fds(shard) == 0
