"""``[batch] loader = "accelerate"``: the order of a DataLoader passed to ``accelerator.prepare``, held to
accelerate's own ``BatchSamplerShard`` (the port, over every small shape) and to the batches accelerate's
prepared loader of each process yields (``prepare_data_loader``, the function ``accelerator.prepare``
calls), with an uneven last batch (``even_batches`` padding), ``drop_last``, ``even_batches = false`` and
``split_batches``."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("accelerate")
from acceleratehelp import prepared, reference_shards  # noqa: E402
from torch.utils.data import BatchSampler, SequentialSampler  # noqa: E402

from datacheck.model.config import BatchSection  # noqa: E402
from datacheck.model.order import accelerate_shards, epoch_order  # noqa: E402


@pytest.fixture
def accelerate_state():
    state = pytest.importorskip("accelerate.state")
    yield
    state.PartialState._reset_state()


@pytest.mark.parametrize("processes", [1, 2, 3, 4])
@pytest.mark.parametrize("split", [False, True])
def test_the_port_is_accelerates_batch_sampler_shard(processes, split):
    """Every (rows 0..29, batch 1..6, drop_last, even_batches) of ``processes`` processes: the batches of each
    process are those accelerate's BatchSamplerShard yields over the same batch sampler."""
    from accelerate.data_loader import BatchSamplerShard
    cases = 0
    for n in range(30):
        for bs in (1, 2, 3, 4, 6):
            if split and bs % processes:
                continue  # accelerate refuses a batch its processes cannot split evenly
            for drop_last in (False, True):
                for even in (False, True):
                    sampler = BatchSampler(SequentialSampler(range(n)), bs, drop_last)
                    for p in range(processes):
                        want = [list(b) for b in BatchSamplerShard(sampler, processes, p, split_batches=split,
                                                                   even_batches=even)]
                        got = accelerate_shards(list(sampler), processes, p, batch_size=bs, drop_last=drop_last,
                                                even_batches=even, split_batches=split)
                        assert got == want, (n, bs, drop_last, even, p)
                        cases += 1
    assert cases > 100


SHAPES = [  # rows, processes, batch (per process), drop_last, even_batches, split_batches
    (50, 2, 4, False, True, False),   # 13 batches: the 14th of the last round is made of the epoch's first rows
    (64, 2, 4, False, True, False),   # 16 batches: nothing padded
    (50, 3, 4, False, True, False),   # a short last batch filled up, and a whole batch of first rows
    (50, 2, 4, True, True, False),    # the short last batch and its round dropped
    (50, 2, 4, False, False, False),  # even_batches false: process 0 gets one batch more, the last one short
    (50, 2, 4, False, True, True),    # split_batches: slices of 8-row batches, the short one completed
    (7, 4, 2, False, True, False),    # fewer rows than one round: the first rows cycled
]


@pytest.mark.parametrize("n,processes,bs,drop_last,even,split", SHAPES)
def test_epoch_order_is_what_each_prepared_loader_yields(accelerate_state, n, processes, bs, drop_last, even, split):
    """``epoch_order`` under loader accelerate, epochs 0 and 1 (seed 3): process ``p``'s micro-batches are
    the batches of accelerate's prepared loader of process ``p``, and of BatchSamplerShard over the epoch's
    permutation; with ``even_batches`` the rows trained twice per epoch are the padding's."""
    batch = BatchSection(batch_size=bs, world_size=processes, grad_accum=2, drop_last=drop_last, seed=3,
                         loader="accelerate", even_batches=even, split_batches=split)
    loaders = [prepared(n, processes, p, bs, 3, drop_last=drop_last, even_batches=even, split_batches=split)
               for p in range(processes)]
    for epoch in range(2):
        ref = reference_shards(n, processes, bs, 3, epoch, drop_last=drop_last, even_batches=even,
                               split_batches=split)
        order = epoch_order(n, batch, epoch)
        for p in range(processes):
            got = [mb.tolist() for mb in order.ranks[p]]
            assert got == ref[p] == [b.tolist() for b in loaders[p]], (epoch, p)
        loaded = sum(len(mb) for shard in ref for mb in shard)
        distinct = len({i for shard in ref for mb in shard for i in mb})
        assert order.repeats == loaded - distinct
        assert order.steps == -(-max(len(s) for s in ref) // 2)


def test_the_torch_order_is_unchanged_by_the_accelerate_keys():
    """loader torch (and auto): DistributedSampler deals rows to ranks, even_batches and split_batches unread."""
    plain = epoch_order(50, BatchSection(batch_size=4, world_size=2, seed=3), 0)
    keyed = epoch_order(50, BatchSection(batch_size=4, world_size=2, seed=3, even_batches=False, split_batches=True), 0)
    perm = torch.randperm(50, generator=torch.Generator().manual_seed(3)).tolist()
    perm += perm[:50 % 2]
    for r in range(2):
        mine = perm[r::2]
        want = [mine[i:i + 4] for i in range(0, len(mine), 4)]
        assert [mb.tolist() for mb in plain.ranks[r]] == [mb.tolist() for mb in keyed.ranks[r]] == want
