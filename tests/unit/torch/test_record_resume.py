"""The resume chain through ``record_batches``: a run trains epoch 0 and the first ``R`` micro-batches of
epoch 1, stops, and a resumed run trains the rest of epoch 1 from a loader that skips those ``R``
(accelerate's ``skip_first_batches``, or a skipping batch sampler with plain torch), then epoch 2 from the
full loader. The full loader is recorded either once before the epoch loop (created before the skip
loader's recorder, so the ledger advances under it) or anew in each epoch; both must record every step once,
with the rows the loop trained, and ``order verify`` must pass. A recorder given a ``start_step`` that
another recorder recorded past since it was created is refused; a resume that re-trains the skipped
batches is flagged by ``order verify``.

Every expected step and row comes from the sampler arithmetic: ``DistributedSampler(num_replicas=1,
shuffle=True, seed=S)`` orders epoch ``e`` as ``torch.randperm(n)`` of a generator seeded ``S + e``; micro-batch
``k`` of epoch ``e`` holds that order's rows ``k*B .. k*B + B - 1`` and belongs to optimizer step
``e * ceil(N / B / GA) + k // GA``."""
from __future__ import annotations

import gc
import gzip
import itertools
import json
import math
from pathlib import Path

import pytest
from conftest import run_cli

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader, DistributedSampler  # noqa: E402

from datacheck.io.ledger import rank_file, read_ledger  # noqa: E402
from datacheck.model.errors import UsageError  # noqa: E402
from datacheck.resume.order import verify_order  # noqa: E402
from datacheck.torch import flush_ledgers, record_batches  # noqa: E402

N, B, SEED, EPOCHS, R = 40, 4, 3, 3, 4  # 10 micro-batches per epoch; the first run stops after R of epoch 1
START = 1  # the epoch the resumed run starts in


def _order(epoch: int) -> list[int]:
    return torch.randperm(N, generator=torch.Generator().manual_seed(SEED + epoch)).tolist()


def _want(ga: int) -> dict[tuple[int, int], tuple[int, list[int]]]:
    """(step, micro-batch) -> (epoch, rows) of a correct run of EPOCHS epochs."""
    spe = math.ceil(N / B / ga)
    out = {}
    for e in range(EPOCHS):
        order = _order(e)
        for k in range(N // B):
            out[(e * spe + k // ga, k % ga)] = (e, order[k * B:(k + 1) * B])
    return out


def _raw(folder: Path) -> list[tuple[int, int, int, list[int]]]:
    """Every micro-batch line of rank 0's ledger file as written (superseded lines included)."""
    with gzip.open(rank_file(folder, 0), "rt") as f:
        return [(int(p[0]), int(p[2]), int(p[3]), [int(x) for x in p[4:]])
                for p in (line.rstrip("\n").split("\t") for line in f if not line.startswith("#"))]


def _recorded(folder: Path) -> dict[tuple[int, int], tuple[int, list[int]]]:
    led = read_ledger(folder)
    return {(b.step, b.micro_batch): (b.epoch, list(b.indices)) for s in led.batches[0] for b in led.batches[0][s]}


def _assert_true_ledger(folder: Path, ga: int) -> None:
    raw = _raw(folder)
    keys = [(s, m) for s, m, _e, _rows in raw]
    assert len(keys) == len(set(keys)), "a (step, micro-batch) written twice"
    assert {(s, m): (e, rows) for s, m, e, rows in raw} == _want(ga)
    assert _recorded(folder) == _want(ga)
    v = verify_order(read_ledger(folder), None, N)
    assert v.findings == [] and v.first_divergent_step is None, v.findings
    res = run_cli("order", "verify", str(folder), "--rows", str(N))
    assert res.returncode == 0, res.stdout + res.stderr


def _sampler() -> DistributedSampler:
    return DistributedSampler(list(range(N)), num_replicas=1, rank=0, shuffle=True, seed=SEED)


class SkipFirst:
    """A batch sampler yielding ``inner``'s batches after its first ``k`` (a plain-torch resume)."""

    def __init__(self, inner, k: int):
        self.inner, self.k, self.sampler = inner, k, inner.sampler

    def __iter__(self):
        return itertools.islice(iter(self.inner), self.k, None)

    def __len__(self) -> int:
        return len(self.inner) - self.k


def _trained(received: list[tuple[int, list[int]]]) -> None:
    """The loops' batches (epoch, rows) over both runs are the sampler's: each epoch's order once, in B-row
    batches (what makes the run a correct one, independently of the ledger)."""
    assert received == [(e, _order(e)[k * B:(k + 1) * B]) for e in range(EPOCHS) for k in range(N // B)]


def _first_run(folder: Path, loader, ga: int, set_epoch, received) -> None:
    """Epoch 0 whole, then R micro-batches of epoch 1 (R a multiple of ga: whole steps), then the run stops."""
    rec = record_batches(loader, folder, grad_accum=ga)
    for epoch in range(START + 1):
        set_epoch(epoch)
        for k, batch in enumerate(rec):
            received.append((epoch, batch.tolist()))
            if epoch == START and k == R - 1:
                break
    del rec, batch
    gc.collect()
    flush_ledgers()
    assert max(s for s, _m, _e, _r in _raw(folder)) == math.ceil(N / B / ga) + R // ga - 1


@pytest.fixture
def accelerate_state():
    state = pytest.importorskip("accelerate.state")
    yield
    state.AcceleratorState._reset_state(True)


def _accelerate(folder: Path, ga: int, mode: str, *, skip: bool = True, start_step=None) -> list:
    """Both runs, returning the (epoch, rows) of every batch the loops received."""
    from accelerate import Accelerator
    acc = Accelerator(cpu=True)

    def prepared():
        return acc.prepare(DataLoader(list(range(N)), batch_size=B, sampler=_sampler()))

    first, received = prepared(), []
    _first_run(folder, first, ga, first.set_epoch, received)
    train_dl = prepared()  # the resumed process
    resume_step, spe = R, math.ceil(N / B / ga)
    full = record_batches(train_dl, folder, grad_accum=ga, start_step=start_step) if mode == "once" else None
    for epoch in range(START, EPOCHS):
        train_dl.set_epoch(epoch)
        if resume_step and epoch == START and skip:
            active = record_batches(acc.skip_first_batches(train_dl, resume_step), folder, grad_accum=ga,
                                    start_step=epoch * spe + resume_step // ga)
        else:
            active = full if full is not None else record_batches(train_dl, folder, grad_accum=ga)
        active.set_epoch(epoch)
        received.extend((epoch, b.tolist()) for b in active)
    return received


@pytest.mark.parametrize("ga", [1, 2])
@pytest.mark.parametrize("mode", ["once", "per_epoch"])
def test_accelerate_resume_records_every_step_once(tmp_path, accelerate_state, mode, ga):
    """The full loader's recorder, created before the skip_first_batches one ("once"), continues after the
    steps that recorder wrote (it was at the resumed step when created): epoch 2 is steps 2 x spe.. ."""
    _trained(_accelerate(tmp_path, ga, mode))
    _assert_true_ledger(tmp_path, ga)


@pytest.mark.parametrize("ga", [1, 2])
@pytest.mark.parametrize("mode", ["once", "per_epoch"])
def test_plain_torch_resume_records_every_step_once(tmp_path, mode, ga):
    sampler, received = _sampler(), []
    _first_run(tmp_path, DataLoader(list(range(N)), batch_size=B, sampler=sampler), ga, sampler.set_epoch, received)
    sampler = _sampler()  # the resumed process
    train_dl = DataLoader(list(range(N)), batch_size=B, sampler=sampler)
    spe = math.ceil(N / B / ga)
    full = record_batches(train_dl, tmp_path, grad_accum=ga) if mode == "once" else None
    for epoch in range(START, EPOCHS):
        sampler.set_epoch(epoch)
        if epoch == START:
            skipping = DataLoader(list(range(N)), batch_sampler=SkipFirst(train_dl.batch_sampler, R))
            active = record_batches(skipping, tmp_path, grad_accum=ga, start_step=epoch * spe + R // ga)
        else:
            active = full if full is not None else record_batches(train_dl, tmp_path, grad_accum=ga)
        received.extend((epoch, b.tolist()) for b in active)
    _trained(received)
    _assert_true_ledger(tmp_path, ga)


def test_a_recorder_created_with_a_start_step_the_ledger_has_passed_is_refused(tmp_path, accelerate_state):
    """The resumed step given to the full loader's recorder too (created before the loop): by epoch 2 the
    skip_first_batches recorder has recorded steps 14..19, so start_step=14 would record epoch 2 over them:
    refused, naming the fix, and nothing of epoch 2 is written."""
    with pytest.raises(UsageError, match="leave start_step out") as err:
        _accelerate(tmp_path, 1, "once", start_step=N // B + R)
    assert "start_step=14" in str(err.value) and "steps 14..19" in str(err.value)
    gc.collect()
    flush_ledgers()
    raw = _raw(tmp_path)
    assert [e for _s, _m, e, _r in raw].count(2) == 0
    with gzip.open(rank_file(tmp_path, 0), "rt") as f:
        states = [json.loads(line.split("\t", 1)[1]) for line in f if line.startswith("#state")]
    assert [st["epoch"] for st in states] == [0, 1, 1]


def test_a_resume_that_retrains_the_skipped_batches_is_flagged(tmp_path, accelerate_state):
    """The resumed run iterates the full loader in epoch 1 (no skip_first_batches): epoch 1's first R batches
    are trained twice; the ledger says so and order verify fails on it."""
    _accelerate(tmp_path, 1, "per_epoch", skip=False)
    epoch1 = [i for _s, _m, e, rows in _raw(tmp_path) if e == START for i in rows]
    assert len(epoch1) == N + R * B  # the R re-trained batches' rows are in the ledger twice
    res = run_cli("order", "verify", str(tmp_path), "--rows", str(N))
    assert res.returncode == 1, res.stdout
    again = sorted(_order(START)[:R * B])  # the rows of the re-trained batches
    assert f"error: order.seen_twice: {R * B} row(s)" in res.stdout
    assert f"first ids {again[:10]}" in res.stdout


@pytest.mark.parametrize("mode", ["once", "per_epoch"])
def test_recorders_of_a_sequential_loader_number_the_epochs(tmp_path, mode):
    """DataLoader(shuffle=False) (a SequentialSampler: no epoch attribute, rows in order every epoch), recorded
    once or anew each epoch: epoch e is steps 10e..10e+9 with rows 4k..4k+3, recorded as epoch e; the
    ``#state`` says the order is not shuffled, so order verify plans it in order and passes."""
    dl = DataLoader(list(range(N)), batch_size=B)
    once = record_batches(dl, tmp_path)
    for _epoch in range(EPOCHS):
        for _batch in (once if mode == "once" else record_batches(dl, tmp_path)):
            pass
    per = N // B
    assert _raw(tmp_path) == [(e * per + k, 0, e, list(range(k * B, (k + 1) * B)))
                              for e in range(EPOCHS) for k in range(per)]
    assert [st.get("shuffle") for st in read_ledger(tmp_path).states[0]] == [False] * EPOCHS
    v = verify_order(read_ledger(tmp_path), None, N)
    assert v.findings == [] and v.first_divergent_step is None, v.findings


def test_two_recorders_created_on_an_empty_folder_write_one_header_and_one_numbering(tmp_path):
    """Both recorders created before either writes; the second iterated first: the file has one header line,
    and the first one's epoch follows at step 10 as epoch 1 (not step 0 again)."""
    dl = DataLoader(list(range(N)), batch_size=B)
    first, second = record_batches(dl, tmp_path), record_batches(dl, tmp_path)
    for loader in (second, first):
        for _batch in loader:
            pass
    with gzip.open(rank_file(tmp_path, 0), "rt") as f:
        assert sum(line.startswith("#datacheck-ledger") for line in f) == 1
    per = N // B
    assert _raw(tmp_path) == [(e * per + k, 0, e, list(range(k * B, (k + 1) * B))) for e in range(2) for k in range(per)]


def _islice_resume(folder: Path, ga: int, workers: int, **kw) -> list[tuple[int, list[int]]]:
    """Both runs of a plain-torch loop whose resume skips the batches trained before by
    ``itertools.islice`` over the recording loader (recorded once, before the epoch loop, with the restored
    ``start_step``); returns the (epoch, rows) the loops trained on."""
    sampler, received = _sampler(), []
    _first_run(folder, DataLoader(list(range(N)), batch_size=B, sampler=sampler), ga, sampler.set_epoch, received)
    sampler = _sampler()  # the resumed process
    spe = math.ceil(N / B / ga)
    loader = record_batches(DataLoader(list(range(N)), batch_size=B, sampler=sampler, num_workers=workers), folder,
                            grad_accum=ga, start_step=START * spe + R // ga, **kw)
    for epoch in range(START, EPOCHS):
        sampler.set_epoch(epoch)
        batches = itertools.islice(loader, R, None) if epoch == START else loader
        received.extend((epoch, b.tolist()) for b in batches)
    return received


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("ga", [1, 2])
def test_an_islice_resume_with_resume_skips_records_every_step_once(tmp_path, ga, workers):
    """resume_skips=True: the R batches islice passes over (yielded again with the rows the ledger holds for
    epoch 1's first R micro-batches) are not recorded; epoch 1 goes on at the restored step with its batch R,
    and the ledger is the true one: every step once, every row once an epoch."""
    _trained(_islice_resume(tmp_path, ga, workers, resume_skips=True))
    _assert_true_ledger(tmp_path, ga)


def test_an_islice_resume_without_resume_skips_is_warned_and_flagged(tmp_path):
    """Left at its default, the recorder takes every batch yielded as trained (a loop that re-trains them is
    recorded truly): the R skipped batches are recorded, a warning names resume_skips, and order verify
    flags their rows as seen twice."""
    with pytest.warns(UserWarning, match="pass resume_skips=True"):
        _islice_resume(tmp_path, 1, 0)
    res = run_cli("order", "verify", str(tmp_path), "--rows", str(N))
    assert res.returncode == 1 and f"error: order.seen_twice: {R * B} row(s)" in res.stdout, res.stdout
