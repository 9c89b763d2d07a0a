"""datacheck plan and trace --data over a Megatron blend of the two real shards (realdata
PROVENANCE.md: megatron_gpt2_openwebtext, 1,000 sequences; megatron_toy_duplicates, 10,000 sequences
of 5 or 7 tokens), ``--data-path 0.3 OWT 0.7 TOY`` as ``[megatron] data_path``: a step's rows are
the documents of both prefixes that BlendedDataset's samples read, computed here from the two .idx
files by the plain-Python reference of Megatron's code (tests/helpers/megatronref.py)."""
from __future__ import annotations

import json
import struct

import megatronref as ref
import numpy as np
import polars as pl
import pytest
from conftest import SHARED, run_cli

OWT = "megatron_gpt2_openwebtext/meg-gpt2-openwebtext_text_document"
TOY = "megatron_toy_duplicates/my-gpt2_text_document"
# 2 x 2 x 2 = 8 samples a step, 62 steps: 496 samples of 256 (+1) tokens; the run's folders are not these
CONFIG = """[batch]
batch_size = 2
world_size = 2
grad_accum = 2

[megatron]
seq_length = 256
train_iters = 62
seed = 42
split = "949,50,1"
data_path = ["0.3", "/gpfs/data/owt/meg-gpt2-openwebtext_text_document", "0.7", "/gpfs/data/toy/my-gpt2_text_document"]
"""
LOG = SHARED / "logs" / "megatron" / "meg_ds_3d_gpt2_perf_n16-ds-off.out"


def _lengths(idx, n):
    raw = idx.read_bytes()
    version, code, s, d = struct.unpack("<QBQQ", raw[9:34])
    assert raw[:9] == b"MMIDIDX\x00\x00" and (version, code, s, d) == (1, 8, n, n + 1)
    docs = np.frombuffer(raw, dtype="<i8", count=d, offset=34 + 12 * s)
    assert docs.tolist() == list(range(n + 1))  # one sequence per document: a sequence is its document
    return np.frombuffer(raw, dtype="<i4", count=s, offset=34).tolist()


@pytest.fixture
def blend(realdata, tmp_path):
    (tmp_path / "datacheck.toml").write_text(CONFIG)
    lens = [_lengths(realdata / f"{OWT}.idx", 1000), _lengths(realdata / f"{TOY}.idx", 10_000)]
    assert sum(lens[0]) == 1_361_845 and set(lens[1]) == {5, 7}  # PROVENANCE.md
    return realdata, tmp_path / "datacheck.toml", lens


def _want(realdata, lens, step):
    """The rows (as plan --format json names them) of optimizer step ``step``: the toy pair's rows come
    after the 1,000 documents of the openwebtext pair in the row space (the .bin files as passed)."""
    out = []
    for rank, mb, idx, d, seq, a, b in ref.blend_step_reads(lens, [0.3, 0.7], 256, 42, "949,50,1", 1, 2, 2, 2,
                                                            62 * 8, step):
        shard = [OWT, TOY][d] + ".bin"
        out.append({"rank": rank, "micro_batch": mb, "global_index": seq + (1000 if d else 0), "row": seq,
                    "sample": idx, "shard": shard, "tokens": [a, b]})
    return out


@pytest.mark.parametrize("step", [0, 30, 61])
def test_blend_step_rows_are_megatrons(blend, step):
    realdata, cfg, lens = blend
    r = run_cli("plan", str(realdata / f"{OWT}.bin"), str(realdata / f"{TOY}.bin"), "--config", str(cfg),
                "--step", str(step), "--format", "json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)["result"]
    want = _want(realdata, lens, step)
    assert got["step"]["rows"] == want and got["step"]["samples"] == 8
    plan = got["plan"]
    # 496 samples: targets ceil(496 x 0.3) = 149 and ceil(496 x 0.7) = 348 (347.2); each GPTDataset
    # built for ceil(target x 1.005): 150 and 350 (349.74)
    assert [b["target_samples"] for b in plan["blend"]] == [149, 348] and plan["samples"] == 497
    assert [b["train_sequences"] for b in plan["blend"]] == [[0, 949], [0, 9490]]
    toy_tokens = sum(lens[1][:9490])
    assert plan["blend"][1]["data_epochs"] == -(-(350 * 256 + 1) // toy_tokens)
    # the blend's 497 positions go 3 : 7 to the prefixes (helpers.cpp's greedy choice)
    _, ds, _ = ref.blend(lens, [0.3, 0.7], 256, 42, "949,50,1", 1, 62 * 8)
    assert len(ds) == 497 and abs(ds.count(0) - 0.3 * 497) < 1


def test_blend_export_holds_each_samples_tokens(blend, tmp_path):
    realdata, cfg, lens = blend
    out = tmp_path / "step5.parquet"
    r = run_cli("plan", str(realdata / f"{OWT}.bin"), str(realdata / f"{TOY}.bin"), "--config", str(cfg),
                "--step", "5", "--export", str(out))
    assert r.returncode == 0, r.stderr
    df = pl.read_parquet(out)
    tokens = [np.fromfile(realdata / f"{p}.bin", dtype="<u2") for p in (OWT, TOY)]
    starts = [np.concatenate([[0], np.cumsum(x)]) for x in lens]
    reads = ref.blend_step_reads(lens, [0.3, 0.7], 256, 42, "949,50,1", 1, 2, 2, 2, 62 * 8, 5)
    assert df["_datacheck_sample"].to_list() == [w[2] for w in reads]
    for sample in sorted(set(df["_datacheck_sample"].to_list())):
        part = df.filter(pl.col("_datacheck_sample") == sample)
        got = [t for ids, a, b in zip(part["input_ids"].to_list(), part["_datacheck_token_start"].to_list(),
                                      part["_datacheck_token_end"].to_list()) for t in ids[a:b]]
        want = [int(t) for _, _, i, d, seq, a, b in reads if i == sample
                for t in tokens[d][starts[d][seq] + a:starts[d][seq] + b]]
        assert got == want and len(got) == 257


def _log(path, iterations, consumed, gbs, total=62):
    """A Megatron-LM log (training.py ``training_log``'s iteration lines) of ``iterations``, with
    ``consumed[i]`` consumed samples after iteration ``i``."""
    path.write_text("".join(
        f" iteration {i:8d}/{total:8d} | consumed samples: {consumed[i]:12d} | elapsed time per iteration (ms): 1376.1 | "
        f"learning rate: 1.500E-04 | global batch size: {gbs:5d} | lm loss: {7.5 - i / 100:.6E} | loss scale: 16384.0 | "
        "grad norm: 1.234 | number of skipped iterations:   0 | number of nan iterations:   0 |\n" for i in iterations))
    return path


def test_trace_names_a_resumed_log_steps_rows_across_both_prefixes(blend, tmp_path):
    """A run that trained 20 iterations with a global batch of 4, then resumed from that checkpoint
    (consumed samples 80) with a global batch of 8: its log starts at iteration 21, 88 samples
    consumed. Iteration 25's samples are blend positions 80 + 4 x 8 .. 80 + 5 x 8 - 1 (Megatron's
    sampler starts at consumed_samples), not optimizer step 24 x 8."""
    realdata, cfg, lens = blend
    consumed = {i: 80 + (i - 20) * 8 for i in range(21, 31)}
    log = _log(tmp_path / "resumed.out", range(21, 31), consumed, 8)
    r = run_cli("trace", str(log), "--data", str(realdata / f"{OWT}.bin"), str(realdata / f"{TOY}.bin"),
                "--config", str(cfg), "--step", "25", "--format", "json")
    assert r.returncode in (0, 1), r.stderr
    data = json.loads(r.stdout)["result"]["data"]
    assert data["audited_optimizer_steps"] == [24, 24] and "BlendedDataset of 2 prefixes" in data["source"]["description"]
    assert "the samples before iteration 25: 112, from the log's consumed samples" in data["source"]["description"]
    parts, ds, dsi = ref.blend(lens, [0.3, 0.7], 256, 42, "949,50,1", 1, 62 * 8)
    want: dict[str, list[int]] = {}
    for rank in range(2):
        for mb in range(2):
            for idx in range(112 + mb * 4 + rank * 2, 112 + mb * 4 + rank * 2 + 2):  # MegatronPretrainingSampler
                di, si, sh = parts[ds[idx]]
                for seq, _, _ in ref.sample_pieces(lens[ds[idx]], di, si, sh, dsi[idx], 1):
                    want.setdefault(str(rank), []).append(seq + (1000 if ds[idx] else 0))
    assert data["rows"]["steps"]["25"] == want
    assert {ds[i] for i in range(112, 120)} == {0, 1}  # the step reads both prefixes
    # the same log step of a run that never changed its batch (consumed = iteration x 8) is step 24's
    # samples 192 .. 199: what the plan names for optimizer step 24
    _log(log, range(21, 31), {i: i * 8 for i in range(21, 31)}, 8)
    r = run_cli("trace", str(log), "--data", str(realdata / f"{OWT}.bin"), str(realdata / f"{TOY}.bin"),
                "--config", str(cfg), "--step", "25", "--format", "json")
    plan = run_cli("plan", str(realdata / f"{OWT}.bin"), str(realdata / f"{TOY}.bin"), "--config", str(cfg),
                   "--step", "24", "--format", "json")
    rows = json.loads(plan.stdout)["result"]["step"]["rows"]
    assert {r_["sample"] for r_ in rows} == set(range(192, 200))
    got = json.loads(r.stdout)["result"]["data"]["rows"]["steps"]["25"]
    assert got == {str(k): [r_["global_index"] for r_ in rows if r_["rank"] == k] for k in range(2)}


def test_a_log_without_consumed_samples_says_what_it_assumed(blend, tmp_path):
    realdata, cfg, lens = blend
    log = _log(tmp_path / "resumed.out", range(41, 46), {i: 0 for i in range(41, 46)}, 8)
    log.write_text(log.read_text().replace("consumed samples:            0 | ", ""))
    assert "consumed" not in log.read_text() and len(log.read_text().splitlines()) == 5
    r = run_cli("trace", str(log), "--data", str(realdata / f"{OWT}.bin"), str(realdata / f"{TOY}.bin"),
                "--config", str(cfg), "--step", "43", "--format", "json")
    assert r.returncode in (0, 1), r.stderr
    data = json.loads(r.stdout)["result"]["data"]
    desc = data["source"]["description"]
    assert "the log reports no consumed samples: assumed optimizer step x global batch" in desc
    assert "a resumed run whose global batch changed needs a log with them, or --ledger" in desc
    # optimizer step 42: blend positions 336 .. 343
    assert data["audited_optimizer_steps"] == [42, 42]
    assert sorted({s["sample"] for v in data["rows"]["samples"]["43"].values() for s in v}) == list(range(336, 344))
