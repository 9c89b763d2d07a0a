"""A shard that changes while it is audited (a writer still appending, a sync
replacing it) gives a content hash of one version and rows of another. It is reported
(``decode.unreadable``, reason "changed while being read") and never cached."""
from __future__ import annotations

import pytest

import datacheck
from datacheck.engine import shard as engine
from datacheck.model.config import config_from_dict
from datacheck.tools.inspect import inspect_shards


@pytest.fixture
def growing(monkeypatch, tmp_path):
    """A shard that a writer appends to while the engine reads it (the first read only)."""
    path = tmp_path / "data" / "s.jsonl"
    path.parent.mkdir()
    path.write_text('{"text": "a"}\n{"text": "b"}\n')
    real = engine.audit_shard
    calls = {"n": 0}

    def appending(ds, *args, **kw):
        calls["n"] += 1
        if calls["n"] == 1:
            with open(ds.path, "a") as f:
                f.write('{"text": ""}\n')
        return real(ds, *args, **kw)

    monkeypatch.setattr(engine, "audit_shard", appending)
    return path


def _changed(findings):
    return [f for f in findings if f.check == "decode.unreadable" and "changed while being read" in f.message]


def test_a_shard_that_changes_while_audited_is_reported_and_not_cached(growing, tmp_path):
    cache = tmp_path / "cache"
    rep = datacheck.audit(str(growing.parent), config={}, fail_on="error", cache_dir=str(cache))
    (f,) = _changed(rep.findings)
    assert f.severity == "error" and not rep.passed
    assert "28 -> 41 bytes" in f.message and "audit it again" in f.message
    assert rep.shards[0].rows is None  # no rows of an unknown version are reported
    def entries():
        return [p for p in cache.rglob("*") if p.is_file() and p.suffix != ".lock" and "tmp" not in p.name]

    assert not entries()
    # the next audit (the file no longer changes) reads it afresh: the row the writer appended is seen
    again = datacheck.audit(str(growing.parent), config={}, fail_on="never", cache_dir=str(cache))
    assert not _changed(again.findings)
    assert [f.rows for f in again.findings if f.check == "empty.text"] == [(2,)]
    assert entries()  # a stable shard is cached


def test_audit_without_cache_sees_it_too(growing):
    rep = datacheck.audit(str(growing), config={}, fail_on="never")
    assert _changed(rep.findings)


def test_inspect_reports_a_changing_shard(growing):
    (one,) = inspect_shards([str(growing)], config_from_dict({}))
    assert one.unreadable and "changed while being read" in one.unreadable
