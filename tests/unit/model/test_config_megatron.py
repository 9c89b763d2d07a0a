"""[megatron] and [batch] loader: validated as Megatron validates its arguments, and out of config_hash at
their defaults (a report or logged identity made before they existed keeps its hash)."""
from __future__ import annotations

import hashlib
import json

import pytest

from datacheck.model.config import config_from_dict
from datacheck.model.errors import ConfigError


def _hash_without_new_keys(cfg, megatron_keys: tuple[str, ...] | None = None) -> str:
    """config_hash as it was computed before [batch] loader, even_batches, split_batches, sampler, persistent_workers, [megatron],
    [dataset] sample_by, [pref] and [labels] tag_classes existed; with ``megatron_keys``, [megatron] kept without those (keys added to
    it later)."""
    doc = cfg.model_dump(mode="json", by_alias=True,
                         exclude={"trace", "pref"} if megatron_keys else {"trace", "megatron", "pref"})
    for key in megatron_keys or ():
        del doc["megatron"][key]
    for key in ("loader", "even_batches", "split_batches", "sampler", "persistent_workers"):
        del doc["batch"][key]
    if doc["tokens"]["padding_side"] is None:  # unset is "recognized per shard" (not "right"), its own audit
        del doc["tokens"]["padding_side"]
    if doc["labels"]["tag_classes"] is None:  # [labels] tag_classes, added later: out of the hash while unset
        del doc["labels"]["tag_classes"]
    for key, default in {"max_member_bytes": 256 << 20, "max_record_bytes": 512 << 20, "max_file_bytes": 4 << 30,
                         "max_row_bytes": 128 << 20,
                         "infer_splits": True, "sample_by": "line"}.items():
        if doc["dataset"].get(key) == default:
            del doc["dataset"][key]
    return "sha256:" + hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


@pytest.mark.parametrize("raw", [{}, {"batch": {"batch_size": 8, "world_size": 2}}, {"tokens": {"vocab_size": 100}},
                                 {"batch": {"loader": "auto"}, "megatron": {"seed": 1234, "split": "969, 30, 1"}},
                                 {"batch": {"even_batches": True, "split_batches": False}}])
def test_defaults_leave_the_hash_as_it_was(raw):
    cfg = config_from_dict(raw)
    assert cfg.hash() == _hash_without_new_keys(cfg)


@pytest.mark.parametrize("raw", [{"megatron": {"seq_length": 2048, "train_iters": 10}},
                                 {"megatron": {"seq_length": 2048, "implementation": "megatron-core"}}])
def test_a_megatron_config_keeps_its_hash_from_before_implementation(raw):
    # [megatron] implementation came later: at its default ("megatron-core") a set [megatron] hashes as before
    cfg = config_from_dict(raw)
    want = _hash_without_new_keys(cfg, ("implementation", "rampup_batch_size"))
    assert cfg.hash() == want
    legacy = config_from_dict({"megatron": {**raw["megatron"], "implementation": "legacy"}})
    assert legacy.hash() != want


@pytest.mark.parametrize("raw", [{"batch": {"loader": "megatron"}}, {"batch": {"loader": "accelerate"}},
                                 {"batch": {"even_batches": False}}, {"batch": {"split_batches": True}},
                                 {"megatron": {"seq_length": 2048}},
                                 {"megatron": {"seed": 1}}, {"megatron": {"train_iters": 10}},
                                 {"megatron": {"data_path": ["0.3", "a", "0.7", "b"]}},
                                 {"megatron": {"mid_level_dataset_surplus": 0.01}},
                                 {"megatron": {"implementation": "legacy"}},
                                 {"megatron": {"train_samples": 400, "rampup_batch_size": [4, 4, 60]}}])
def test_a_set_key_enters_the_hash(raw):
    assert config_from_dict(raw).hash() != config_from_dict({}).hash()


@pytest.mark.parametrize("raw, key", [
    ({"megatron": {"split": "1,2,3,4"}}, "megatron.split"),
    ({"megatron": {"split": "a,b"}}, "megatron.split"),
    ({"megatron": {"split": "0,0,0"}}, "megatron.split"),
    ({"megatron": {"seq_length": 1}}, "megatron.seq_length"),  # helpers.cpp asserts seq_length > 1
    ({"megatron": {"seed": 2**32}}, "megatron.seed"),  # numpy RandomState takes 0 .. 2**32 - 1
    ({"megatron": {"train_iters": 5, "train_samples": 40}}, "train_iters or train_samples"),
    ({"megatron": {"dataloader_type": "external"}}, "megatron.dataloader_type"),
    ({"batch": {"loader": "deepspeed"}}, "batch.loader"),
    ({"batch": {"loader": "accelerate", "max_tokens": 4096}}, "max_tokens"),  # accelerate's token batches: not simulated
    ({"megatron": {"data_path": []}}, "megatron.data_path"),
    ({"megatron": {"data_path": ["0.3", "a", "b", "c"]}}, "megatron.data_path"),  # weights for some prefixes only
    ({"megatron": {"data_path": ["0", "a", "1", "b"]}}, "megatron.data_path"),  # BlendedDataset asserts weights > 0
    ({"megatron": {"data_path": "0.3 a 0.7 b"}}, "megatron.data_path"),  # the words as a list, as the run split them
    ({"megatron": {"mid_level_dataset_surplus": -0.1}}, "megatron.mid_level_dataset_surplus"),
    # --rampup-batch-size START INCR SAMPLES: three numbers above 0, and only with train_samples (Megatron
    # asserts "expected no batch-size rampup for iteration-based training")
    ({"megatron": {"rampup_batch_size": [4, 4]}}, "megatron.rampup_batch_size"),
    ({"megatron": {"rampup_batch_size": [4, 0, 60]}}, "megatron.rampup_batch_size"),
    ({"megatron": {"rampup_batch_size": [4, 4, 60], "train_iters": 10}}, "iteration-based training"),
])
def test_bad_values_name_the_key(raw, key):
    with pytest.raises(ConfigError, match=key.replace(".", "\\.")):
        config_from_dict(raw)


def test_an_unset_rampup_keeps_a_set_megatron_sections_hash():
    # rampup_batch_size came after [megatron]: a config that sets other [megatron] keys keeps its hash
    cfg = config_from_dict({"megatron": {"seq_length": 2048, "train_iters": 10}})
    # implementation came later still
    assert cfg.hash() == _hash_without_new_keys(cfg, ("rampup_batch_size", "implementation"))
