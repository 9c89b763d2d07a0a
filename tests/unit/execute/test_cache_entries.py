"""The result cache never follows links, never blocks on a FIFO and repairs what is not a regular file; a failing cache write is said once per audit."""
from __future__ import annotations

import os
import warnings

import polars as pl
import pytest

from datacheck.execute.audit import audit
from datacheck.execute.cache import CacheWarning
from datacheck.model.config import Config


@pytest.fixture
def data(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    for i in range(3):
        pl.DataFrame({"text": [f"r{i}", "x"], "label": [0, 1]}).write_parquet(d / f"s{i}.parquet")
    return d


def _entries(cache_dir, data):
    """Audit once to learn the entry paths, then remove them."""
    audit([str(data)], Config(), cache_dir=cache_dir)
    paths = sorted(p for p in cache_dir.rglob("*.dcr"))
    for p in paths:
        p.unlink()
    return paths


def test_dangling_link_at_entry_writes_nothing_outside(tmp_path, data):
    cache = tmp_path / "cache"
    entries = _entries(cache, data)
    outside = tmp_path / "outside"
    os.symlink(outside / "x" / "y.dcr", entries[0])
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    os.symlink(victim, entries[1])
    audit([str(data)], Config(), cache_dir=cache)
    assert not outside.exists() and victim.read_text() == "keep"
    assert all(p.is_file() and not p.is_symlink() for p in entries)


def test_link_in_place_of_an_entry_folder_is_repaired(tmp_path, data):
    cache = tmp_path / "cache"
    entries = _entries(cache, data)
    sub = entries[0].parent
    for p in sub.iterdir():
        p.unlink()
    sub.rmdir()
    os.symlink(tmp_path / "elsewhere", sub)  # dangling folder link
    audit([str(data)], Config(), cache_dir=cache)
    assert not (tmp_path / "elsewhere").exists()
    assert sub.is_dir() and not sub.is_symlink()


def test_fifo_and_folder_at_entry_do_not_block_and_are_repaired(tmp_path, data):
    cache = tmp_path / "cache"
    entries = _entries(cache, data)
    os.mkfifo(entries[0])
    entries[1].mkdir()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        audit([str(data)], Config(), cache_dir=cache)
    assert entries[0].is_file() and entries[1].is_file()
    with warnings.catch_warnings(record=True) as caught:  # repaired: the second run says nothing
        warnings.simplefilter("always")
        rep = audit([str(data)], Config(), cache_dir=cache)
    assert not [w for w in caught if issubclass(w.category, CacheWarning)]
    assert rep.summary["shards"] == 3


def test_full_disk_is_said_once(tmp_path, data, monkeypatch):
    cache = tmp_path / "cache"
    real = os.fsync

    def full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        audit([str(data)], Config(), cache_dir=cache)
    monkeypatch.setattr(os, "fsync", real)
    said = [w for w in caught if issubclass(w.category, CacheWarning)]
    assert len(said) == 1 and "No space left" in str(said[0].message)
    assert not list(cache.rglob("*.tmp"))
