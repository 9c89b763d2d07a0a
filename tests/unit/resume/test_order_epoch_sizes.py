"""``order verify`` on real plain-torch runs over a dataset whose size changes between epochs (18, 26 and 10
rows), recorded by ``record_batches`` around a DataLoader built each epoch over a
``DistributedSampler(num_replicas=1, seed=SEED)`` (``set_epoch(e)``), batch 4, ``grad_accum`` 2: a clean run,
a crash and a right resume, a resume that restarts its epoch, and a batch sampler that records no dataset size.

Each epoch ``e`` yields ``torch.randperm(SIZES[e])`` of a generator seeded ``SEED + e`` in batches of 4 (the
last one short) and each epoch's last step takes the remainder micro-batches; expected rows and steps come
from that arithmetic, never from datacheck. Before, the plan took one size for every epoch (``--rows 26``):
epoch 0's and 2's rows past their size read as never seen and their steps as divergent."""
from __future__ import annotations

import math

import pytest
from conftest import run_cli

from datacheck.io.ledger import read_ledger
from datacheck.resume.order import verify_order

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader, DistributedSampler  # noqa: E402

from datacheck.torch import record_batches  # noqa: E402
from datacheck.torch.record import RecordingBatchSampler  # noqa: E402

SIZES, B, GA, SEED = (18, 26, 10), 4, 2, 5
N = max(SIZES)


class Rows(torch.utils.data.Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return i


def _batches(e: int) -> list[list[int]]:
    order = torch.randperm(SIZES[e], generator=torch.Generator().manual_seed(SEED + e)).tolist()
    return [order[i:i + B] for i in range(0, len(order), B)]


def _loader(e: int) -> DataLoader:
    s = DistributedSampler(Rows(SIZES[e]), num_replicas=1, rank=0, shuffle=True, seed=SEED)
    s.set_epoch(e)
    return DataLoader(Rows(SIZES[e]), batch_size=B, sampler=s)


def _steps_before(e: int) -> int:
    return sum(math.ceil(len(_batches(k)) / GA) for k in range(e))


def _train(folder, epochs=range(len(SIZES)), *, stop=None, resume=None, replay=False):
    """Train ``epochs`` (a new recorder each epoch); ``stop=(e, k)``: crash after micro-batch k of epoch e;
    ``resume=(e, k)``: epoch e starts at its micro-batch k (``replay``: from its first again, at the resumed step)."""
    for e in epochs:
        dl = _loader(e)
        start = None
        if resume is not None and resume[0] == e:
            start = _steps_before(e) + resume[1] // GA
        rec = record_batches(dl, folder, grad_accum=GA, start_step=start, resume_skips=not replay)
        for k, _batch in enumerate(rec):
            if resume is not None and resume[0] == e and k < resume[1] and not replay:
                continue  # the loop skips what was trained before the crash (itertools.islice)
            if stop is not None and (e, k) == stop:
                return
    return


def test_a_clean_run_over_changing_sizes_is_the_plan(tmp_path):
    _train(tmp_path)
    led = read_ledger(tmp_path)
    got = sorted((b.step, b.micro_batch, b.epoch, list(b.indices)) for per in led.batches[0].values() for b in per)
    assert got == sorted((_steps_before(e) + k // GA, k % GA, e, rows)
                         for e in range(3) for k, rows in enumerate(_batches(e)))
    v = verify_order(led, None, N)
    assert v.findings == [] and v.first_divergent_step is None
    assert v.plan["epoch_rows"] == {str(e): n for e, n in enumerate(SIZES)}
    assert v.never_seen["completed_epochs"] == [0, 1, 2] and v.never_seen["count"] == 0


def test_a_right_resume_over_changing_sizes_sees_every_row_once(tmp_path):
    _train(tmp_path, stop=(1, 3))                                   # epoch 1: micro-batches 0..3 received (steps 3, 4)
    _train(tmp_path, epochs=range(1, 3), resume=(1, 2))            # resumed at step 4 (epoch 1's micro-batch 2)
    v = verify_order(read_ledger(tmp_path), None, N)
    assert v.findings == [] and v.first_divergent_step is None
    assert v.seen_twice["count"] == 0 and v.never_seen["count"] == 0 and v.never_seen["completed_epochs"] == [0, 1, 2]


def test_a_resume_that_restarts_its_epoch_is_found_under_changing_sizes(tmp_path):
    _train(tmp_path, stop=(1, 4))                                   # epoch 1: micro-batches 0..3 (steps 3, 4)
    with pytest.warns(UserWarning, match="trained again"):
        _train(tmp_path, epochs=range(1, 3), resume=(1, 4), replay=True)  # epoch 1 from its start, at step 5
    v = verify_order(read_ledger(tmp_path), None, N)
    twice = sorted(i for rows in _batches(1)[:4] for i in rows)
    assert v.seen_twice["by_epoch"] == {"1": len(twice)} == {"1": 16}
    resumed = _steps_before(1) + 2
    assert v.first_divergent_step == resumed and v.divergence["order"] == "restart_of_epoch"
    assert v.never_seen["count"] == 0  # the replay went on to the epoch's end: every row of epoch 1 trained
    res = run_cli("order", "verify", str(tmp_path), "--rows", str(N))
    assert res.returncode == 1 and "order.seen_twice" in res.stdout


def test_a_resume_that_skips_batches_is_found_under_changing_sizes(tmp_path):
    """Resumed at step 6 (epoch 1's micro-batch 6, the loader skipping the first 6 as ``skip_first_batches``
    does) after steps 3 and 4: micro-batches 4 and 5 (step 5) are never trained; the steps after are where the
    plan puts them, so only the rows tell: never seen in epoch 1."""
    _train(tmp_path, stop=(1, 3))
    dl = _loader(1)
    skipping = DataLoader(dl.dataset, batch_sampler=list(dl.batch_sampler)[6:])
    for _b in record_batches(skipping, tmp_path, grad_accum=GA, start_step=_steps_before(1) + 3, epoch=1):
        pass
    _train(tmp_path, epochs=range(2, 3))
    v = verify_order(read_ledger(tmp_path), None, N)
    skipped = sorted(i for rows in _batches(1)[4:6] for i in rows)
    assert len(skipped) == 8 and v.never_seen["by_epoch"] == {"1": 8} and v.never_seen["rows"] == skipped
    assert v.seen_twice["count"] == 0 and [f.check for f in v.findings] == ["order.never_seen"]


class Growing:
    """A batch sampler over the epoch's rows that shows no sampler or dataset (no size recorded), only its
    ``seed`` and ``shuffle`` (recorded: the plan's)."""

    def __init__(self):
        self.epoch, self.batch_size, self.drop_last, self.seed, self.shuffle = 0, B, False, SEED, True

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __iter__(self):
        return iter(_batches(self.epoch))

    def __len__(self):
        return len(_batches(self.epoch))


def test_epochs_whose_size_is_not_recorded_are_said_not_judged(tmp_path):
    """Epochs 0 and 2 yield 5 and 3 micro-batches where a plan of 26 rows gives 7, and no size is recorded:
    not judged (a note names each), no false alarm; epoch 1, of the plan's size, is still judged."""
    g = Growing()
    rec = RecordingBatchSampler(g, tmp_path, grad_accum=GA)
    for e in range(3):
        rec.set_epoch(e)
        for _b in rec:
            pass
    v = verify_order(read_ledger(tmp_path), None, N)
    assert [len(_batches(e)) for e in range(3)] == [5, 7, 3] and math.ceil(N / B) == 7
    assert v.findings == [] and v.plan["epochs_not_judged"] == [0, 2]
    assert v.plan["epoch_rows"] == {"0": None, "1": N, "2": None}
    assert sum("not judged" in n for n in v.notes) == 2
    assert v.never_seen["completed_epochs"] == [1]
