"""datacheck plan on the real Megatron shard (PROVENANCE.md section 4): a step's rows are the documents
Megatron's own GPTDataset samples read, with their token ranges, computed here from the .idx's sequence
lengths by the plain-Python reference of Megatron's code (tests/helpers/megatronref.py)."""
from __future__ import annotations

import json
import struct

import megatronref as ref
import numpy as np
import polars as pl
import pytest
from conftest import run_cli

SHARD = "megatron_gpt2_openwebtext/meg-gpt2-openwebtext_text_document"
# micro-batch 2 x data-parallel 2 x grad_accum 2 = 8 samples a step; 400 steps = 3,200 samples of 1024 (+1)
# tokens: more than two passes over the 969 train documents, the last pass shuffled apart
CONFIG = """[batch]
batch_size = 2
world_size = 2
grad_accum = 2

[megatron]
seq_length = 1024
train_iters = 400
"""


def _idx(path):
    """(sequence lengths, document index) of a MMIDIDX v1 .idx, read by its documented layout."""
    raw = path.read_bytes()
    assert raw[:9] == b"MMIDIDX\x00\x00"
    version, code, s, d = struct.unpack("<QBQQ", raw[9:34])
    assert (version, code) == (1, 8)
    lens = np.frombuffer(raw, dtype="<i4", count=s, offset=34)
    docs = np.frombuffer(raw, dtype="<i8", count=d, offset=34 + 12 * s)
    return lens.tolist(), docs.tolist()


@pytest.fixture
def data(realdata, tmp_path):
    (tmp_path / "datacheck.toml").write_text(CONFIG)
    return realdata / SHARD, tmp_path / "datacheck.toml"


def test_provenance_facts_of_the_index(realdata):
    lens, docs = _idx(realdata / f"{SHARD}.idx")
    assert len(lens) == 1000 and len(docs) == 1001 and sum(lens) == 1_361_845


@pytest.mark.parametrize("step", [0, 123, 399])
def test_step_rows_are_megatrons_samples(data, step):
    prefix, cfg = data
    lens, docs = _idx(prefix.with_suffix(".idx"))
    r = run_cli("plan", str(prefix.with_suffix(".bin")), "--config", str(cfg), "--step", str(step), "--format", "json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)["result"]
    want = []
    for rank, mb, idx, seq, a, b in ref.step_reads(lens, 1024, 1234, "969, 30, 1", 1, 2, 2, 2, 400 * 8, step):
        doc = max(k for k in range(len(docs) - 1) if docs[k] <= seq)
        off = sum(lens[docs[doc]:seq])
        want.append({"rank": rank, "micro_batch": mb, "global_index": doc, "row": doc, "sample": idx,
                     "shard": prefix.name + ".bin", "tokens": [off + a, off + b]})
    assert got["step"]["rows"] == want and got["step"]["samples"] == 8
    plan = got["plan"]
    # 969 of 1000 sequences train (969 / 1000 rounded); 3,200 samples x 1024 + 1 tokens need 3 passes
    train_tokens = sum(lens[:969])
    assert plan["loader"] == "megatron" and plan["train_sequences"] == [0, 969]
    assert plan["tokens_per_epoch"] == train_tokens and plan["data_epochs"] == -(-(3200 * 1024 + 1) // train_tokens) == 3
    assert plan["samples"] == (3 * train_tokens - 1) // 1024 and plan["steps"] == 400


def test_without_the_run_facts_the_plan_says_so(data, tmp_path):
    prefix, _ = data
    (tmp_path / "b.toml").write_text("[batch]\nbatch_size = 2\n")
    r = run_cli("plan", str(prefix.with_suffix(".bin")), "--config", str(tmp_path / "b.toml"), "--step", "0")
    assert r.returncode == 2 and r.stdout == ""
    assert "seq_length" in r.stderr and "train_iters" in r.stderr and "Megatron" in r.stderr


def test_export_holds_each_samples_tokens(data, tmp_path):
    prefix, cfg = data
    lens, docs = _idx(prefix.with_suffix(".idx"))
    tokens = np.fromfile(prefix.with_suffix(".bin"), dtype="<u2")
    starts = np.concatenate([[0], np.cumsum(lens)])  # one token each: a sequence's first token
    out = tmp_path / "step7.parquet"
    r = run_cli("plan", str(prefix.with_suffix(".bin")), "--config", str(cfg), "--step", "7", "--export", str(out))
    assert r.returncode == 0, r.stderr
    df = pl.read_parquet(out)
    reads = ref.step_reads(lens, 1024, 1234, "969, 30, 1", 1, 2, 2, 2, 400 * 8, 7)
    assert df["_datacheck_sample"].to_list() == [w[2] for w in reads]
    # each sample's 1025 tokens, as Megatron reads them from the .bin, are the exported documents' slices
    for sample in sorted(set(df["_datacheck_sample"].to_list())):
        part = df.filter(pl.col("_datacheck_sample") == sample)
        got = [t for ids, a, b in zip(part["input_ids"].to_list(), part["_datacheck_token_start"].to_list(),
                                      part["_datacheck_token_end"].to_list()) for t in ids[a:b]]
        want = [int(t) for _, _, i, seq, a, b in reads if i == sample for t in tokens[starts[seq] + a:starts[seq] + b]]
        assert got == want and len(got) == 1025


def test_cyclic_dataloader_step_rows(data, tmp_path):
    pytest.importorskip("torch")
    prefix, _ = data
    (tmp_path / "c.toml").write_text(CONFIG + 'dataloader_type = "cyclic"\n')
    lens, docs = _idx(prefix.with_suffix(".idx"))
    r = run_cli("plan", str(prefix.with_suffix(".bin")), "--config", str(tmp_path / "c.toml"), "--step", "250",
                "--format", "json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)["result"]
    di, si, sh, _, _ = ref.order(lens, 1024, 1234, "969, 30, 1", 1, 400 * 8)
    want = []
    for rank in range(2):
        mbs = ref.cyclic_batches(len(si) - 1, 2, 2, rank, 251 * 2)[250 * 2:]
        for mb, batch in enumerate(mbs):
            for idx in batch:
                for seq, a, b in ref.sample_pieces(lens, di, si, sh, idx, 1):
                    want.append({"rank": rank, "micro_batch": mb, "global_index": seq, "row": seq, "sample": idx,
                                 "shard": prefix.name + ".bin", "tokens": [a, b]})  # one sequence per document
    assert docs == list(range(1001)) and got["step"]["rows"] == want
    assert got["plan"]["dataloader_type"] == "cyclic"


# a run resumed with another global batch: micro-batch 1 x data-parallel 2 x grad_accum 2 = 4 samples a
# step, after a first run of 125 steps x 8 samples (the log's "consumed samples: 1000" at iteration 125)
RESUMED = CONFIG.replace("batch_size = 2", "batch_size = 1")


@pytest.mark.parametrize("consumed", [1000, 1001, 0])
def test_consumed_samples_place_a_resumed_runs_step(data, tmp_path, consumed):
    """The rows of the step come from MegatronPretrainingSampler started at ``consumed``: rank r's
    micro-batch m holds samples consumed + m x mbs x dp + r x mbs (mbs of them), whatever the step's
    number; each sample's documents from the plain-Python reference of GPTDataset."""
    prefix, _ = data
    cfg = tmp_path / "resumed.toml"
    cfg.write_text(RESUMED)
    lens, docs = _idx(prefix.with_suffix(".idx"))
    step = 125
    r = run_cli("plan", str(prefix.with_suffix(".bin")), "--config", str(cfg), "--step", str(step),
                "--consumed-samples", str(consumed), "--format", "json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)["result"]["step"]
    di, si, sh, _, _ = ref.order(lens, 1024, 1234, "969, 30, 1", 1, 400 * 4)
    mbs, dp, ga = 1, 2, 2
    want = []
    for rank in range(dp):
        for mb in range(ga):
            lo = consumed + mb * mbs * dp + rank * mbs
            for idx in range(lo, lo + mbs):
                for seq, a, b in ref.sample_pieces(lens, di, si, sh, idx, 1):
                    doc = max(k for k in range(len(docs) - 1) if docs[k] <= seq)
                    off = sum(lens[docs[doc]:seq])
                    want.append({"rank": rank, "micro_batch": mb, "global_index": doc, "row": doc, "sample": idx,
                                 "shard": prefix.name + ".bin", "tokens": [off + a, off + b]})
    assert got["rows"] == want
    assert got["samples"] == 4 and got["consumed_samples"] == consumed
    # without it the step is placed at step x global batch (500 here), other samples
    r = run_cli("plan", str(prefix.with_suffix(".bin")), "--config", str(cfg), "--step", str(step), "--format", "json")
    assert {x["sample"] for x in json.loads(r.stdout)["result"]["step"]["rows"]} == set(range(500, 504))
    r = run_cli("plan", str(prefix.with_suffix(".bin")), "--config", str(cfg), "--step", str(step),
                "--consumed-samples", str(consumed))
    assert r.returncode == 0 and f"4 Megatron sample(s) after {consumed} consumed" in r.stdout


def test_consumed_samples_are_refused_where_they_mean_nothing(data, tmp_path):
    prefix, cfg = data
    r = run_cli("plan", str(prefix.with_suffix(".bin")), "--config", str(cfg), "--consumed-samples", "8")
    assert r.returncode == 2 and "--step" in r.stderr
    r = run_cli("plan", str(prefix.with_suffix(".bin")), "--config", str(cfg), "--step", "3",
                "--consumed-samples", "10000000")
    assert r.returncode == 2 and "consumed samples 10000000" in r.stderr and "Traceback" not in r.stderr
    pq_dir = tmp_path / "rows"
    pq_dir.mkdir()
    pl.DataFrame({"input_ids": [[1, 2, 3]] * 8}).write_parquet(pq_dir / "train.parquet")
    (tmp_path / "t.toml").write_text("[batch]\nbatch_size = 2\n")
    r = run_cli("plan", str(pq_dir), "--config", str(tmp_path / "t.toml"), "--step", "1", "--consumed-samples", "2")
    assert r.returncode == 2 and "Megatron" in r.stderr
