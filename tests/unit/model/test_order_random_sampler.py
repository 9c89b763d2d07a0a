"""``[batch] sampler = "random"``: a single-process ``DataLoader(shuffle=True, generator=...)``'s order,
held to real DataLoaders iterated here (3 epochs, ``drop_last`` both ways, ``num_workers`` 0 and 1,
``persistent_workers``), and the settings it refuses."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader  # noqa: E402

from datacheck.model.config import config_from_dict  # noqa: E402
from datacheck.model.errors import ConfigError, UsageError  # noqa: E402
from datacheck.model.order import epoch_order  # noqa: E402

EPOCHS = 3


def _real_epochs(n: int, bs: int, seed: int, drop_last: bool, workers: int = 0, persistent: bool = False) -> list[list[list[int]]]:
    """The batches (lists of dataset indices) each epoch of a real DataLoader yields, one generator for the run."""
    loader = DataLoader(list(range(n)), batch_size=bs, shuffle=True, drop_last=drop_last, num_workers=workers,
                        persistent_workers=persistent, generator=torch.Generator().manual_seed(seed))
    return [[b.tolist() for b in loader] for _ in range(EPOCHS)]


def _batch(**kw):
    return config_from_dict({"batch": {"sampler": "random", "epochs": EPOCHS, **kw}}).batch


@pytest.mark.parametrize("n,bs,drop_last", [(50, 8, False), (50, 8, True), (48, 8, False), (48, 8, True), (7, 16, False)])
def test_each_epoch_is_the_real_loaders(n, bs, drop_last):
    want = _real_epochs(n, bs, 11, drop_last)
    b = _batch(batch_size=bs, seed=11, drop_last=drop_last)
    got = [[mb.tolist() for mb in epoch_order(n, b, e).ranks[0]] for e in range(EPOCHS)]
    assert got == want
    # asked out of order (the replay restarts from the seed): the same batches
    assert [mb.tolist() for mb in epoch_order(n, b, 1).ranks[0]] == want[1]
    assert [mb.tolist() for mb in epoch_order(n, b, 0).ranks[0]] == want[0]


def test_later_epochs_are_not_distributed_samplers_seed_plus_epoch():
    """The default plan (DistributedSampler, seed + epoch) is another order than the RandomSampler loop's:
    every epoch of the real loop differs from it (the reason the setting exists)."""
    want = _real_epochs(40, 4, 5, False)
    dist = config_from_dict({"batch": {"batch_size": 4, "seed": 5}}).batch
    assert all([mb.tolist() for mb in epoch_order(40, dist, e).ranks[0]] != want[e] for e in range(EPOCHS))


def test_one_worker_draws_as_the_main_process():
    want = _real_epochs(30, 4, 3, False, workers=1)
    b = _batch(batch_size=4, seed=3)
    assert [[mb.tolist() for mb in epoch_order(30, b, e).ranks[0]] for e in range(EPOCHS)] == want


def test_persistent_workers_draw_one_base_seed():
    want = _real_epochs(30, 4, 3, True, workers=1, persistent=True)
    b = _batch(batch_size=4, seed=3, drop_last=True, persistent_workers=True)
    assert [[mb.tolist() for mb in epoch_order(30, b, e).ranks[0]] for e in range(EPOCHS)] == want
    plain = _batch(batch_size=4, seed=3, drop_last=True)
    assert [mb.tolist() for mb in epoch_order(30, plain, 1).ranks[0]] != want[1]


def test_steps_group_grad_accum_micro_batches():
    want = _real_epochs(50, 8, 2, False)[2]
    o = epoch_order(50, _batch(batch_size=8, seed=2, grad_accum=3), 2)
    assert o.steps == 3 and o.per_rank == 50 and o.repeats == 0
    assert [[m.tolist() for _, _, m in o.step(s)] for s in range(3)] == [want[0:3], want[3:6], want[6:7]]


@pytest.mark.parametrize("kw,words", [
    ({"world_size": 2}, "world_size = 2"),
    ({"shuffle": False}, "SequentialSampler"),
    ({"max_tokens": 64}, "max_tokens"),
    ({"loader": "accelerate"}, "loader = \"accelerate\""),
    ({"loader": "megatron"}, "loader = \"megatron\""),
])
def test_settings_it_cannot_have_are_refused(kw, words):
    with pytest.raises(ConfigError, match="sampler = \"random\"") as exc:
        _batch(batch_size=4, **kw)
    assert words in str(exc.value)


def test_a_copied_section_with_ranks_is_refused_when_planned():
    """A section built past the config's check (model_copy, as order verify's other world sizes are)."""
    b = _batch(batch_size=4).model_copy(update={"world_size": 2})
    with pytest.raises(UsageError, match="world_size = 2"):
        epoch_order(10, b, 0)


def test_default_leaves_the_config_hash_alone():
    plain = config_from_dict({"batch": {"batch_size": 4}})
    named = config_from_dict({"batch": {"batch_size": 4, "sampler": "distributed", "persistent_workers": False}})
    other = config_from_dict({"batch": {"batch_size": 4, "sampler": "random"}})
    assert plain.hash() == named.hash() != other.hash()
