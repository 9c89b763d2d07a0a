"""Real Hugging Face ``Trainer`` CPU runs over a dataset whose size changes between epochs (a callback sets it
at each epoch's begin, by the epoch the Trainer trains), per-device batch
4, ``gradient_accumulation_steps`` 2, a checkpoint at each epoch's end (``save_strategy="epoch"``), resumed
from the checkpoint of a shrunk epoch's end: a carry in flight (the shrunk epoch's last micro-batch was
trained with no update after it; its gradient waits for the next epoch's first update and is not in the
checkpoint).

What the resumed Trainer does (transformers 5's ``_init_training_state`` / ``_run_epoch``): the update count
per epoch ``ceil(5 / 2)`` = 3 and ``steps_in_epoch`` 5 come from its loader's length when ``train()``
begins (the dataset's first size, 20 rows); it resumes epoch ``global_step // 3`` after skipping its first
``(global_step % 3) x 2`` micro-batches, whatever epoch the run was really in:

- sizes 20, 12, 20 resumed at step 4 (the end of epoch 1, whose micro-batch 2 is in flight): epoch 1 after 2
  micro-batches, the one in flight trained again and carried into epoch 2's first update as in the
  uninterrupted run: every row is trained once an epoch;
- sizes 20, 12, 12, 20 resumed at step 5 (the end of epoch 2): epoch ``5 // 3`` = 1 after 4 micro-batches
  (all 3 of the shrunk epoch 1 skipped), then epoch 2 again from its start: its first 2 micro-batches (8 rows)
  are trained twice, a defect of the Trainer's arithmetic under changing sizes.

Before, the resumed ledger started the re-read epoch at the step that epoch first started at and recorded
the skipped batches again there: its ``#state`` line superseded steps trained before the checkpoint (epoch
1's and 2's records lost: ``order verify`` said their rows were never seen and missed the 8 rows trained
twice). Now the resume records from the restored step on what the Trainer trains, and ``order verify``
finds nothing on the first run and the rows trained twice (and the step where the order left the plan) on
the second.

Every expected step and row comes from that arithmetic and the sampler's order (``torch.randperm(n)`` of a
generator seeded ``seed + epoch``), checked against the ``state.global_step`` of every forward, never read
back from datacheck."""
from __future__ import annotations

import contextlib
import io
import json
import math
import warnings

import pytest
from hftiny import linear_model, row_dataset
from realruns import cli

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")
pytestmark = pytest.mark.slow  # Trainer runs

from datacheck.io.ledger import read_ledger  # noqa: E402
from datacheck.torch.hf import DatacheckCallback  # noqa: E402

B, GA, SEED = 4, 2, 11
GOOD, BAD = (20, 12, 20), (20, 12, 12, 20)


def _batches(lengths: tuple[int, ...], epoch: int, size: int | None = None) -> list[list[int]]:
    n = lengths[epoch] if size is None else size
    order = torch.randperm(n, generator=torch.Generator().manual_seed(SEED + epoch)).tolist()
    return [order[i:i + B] for i in range(0, len(order), B)]


def _simulate(lengths: tuple[int, ...], resume_at: int = 0, *,
              resumed_size: int | None = None) -> list[tuple[int, int, list[int]]]:
    """(global_step while trained, epoch, rows) of every micro-batch the Trainer trains in one ``train()``
    from ``global_step`` ``resume_at``: ``steps_in_epoch`` F = the first size's micro-batches, 3 updates an
    epoch (the last on F % GA); it resumes epoch ``resume_at // 3`` after ``(resume_at % 3) x GA`` micro-batches;
    an update is taken after micro-batch ``k`` of an epoch when ``(k + 1) % GA == 0`` or ``k + 1 == F``
    (a micro-batch with none after it in its epoch goes into the next update taken). ``resumed_size``: the
    rows the resumed epoch's dataset holds (else its own size)."""
    first = len(_batches(lengths, 0))
    per_epoch = math.ceil(first / GA)
    sizes = [GA] * (per_epoch - 1) + [first % GA or GA]
    skip = (resume_at % per_epoch) * GA
    out, g = [], resume_at
    for e in range(resume_at // per_epoch, len(lengths)):
        k = skip if e == resume_at // per_epoch else 0
        mbs = _batches(lengths, e, resumed_size if resume_at and e == resume_at // per_epoch else None)
        for size in sizes[k // GA:]:
            take = mbs[k:k + size]
            for rows in take:
                out.append((g, e, rows))
                k += 1
                if k % GA == 0 or k == first:
                    g += 1
    return out


def _ledger_want(lengths: tuple[int, ...], resume_at: int) -> list[tuple[int, int, list[int]]]:
    """What trained the final weights, by update: the first run's micro-batches of steps before the checkpoint,
    then the resumed run's (the first run's micro-batch in flight at the checkpoint is in neither: its gradient
    was never in a checkpoint; the resumed run trains what it trains)."""
    return [x for x in _simulate(lengths) if x[0] < resume_at] + _simulate(lengths, resume_at)


def _run(root, lengths, resume_at, via_set_epoch=False):
    n = max(lengths)
    x = torch.randn(n, 2, generator=torch.Generator().manual_seed(3))
    y = (x.sum(1) > 0).long()
    seen: list[list] = []

    # with set_epoch: accelerate's DataLoaderShard.set_epoch calls it (not on a skipping loader)
    data = row_dataset(torch, x, y, n=lengths[0], sizes=lengths if via_set_epoch else None)

    class Resize(transformers.TrainerCallback):
        """Each epoch's size, by the epoch the Trainer trains: it resumes epoch global_step // 3 (its
        _init_training_state, 3 updates an epoch), the first size's loader fixing that count. (A dataset's own
        set_epoch is not used: accelerate's DataLoaderShard.set_epoch does not call it on the loader
        skip_first_batches builds, whose SkipBatchSampler holds a sampler with set_epoch.)"""

        def on_train_begin(self, args, state, control, **kw):
            self.epoch = state.global_step // math.ceil(math.ceil(lengths[0] / B) / GA) - 1

        def on_epoch_begin(self, args, state, control, **kw):
            self.epoch += 1
            data.n = lengths[self.epoch]

    def trainer():
        held = []

        torch.manual_seed(0)
        args = transformers.TrainingArguments(str(root / "out"), use_cpu=True, per_device_train_batch_size=B,
                                              gradient_accumulation_steps=GA, num_train_epochs=len(lengths),
                                              logging_steps=1, seed=SEED, report_to=[], save_strategy="epoch",
                                              disable_tqdm=True, remove_unused_columns=False)
        data.n = lengths[0]  # a new process's dataset: its first size when train() begins
        t = transformers.Trainer(model=linear_model(torch, lambda ids: seen.append([held[0].state.global_step, ids])),
                                 args=args, train_dataset=data, callbacks=([] if via_set_epoch else [Resize()]) + [DatacheckCallback()])
        held.append(t)
        return t

    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer().train()
        first = list(seen)
        seen.clear()
        trainer().train(resume_from_checkpoint=str(root / "out" / f"checkpoint-{resume_at}"))
    return first, list(seen)


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf_resume_carry_good")
    return root, _run(root, GOOD, 4)


@pytest.fixture(scope="module")
def bad(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf_resume_carry_bad")
    return root, _run(root, BAD, 5)


def _recorded(root) -> list[tuple[int, int, list[int]]]:
    led = read_ledger(root / "out")
    return sorted((b.step, b.epoch, list(b.indices)) for per in led.batches[0].values() for b in per)


def test_the_trainer_resumes_as_its_arithmetic_says(good, bad):
    for (_root, (first, resumed)), lengths, at in ((good, GOOD, 4), (bad, BAD, 5)):
        assert first == [[g, rows] for g, _e, rows in _simulate(lengths)]
        assert resumed == [[g, rows] for g, _e, rows in _simulate(lengths, at)]
    # the checkpoint of a shrunk epoch's end holds a micro-batch in flight (trained at that step, no update yet)
    assert [(e, rows) for g, e, rows in _simulate(GOOD) if g == 4][0] == (1, _batches(GOOD, 1)[2])
    assert [(e, rows) for g, e, rows in _simulate(BAD) if g == 5][0] == (2, _batches(BAD, 2)[2])
    # the good resume trains epoch 1's micro-batch in flight again, then as the first run did
    assert _simulate(GOOD, 4) == [x for x in _simulate(GOOD) if x[0] >= 4]
    # the bad one trains epoch 2's first two micro-batches again (at step 5, not 4)
    assert [(g, e) for g, e, _r in _simulate(BAD, 5)][:2] == [(5, 2), (5, 2)]


def test_the_resumed_ledger_records_what_trained_the_weights(good, bad):
    for (root, _seen), lengths, at in ((good, GOOD, 4), (bad, BAD, 5)):
        assert _recorded(root) == sorted((g, e, rows) for g, e, rows in _ledger_want(lengths, at))
    assert _ledger_want(GOOD, 4) == _simulate(GOOD)  # the good resume's ledger is the uninterrupted run's


def test_order_verify_finds_nothing_on_a_resume_with_a_carry_in_flight(good):
    root, _seen = good
    rc, out, err = cli("order", "verify", str(root / "out"), "--rows", str(max(GOOD)), "--format", "json")
    assert rc == 0, out + err
    res = json.loads(out)["result"]
    assert res["findings"] == [] and res["first_divergent_step"] is None
    assert res["seen_twice"]["count"] == 0 and res["never_seen"]["count"] == 0
    assert res["never_seen"]["completed_epochs"] == [0, 1, 2]
    # every row of each epoch trained exactly once across the resume
    for e, n in enumerate(GOOD):
        rows = sorted(i for _g, ep, r in _ledger_want(GOOD, 4) if ep == e for i in r)
        assert rows == list(range(n))


def test_order_verify_finds_the_rows_a_resume_trained_twice(bad):
    root, _seen = bad
    rc, out, err = cli("order", "verify", str(root / "out"), "--rows", str(max(BAD)), "--format", "json")
    assert rc == 1, out + err
    res = json.loads(out)["result"]
    twice = sorted(_batches(BAD, 2)[0] + _batches(BAD, 2)[1])
    visits = {}
    for _g, e, r in _ledger_want(BAD, 5):
        for i in r:
            visits[(e, i)] = visits.get((e, i), 0) + 1
    assert sorted(i for (e, i), c in visits.items() if c == 2) == twice and max(visits.values()) == 2
    assert res["seen_twice"]["by_epoch"] == {"2": len(twice)} and res["seen_twice"]["count"] == 8
    assert res["never_seen"]["count"] == 0
    # step 5 (epoch 2's in-epoch step 1 in the ledger) trained the rows of the epoch's step 0 again
    assert res["first_divergent_step"] == 5 and res["divergence"]["order"] == "restart_of_epoch"


@pytest.fixture(scope="module")
def quirk(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf_resume_set_epoch")
    return root, _run(root, GOOD, 4, via_set_epoch=True)


def test_a_resumed_epoch_over_the_wrong_dataset_size_is_found(quirk):
    """The dataset resizes itself in ``set_epoch``: accelerate's ``DataLoaderShard.set_epoch`` calls it only when
    the batch sampler holds no sampler with ``set_epoch`` two levels down, which the ``SkipBatchSampler`` of the
    resumed loader does: the resumed epoch 1 iterates the dataset's first size (20 rows, ``randperm(20)``
    seeded ``SEED + 1``) and trains its micro-batches 2..4. The ledger records those rows (and the 20 rows its
    ``#state`` line saw); ``order verify`` finds epoch 1's rows trained twice and never, and the step where the
    order left the plan, with a note naming the size."""
    root, (first, resumed) = quirk
    assert first == [[g, rows] for g, _e, rows in _simulate(GOOD)]
    want = _simulate(GOOD, 4, resumed_size=GOOD[0])
    assert resumed == [[g, rows] for g, _e, rows in want]
    assert _recorded(root) == sorted([x for x in _simulate(GOOD) if x[0] < 4] + want)
    visits: dict[int, int] = {}
    for _g, e, r in [x for x in _simulate(GOOD) if x[0] < 4] + want:
        for i in r if e == 1 else ():
            visits[i] = visits.get(i, 0) + 1
    twice = sorted(i for i, c in visits.items() if c >= 2)
    never = sorted(i for i in range(GOOD[1]) if i not in visits)
    assert twice and never
    rc, out, err = cli("order", "verify", str(root / "out"), "--rows", str(max(GOOD)), "--format", "json")
    assert rc == 1, out + err
    res = json.loads(out)["result"]
    assert res["seen_twice"]["by_epoch"] == {"1": len(twice)} and res["seen_twice"]["rows"] == twice
    assert res["never_seen"]["by_epoch"] == {"1": len(never)} and res["never_seen"]["rows"] == never
    assert res["first_divergent_step"] == 4
    assert any("over a dataset of 20 rows, where the epoch began with 12" in n for n in res["notes"])
