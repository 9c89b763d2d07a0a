"""The library's audit of one local parquet shard decodes its first batches while the shard is
hashed, opened and planned (execute/audit.py: formats/parquetdecode.prefetch around the one shard's
audit): the same result as without it, and no prefetch of a folder of several shards."""
from __future__ import annotations

import contextlib
import threading

import pyarrow as pa
import pyarrow.parquet as pq
from spyhelp import record_calls

import datacheck
from datacheck.execute import audit as audit_mod
from datacheck.formats import batches
from datacheck.formats import parquetdecode as pd

CONFIG = {"tokens": {"vocab_size": 100, "pad_token_id": 0}, "labels": {"ignore_index": -100},
          "report": {"max_examples": 3}}


def _shard(path, n: int = 500, seed: int = 0):
    ids = [[(i * 13 + j + seed) % 97 + 1 for j in range(i % 10 + 1)] for i in range(n)]
    for i in range(3, n, 61):
        ids[i][0] = 140  # out of the vocabulary, in several batches
    table = pa.table({"input_ids": pa.array(ids, pa.list_(pa.int32())),
                      "labels": pa.array([[-100] + r[1:] for r in ids], pa.list_(pa.int64())),
                      "text": [None if i % 50 == 7 else f"row {i}" for i in range(n)]})
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, row_group_size=90)
    return path


def _result(rep) -> tuple:
    return tuple((f.check, f.column, f.count, f.rows) for f in rep.findings), rep.summary, rep.stats


def test_one_shard_is_prefetched_and_audited_alike(tmp_path, monkeypatch):
    shard = _shard(tmp_path / "d" / "a.parquet")
    monkeypatch.setattr(batches, "BATCH_TARGET_BYTES", 1200)
    monkeypatch.setattr(pd, "BATCH_TARGET_BYTES", 1200)
    monkeypatch.delenv("DATACHECK_BATCH_ROWS", raising=False)
    taken = record_calls(monkeypatch, pd.Prefetch, "take")
    fast = datacheck.audit(shard, CONFIG, workers=1)
    assert len(taken) == 1 and any(f.check == "tokens.out_of_vocab" and f.count == 9 for f in fast.findings)
    monkeypatch.setattr(audit_mod, "prefetch", lambda path: contextlib.nullcontext())
    plain = datacheck.audit(shard, CONFIG, workers=1)
    assert len(taken) == 1 and _result(plain) == _result(fast)
    assert not [t for t in threading.enumerate() if t.name == "datacheck-parquet-prefetch"] and not pd._started


def test_no_prefetch_for_several_shards(tmp_path, monkeypatch):
    _shard(tmp_path / "d" / "a.parquet")
    _shard(tmp_path / "d" / "b.parquet", seed=5)
    monkeypatch.setattr(pd, "BATCH_TARGET_BYTES", 1200)
    started: list[object] = []
    monkeypatch.setattr(audit_mod, "prefetch", lambda path: started.append(path) or contextlib.nullcontext())
    rep = datacheck.audit(tmp_path / "d", CONFIG, workers=1)
    assert rep.summary["shards"] == 2 and started == []
