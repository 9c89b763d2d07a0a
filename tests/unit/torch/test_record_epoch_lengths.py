"""Epochs of different lengths through ``record_batches``: a dataset whose size changes between epochs
(``drop_last=False``: each epoch's last optimizer step takes the remainder micro-batches), batched by a
sampler with a length or without one (an epoch's length is then only known when it runs out).

The training loop here counts its own optimizer steps the way the Hugging Face Trainer and a plain loop
do: one step per ``GA`` micro-batches and one on an epoch's remainder, counted over the run. Every
expected step and row comes from that count and from the sampler arithmetic (epoch ``e`` holds rows
``0 .. SIZES[e]-1`` in the order ``torch.randperm(SIZES[e])`` of a generator seeded ``SEED + e``, cut
into batches of ``B``), never from datacheck.
"""
from __future__ import annotations

import gc
import math

import pytest

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader  # noqa: E402

from datacheck.io.ledger import read_ledger  # noqa: E402
from datacheck.torch import flush_ledgers, record_batches  # noqa: E402
from datacheck.torch.record import RecordingBatchSampler  # noqa: E402

SIZES, B, GA, SEED = (18, 26, 10), 4, 2, 5  # 5, 7 and 3 micro-batches: 3, 4 and 2 optimizer steps


def _batches(epoch: int) -> list[list[int]]:
    order = torch.randperm(SIZES[epoch], generator=torch.Generator().manual_seed(SEED + epoch)).tolist()
    return [order[i:i + B] for i in range(0, len(order), B)]


def _want(epochs: int = len(SIZES)) -> dict[tuple[int, int], tuple[int, list[int]]]:
    """(step, micro-batch) -> (epoch, rows): the loop's own step count over the run."""
    out, step = {}, 0
    for e in range(epochs):
        mbs = _batches(e)
        for k, rows in enumerate(mbs):
            out[(step + k // GA, k % GA)] = (e, rows)
        step += math.ceil(len(mbs) / GA)
    return out


def _recorded(folder) -> dict[tuple[int, int], tuple[int, list[int]]]:
    led = read_ledger(folder)
    return {(b.step, b.micro_batch): (b.epoch, list(b.indices)) for per in led.batches[0].values() for b in per}


class Growing:
    """A batch sampler over a dataset whose size is ``SIZES[epoch]``: the epoch's shuffled rows in
    batches of ``B`` (the last one short); it has no ``__len__`` (SizedGrowing has)."""

    def __init__(self):
        self.epoch, self.batch_size, self.drop_last = 0, B, False

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self):
        return iter(_batches(self.epoch))


class SizedGrowing(Growing):
    def __len__(self) -> int:
        return math.ceil(SIZES[self.epoch] / B)


class Rows(torch.utils.data.Dataset):
    def __getitem__(self, i: int) -> int:
        return i

    def __len__(self) -> int:
        return max(SIZES)


@pytest.mark.parametrize("sized", [True, False], ids=["sized", "unsized"])
@pytest.mark.parametrize("mode", ["once", "per_epoch"])
def test_each_epoch_continues_after_the_steps_the_one_before_took(tmp_path, sized, mode):
    """A recorder over the whole run or a new one each epoch: epoch e starts where epoch e-1's steps
    (its remainder step included) ended, also when the sampler has no length."""
    bs = SizedGrowing() if sized else Growing()
    once = record_batches(DataLoader(Rows(), batch_sampler=bs), tmp_path, grad_accum=GA)
    trained, step = {}, 0
    for e in range(len(SIZES)):
        bs.set_epoch(e)
        loader = once if mode == "once" else record_batches(DataLoader(Rows(), batch_sampler=bs), tmp_path,
                                                             grad_accum=GA)
        k = -1
        for k, batch in enumerate(loader):
            trained[(step + k // GA, k % GA)] = (e, batch.tolist())
        step += math.ceil((k + 1) / GA)
    assert trained == _want()
    assert _recorded(tmp_path) == _want()
    assert read_ledger(tmp_path).partial == {}


def test_epoch_aligned_starts_each_epoch_after_the_steps_observed(tmp_path):
    """``epoch_aligned`` (the Hugging Face callback's numbering) over a loader whose length changes: epoch e
    starts after the steps epochs 0..e-1 took (3, then 7), not at ``e x ceil(len / GA)`` of its own length."""
    bs = SizedGrowing()
    rec = RecordingBatchSampler(bs, tmp_path, grad_accum=GA, epoch_aligned=True)
    for e in range(len(SIZES)):
        rec.set_epoch(e)
        for _batch in rec:
            pass
    assert _recorded(tmp_path) == _want()


def test_epoch_aligned_resume_restarts_its_epoch_where_the_ledger_started_it(tmp_path):
    """The Trainer's resume inside epoch 1: a new recorder re-reads epoch 1 from its start (the skipped
    batches recorded again under the same steps) and starts it at step 3, where the first run's ``#state``
    of epoch 1 put it (epoch 0 took 3 steps), then epoch 2 at step 7."""
    bs = SizedGrowing()
    first = RecordingBatchSampler(bs, tmp_path, grad_accum=GA, epoch_aligned=True)
    for e in range(2):
        first.set_epoch(e)
        for k, _batch in enumerate(first):
            if e == 1 and k == 2 * GA - 1:  # two steps of epoch 1 trained, then the run stops
                break
    del first
    gc.collect()
    flush_ledgers()
    resumed = RecordingBatchSampler(SizedGrowing(), tmp_path, grad_accum=GA, epoch_aligned=True)
    for e in range(1, len(SIZES)):
        resumed.set_epoch(e)
        for _batch in resumed:
            pass
    assert _recorded(tmp_path) == _want()


def test_a_run_stopped_before_its_epochs_first_batch_resumes_at_that_epochs_start(tmp_path):
    """Epoch 0 whole (5 micro-batches, 3 steps), then epoch 1's iteration starts (DataLoader workers fetch
    ahead, so its ``#state`` line is written) and the run stops before the loop receives a batch: a new
    recorder continues at step 3 with epoch 1, not in epoch 0's last step (whose one micro-batch is its
    remainder, not a step cut short)."""
    bs = Growing()
    loader = record_batches(DataLoader(Rows(), batch_sampler=bs, num_workers=1), tmp_path, grad_accum=GA)
    for _batch in loader:
        pass
    bs.set_epoch(1)
    it = iter(loader)  # the workers are handed indices at once: epoch 1's #state is written
    del it, loader
    gc.collect()
    flush_ledgers()
    bs = Growing()
    bs.set_epoch(1)
    for _batch in record_batches(DataLoader(Rows(), batch_sampler=bs), tmp_path, grad_accum=GA):
        pass
    assert _recorded(tmp_path) == _want(2)


def test_epoch_aligned_records_a_shrunk_epochs_untaken_micro_batch_in_the_next_epochs_first_step(tmp_path):
    """The Hugging Face Trainer's loop, driven by hand as ``DatacheckCallback`` reports it: each epoch runs the
    first epoch's updates (5 micro-batches: updates of 2, 2 and 1) over what its loader yields, syncing at
    ``(k + 1) % GA == 0`` or ``k + 1 == 5``, and zeroes the gradients only after an update. Epoch 1 (10 rows,
    3 micro-batches) trains its third with no update after it: that micro-batch's gradient goes into the next
    update taken, epoch 2's first (step 4), recorded there as micro-batch 0 before epoch 2's two."""
    lengths = (18, 10, 18)

    def batches(e: int) -> list[list[int]]:
        order = torch.randperm(lengths[e], generator=torch.Generator().manual_seed(SEED + e)).tolist()
        return [order[i:i + B] for i in range(0, len(order), B)]

    class Shrinking:
        epoch, batch_size, drop_last = 0, B, False

        def set_epoch(self, epoch: int) -> None:
            self.epoch = epoch

        def __iter__(self):
            return iter(batches(self.epoch))

        def __len__(self) -> int:
            return len(batches(self.epoch))

    first = len(batches(0))
    sizes = [GA] * (math.ceil(first / GA) - 1) + [first % GA or GA]
    rec = RecordingBatchSampler(Shrinking(), tmp_path, grad_accum=GA, epoch_aligned=True, hold=True)
    want, g, pending = {}, 0, []  # pending: (epoch, rows) trained since the last update
    for e in range(len(lengths)):
        rec.epoch_start = g  # on_epoch_begin
        rec.set_epoch(e)
        it, k = iter(rec), -1
        for size in sizes:
            take = [b for _, b in zip(range(size), it)]
            if not take:
                break
            for _b in take:
                k += 1
                if k % GA == 0:
                    trained = 0  # on_step_begin
                pending.append((e, batches(e)[k]))
                if (k + 1) % GA == 0 or k + 1 == first:
                    rec.step_taken(g, trained + 1)  # on_step_end
                    want.update({(g, m): x for m, x in enumerate(pending)})
                    g, pending = g + 1, []
                else:
                    trained += 1
                    rec.commit_through(g, trained)  # on_substep_end
        for _rest in it:  # the loader runs out (DataLoader's iterator is dropped; the ledger's #end follows)
            pass
    flush_ledgers()
    assert [len(batches(e)) for e in range(3)] == [5, 3, 5]
    assert [x for (s, _m), x in sorted(want.items()) if s == 4] == [(1, batches(1)[2]), (2, batches(2)[0]),
                                                                    (2, batches(2)[1])]
    assert _recorded(tmp_path) == want
