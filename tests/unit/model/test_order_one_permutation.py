"""The simulated epoch order (datacheck/model/order.py ``epoch_order``) is drawn from one permutation an
epoch and sliced per rank: equal to torch's own ``DistributedSampler`` + ``BatchSampler`` built for each
rank (``_sampler_indices``, the samplers themselves), and its cost does not grow with the ranks: a
config of 1,048,576 ranks or 1,000 epochs of batch size 1 (a new user's trial: over 10 minutes, and
52 s) is worked out in seconds. The zero-supervision micro-batches equal a plain-Python sum per
micro-batch."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from datacheck.checks.batch import zero_micro_batches  # noqa: E402
from datacheck.model.config import BatchSection  # noqa: E402
from datacheck.model.order import _sampler_indices, epoch_order  # noqa: E402


def _torch_samplers(n: int, batch: BatchSection, epoch: int) -> list[list[list[int]]]:
    """Every rank's micro-batches, one torch DistributedSampler + BatchSampler per rank."""
    data = torch.utils.data
    out = []
    for r in range(batch.world_size):
        s = data.DistributedSampler(range(n), num_replicas=batch.world_size, rank=r, shuffle=batch.shuffle,
                                    seed=batch.seed, drop_last=False)
        s.set_epoch(epoch)
        out.append(list(data.BatchSampler(s, batch_size=int(batch.batch_size), drop_last=batch.drop_last)))
    return out


@settings(max_examples=examples(300), deadline=None)
@given(n=st.integers(1, 300), ws=st.sampled_from([1, 2, 3, 4, 7, 8, 64, 500]), bs=st.integers(1, 70),
       seed=st.integers(0, 2**31), shuffle=st.booleans(), drop_last=st.booleans(), epoch=st.integers(0, 6))
def test_one_permutation_equals_torch_samplers_rank_by_rank(n, ws, bs, seed, shuffle, drop_last, epoch):
    batch = BatchSection(batch_size=bs, world_size=ws, seed=seed, shuffle=shuffle, drop_last=drop_last)
    order = epoch_order(n, batch, epoch)
    got = [[mb.tolist() for mb in mbs] for mbs in order.ranks]
    assert got == _torch_samplers(n, batch, epoch)
    assert got[0] == _sampler_indices(torch, n, batch, 0, epoch)
    assert order.per_rank == -(-n // ws) and order.repeats == -(-n // ws) * ws - n


@settings(max_examples=examples(300), deadline=None)
@given(n=st.integers(1, 80), ws=st.integers(1, 5), bs=st.integers(1, 7), ga=st.integers(1, 3),
       epoch=st.integers(0, 3), drop_last=st.booleans(), data=st.data())
def test_zero_supervision_micro_batches_equal_a_plain_sum(n, ws, bs, ga, epoch, drop_last, data):
    sup = np.array(data.draw(st.lists(st.sampled_from([0, 0, 1, 5]), min_size=n, max_size=n)))
    order = epoch_order(n, BatchSection(batch_size=bs, world_size=ws, grad_accum=ga, drop_last=drop_last), epoch)
    want = [(epoch, m // ga, r, m % ga) for r, mbs in enumerate(order.ranks) for m, idx in enumerate(mbs)
            if len(idx) and sum(int(sup[i]) for i in idx) == 0]
    assert zero_micro_batches(order, sup) == want


def test_a_million_ranks_is_one_permutation(tmp_path):
    """1,048,576 ranks over 10,000 rows (each rank 1 row, 1,038,576 of them repeated): every rank's one
    micro-batch is the permutation's entry at the rank, cycled, as DistributedSampler pads it."""
    n, ws = 10_000, 1 << 20
    batch = BatchSection(batch_size=8, world_size=ws, seed=3)
    order = epoch_order(n, batch, 0)
    g = torch.Generator()
    g.manual_seed(3)
    perm = torch.randperm(n, generator=g).tolist()
    assert len(order.ranks) == ws and order.repeats == ws - n
    for r in (0, 1, n - 1, n, n + 5, ws - 1):
        assert [mb.tolist() for mb in order.ranks[r]] == [[perm[r % n]]]
