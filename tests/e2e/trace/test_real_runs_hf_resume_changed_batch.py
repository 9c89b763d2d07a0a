"""Real Hugging Face ``Trainer`` CPU runs resumed with other batch settings than they began with: 50 rows,
``per_device_train_batch_size`` 4, ``gradient_accumulation_steps`` 2 (13 micro-batches, 7 updates an epoch),
trained to ``global_step`` 10 (epoch 1 after 3 updates), then resumed from ``checkpoint-10`` with
``per_device_train_batch_size`` 8 (7 micro-batches, 4 updates an epoch) or with ``gradient_accumulation_steps``
4 (13 micro-batches, 4 updates an epoch), to step 16. Two more: resumed from ``checkpoint-3`` with batch size 8
(global step 3 stays in epoch 0, but after 6 micro-batches of 8 rows where the run had trained 24 rows), and
from ``checkpoint-4`` with batch size 8 and ``gradient_accumulation_steps`` 1 (the same 8 rows a step, 7 steps
an epoch: the resume lands where the run was, and nothing is found).

What the resumed Trainer does (transformers' ``set_initial_training_values`` / ``_init_training_state`` /
``_run_epoch``, from its loader's length when ``train()`` begins): ``num_update_steps_per_epoch`` =
``ceil(len(loader) / grad_accum)`` = 4, so global step 10 is epoch ``10 // 4`` = 2 after ``(10 % 4) x
grad_accum`` skipped micro-batches: the rest of epoch 1 (26 rows) is never trained, nor epoch 2's first 32
rows; epoch 3 trains every row. Before, ``order verify`` planned every epoch with the first launch's batch
size 4 (it counted 28 rows never trained in epoch 2 and noted, for epochs 2 and 3, that "its loader yields
13 micro-batches ... micro-batches 7..12 (22 rows) are never trained", where the loader at batch size 8
yields 7 and epoch 3 trained all 50 rows); now each launch's epochs are planned with its own recorded
settings and its steps placed where the Trainer's arithmetic puts them.

Every expected row comes from what the runs trained: the row ids of each micro-batch its forward saw, with
the ``global_step`` and the epoch the loop itself reports (``state.epoch`` = ``epoch + (step + 1) /
steps_in_epoch`` after each update), never read back from datacheck; the Trainer's arithmetic (computed
here from the loader lengths) is checked against them."""
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

from datacheck.torch.hf import DatacheckCallback  # noqa: E402

N, B, GA, SEED = 50, 4, 2, 0


def _run(root, batch: int, accum: int, ckpt: int, steps: int) -> list[tuple[int, int, list[int]]]:
    """Train to step ``ckpt`` with (B, GA), resume from checkpoint-``ckpt`` with (batch, accum) to ``steps``:
    (global step while trained, epoch the loop reports, row ids) of every micro-batch whose update is in the
    final weights (the first launch's steps, then the resumed launch's)."""
    x = torch.randn(N, 2, generator=torch.Generator().manual_seed(3))
    y = (x.sum(1) > 0).long()
    data = row_dataset(torch, x, y)
    pending: list[tuple[int, list[int]]] = []
    trained: list[tuple[int, int, list[int]]] = []

    class Epochs(transformers.TrainerCallback):
        """Gives the micro-batches of each update the epoch the loop reports after it: state.epoch = epoch +
        (step + 1) / steps_in_epoch, in (epoch, epoch + 1]."""

        def on_step_end(self, args, state, control, **kw):
            e = math.ceil(state.epoch) - 1
            trained.extend((g, e, rows) for g, rows in pending)
            pending.clear()

    def launch(bs, ga, max_steps, resume=None):
        held = []
        torch.manual_seed(0)
        args = transformers.TrainingArguments(str(root / "out"), use_cpu=True, per_device_train_batch_size=bs,
                                              gradient_accumulation_steps=ga, max_steps=max_steps,
                                              num_train_epochs=3, save_steps=ckpt, logging_steps=1, seed=SEED,
                                              report_to=[], disable_tqdm=True, remove_unused_columns=False)
        t = transformers.Trainer(model=linear_model(torch, lambda ids: pending.append((held[0].state.global_step, ids))),
                                 args=args, train_dataset=data, callbacks=[Epochs(), DatacheckCallback()])
        held.append(t)
        t.train(resume_from_checkpoint=resume)
        assert not pending  # every micro-batch went into an update

    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        launch(B, GA, ckpt)
        assert max(g for g, _e, _r in trained) == ckpt - 1
        first = list(trained)
        trained.clear()
        launch(batch, accum, steps, str(root / "out" / f"checkpoint-{ckpt}"))
    return first + trained


CASES = {"batch_size_8": (8, GA, 10, 16), "grad_accum_4": (B, 4, 10, 16), "same_epoch": (8, GA, 3, 8),
         "same_global_batch": (8, 1, 4, 14)}


@pytest.fixture(scope="module", params=sorted(CASES))
def resumed(request, tmp_path_factory):
    batch, accum, ckpt, steps = CASES[request.param]
    root = tmp_path_factory.mktemp(f"hf_resume_{request.param}")
    return root, batch, accum, ckpt, _run(root, batch, accum, ckpt, steps)


def _arithmetic(batch: int, accum: int, ckpt: int) -> tuple[int, int, int]:
    """transformers' resume: (num_update_steps_per_epoch = ceil(len(loader) / grad_accum), the epoch global step
    ``ckpt`` re-reads = ckpt // it, the micro-batches it skips = (ckpt % it) x grad_accum)."""
    per_epoch = math.ceil(math.ceil(N / batch) / accum)
    return per_epoch, ckpt // per_epoch, (ckpt % per_epoch) * accum


def test_the_resumed_trainer_lands_as_its_arithmetic_says(resumed):
    _root, batch, accum, ckpt, trained = resumed
    _per, epoch, skip = _arithmetic(batch, accum, ckpt)
    resumed_part = [x for x in trained if x[0] >= ckpt]
    assert resumed_part[0][1] == epoch
    # the resumed epoch's micro-batches are its loader's from `skip` on: randperm(N) seeded SEED + epoch
    perm = torch.randperm(N, generator=torch.Generator().manual_seed(SEED + epoch)).tolist()
    want = [perm[i:i + batch] for i in range(0, N, batch)][skip:]
    assert [r for _g, e, r in resumed_part if e == epoch] == want


def _never(trained, epoch: int) -> int:
    return N - len({i for _g, e, rows in trained if e == epoch for i in rows})


def test_order_verify_counts_each_epoch_as_the_run_trained_it(resumed):
    root, batch, accum, ckpt, trained = resumed
    per_epoch, epoch, skip = _arithmetic(batch, accum, ckpt)
    epochs = sorted({e for _g, e, _r in trained})
    last = max(epochs)
    # the last epoch ran to its end in every case: each epoch is completed
    assert sum(1 for _g, e, _r in trained if e == last) == math.ceil(N / batch)
    want_never = {str(e): _never(trained, e) for e in epochs if _never(trained, e)}
    assert all(len(set(r)) == len(r) for r in ([i for _g, e, rows in trained if e == k for i in rows] for k in epochs))
    # where the run was at the checkpoint: the epoch in progress, the rows trained of it
    run_epoch = trained[ckpt_at(trained, ckpt) - 1][1]
    run_rows = sum(len(r) for g, e, r in trained if g < ckpt and e == run_epoch)
    if run_rows == N:  # the epoch ended at the checkpoint
        run_epoch, run_rows = run_epoch + 1, 0
    landed = (epoch, skip * batch)
    order = ("continuation" if landed == (run_epoch, run_rows) else "skip_ahead" if landed > (run_epoch, run_rows)
             else "rewind")
    rc, out, err = cli("order", "verify", str(root / "out"), "--rows", str(N), "--format", "json")
    res = json.loads(out)["result"]
    assert rc == (1 if want_never else 0), out + err
    assert res["never_seen"]["by_epoch"] == want_never
    assert res["never_seen"]["completed_epochs"] == epochs
    assert res["seen_twice"]["count"] == 0
    assert "rows_past_trainer_epoch" not in res["plan"]
    assert not [n for n in res["notes"] if "never trained, nor planned" in n]
    # the epochs the resumed launch began are planned with its settings
    begun = sorted({e for g, e, _r in trained if g >= ckpt} - {e for g, e, _r in trained if g < ckpt})
    assert res["plan"]["epoch_settings"] == {str(e): {"batch_size": batch, "grad_accum": accum, "world_size": 1}
                                             for e in begun}
    # the resume is placed where the Trainer put it, and judged against where the run was; each later epoch
    # begins as an epoch, not a resume
    segs = {s["start_step"]: s for s in res["segments"]}
    assert segs[ckpt]["kind"] == "resume" and segs[ckpt]["order"] == order
    assert segs[ckpt]["located"] == {"epoch": epoch, "step": ckpt % per_epoch, "rank": 0}
    for e in begun[1:] if epoch in begun else begun:
        e_start = min(g for g, ee, _r in trained if ee == e)
        assert segs[e_start]["kind"] == "epoch" and segs[e_start]["order"] == "continuation"
    assert [s["start_step"] for s in res["segments"] if s["kind"] == "resume"] == [ckpt]
    if order == "continuation":
        assert res["first_divergent_step"] is None and res["findings"] == []
    else:
        assert res["first_divergent_step"] == ckpt and res["divergence"]["order"] == order
        assert res["divergence"]["run_position"] == {"epoch": run_epoch, "rows_trained": run_rows}


def ckpt_at(trained, ckpt: int) -> int:
    """Index of the first micro-batch trained at or after global step ``ckpt``."""
    return next(i for i, (g, _e, _r) in enumerate(trained) if g >= ckpt)


def test_the_cases_cover_a_skip_across_epochs_within_one_and_none(resumed):
    _root, batch, accum, ckpt, trained = resumed
    want = {(8, GA, 10): {"1": 26, "2": 32}, (B, 4, 10): {"1": 26, "2": 32}, (8, GA, 3): {"0": 24}, (8, 1, 4): {}}
    assert {str(e): _never(trained, e) for e in sorted({e for _g, e, _r in trained}) if _never(trained, e)} == \
        want[(batch, accum, ckpt)]
