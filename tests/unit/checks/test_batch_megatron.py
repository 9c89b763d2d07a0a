"""batch.* over Megatron .bin/.idx pairs: Megatron's loader has no torch micro-batches of rows (GPTDataset
cuts fixed-length samples across documents; MegatronPretrainingSampler hands out whole global batches),
so a tail or wraparound simulated with torch's samplers over the documents would be a false alarm."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from hostilegen import megatron_pair  # noqa: E402

import datacheck  # noqa: E402

BATCH_IDS = {"batch.no_batches", "batch.singleton_tail", "batch.small_tail", "batch.wraparound",
             "batch.no_supervised_tokens"}


def _audit(tmp_path, batch):
    # 9 documents, batch_size 4 on 1 rank: torch's BatchSampler would leave a 1-row tail
    megatron_pair(tmp_path / "d", [[1, 2, 3, 4]] * 9)
    rep = datacheck.audit([str(tmp_path / "d")], config={"batch": batch})
    return ({f.check for f in rep.findings if f.check.startswith("batch.")},
            {s["check"]: s["reason"] for s in rep.skipped if s["check"].startswith("batch.")})


def test_megatron_pairs_skip_the_torch_batch_checks(tmp_path):
    found, skipped = _audit(tmp_path, {"batch_size": 4})
    assert found == set() and set(skipped) == BATCH_IDS
    assert all("Megatron's loader" in r for r in skipped.values())


def test_loader_torch_keeps_them(tmp_path):
    found, skipped = _audit(tmp_path, {"batch_size": 4, "loader": "torch"})
    assert found == {"batch.singleton_tail"}  # 9 rows in batches of 4: a 1-row tail
    assert not any("Megatron" in r for r in skipped.values())
