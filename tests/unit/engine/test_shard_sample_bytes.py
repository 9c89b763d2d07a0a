"""The layout recognizer's sample of a shard's first rows is bounded in bytes (engine/shard.py
``_Sampler``, :data:`datacheck.model.constants.LAYOUT_SAMPLE_BYTES`): 1,000 rows, fewer where the reader's
size of a row (a parquet footer and first rows, a JSONL or CSV first pass) says those hold more. The
bound is set small here (the default is 64 MiB) so that small files show it; the expected rows are
computed from the bytes the rows decode to, measured here with polars."""
from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from datacheck.derive.layout import SAMPLE_ROWS
from datacheck.derive.read import open_for_checks
from datacheck.engine import shard as engine
from datacheck.formats import jsonl, jsonvalues
from datacheck.io.discover import DiscoveredShard
from datacheck.model.config import config_from_dict

ROWS = 1_500
#: the bound in place of the default: a few hundred of the rows below
CAP = 1 << 20


def _frame() -> pl.DataFrame:
    return pl.DataFrame({"text": [f"{i:05d} " + "w" * 4_000 for i in range(ROWS)], "label": [i % 3 for i in range(ROWS)]})


def _write(path: Path, fmt: str) -> Path:
    df = _frame()
    if fmt == "parquet":
        df.write_parquet(path)
    elif fmt == "csv":
        df.write_csv(path)
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in df.iter_rows(named=True)))
    return path


@pytest.mark.parametrize("fmt", ["parquet", "jsonl", "csv"])
def test_the_sample_holds_at_most_the_byte_bound(tmp_path, monkeypatch, fmt):
    path = _write(tmp_path / f"s.{fmt}", fmt)
    monkeypatch.setattr(engine, "LAYOUT_SAMPLE_BYTES", CAP)
    # JSONL: 1 MiB chunks read from the file (a file of one chunk is held in memory, its sample free)
    monkeypatch.setattr(jsonvalues, "JSONL_CHUNK_BYTES", 1 << 20)
    monkeypatch.setattr(jsonl, "KEEP_BYTES", 0)
    data = open_for_checks(DiscoveredShard(path=path, rel=path.name, format=fmt), config_from_dict({}))
    sampler = engine._Sampler(data)
    monkeypatch.setattr(engine._Sampler, "_whole", lambda self, cols: None)  # the read apart, as for a big shard
    got = sampler(["text"])
    assert got is not None
    per_row = _frame().select("text").estimated_size() / ROWS  # about 4 KB a row
    assert per_row * SAMPLE_ROWS > CAP  # the 1,000 rows would pass the bound
    want = int(CAP // per_row)
    # the reader's size of a row is an estimate from its first rows (a parquet footer, a first pass): within 5%
    assert abs(got.height - want) <= want // 20, (got.height, want)
    assert got.estimated_size() <= CAP * 1.05
    assert got["text"].to_list() == _frame()["text"].head(got.height).to_list()  # the first rows, in order


@pytest.mark.parametrize("fmt", ["parquet", "jsonl", "csv"])
def test_small_rows_keep_the_whole_sample(tmp_path, fmt):
    path = tmp_path / f"small.{fmt}"
    df = pl.DataFrame({"text": [f"t{i}" for i in range(ROWS)]})
    if fmt == "parquet":
        df.write_parquet(path)
    elif fmt == "csv":
        df.write_csv(path)
    else:
        df.write_ndjson(path)
    data = open_for_checks(DiscoveredShard(path=path, rel=path.name, format=fmt), config_from_dict({}))
    sampler = engine._Sampler(data)
    assert sampler.rows(["text"]) == SAMPLE_ROWS
    got = sampler(["text"])
    assert got is not None and got.height == SAMPLE_ROWS
