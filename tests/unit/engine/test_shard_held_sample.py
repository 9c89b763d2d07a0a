"""The layout's sample taken from one read of the sampled columns (engine/shard.py ``_Sampler``):
a parquet shard whose sampled columns fit in one batch is decoded once, the engine's read takes
those columns from that read, and the result is the one of a separate sample read, for a shard of
one batch and for one whose other needed columns are read in batches."""
from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from batchhelp import _same_result, batch_rows

from datacheck.engine import shard as engine
from datacheck.engine.shard import audit_shard
from datacheck.formats import batches
from datacheck.formats import parquet as fparquet
from datacheck.io.discover import DiscoveredShard
from datacheck.io.hashing import hash_file
from datacheck.model.config import config_from_dict

CONFIG = {"tokens": {"vocab_size": 50, "pad_token_id": 0, "eos_token_id": 2, "max_seq_len": 6},
          "labels": {"ignore_index": -100}}
TOKENS = ["input_ids", "attention_mask", "labels"]


def _shard(path: Path, n: int) -> Path:
    """``n`` causal-LM rows (some out of the vocabulary, too long, or repeated) and a long text column."""
    ids = [[(i * 7 + j) % 61 for j in range(1 + i % 7)] for i in range(n)]
    ids[5] = list(ids[2])
    text = [("row %d " % (i % 40)) * 20 for i in range(n)]
    text[5] = text[2]
    pl.DataFrame({
        "input_ids": pl.Series(ids, dtype=pl.List(pl.Int32)),
        "attention_mask": pl.Series([[1] * len(x) for x in ids], dtype=pl.List(pl.Int8)),
        "labels": pl.Series([[-100] + x[1:] for x in ids], dtype=pl.List(pl.Int64)),
        "text": text,
    }).write_parquet(path, row_group_size=37)
    return path


def _audit(path: Path):
    chash, size = hash_file(path)
    return audit_shard(DiscoveredShard(path=path, rel=path.name, format="parquet"), config_from_dict(CONFIG),
                       chash, size, keep_rows=True)


def _reads(monkeypatch) -> list[tuple[str, tuple[str, ...]]]:
    """Spy on the parquet reader: ("all" | "batches", columns) of every read of the shard's rows."""
    got: list[tuple[str, tuple[str, ...]]] = []
    real_all, real_batches = fparquet.ParquetReader.read_all, fparquet.ParquetReader.batches

    def read_all(self, columns, want):
        got.append(("all", tuple(columns)))
        return real_all(self, columns, want)

    def batches_(self, columns, rows, want=None, ramp=False):
        got.append(("batches", tuple(columns)))
        return real_batches(self, columns, rows, want, ramp)

    monkeypatch.setattr(fparquet.ParquetReader, "read_all", read_all)
    monkeypatch.setattr(fparquet.ParquetReader, "batches", batches_)
    return got


def _separate(monkeypatch) -> None:
    """The sample read on its own (a ``head`` of the opened frame), as before the one read."""
    monkeypatch.setattr(engine._Sampler, "_whole", lambda self, cols: None)


@pytest.mark.parametrize("target", [None, 25_000])
def test_the_sample_comes_from_the_engine_s_one_read(tmp_path, monkeypatch, target):
    path = _shard(tmp_path / "s.parquet", 200)
    if target is not None:  # the token columns fit in one batch, with the text they do not
        # (15,452 and 43,881 decoded bytes; one batch holds at most ONE_BATCH_TARGETS targets)
        monkeypatch.setattr(batches, "BATCH_TARGET_BYTES", target // batches.ONE_BATCH_TARGETS)
    with batch_rows(None):
        with monkeypatch.context() as m:
            _separate(m)
            before = _audit(path)
        reads = _reads(monkeypatch)
        after = _audit(path)
    _same_result(before, after)
    assert after.layout == before.layout and after.layout["name"] == "sft_tokenized" and after.rows == 200
    assert {f.check for f in after.findings} >= {"tokens.out_of_vocab", "length.over_max", "dup.exact_in_shard"}
    sampled = next(cols for how, cols in reads if how == "all")
    assert set(sampled) == set(TOKENS)
    rest = [(how, cols) for how, cols in reads[1:] if how in ("all", "batches")]
    # the text column is read on its own (in one read or in batches): the token columns never again
    assert rest and all(set(cols) == {"text"} for _, cols in rest)
    assert rest[0][0] == ("all" if target is None else "batches")


def test_a_shard_of_several_batches_for_the_sampled_columns_is_sampled_apart(tmp_path, monkeypatch):
    path = _shard(tmp_path / "s.parquet", 200)
    monkeypatch.setattr(batches, "BATCH_TARGET_BYTES", 2000)
    with batch_rows(None):
        with monkeypatch.context() as m:
            _separate(m)
            before = _audit(path)
        reads = _reads(monkeypatch)
        after = _audit(path)
    _same_result(before, after)
    assert [how for how, _ in reads] == ["batches"]  # the sample: a head of the opened frame


def test_a_forced_batch_size_keeps_the_separate_sample(tmp_path, monkeypatch):
    path = _shard(tmp_path / "s.parquet", 60)
    with batch_rows(7):
        reads = _reads(monkeypatch)
        got = _audit(path)
    assert [how for how, _ in reads] == ["batches"]
    with batch_rows(None):
        _same_result(_audit(path), got)


def test_a_streamed_shard_is_sampled_apart_without_sizing_it_twice(tmp_path, monkeypatch):
    """An Arrow IPC shard is a streamed reader (no one-read path; its bytes per row are counted at open):
    its sample is a head of the opened frame, and only the engine sizes its batches (no sizing to decide
    on the sample)."""
    path = tmp_path / "s.arrow"
    pl.DataFrame({"input_ids": pl.Series([[i % 60, 3, 4] for i in range(50)], dtype=pl.List(pl.Int32)),
                  "labels": pl.Series([[-100, 3, 4]] * 50, dtype=pl.List(pl.Int64))}).write_ipc(path)
    sized: list[tuple[str, ...]] = []
    real = engine.batch_rows

    def spy(lf, columns, stream=None):
        sized.append(tuple(columns))
        return real(lf, columns, stream)

    monkeypatch.setattr(engine, "batch_rows", spy)
    chash, size = hash_file(path)
    got = audit_shard(DiscoveredShard(path=path, rel=path.name, format="arrow"), config_from_dict(CONFIG),
                      chash, size, keep_rows=True)
    assert got.rows == 50 and got.layout["name"] == "sft_tokenized"
    assert len(sized) == 1  # the engine's own
