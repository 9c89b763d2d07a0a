"""A real Hugging Face ``Trainer`` CPU run whose LAST epoch shrank (a dataset with ``set_epoch``, which
accelerate's ``DataLoaderShard.set_epoch`` calls, holds 20 rows in epoch 0 and 14 in epoch 1), per-device
batch 4, ``gradient_accumulation_steps`` 3, with ``DatacheckCallback``'s ledger.

What the Trainer does (transformers 5's ``_run_epoch``): ``steps_in_epoch`` (5 micro-batches) and the
update count (2: of 3 micro-batches, then the remainder 2) are fixed by the first epoch; an update is taken
after micro-batch ``k`` of an epoch when ``(k + 1) % 3 == 0`` or ``k + 1 == 5``. The shrunk epoch yields 4
micro-batches: micro-batches 0-2 take an update, micro-batch 3 is trained (forward and backward) with no
update after it, and no epoch follows to take it: its rows never reach the weights.

Before, the ledger recorded that micro-batch as trained at the last step (step 3, which the Trainer never
took) and ``order verify`` planned epoch 1 over the first epoch's 20 rows (6 of them, rows 14..19, flagged
never seen; the epoch's steps flagged divergent). Now an ``#untrained`` line says it, the reader keeps it out
of the step's batches, and ``order verify`` plans each epoch with its own size, names the untrained rows in
a note and finds nothing on this correct run.

Every expected row and step comes from that arithmetic and the sampler's order (``torch.randperm(n)`` of a
generator seeded ``seed + epoch``: accelerate's ``SeedableRandomSampler``), checked against the
``state.global_step`` of every forward, never read back from datacheck."""
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
pytestmark = pytest.mark.slow  # a Trainer run

from datacheck.io.ledger import read_ledger  # noqa: E402
from datacheck.torch.hf import DatacheckCallback  # noqa: E402

LENGTHS, B, GA, SEED = (20, 14), 4, 3, 7


def _batches(epoch: int) -> list[list[int]]:
    order = torch.randperm(LENGTHS[epoch], generator=torch.Generator().manual_seed(SEED + epoch)).tolist()
    return [order[i:i + B] for i in range(0, len(order), B)]


def _trained() -> list[tuple[int, int, int, list[int], bool]]:
    """(global_step while trained, micro-batch in its update, epoch, rows, an update was taken after it) of
    every micro-batch the Trainer trains: the first epoch fixes the updates (``ceil(5 / 3)``: sizes 3, 2);
    an update follows micro-batch ``k`` when ``(k + 1) % GA == 0`` or ``k + 1`` is the first epoch's count;
    a micro-batch with no update after it in its epoch waits for the next update taken (none here)."""
    first = len(_batches(0))
    sizes = [GA] * (math.ceil(first / GA) - 1) + [first % GA or GA]
    out, g, carried = [], 0, 0
    for e in range(len(LENGTHS)):
        mbs, k = _batches(e), 0
        for size in sizes:
            take = mbs[k:k + size]
            if not take:
                break
            synced = (k + len(take)) % GA == 0 or k + len(take) == first
            out += [(g, carried + m, e, rows, synced) for m, rows in enumerate(take)]
            k += len(take)
            g, carried = (g + 1, 0) if synced else (g, carried + len(take))
    return out


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf_shrunk_last")
    n = max(LENGTHS)
    g = torch.Generator().manual_seed(3)
    x = torch.randn(n, 2, generator=g)
    y = (x.sum(1) > 0).long()
    seen: list[list] = []
    held: list = []

    torch.manual_seed(0)
    args = transformers.TrainingArguments(str(root / "out"), use_cpu=True, per_device_train_batch_size=B,
                                          gradient_accumulation_steps=GA, num_train_epochs=len(LENGTHS),
                                          logging_steps=1, seed=SEED, report_to=[], save_strategy="no",
                                          disable_tqdm=True, remove_unused_columns=False)
    trainer = transformers.Trainer(model=linear_model(torch, lambda ids: seen.append([held[0].state.global_step, ids])),
                                   args=args, train_dataset=row_dataset(torch, x, y, sizes=LENGTHS),
                                   callbacks=[DatacheckCallback()])
    held.append(trainer)
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.train()
    return root, seen, trainer.state.global_step


def test_the_trainer_leaves_the_shrunk_last_epochs_last_micro_batch_without_an_update(run):
    _root, seen, steps = run
    want = _trained()
    assert seen == [[g, rows] for g, _m, _e, rows, _s in want]
    assert [len(_batches(e)) for e in range(2)] == [5, 4]
    assert [(g, m, e, s) for g, m, e, _r, s in want] == [(0, 0, 0, True), (0, 1, 0, True), (0, 2, 0, True),
                                                        (1, 0, 0, True), (1, 1, 0, True),
                                                        (2, 0, 1, True), (2, 1, 1, True), (2, 2, 1, True),
                                                        (3, 0, 1, False)]
    assert steps == 3  # no update 3 was taken: micro-batch 3 of epoch 1 never reached the weights


def test_the_ledger_records_only_micro_batches_an_update_took(run):
    root, _seen, _steps = run
    led = read_ledger(root / "out")
    got = sorted((b.step, b.micro_batch, b.epoch, list(b.indices)) for per in led.batches[0].values() for b in per)
    assert got == sorted((g, m, e, rows) for g, m, e, rows, s in _trained() if s)
    untrained = sorted((b.step, b.micro_batch, b.epoch, list(b.indices)) for per in led.untrained[0].values()
                       for b in per)
    assert untrained == [(3, 0, 1, _batches(1)[3])]
    assert led.steps == [0, 1, 2] and led.partial == {}


def test_order_verify_plans_each_epoch_with_its_size_and_names_the_untrained_rows(run):
    """Epoch 1 is planned over its own 14 rows (before: over 20, rows 14..19 never seen and its first step
    divergent); its last micro-batch's 2 rows are not trained and said so, not flagged."""
    root, _seen, _steps = run
    rc, out, err = cli("order", "verify", str(root / "out"), "--rows", str(max(LENGTHS)), "--format", "json")
    assert rc == 0, out + err
    res = json.loads(out)["result"]
    assert res["findings"] == [] and res["first_divergent_step"] is None
    assert res["plan"]["epoch_rows"] == {str(e): n for e, n in enumerate(LENGTHS)}
    last = _batches(1)[3]
    assert len(last) == LENGTHS[1] - 3 * B == 2
    assert res["untrained"] == {"count": len(last), "rows": sorted(last), "by_epoch": {"1": len(last)}, "steps": [3]}
    assert res["never_seen"]["count"] == 0 and res["never_seen"]["completed_epochs"] == [0, 1]
    assert res["seen_twice"]["count"] == 0
