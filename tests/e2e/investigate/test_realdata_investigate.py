"""Real data (../shared/realdata, read-only): inspect of the mBERT-tokenized DKHate train split against
a 30,522-token vocabulary, and clean of SST-2 (Vietnamese) train without its in-shard duplicates."""
from __future__ import annotations

import json

import polars as pl
import pytest
from conftest import ROOT

import datacheck
from datacheck.io.hashing import hash_file
from datacheck.model.config import config_from_dict
from datacheck.tools.clean import INDEX_NAME, QUARANTINE_DIR, clean
from datacheck.tools.inspect import inspect_shards, load_tokenizer

REAL = ROOT.parent / "shared" / "realdata"
MBERT_TRAIN = REAL / "dkhate_danish_offensive/dkhate_mbert/train"
SST2_TRAIN = REAL / "sst2_vi_glue_parquet/train-00000-of-00001.parquet"

from conftest import run_cli  # noqa: E402

pytestmark = [pytest.mark.realdata,
              pytest.mark.skipif(not REAL.is_dir(), reason="../shared/realdata is not present")]


def test_inspect_dkhate_mbert_out_of_vocab_first_rows_and_positions():
    cfg = config_from_dict({"tokens": {"vocab_size": 30522}})
    (ins,) = inspect_shards([str(MBERT_TRAIN)], cfg, checks=["tokens.out_of_vocab"], limit=5)
    assert ins.shard.rel == "data-00000-of-00001.arrow" and ins.rows == 2960
    rows = ins.failing["tokens.out_of_vocab:input_ids"]
    assert len(rows) == 2773 and rows[:5] == [0, 1, 2, 3, 4]
    got = [(r.row, r.position, r.length, r.bad_value) for r in ins.shown]
    assert got[:3] == [(0, 1, 128, "49716"), (1, 4, 128, "41376"), (2, 7, 128, "47458")]
    # reference: the first id >= 30522 in each shown row, straight from the Arrow file
    import pyarrow as pa

    table = pa.ipc.open_stream(pa.memory_map(str(MBERT_TRAIN / "data-00000-of-00001.arrow"))).read_all()
    ids = table.column("input_ids").to_pylist()
    for r in ins.shown:
        pos = next(k for k, v in enumerate(ids[r.row]) if v >= 30522 or v < 0)
        assert (r.position, int(r.bad_value)) == (pos, ids[r.row][pos])


def test_inspect_dkhate_mbert_cli_with_minilm_tokenizer(tmp_path):
    cfg = tmp_path / "v.toml"
    cfg.write_text("[tokens]\nvocab_size = 30522\n")
    out = tmp_path / "oov.parquet"
    p = run_cli("inspect", str(MBERT_TRAIN), "--config", str(cfg), "--check", "tokens.out_of_vocab", "--limit", "3",
                "--tokenizer", str(REAL / "minilm_bert_tokenizer"), "--export", str(out))
    assert p.returncode == 1, p.stderr
    assert "tokens.out_of_vocab:input_ids: 2773 row(s); first: 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 …" in p.stdout
    assert "row 0  tokens.out_of_vocab column input_ids" in p.stdout
    assert "first bad element: position 1 of 128: 49716" in p.stdout
    assert "tokens: [CLS] ⟦<oov:49716>⟧ <oov:107921>" in p.stdout
    df = pl.read_parquet(out)
    assert df.height == 2773 and df["_datacheck_row"][:3].to_list() == [0, 1, 2]
    assert set(df["_datacheck_shard_hash"]) == {hash_file(MBERT_TRAIN / "data-00000-of-00001.arrow")[0]}
    assert load_tokenizer(REAL / "minilm_bert_tokenizer").vocab_size == 30522


@pytest.mark.slow
def test_clean_sst2_train_drops_3622_duplicates(tmp_path):
    cfg = config_from_dict({"columns": {"text": ["sentence"], "label": "label"}})
    before = hash_file(SST2_TRAIN)
    res = clean([str(SST2_TRAIN)], tmp_path / "sst2_clean", cfg, drop=["dup.exact_in_shard"])
    assert hash_file(SST2_TRAIN) == before
    (s,) = res.shards
    assert (s.input_rows, s.kept, s.quarantined, s.dropped) == (67349, 63727, 3622, {"dup.exact_in_shard": 3622})
    q = pl.read_parquet(res.out / QUARANTINE_DIR / s.path)
    assert q.height == 3622 and set(q["_datacheck_checks"].explode()) == {"dup.exact_in_shard"}
    kept = pl.read_parquet(res.out / s.path)
    assert kept.height == 63727
    # every quarantined (sentence, label) also occurs among the kept rows: only extra copies were dropped
    assert q.select("sentence", "label").join(kept.select("sentence", "label").unique(), on=["sentence", "label"],
                                              how="anti", nulls_equal=True).height == 0
    idx = json.loads((res.out / INDEX_NAME).read_text())
    assert [(e["path"], e["rows"]) for e in idx["shards"]] == [(s.path, 63727)]
    again = datacheck.audit([str(res.out)], cfg)
    assert not [f for sh in again.shards for f in sh.findings if f.check == "dup.exact_in_shard"]
    assert again.summary["rows"] == 63727


def test_clean_sst2_cli(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[columns]\ntext = ["sentence"]\nlabel = "label"\n')
    p = run_cli("clean", str(SST2_TRAIN), "--out", str(tmp_path / "o"), "--drop", "dup.exact_in_shard",
                "--config", str(cfg))
    assert p.returncode == 0, p.stderr
    assert ("train-00000-of-00001.parquet: 67349 in, 63727 kept, 3622 quarantined (dup.exact_in_shard 3622)"
            in p.stdout)
