"""BatchGuard pickles: a DataLoader whose workers start with ``spawn`` or ``forkserver`` (the default
on macOS and Windows) sends its collate function to each worker by pickle."""
from __future__ import annotations

import pickle

import pytest

torch = pytest.importorskip("torch")

from datacheck.model.errors import BatchValidationError  # noqa: E402
from datacheck.torch import BatchGuard  # noqa: E402


def test_a_guard_survives_pickling_and_still_checks():
    guard = BatchGuard(facts={"tokens": {"vocab_size": 10}})
    copy = pickle.loads(pickle.dumps(guard))
    assert copy.torch is torch
    ok = [{"input_ids": torch.tensor([1, 2, 3])}, {"input_ids": torch.tensor([4, 5, 6])}]
    assert copy(ok)["input_ids"].tolist() == [[1, 2, 3], [4, 5, 6]]
    bad = [{"input_ids": torch.tensor([1, 2, 3])}, {"input_ids": torch.tensor([4, 10, 6])}]
    with pytest.raises(BatchValidationError, match="tokens.out_of_vocab"):
        copy(bad)
    assert (copy.batches, copy.failed) == (2, 1)
