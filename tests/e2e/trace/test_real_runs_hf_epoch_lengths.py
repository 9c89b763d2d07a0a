"""A real Hugging Face ``Trainer`` CPU run over a dataset whose length changes between epochs (a callback
sets it at ``on_epoch_begin``: 20, 28, 12, then 20 rows), per-device batch 4, ``gradient_accumulation_steps`` 2,
with ``DatacheckCallback``'s ledger; traced back to the rows of a step in the grown and the shrunk epoch.

What the Trainer does (transformers 5's ``_inner_training_loop`` / ``_run_epoch``): ``steps_in_epoch`` and
``num_update_steps_per_epoch`` are computed once, from the first epoch's loader (5 micro-batches: 3 updates
of 2, 2 and the remainder 1), and every epoch runs those updates over whatever its loader yields:

- the grown epoch (7 micro-batches) takes 3 updates, the last on micro-batch 4 alone; micro-batches 5 and 6
  are fetched, never trained;
- the shrunk epoch (3 micro-batches) takes one update on micro-batches 0-1; micro-batch 2 is trained with no
  update after it (its gradient is not synchronised: ``(step + 1) % 2`` and ``step + 1 == 5`` both fail);
  ``model.zero_grad()`` runs only after an update (never at an epoch's start), so its gradient goes into the
  next epoch's first update with that epoch's micro-batches 0-1 (step 7 trains 3 micro-batches: every
  forward made while ``global_step`` is g goes into update g);
- each epoch starts at the ``global_step`` the one before ended at, not at ``epoch x ceil(its length / 2)``.

The ledger used to number epoch 2 by its own length (start ``2 x ceil(3 / 2)`` = 4, where the Trainer was at
6: its ``#state`` line then superseded epoch 1's steps 4 and 5) and to record micro-batch 5 of epoch 1 as
trained at step 5. The Trainer's log cannot tell any of this: its epoch fractions are counted from the
first epoch's length (``epoch + (step + 1) / 5``), so the simulated plan cannot place a changed epoch; the
ledger can.

Every expected row and step comes from that arithmetic and the sampler's order (``torch.randperm(n)`` of a
generator seeded ``seed + epoch``: accelerate's ``SeedableRandomSampler``), checked against the
``state.global_step`` of every forward, never read back from datacheck."""
from __future__ import annotations

import contextlib
import gzip
import io
import json
import math
import shutil
import warnings

import pytest
from hftiny import linear_model, row_dataset
from realruns import cli, trace_json, write_nan_feature_rows

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")
pytestmark = pytest.mark.slow  # a Trainer run

from datacheck.io.ledger import read_ledger  # noqa: E402
from datacheck.torch.hf import DatacheckCallback  # noqa: E402

LENGTHS, B, GA, SEED = (20, 28, 12, 20), 4, 2, 5
SIZES = (10, 10, 8)  # the shards of the 28 rows
BAD = 26  # a row only the grown epoch holds
COLUMNS = '[columns]\nfeatures = ["x1", "x2"]\nlabel = "label"\n'


def _batches(epoch: int) -> list[list[int]]:
    order = torch.randperm(LENGTHS[epoch], generator=torch.Generator().manual_seed(SEED + epoch)).tolist()
    return [order[i:i + B] for i in range(0, len(order), B)]


def _trained() -> list[tuple[int, int, int, list[int], bool]]:
    """(global_step while trained, micro-batch in its update, epoch, rows, the update was taken) of every
    micro-batch the Trainer trains: the first epoch's count fixes each epoch's updates and their sizes; the
    gradients are zeroed only after an update, so a micro-batch trained with no update after it in its epoch
    goes into the next update taken (the next epoch's first), counted first among its micro-batches."""
    first = len(_batches(0))
    updates = math.ceil(first / GA)
    sizes = [GA] * (updates - 1) + [first % GA or GA]
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


def _update_rows(step: int) -> list[int]:
    """The rows whose gradients went into update ``step``: every micro-batch trained while ``global_step``
    was ``step`` (none is zeroed before the update), in training order."""
    return [i for g, _m, _e, rows, _s in _trained() if g == step for i in rows]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf_epoch_lengths")
    rows = write_nan_feature_rows(torch, root, BAD, SIZES)
    (root / "cols.toml").write_text(COLUMNS)
    x = torch.tensor([[r["x1"], r["x2"]] for r in rows])
    y = torch.tensor([r["label"] for r in rows])
    seen: list[list] = []
    held: list = []

    data = row_dataset(torch, x, y, n=LENGTHS[0])

    class Resize(transformers.TrainerCallback):
        # by the epochs begun: state.epoch is counted from the first epoch's length (2.4 after the shrunk one)
        begun = 0

        def on_epoch_begin(self, args, state, control, **kw):
            data.n = LENGTHS[self.begun]
            self.begun += 1

    torch.manual_seed(0)
    args = transformers.TrainingArguments(str(root / "out"), use_cpu=True, per_device_train_batch_size=B,
                                          gradient_accumulation_steps=GA, num_train_epochs=len(LENGTHS),
                                          logging_steps=1, seed=SEED, report_to=[], save_strategy="no",
                                          disable_tqdm=True, remove_unused_columns=False)
    trainer = transformers.Trainer(model=linear_model(torch, lambda ids: seen.append([held[0].state.global_step, ids])),
                                   args=args, train_dataset=data,
                                   callbacks=[Resize(), DatacheckCallback()])
    held.append(trainer)
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.train()
    return root, seen


def test_the_trainer_trains_each_epoch_by_its_first_epochs_count(run):
    _root, seen = run
    want = _trained()
    assert seen == [[g, rows] for g, _m, _e, rows, _s in want]
    assert [len(_batches(e)) for e in range(4)] == [5, 7, 3, 5]
    assert [(g, e) for g, m, e, _r, _s in want if m == 0] == [(0, 0), (1, 0), (2, 0), (3, 1), (4, 1), (5, 1),
                                                              (6, 2), (7, 2), (8, 3), (9, 3)]
    # the shrunk epoch's last micro-batch and the next epoch's first two are trained at global_step 7
    assert [(m, e, rows) for g, m, e, rows, _s in want if g == 7] == [(0, 2, _batches(2)[2]), (1, 3, _batches(3)[0]),
                                                                     (2, 3, _batches(3)[1])]
    assert not any(rows == _batches(1)[5] for *_x, rows, _s in want)  # fetched, never trained


def test_the_ledger_records_what_the_trainer_trained_at_its_steps(run):
    root, _seen = run
    led = read_ledger(root / "out")
    got = sorted((b.step, b.micro_batch, b.epoch, list(b.indices)) for per in led.batches[0].values() for b in per)
    assert got == sorted((g, m, e, rows) for g, m, e, rows, _s in _trained())


@pytest.mark.parametrize("step", [5, 6, 7])
def test_trace_names_the_rows_of_a_step_in_a_changed_epoch(run, step):
    """Step 5: the grown epoch's last update, micro-batch 4 alone (the NaN row's); step 6: the shrunk epoch's
    first; step 7: the next epoch's first, which also takes the shrunk epoch's last micro-batch (its
    gradient was never zeroed). Each logged as ``global_step`` step + 1. Before, the next epoch's ``#state``
    line (start_step 7, before the shrunk epoch's ``#end`` next_step 8) superseded the carried micro-batch:
    trace named step 7's new-epoch rows only."""
    root, _seen = run
    rc, res, err = trace_json(str(root / "out"), "--data", str(root / "data"), "--config", str(root / "cols.toml"),
                              "--step", str(step + 1))
    assert rc == 1, err
    want = _update_rows(step)
    assert want == {5: _batches(1)[4], 6: _batches(2)[0] + _batches(2)[1],
                    7: _batches(2)[2] + _batches(3)[0] + _batches(3)[1]}[step]
    d = res["data"]
    assert d["source"]["kind"] == "ledger"
    assert d["rows"]["steps"][str(step + 1)] == {"0": want}
    assert d["rows"]["row_checks"] == ({str(BAD): ["finite.nan:x1"]} if BAD in want else {})
    if step == 5:
        assert res["first_bad"]["step"] == step + 1  # the NaN row's first (and only) update


def test_the_plan_of_the_data_is_refused_where_the_logged_epochs_contradict_it(run):
    """Without the ledger: the plan of the 28 rows has 7 micro-batches an epoch (4 updates); the Trainer logged
    epoch 0.4 after its first update (2 of the first epoch's 5 micro-batches), where 7 would give 2 / 7. No rows
    are named from the plan (exit 2, the step and both epochs said); before, it named the plan's rows."""
    root, _seen = run
    (root / "batch.toml").write_text(COLUMNS + f"[batch]\nbatch_size = {B}\ngrad_accum = {GA}\nseed = {SEED}\n"
                                     f"epochs = {len(LENGTHS)}\n")
    first = len(_batches(0))
    state = json.loads((root / "out" / "trainer_state.json").read_text())
    logged = {e["step"]: e["epoch"] for e in state["log_history"] if "loss" in e}
    assert logged[1] == pytest.approx(GA / first)  # the first epoch's count
    rc, res, err = trace_json(str(root / "out" / "trainer_state.json"), "--data", str(root / "data"), "--config",
                              str(root / "batch.toml"), "--step", "7")
    assert rc == 2 and not res, err
    assert "the log's epoch at log step 1 is 0.4" in err and f"{GA / math.ceil(sum(SIZES) / B):.4g}" in err
    assert "--ledger" in err


def test_order_verify_counts_the_carried_micro_batch_in_its_own_epoch(run):
    """``order verify`` puts each recorded micro-batch in the epoch that yielded it: the shrunk epoch's last,
    recorded at the next epoch's first step, counts in the shrunk epoch (before the carry was kept it was
    superseded; kept but placed by step, its rows read as seen twice in epoch 3), and is left out of that
    step's rows when they are compared with the plan. Each epoch is planned with the dataset size its
    ``#state`` line records (20, 28, 12, 20), the grown epoch cut at the Trainer's first-epoch count of 5
    micro-batches (its micro-batches 5 and 6, 8 rows, are never trained nor planned). Before, one plan of 28
    rows flagged every epoch's rows the dataset did not hold then as never seen (8, 8, 16, 8) and the first
    step of epoch 1 as divergent: a false alarm on a correct run."""
    root, _seen = run
    rc, out, err = cli("order", "verify", str(root / "out"), "--rows", str(sum(SIZES)), "--format", "json")
    assert rc == 0, out + err
    res = json.loads(out)["result"]
    assert res["findings"] == [] and res["first_divergent_step"] is None
    assert res["seen_twice"]["count"] == 0 and res["never_seen"]["count"] == 0
    assert res["never_seen"]["completed_epochs"] == list(range(len(LENGTHS)))
    trained = {e: {i for _g, _m, ep, rows, _s in _trained() if ep == e for i in rows} for e in range(len(LENGTHS))}
    assert [len(trained[e]) for e in range(4)] == [20, 20, 12, 20]
    assert res["plan"]["epoch_rows"] == {str(e): n for e, n in enumerate(LENGTHS)}
    first = len(_batches(0))
    assert res["plan"]["rows_past_trainer_epoch"] == {"1": sum(len(b) for b in _batches(1)[first:])} == {"1": 8}
    assert "untrained" not in res  # every trained micro-batch went into an update (the carried one into step 7)


def test_order_verify_still_finds_a_step_whose_rows_leave_the_plan(run, tmp_path):
    """The same ledger with step 8 (epoch 3's second update) given the rows of epoch 3's first micro-batches
    (a replay): rows trained twice in epoch 3 and a divergent step 8 (the epoch's step 0 again) are found,
    under the per-epoch plan."""
    root, _seen = run
    shutil.copytree(root / "out" / "data-indices", tmp_path / "data-indices")
    path = tmp_path / "data-indices" / "rank0.tsv.gz"
    lines = gzip.decompress(path.read_bytes()).decode().splitlines()
    e3 = _batches(3)
    fixed = []
    for line in lines:
        parts = line.split("\t")
        if not line.startswith("#") and parts[0] == "8":
            m = int(parts[2])
            parts = parts[:4] + [str(i) for i in e3[m]]
        fixed.append("\t".join(parts))
    path.write_bytes(gzip.compress(("\n".join(fixed) + "\n").encode()))
    rc, out, err = cli("order", "verify", str(tmp_path), "--rows", str(sum(SIZES)), "--format", "json")
    res = json.loads(out)["result"]
    assert rc == 1, out + err
    assert res["first_divergent_step"] == 8 and res["divergence"]["order"] == "restart_of_epoch"
    twice = set(e3[0]) | set(e3[1])
    assert res["seen_twice"]["by_epoch"] == {"3": len(twice)}
    assert res["never_seen"]["by_epoch"] == {"3": len(set(e3[2]) | set(e3[3]))}
