"""A full disk during ``clean --out`` or ``inspect --export`` is exit 2 naming the path
and "no space left", with nothing partial left; ``clean`` removes the staging folder a killed run left."""
from __future__ import annotations

import contextlib
import io
import os

import polars as pl
import pyarrow.parquet as pq
import pytest

import datacheck.tools.clean as clean_mod
from datacheck.cli.main import main


def _cli(*args: str) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = main(list(args))
    return rc, err.getvalue()


@pytest.fixture
def data(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    pl.DataFrame({"text": ["a", "", "c"], "label": [0, 1, 0]}).write_parquet(d / "t.parquet")
    (d / "l.jsonl").write_text('{"text": "x", "label": 1}\n{"text": "", "label": 0}\n')
    return d


def _enospc(*_a, **_k):
    raise OSError(28, "No space left on device")


def test_clean_out_disk_full(tmp_path, data, monkeypatch):
    monkeypatch.setattr(clean_mod, "_fsync_write", _enospc)
    rc, err = _cli("clean", str(data), "--out", str(tmp_path / "out"))
    assert rc == 2, err
    assert "no space left" in err and str(tmp_path / "out") in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]  # no out, no .out.tmp-* left


def test_inspect_export_disk_full_from_polars(tmp_path, data, monkeypatch):
    def full(self, f, *a, **k):
        raise pl.exceptions.ComputeError("failed to write: No space left on device (os error 28)")

    monkeypatch.setattr(pl.DataFrame, "write_parquet", full)
    out = tmp_path / "rows.parquet"
    rc, err = _cli("inspect", str(data / "l.jsonl"), "--export", str(out))  # a JSONL shard: polars' writer
    assert rc == 2, err
    assert "no space left" in err and str(out) in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]


def test_inspect_export_disk_full_from_pyarrow(tmp_path, data, monkeypatch):
    monkeypatch.setattr(pq, "write_table", _enospc)  # a parquet shard's rows keep its types: pyarrow's writer
    out = tmp_path / "rows.parquet"
    rc, err = _cli("inspect", str(data / "t.parquet"), "--export", str(out))
    assert rc == 2, err
    assert "no space left" in err and str(out) in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]


def test_clean_removes_the_stage_a_killed_run_left(tmp_path, data):
    dead = 2**22 + 12345  # above the default pid_max: no such process
    stale = tmp_path / f".out.tmp-{dead}-abcd1234"
    (stale / "x").mkdir(parents=True)
    live = tmp_path / f".out.tmp-{os.getpid()}-zzzz"
    live.mkdir()
    rc, err = _cli("clean", str(data), "--out", str(tmp_path / "out"))
    assert rc == 0, err
    assert not stale.exists() and live.exists() and (tmp_path / "out" / "t.parquet").is_file()
