"""Output folders and files get the permissions ``mkdir``/``open`` would give them
(``0o777``/``0o666`` minus the umask), not ``tempfile``'s private ``0o700``/``0o600``."""
from __future__ import annotations

import os
import stat
from pathlib import Path

import polars as pl
import pytest

from datacheck.execute.audit import audit
from datacheck.io.outputs import make_temp_file, make_temp_folder, write_atomic
from datacheck.model.config import Config, config_from_dict
from datacheck.tools.clean import INDEX_NAME, clean


@pytest.fixture(params=[0o022, 0o002, 0o077])
def umask(request):
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def _mode(p: Path) -> int:
    return stat.S_IMODE(os.stat(p).st_mode)


def test_clean_out_folder_respects_the_umask(tmp_path, umask):
    data = tmp_path / "data"
    data.mkdir()
    pl.DataFrame({"text": ["a", "", "c"]}).write_parquet(data / "s.parquet")
    out = tmp_path / "clean"
    clean([str(data)], out, config_from_dict({}))
    assert _mode(out) == 0o777 & ~umask
    assert _mode(out / INDEX_NAME) == 0o666 & ~umask
    assert _mode(out / "s.parquet") == 0o666 & ~umask


def test_temp_helpers_and_write_atomic_respect_the_umask(tmp_path, umask):
    d = make_temp_folder(tmp_path, ".x-")
    assert d.name.startswith(".x-") and _mode(d) == 0o777 & ~umask
    fd, f = make_temp_file(d, ".y-")
    os.close(fd)
    assert _mode(Path(f)) == 0o666 & ~umask
    write_atomic(str(tmp_path / "r.json"), "{}")
    assert _mode(tmp_path / "r.json") == 0o666 & ~umask


def test_cache_entries_respect_the_umask(tmp_path, umask):
    data = tmp_path / "data"
    data.mkdir()
    pl.DataFrame({"text": ["a", "b"]}).write_parquet(data / "s.parquet")
    cache = tmp_path / "cache"
    audit([str(data)], Config(), cache_dir=cache)
    entries = [p for p in cache.rglob("*") if p.is_file() and not p.name.startswith(".")]
    assert entries, "the audit wrote no cache entry"
    assert {_mode(p) for p in entries} == {0o666 & ~umask}
