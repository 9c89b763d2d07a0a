"""datacheck trace --data under ``[megatron] implementation = "legacy"``: the real Megatron-DeepSpeed
log (logs PROVENANCE.md, megatron/meg_ds_3d_gpt2_perf_n16-ds-off.out; its own facts: global batch
1024, seq_length 1024, seed 1234, split 949,50,1, 1000 iterations asked) over the real shard
(realdata PROVENANCE.md section 4): the rows of a log step are the samples legacy Megatron's
GPTDataset builds, computed here from the .idx by the legacy reference
(tests/helpers/megatronlegacyref.py), and the source description names the lineage assumed. The real
log's run read 10,000 documents, not this shard's 1000 (its dataset lines say so, and the trace
refuses it: tests/e2e/trace/test_megatron_dataset_lines.py), so the log traced here is the real one
with its dataset block replaced by the lines legacy Megatron prints for this shard and config
(tests/helpers/megatronlogs.py, numbers from the legacy reference); its arguments block is the
config's already (micro-batch 4, data-parallel 1, global batch 1024, seq_length 1024, seed 1234,
1000 iterations)."""
from __future__ import annotations

import json
import struct

import megatronlegacyref as leg
import megatronlogs
import numpy as np
import pytest
from conftest import SHARED, run_cli

LOG = SHARED / "logs" / "megatron" / "meg_ds_3d_gpt2_perf_n16-ds-off.out"
CONFIG = """[batch]
batch_size = 4
world_size = 1
grad_accum = 256

[megatron]
seq_length = 1024
train_iters = 1000
seed = 1234
split = "949,50,1"
implementation = "legacy"
"""


def _lengths(idx):
    raw = idx.read_bytes()
    version, code, s, d = struct.unpack("<QBQQ", raw[9:34])
    assert raw[:9] == b"MMIDIDX\x00\x00" and (version, code, s, d) == (1, 8, 1000, 1001)
    return np.frombuffer(raw, dtype="<i4", count=s, offset=34).tolist()


@pytest.mark.slow  # the reference walks the run's 1,024,000 samples token by token (about 4 s)
def test_log_step_rows_are_legacy_megatrons_samples(realdata, tmp_path):
    if not LOG.is_file():
        pytest.skip("../shared/logs is not present")
    bin_ = realdata / "megatron_gpt2_openwebtext" / "meg-gpt2-openwebtext_text_document.bin"
    (tmp_path / "datacheck.toml").write_text(CONFIG)
    sizes = _lengths(bin_.with_suffix(".idx"))
    ds = leg.train_dataset(sizes, "949,50,1", 1000 * 1024, 1024, 1234)
    log = tmp_path / "run.out"
    lines = LOG.read_text(errors="replace").splitlines()
    a = lines.index("> building train, validation, and test datasets ...")
    b = lines.index("> finished creating GPT datasets ...")
    block = megatronlogs.legacy_lines("/gpfswork/owt/meg-gpt2-openwebtext_text_document", len(sizes),
                                      leg.split("949,50,1", len(sizes)), 1000 * 1024, 1024, 1234, ds["len"] + 1,
                                      ds["epochs"], 1000 * 1024)
    log.write_text("\n".join(lines[:a] + block + lines[b + 1:]) + "\n")
    r = run_cli("trace", str(log), "--data", str(bin_), "--config", str(tmp_path / "datacheck.toml"),
                "--step", "3", "--format", "json")
    assert r.returncode in (0, 1), r.stderr
    data = json.loads(r.stdout)["result"]["data"]
    assert data["audited_optimizer_steps"] == [2, 2] and data["source"]["kind"] == "plan"
    assert "legacy Megatron-LM / Megatron-DeepSpeed's rules" in data["source"]["description"]
    assert f"{ds['len'] + 1} sample-index rows (the dataset's length + 1)" in data["source"]["dataset_lines"]
    # the log's micro-batch 4, data-parallel 1, global batch 1024: 256 micro-batches an iteration;
    # the log's consumed samples after iteration 2 are 2048, where step 2 starts
    want: list[dict] = []
    for k, mb in enumerate(leg.micro_batches(ds["len"], 2048, 4, 1, 0)):
        if k == 256:
            break
        for idx in mb:
            want.append({"sample": idx, "micro_batch": k, "reads": [list(p) for p in leg.pieces(sizes, ds, idx)]})
    assert data["rows"]["samples"] == {"3": {"0": want}}
