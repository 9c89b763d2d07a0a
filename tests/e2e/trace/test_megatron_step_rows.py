"""datacheck trace --data over the real Megatron shard (realdata PROVENANCE.md section 4) with a real
Megatron-DeepSpeed log (logs PROVENANCE.md, megatron/meg_ds_3d_gpt2_perf_n16-ds-off.out: iterations
1..62, the loss jumps at iteration 3): the rows of a log step are the documents Megatron's own samples
of that iteration read, computed here from the .idx by the reference of Megatron's code
(tests/helpers/megatronref.py), never torch's DistributedSampler over the documents. The real log's
run read another dataset (its dataset lines: 10,000 documents, seq_length 1024, seed 1234), which
the trace refuses; the log traced for the rows is the real one with its dataset block replaced by
the lines megatron-core prints for this shard and config (tests/helpers/megatronlogs.py, numbers
from the reference) and its arguments block set to the config's."""
from __future__ import annotations

import json
import struct

import megatronlogs
import megatronref as ref
import numpy as np
import polars as pl
import pytest
from conftest import SHARED, run_cli

LOG = SHARED / "logs" / "megatron" / "meg_ds_3d_gpt2_perf_n16-ds-off.out"
# the log's global batch size is 1024 (its consumed samples grow by 1024 an iteration): 8 x 16 x 8
CONFIG = """[batch]
batch_size = 8
world_size = 16
grad_accum = 8

[megatron]
seq_length = 512
train_iters = 62
seed = 42
split = "949,50,1"
"""


def _lengths(idx):
    raw = idx.read_bytes()
    version, code, s, d = struct.unpack("<QBQQ", raw[9:34])
    assert raw[:9] == b"MMIDIDX\x00\x00" and (version, code, s, d) == (1, 8, 1000, 1001)
    docs = np.frombuffer(raw, dtype="<i8", count=d, offset=34 + 12 * s)
    assert docs.tolist() == list(range(1001))  # one sequence per document: a sequence is its document
    return np.frombuffer(raw, dtype="<i4", count=s, offset=34).tolist()


def _log_of_this_shard(tmp_path, bin_, asked=62 * 1024):
    """The real log with its dataset block replaced by megatron-core's lines for this shard and CONFIG
    (``asked``: the train samples the run asked for, train_iters x global batch)."""
    lens = _lengths(bin_.with_suffix(".idx"))
    _, si, _, epochs, _ = ref.order(lens, 512, 42, "949,50,1", 1, asked)
    lines = LOG.read_text(errors="replace").splitlines()
    a = lines.index("> building train, validation, and test datasets ...")
    b = lines.index("> finished creating GPT datasets ...")
    block = megatronlogs.core_lines("/gpfswork/owt/meg-gpt2-openwebtext_text_document", len(lens), len(lens), 512, 42,
                                    "949,50,1", len(si) - 1, epochs, asked)
    log = tmp_path / "run.out"
    lines = megatronlogs.with_args(lines[:a] + block + lines[b + 1:], seed=42, seq_length=512, train_iters=62,
                                   global_batch_size=1024, micro_batch_size=8, data_parallel_size=16)
    log.write_text("\n".join(lines) + "\n")
    return log, len(si) - 1


def test_the_real_log_is_not_of_this_shard(realdata, tmp_path):
    if not LOG.is_file():
        pytest.skip("../shared/logs is not present")
    bin_ = realdata / "megatron_gpt2_openwebtext" / "meg-gpt2-openwebtext_text_document.bin"
    (tmp_path / "datacheck.toml").write_text(CONFIG)
    r = run_cli("trace", str(LOG), "--data", str(bin_), "--config", str(tmp_path / "datacheck.toml"), "--step", "3")
    assert r.returncode == 2, r.stdout
    assert "'number of documents: 10000': the run's indexed dataset held 10000 sequences" in r.stderr
    assert "likely cause: wrong shard" in r.stderr


def test_log_step_rows_are_megatrons_samples_of_that_iteration(realdata, tmp_path):
    if not LOG.is_file():
        pytest.skip("../shared/logs is not present")
    bin_ = realdata / "megatron_gpt2_openwebtext" / "meg-gpt2-openwebtext_text_document.bin"
    (tmp_path / "datacheck.toml").write_text(CONFIG)
    log, samples = _log_of_this_shard(tmp_path, bin_)
    r = run_cli("trace", str(log), "--data", str(bin_), "--config", str(tmp_path / "datacheck.toml"),
                "--step", "3", "--format", "json", "--export", str(tmp_path / "rows.parquet"))
    assert r.returncode in (0, 1), r.stderr
    assert f"{samples} samples" in json.loads(r.stdout)["result"]["data"]["source"]["dataset_lines"]
    data = json.loads(r.stdout)["result"]["data"]
    # Megatron logs iteration N after its N-th update: log step 3 is optimizer step 2
    assert data["audited_optimizer_steps"] == [2, 2] and data["source"]["kind"] == "plan"
    assert "Megatron-LM's own order" in data["source"]["description"]
    lens = _lengths(bin_.with_suffix(".idx"))
    want: dict[str, list[dict]] = {}
    for rank, mb, idx, seq, a, b in ref.step_reads(lens, 512, 42, "949,50,1", 1, 8, 16, 8, 62 * 1024, 2):
        got = want.setdefault(str(rank), [])
        if not got or got[-1]["sample"] != idx:
            got.append({"sample": idx, "micro_batch": mb, "reads": []})
        got[-1]["reads"].append([seq, a, b])
    assert data["rows"]["samples"] == {"3": want}
    assert data["rows"]["steps"]["3"] == {k: [g for s in v for g, _, _ in s["reads"]] for k, v in want.items()}
    # the train split is the first 949/1000 of the sequences: no row past it is named
    assert max(g for v in want.values() for s in v for g, _, _ in s["reads"]) < 949
    # the export: one row per document a sample reads, with the sample and the token range
    df = pl.read_parquet(tmp_path / "rows.parquet")
    flat = [(s["sample"], g, a, b) for k in sorted(want, key=int) for s in want[k] for g, a, b in s["reads"]]
    assert list(zip(df["_datacheck_sample"], df["_datacheck_global_index"], df["_datacheck_token_start"],
                    df["_datacheck_token_end"])) == flat
    assert set(df["_datacheck_log_step"]) == {3} and set(df["_datacheck_step"]) == {2}


def test_a_config_whose_global_batch_is_not_the_logs_is_refused(realdata, tmp_path):
    if not LOG.is_file():
        pytest.skip("../shared/logs is not present")
    # consumed samples 1024, 2048, 3072 at iterations 1, 2, 3 (logs PROVENANCE.md): the run's global
    # batch is 1024; a config of 1 x 4 x 2 = 8 would name other samples than the run's
    lines = [ln for ln in LOG.read_text(errors="replace").splitlines() if ln.lstrip().startswith("iteration")]
    assert [int(ln.split("consumed samples:")[1].split("|")[0]) for ln in lines[:3]] == [1024, 2048, 3072]
    bin_ = realdata / "megatron_gpt2_openwebtext" / "meg-gpt2-openwebtext_text_document.bin"
    (tmp_path / "datacheck.toml").write_text(CONFIG.replace("batch_size = 8", "batch_size = 1")
                                             .replace("world_size = 16", "world_size = 4")
                                             .replace("grad_accum = 8", "grad_accum = 2"))
    # the dataset lines of a run of that config (62 x 8 samples asked): only the consumed samples contradict it
    log, _ = _log_of_this_shard(tmp_path, bin_, asked=62 * 8)
    log.write_text("\n".join(megatronlogs.with_args(log.read_text().splitlines(), global_batch_size=8,
                                                     micro_batch_size=1, data_parallel_size=4)) + "\n")
    r = run_cli("trace", str(log), "--data", str(bin_), "--config", str(tmp_path / "datacheck.toml"), "--step", "3")
    assert r.returncode == 2, r.stdout
    assert "dataset lines" not in r.stderr
    assert "consumed samples grow by 1024 from iteration" in r.stderr and "global batch 8" in r.stderr
