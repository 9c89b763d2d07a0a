"""``plan`` under ``[megatron] implementation = "legacy"`` over the real Megatron-DeepSpeed test shard
(realdata PROVENANCE.md section 4: 1,000 sequences, one per document): the first steps' rows are the
documents legacy Megatron's samples read, computed here from the .idx by the legacy reference
(tests/helpers/megatronlegacyref.py), and they are not megatron-core's (the split "1,1,1" cuts 1,000
sequences at 334 in legacy, at 333 in megatron-core); plan names the lineage it assumed."""
from __future__ import annotations

import json
import struct

import megatronlegacyref as leg
import numpy as np
import pytest
from conftest import run_cli

from datacheck.execute.plan import MegatronPlan, build_plan, rows_of_step
from datacheck.model.config import config_from_dict
from datacheck.model.errors import ConfigError
from datacheck.model.megatronorder import legacy_train_range

SHARD = "megatron_gpt2_openwebtext/meg-gpt2-openwebtext_text_document"
FACTS = {"batch": {"batch_size": 2, "world_size": 2, "grad_accum": 2},
         "megatron": {"seq_length": 1024, "train_iters": 100, "seed": 1234, "split": "1,1,1",
                      "implementation": "legacy"}}


def _lengths(idx):
    raw = idx.read_bytes()
    version, code, s, d = struct.unpack("<QBQQ", raw[9:34])
    assert raw[:9] == b"MMIDIDX\x00\x00" and (version, code, s, d) == (1, 8, 1000, 1001)
    docs = np.frombuffer(raw, dtype="<i8", count=d, offset=34 + 12 * s)
    assert docs.tolist() == list(range(1001))  # one sequence per document: a sequence is its document
    return np.frombuffer(raw, dtype="<i4", count=s, offset=34).tolist()


def _want(sizes, ds, step, gbs=8, mbs=2, dp=2, ga=2):
    out = []
    for rank in range(dp):
        for k, mb in enumerate(leg.micro_batches(ds["len"], 0, mbs, dp, rank)):
            if k // ga == step:
                out += [(rank, k % ga, idx, *p) for idx in mb for p in leg.pieces(sizes, ds, idx)]
    return out


def test_real_shard_first_steps_are_legacy_megatrons_samples(realdata):
    bin_ = realdata / f"{SHARD}.bin"
    sizes = _lengths(bin_.with_suffix(".idx"))
    ds = leg.train_dataset(sizes, "1,1,1", 100 * 8, 1024, 1234)
    assert ds["train"] == (0, 334)  # legacy: 333 + 333 + 333 = 999, every bookend moved up by 1
    plan = build_plan([str(bin_)], config_from_dict(FACTS))
    assert isinstance(plan, MegatronPlan) and plan.order.train == (0, 334)
    core = build_plan([str(bin_)], config_from_dict({**FACTS, "megatron": {**FACTS["megatron"],
                                                                            "implementation": "megatron-core"}}))
    assert isinstance(core, MegatronPlan) and core.order.train == (0, 333)
    differ = False
    for step in range(3):
        rows = rows_of_step(plan, step)
        want = _want(sizes, ds, step)
        assert [(r.rank, r.micro_batch, r.sample, r.row, *r.tokens) for r in rows] == want
        assert all(r.shard.endswith(".bin") for r in rows)
        # every sample reads seq_length + 1 tokens
        per: dict[int, int] = {}
        for r in rows:
            per[r.sample] = per.get(r.sample, 0) + r.tokens[1] - r.tokens[0]
        assert set(per.values()) == {1025}
        differ |= [(r.row, r.tokens) for r in rows] != [(r.row, r.tokens) for r in rows_of_step(core, step)]
    assert differ  # the lineages name other rows for the same run


def test_plan_says_which_lineage_it_assumed(realdata, tmp_path):
    bin_ = realdata / f"{SHARD}.bin"
    for impl, words in (("legacy", "legacy Megatron-LM / Megatron-DeepSpeed's GPTDataset"),
                        ("megatron-core", "megatron-core's GPTDataset")):
        cfg = tmp_path / f"{impl}.toml"
        cfg.write_text("[batch]\nbatch_size = 2\nworld_size = 2\ngrad_accum = 2\n\n[megatron]\nseq_length = 1024\n"
                       f"train_iters = 100\nsplit = \"1,1,1\"\nimplementation = \"{impl}\"\n")
        r = run_cli("plan", str(bin_), "--config", str(cfg), "--step", "0")
        assert r.returncode == 0, r.stderr
        assert words in r.stdout and ("train sequences 0..333" if impl == "legacy" else "train sequences 0..332") in r.stdout
        j = run_cli("plan", str(bin_), "--config", str(cfg), "--format", "json")
        assert j.returncode == 0, j.stderr
        assert json.loads(j.stdout)["result"]["plan"]["implementation"] == impl


@pytest.mark.parametrize("extra, message", [
    ({"add_extra_token_to_sequence": False}, "always reads seq_length"),
    ({"mid_level_dataset_surplus": 0.01}, "fixed factor"),
    ({"split": "1:1"}, "float"),
])
def test_config_refuses_what_legacy_megatron_has_not(extra, message):
    with pytest.raises(ConfigError, match=message):
        config_from_dict({"megatron": {"implementation": "legacy", **extra}})


def test_one_weighted_prefix_is_a_blend_of_one_in_legacy(realdata):
    # gpt_dataset.py build_train_valid_test_datasets: only len(data_prefix) == 1 is a plain GPTDataset;
    # "1.0 PREFIX" is a BlendableDataset of one GPTDataset built for ceil(843 x 1.0 x 1.005) = 848
    # samples: its last epoch is 378 of 470 samples, not below 80 % (376), so it is not shuffled apart,
    # where the plain GPTDataset of 843 samples (373 in its last epoch) shuffles it apart
    bin_ = realdata / f"{SHARD}.bin"
    sizes = _lengths(bin_.with_suffix(".idx"))
    meg = {k: v for k, v in FACTS["megatron"].items() if k != "train_iters"}
    facts = {**FACTS, "megatron": {**meg, "train_samples": 843, "data_path": ["1.0", f"/run/{bin_.stem}"]}}
    plan = build_plan([str(bin_)], config_from_dict(facts))
    assert isinstance(plan, MegatronPlan) and plan.order.targets == [848]
    ds = leg.train_dataset(sizes, "1,1,1", 848, 1024, 1234)
    assert len(plan.order) == ds["len"] and not ds["separate"]  # the blend holds all its dataset's samples
    rows = rows_of_step(plan, 1)
    assert [(r.rank, r.micro_batch, r.sample, r.row, *r.tokens) for r in rows] == _want(sizes, ds, 1)
    plain = build_plan([str(bin_)], config_from_dict({**FACTS, "megatron": {**meg, "train_samples": 843}}))
    assert isinstance(plain, MegatronPlan) and plain.order.separate_final_epoch
    assert [(r.row, r.tokens) for r in rows] != [(r.row, r.tokens) for r in rows_of_step(plain, 1)]


def test_plan_text_of_a_legacy_blend(realdata, tmp_path):
    bin_ = realdata / f"{SHARD}.bin"
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text("[batch]\nbatch_size = 2\nworld_size = 2\ngrad_accum = 2\n\n[megatron]\nseq_length = 1024\n"
                   f"train_samples = 843\nsplit = \"1,1,1\"\nimplementation = \"legacy\"\ndata_path = [\"1.0\", \"{bin_.stem}\"]\n")
    r = run_cli("plan", str(bin_), "--config", str(cfg))
    assert r.returncode == 0, r.stderr
    sizes = _lengths(bin_.with_suffix(".idx"))
    n = leg.train_dataset(sizes, "1,1,1", 848, 1024, 1234)["len"]
    assert "legacy Megatron-LM / Megatron-DeepSpeed's BlendableDataset of 1 GPTDataset(s)" in r.stdout
    assert f"the blend holds {n} samples" in r.stdout and f"GPTDataset built for 848 samples holds {n} over" in r.stdout


@pytest.mark.parametrize("split, n, want", [("1e3,1,1", 1002, (0, 1000)), ("98,1,1,0", 100, (0, 98)),
                                            (" 949 / 50 / 1 ", 10000, (0, 9490))])
def test_config_takes_the_splits_legacy_megatron_reads(split, n, want):
    # legacy reads each word between commas (or slashes) with float() and keeps the first 3: a split
    # megatron-core's parse refuses (an exponent, a 4th weight) is a legacy run's own --split
    cfg = config_from_dict({"megatron": {"implementation": "legacy", "split": split}})
    assert legacy_train_range(n, cfg.megatron.split) == want == tuple(leg.split(split, n)[:2])
    if "e" in split or split.count(",") > 2:
        with pytest.raises(ConfigError, match="megatron.split"):
            config_from_dict({"megatron": {"split": split}})
