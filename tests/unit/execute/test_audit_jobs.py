"""A pool worker's jobs (``execute/audit.py run_job``): each task carries the audit's config
unpickled anew; the worker takes an equal config it had before, so the engine's check plan,
memoized per config object, is built once a worker and not once a task, with the same result."""
from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path

import polars as pl

from datacheck.engine import shard as engine
from datacheck.execute import audit as ex_audit
from datacheck.execute.audit import ShardJob, run_job, seen_config
from datacheck.io.discover import DiscoveredShard
from datacheck.model.config import config_from_dict

CONFIG = {"tokens": {"vocab_size": 50, "pad_token_id": 0, "eos_token_id": 2, "max_seq_len": 8},
          "labels": {"ignore_index": -100}}


def _shard(path: Path) -> DiscoveredShard:
    ids = [[(i * 5 + j) % 60 for j in range(1 + i % 6)] for i in range(40)]
    pl.DataFrame({"input_ids": pl.Series(ids, dtype=pl.List(pl.Int32)),
                  "labels": pl.Series([[-100] + x[1:] for x in ids], dtype=pl.List(pl.Int64))}).write_parquet(path)
    return DiscoveredShard(path=path, rel=path.name, format="parquet")


def test_an_equal_config_is_the_one_seen_before_and_another_is_not(monkeypatch):
    monkeypatch.setattr(ex_audit, "_configs_seen", [])
    cfg = config_from_dict(CONFIG)
    copy = pickle.loads(pickle.dumps(cfg))
    assert copy is not cfg and copy == cfg
    assert seen_config(cfg) is cfg
    assert seen_config(copy) is cfg
    other = config_from_dict({**CONFIG, "labels": {"ignore_index": -1}})
    assert seen_config(other) is other and seen_config(pickle.loads(pickle.dumps(other))) is other
    for k in range(ex_audit._CONFIGS_KEPT + 2):  # only the last few are kept
        seen_config(config_from_dict({**CONFIG, "tokens": {**CONFIG["tokens"], "max_seq_len": 100 + k}}))
    assert len(ex_audit._configs_seen) == ex_audit._CONFIGS_KEPT


def test_tasks_with_unpickled_configs_share_one_plan(tmp_path, monkeypatch):
    monkeypatch.setattr(ex_audit, "_configs_seen", [])
    monkeypatch.setattr(engine, "_plans", engine.OrderedDict())
    built: list[int] = []
    real = engine.shard_plan

    def spy(ctx):
        built.append(1)
        return real(ctx)

    monkeypatch.setattr(engine, "shard_plan", spy)
    cfg = config_from_dict(CONFIG)
    shards = [_shard(tmp_path / f"s{k}.parquet") for k in range(3)]
    outcomes = [run_job(pickle.loads(pickle.dumps(ShardJob(shard=ds, cfg=cfg, cache=None, cross_shard=True))))
                for ds in shards]
    assert len(built) == 1  # three tasks, each with its own unpickled config: one plan
    alone = [ex_audit.audit_one(ds, cfg, True) for ds in shards]
    for o, r in zip(outcomes, alone):
        got = o.result
        assert got.rows == r.rows == 40
        assert [(f.name, getattr(got, f.name)) for f in dataclasses.fields(got) if f.name != "payload"] == \
            [(f.name, getattr(r, f.name)) for f in dataclasses.fields(r) if f.name != "payload"]
        assert got.payload.keys() == r.payload.keys()
        for k, v in got.payload.items():
            assert v.equals(r.payload[k]) if isinstance(v, pl.DataFrame) else v == r.payload[k]
