"""datacheck trace --data holds Megatron's simulated order to the dataset lines the run printed
(number of sequences and documents, the train document range, the train index map's samples,
seq_length and seed, the train dataset's samples and epochs, the samples asked): agreement is said
as evidence, a contradiction stops the trace (exit 2) naming the log line, what it says, what the
data and config give and the likely cause. Data: the real Megatron shard (realdata PROVENANCE.md
section 4: 1000 sequences, one per document); logs: the real BigScience log
(logs PROVENANCE.md, megatron/meg_ds_3d_gpt2_perf_n16-ds-off.out: a run over 10,000 documents) and
logs written by tests/helpers/megatronlogs.py whose numbers come from the references
(tests/helpers/megatronref.py, megatronlegacyref.py), never from datacheck."""
from __future__ import annotations

import json
import struct

import megatronlegacyref as leg
import megatronlogs
import megatronref as ref
import numpy as np
import pytest
from conftest import SHARED, run_cli

REAL_LOG = SHARED / "logs" / "megatron" / "meg_ds_3d_gpt2_perf_n16-ds-off.out"
PREFIX = "/runs/owt/meg-gpt2-openwebtext_text_document"  # the run's folders need not be the local ones
ITERS = 62
GBS = 1024  # 8 x 16 x 8


def _config(seq_length=512, seed=42, split="949,50,1", implementation="megatron-core", train_iters=ITERS):
    return f"""[batch]
batch_size = 8
world_size = 16
grad_accum = 8

[megatron]
seq_length = {seq_length}
train_iters = {train_iters}
seed = {seed}
split = "{split}"
implementation = "{implementation}"
"""


def _iterations() -> list[str]:
    return [f" iteration {i:8d}/{ITERS:8d} | consumed samples: {i * GBS:12d} | elapsed time per iteration (ms): 9.0 | "
            f"learning rate: 1.0E-04 | global batch size: {GBS:5d} | lm loss: {2.0 + i:.6E} | loss scale: 1.0 | "
            "number of skipped iterations:   0 | number of nan iterations:   0 |" for i in range(1, 6)]


def _sizes(bin_):
    raw = bin_.with_suffix(".idx").read_bytes()
    version, code, s, d = struct.unpack("<QBQQ", raw[9:34])
    assert (version, s, d) == (1, 1000, 1001)
    return np.frombuffer(raw, dtype="<i4", count=s, offset=34).tolist()


@pytest.fixture
def shard(realdata):
    return realdata / "megatron_gpt2_openwebtext" / "meg-gpt2-openwebtext_text_document.bin"


def _legacy_log(tmp_path, sizes, split="949,50,1", seq_length=512, seed=42):
    ends = leg.split(split, len(sizes))
    ds = leg.train_dataset(sizes, split, ITERS * GBS, seq_length, seed)
    log = tmp_path / "legacy.log"
    log.write_text("\n".join(megatronlogs.legacy_lines(PREFIX, len(sizes), ends, ITERS * GBS, seq_length, seed,
                                                      ds["len"] + 1, ds["epochs"], ITERS * GBS) + _iterations()) + "\n")
    return log, ds, ends


def _core_log(tmp_path, sizes, cached=False):
    di, si, sh, epochs, _ = ref.order(sizes, 512, 42, "949,50,1", 1, ITERS * GBS)
    log = tmp_path / "core.log"
    log.write_text("\n".join(megatronlogs.core_lines(PREFIX, len(sizes), len(sizes), 512, 42, "949,50,1", len(si) - 1,
                                                    None if cached else epochs, ITERS * GBS) + _iterations()) + "\n")
    return log, len(si) - 1, epochs


def _trace(log, shard, tmp_path, config, *extra):
    (tmp_path / "datacheck.toml").write_text(config)
    return run_cli("trace", str(log), "--data", str(shard), "--config", str(tmp_path / "datacheck.toml"),
                   "--step", "3", "--format", "json", *extra)


def test_a_legacy_log_of_this_shard_agrees(shard, tmp_path):
    sizes = _sizes(shard)
    log, ds, ends = _legacy_log(tmp_path, sizes)
    r = _trace(log, shard, tmp_path, _config(implementation="legacy"))
    assert r.returncode in (0, 1), r.stderr
    src = json.loads(r.stdout)["result"]["data"]["source"]
    assert src["dataset_lines"] == [
        f"{ITERS * GBS} train samples asked", "1000 sequences (documents)", f"train sequences [0, {ends[1]})",
        f"index map {ITERS * GBS} samples asked, seq_length 512, seed 42",
        f"{ds['len'] + 1} sample-index rows (the dataset's length + 1)", f"{ds['epochs']} epoch(s)"]
    assert "the log's dataset lines agree: " in src["description"] and ends[1] == 949


def _two_launches(tmp_path, sizes, seeds):
    """A legacy log of two launches appended to one file (the run restarted from iteration 1), launch k
    with seed ``seeds[k]`` in its arguments block and its build; and the line the second launch's
    arguments block begins at."""
    blocks = []
    for seed in seeds:
        ends = leg.split("949,50,1", len(sizes))
        ds = leg.train_dataset(sizes, "949,50,1", ITERS * GBS, 512, seed)
        blocks += ["------------------------ arguments ------------------------",
                   f"  seed ............................................ {seed}",
                   "  seq_length ...................................... 512",
                   "-------------------- end of arguments ---------------------"]
        blocks += megatronlogs.legacy_lines(PREFIX, len(sizes), ends, ITERS * GBS, 512, seed, ds["len"] + 1,
                                            ds["epochs"], ITERS * GBS) + _iterations()
    log = tmp_path / "two.log"
    log.write_text("\n".join(blocks) + "\n")
    first, second = [i for i, t in enumerate(blocks, 1) if "-- arguments --" in t]
    assert first == 1
    return log, second


def test_each_launch_of_a_restarted_log_is_held_to_the_data(shard, tmp_path):
    """A run launched with seed 43, restarted with 42 and appended to the same log; the config says 42:
    only the last launch was held (it agreed, and the first launch's 5 iterations, trained on another
    order, passed unsaid). Each launch is held on its own: the first launch's index map contradicts the
    config, named with its launch; the second's agreements are said with theirs."""
    log, second = _two_launches(tmp_path, _sizes(shard), (43, 42))
    r = _trace(log, shard, tmp_path, _config(implementation="legacy"))
    assert r.returncode == 2, r.stdout
    assert "the log's dataset lines contradict the data and config" in r.stderr
    n = next(i for i, t in enumerate(log.read_text().splitlines(), 1) if "_train_indexmap_" in t and "_43s_" in t)
    assert f"launch 1 of 2 (from line 1): {log}:{n} " in r.stderr and "wrong [megatron] seed" in r.stderr
    assert f"launch 1 of 2 (from line 1): {log}:2 'seed ..." in r.stderr  # its arguments block too
    assert "launch 2 of 2" not in r.stderr  # the second launch agrees
    log, second = _two_launches(tmp_path, _sizes(shard), (42, 42))
    r = _trace(log, shard, tmp_path, _config(implementation="legacy"))
    assert r.returncode in (0, 1), r.stderr
    got = json.loads(r.stdout)["result"]["data"]["source"]["dataset_lines"]
    for k, first in ((1, 1), (2, second)):
        assert f"launch {k} of 2 (from line {first}): index map {ITERS * GBS} samples asked, seq_length 512, seed 42" in got
        assert f"launch {k} of 2 (from line {first}): --seed 42" in got


@pytest.mark.parametrize("cached", [False, True])
def test_a_megatron_core_log_of_this_shard_agrees(shard, tmp_path, cached):
    log, samples, epochs = _core_log(tmp_path, _sizes(shard), cached)
    r = _trace(log, shard, tmp_path, _config())
    assert r.returncode in (0, 1), r.stderr
    got = json.loads(r.stdout)["result"]["data"]["source"]["dataset_lines"]
    want = [f"{ITERS * GBS} train samples asked", "seed 42", "seq_length 512", "split 949,50,1", "1000 sequences",
            "1000 documents", f"{samples} samples"] + ([] if cached else [f"{epochs} epoch(s)"])
    assert got == want


@pytest.mark.parametrize("config, line, cause", [
    (_config(implementation="legacy", seed=43), "_train_indexmap_", "likely cause: wrong [megatron] seed"),
    (_config(implementation="legacy", seq_length=256), "_train_indexmap_", "likely cause: wrong [megatron] seq_length"),
    (_config(implementation="legacy", train_iters=61), "train:      ", "likely cause: wrong train_iters"),
    (_config(implementation="legacy", split="900,50,50"), "document indices in [0, 949)", "likely cause: wrong split"),
])
def test_a_config_the_legacy_lines_contradict_is_refused(shard, tmp_path, config, line, cause):
    log, _, _ = _legacy_log(tmp_path, _sizes(shard))
    r = _trace(log, shard, tmp_path, config)
    assert r.returncode == 2, r.stdout
    assert "the log's dataset lines contradict the data and config" in r.stderr and cause in r.stderr
    n = next(i for i, t in enumerate(log.read_text().splitlines(), 1) if line in t)
    assert f"{log}:{n} " in r.stderr  # the log line is named


def test_the_other_lineage_is_named_as_the_likely_cause(shard, tmp_path):
    sizes = _sizes(shard)
    # 1000 sequences in thirds: legacy rounds each part on its own (train [0, 334)); megatron-core [0, 333)
    assert leg.split("1,1,1", 1000)[:2] == [0, 334] and ref.train_range(1000, "1,1,1") == (0, 333)
    log, _, _ = _legacy_log(tmp_path, sizes, split="1,1,1")
    r = _trace(log, shard, tmp_path, _config(split="1,1,1"))
    assert r.returncode == 2, r.stdout
    assert "the run trained on sequences [0, 334), the data and config give [0, 333)" in r.stderr
    assert "likely cause: wrong implementation" in r.stderr
    # the same log under the legacy lineage agrees
    assert _trace(log, shard, tmp_path, _config(split="1,1,1", implementation="legacy")).returncode in (0, 1)


def test_a_core_log_of_another_shard_is_refused(shard, tmp_path):
    sizes = _sizes(shard)
    log, samples, epochs = _core_log(tmp_path, sizes)
    log.write_text(log.read_text().replace("total number of sequences: 1000", "total number of sequences: 1200"))
    r = _trace(log, shard, tmp_path, _config())
    assert r.returncode == 2 and "likely cause: wrong shard" in r.stderr
    assert "the run's indexed dataset held 1200 sequences" in r.stderr and "holds 1000" in r.stderr


def test_the_real_bigscience_log_is_not_of_this_shard(shard, tmp_path):
    if not REAL_LOG.is_file():
        pytest.skip("../shared/logs is not present")
    # the log's run: 10,000 documents, train [0, 9490), 1,024,000 samples of 1024 tokens, seed 1234
    # (logs PROVENANCE.md); the shard holds 1000 sequences: the run read another .bin/.idx
    cfg = _config(implementation="legacy", seq_length=1024, seed=1234, train_iters=1000).replace(
        "batch_size = 8\nworld_size = 16\ngrad_accum = 8", "batch_size = 4\nworld_size = 1\ngrad_accum = 256")
    r = _trace(REAL_LOG, shard, tmp_path, cfg)
    assert r.returncode == 2, r.stdout
    n = next(i for i, t in enumerate(REAL_LOG.read_text(errors="replace").splitlines(), 1)
             if "number of documents: 10000" in t)
    assert f"{REAL_LOG}:{n} 'number of documents: 10000': the run's indexed dataset held 10000 sequences" in r.stderr
    assert "likely cause: wrong shard" in r.stderr
    # --allow-data-mismatch traces it anyway, saying so
    r = _trace(REAL_LOG, shard, tmp_path, cfg, "--allow-data-mismatch")
    assert r.returncode in (0, 1), r.stderr
    data = json.loads(r.stdout)["result"]["data"]
    assert "the log's dataset lines contradict" in data["warning"] and "dataset_lines" not in data["source"]


def test_a_blends_lines_are_held_to_each_prefixs_pair(shard, tmp_path):
    # two prefixes (copies of the shard under the run's file names) blended 0.3 / 0.7 under legacy rules
    data = tmp_path / "data"
    data.mkdir()
    for name in ("a_text_document", "b_text_document"):
        for ext in (".bin", ".idx"):
            (data / (name + ext)).write_bytes(shard.with_suffix(ext).read_bytes())
    sizes = _sizes(shard)
    b = leg.blend([sizes, sizes], [0.3, 0.7], "949,50,1", ITERS * GBS, 512, 42)
    ends = leg.split("949,50,1", len(sizes))
    block: list[str] = []
    for name, n, part in zip(("a_text_document", "b_text_document", "c_text_document"), b["built"] + [99],
                             b["parts"] + [b["parts"][0]]):  # c: a prefix of another run, not planned
        block += megatronlogs.legacy_lines(f"/runs/{name}", len(sizes), ends, n, 512, 42, part["len"] + 1,
                                           part["epochs"], ITERS * GBS)
    log = tmp_path / "blend.log"
    log.write_text("\n".join(block + _iterations()) + "\n")
    cfg = _config(implementation="legacy") + 'data_path = ["0.3", "/runs/a_text_document", "0.7", "/runs/b_text_document"]\n'
    (tmp_path / "datacheck.toml").write_text(cfg)
    r = run_cli("trace", str(log), "--data", str(data), "--config", str(tmp_path / "datacheck.toml"), "--step", "3",
                "--format", "json")
    assert r.returncode in (0, 1), r.stderr
    got = json.loads(r.stdout)["result"]["data"]["source"]["dataset_lines"]
    for n, part in zip(b["built"], b["parts"]):
        assert f"index map {n} samples asked, seq_length 512, seed 42" in got
        assert f"{part['len'] + 1} sample-index rows (the dataset's length + 1)" in got
    # prefix b's epochs said otherwise: refused, naming b's line
    text = log.read_text().splitlines()
    at = [i for i, t in enumerate(text) if t.startswith("    total number of epochs:")][2]  # b's train dataset
    text[at] = "    total number of epochs: 999"
    log.write_text("\n".join(text) + "\n")
    r = run_cli("trace", str(log), "--data", str(data), "--config", str(tmp_path / "datacheck.toml"), "--step", "3")
    assert r.returncode == 2 and f"{log}:{at + 1} 'total number of epochs: 999'" in r.stderr
    assert f"give {b['parts'][1]['epochs']} epoch(s)" in r.stderr


def _args_block(**values) -> list[str]:
    """An arguments block as _print_args prints it (its layout in ../shared/logs/megatron)."""
    out = ["------------------------ arguments ------------------------"]
    out += [f"  {k} {'.' * (48 - len(k))} {v}" for k, v in sorted(values.items())]
    return out + ["-------------------- end of arguments ---------------------"]


@pytest.mark.parametrize("change, said", [
    ({}, None),
    ({"split": "94.9, 5, 0.1"}, None),  # the same weights, normalised
    ({"split": "900,50,50"}, "the run's --split is 900,50,50, [megatron] split is 949,50,1: wrong split"),
    ({"seed": 1234}, "the run's --seed is 1234, [megatron] seed is 42: wrong [megatron] seed"),
    ({"global_batch_size": 512, "micro_batch_size": 4}, "the run's --global-batch-size is 512, the global batch"),
    ({"train_iters": 100}, "the run's --train-iters is 100, [megatron] train_iters is 62: wrong train_iters"),
])
def test_the_arguments_block_is_held_to_the_config(shard, tmp_path, change, said):
    args = dict(seed=42, seq_length=512, split="949,50,1", train_iters=ITERS, train_samples=None, global_batch_size=GBS,
                micro_batch_size=8, data_parallel_size=16)
    args.update(change)
    log = tmp_path / "run.log"
    log.write_text("\n".join(_args_block(**args) + _iterations()) + "\n")
    r = _trace(log, shard, tmp_path, _config())
    if said is None:
        assert r.returncode in (0, 1), r.stderr
        assert json.loads(r.stdout)["result"]["data"]["source"]["dataset_lines"] == [
            "--seed 42", "--seq-length 512", f"--global-batch-size {GBS}"]
    else:
        assert r.returncode == 2 and said in r.stderr, r.stderr


def test_a_train_data_path_runs_unused_split_is_not_compared(shard, tmp_path):
    # a --train-data-path run is given as data_path with split "1" (docs/torch.md); it prints the
    # --split default it never used
    args = dict(seed=42, seq_length=512, split="969, 30, 1", train_iters=ITERS, train_samples=None,
                global_batch_size=GBS, micro_batch_size=8, data_parallel_size=16)
    log = tmp_path / "run.log"
    log.write_text("\n".join(_args_block(**args) + _iterations()) + "\n")
    r = _trace(log, shard, tmp_path, _config(split="1"))
    assert r.returncode in (0, 1), r.stderr
