"""DatacheckCallback without a Trainer run: the events called as the Trainer calls them, on a real
DataLoader (the recorder swapped in, the Trainer's step numbering over epochs with a remainder step),
the identity entry, the guard's failures turned into a stop or a warning, and the optional import."""
from __future__ import annotations

import json
import subprocess
import sys
import warnings
from types import SimpleNamespace

import pytest
from conftest import ROOT

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from torch.utils.data import DataLoader  # noqa: E402
from transformers import TrainerControl, TrainerState  # noqa: E402

from datacheck.io.ledger import read_ledger  # noqa: E402
from datacheck.model.errors import UsageError  # noqa: E402
from datacheck.torch import BatchGuard  # noqa: E402
from datacheck.torch.hf import DatacheckCallback  # noqa: E402
from datacheck.torch.record import RecordingBatchSampler  # noqa: E402


def _args(tmp_path, ga=2):
    return SimpleNamespace(output_dir=str(tmp_path / "out"), process_index=0, gradient_accumulation_steps=ga)


def _train_epoch(cb, loader, args, state, control, stop_after_steps=None):
    """Iterate ``loader`` once as the Trainer's epoch loop does: ``on_step_begin`` at a step's first
    micro-batch, ``on_substep_end`` after each other micro-batch, ``global_step += 1`` then
    ``on_step_end`` after a step's last (an epoch's last step takes the remainder); stop after
    ``stop_after_steps`` optimizer steps (max_steps). Returns the batches trained."""
    ga, n = args.gradient_accumulation_steps, len(loader)
    trained = []
    for k, batch in enumerate(loader):
        if k % ga == 0:
            cb.on_step_begin(args, state, control)
        trained.append(batch.tolist())
        if (k + 1) % ga == 0 or k + 1 == n:
            state.global_step += 1
            cb.on_step_end(args, state, control)
            if stop_after_steps is not None and state.global_step >= stop_after_steps:
                break
        else:
            cb.on_substep_end(args, state, control)
    return trained


def test_the_loader_is_recorded_in_the_trainers_step_numbering(tmp_path):
    loader = DataLoader(list(range(10)), batch_size=2)  # 5 micro-batches, grad_accum 2: 3 steps per epoch
    cb = DatacheckCallback({"index_hash": "ab" * 16, "config_hash": "cfg"})
    state, control = TrainerState(), TrainerControl()
    cb.on_train_begin(_args(tmp_path), state, control, train_dataloader=loader)
    assert isinstance(loader.batch_sampler, RecordingBatchSampler) and cb.recorder is loader.batch_sampler
    assert len(loader) == 5
    for _ in range(2):
        assert _train_epoch(cb, loader, _args(tmp_path), state, control) == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9]]
    led = read_ledger(tmp_path / "out")
    got = [(b.step, b.micro_batch, b.epoch) for r in [led.batches[0]] for s in sorted(r) for b in r[s]]
    assert got == [(0, 0, 0), (0, 1, 0), (1, 0, 0), (1, 1, 0), (2, 0, 0),
                   (3, 0, 1), (3, 1, 1), (4, 0, 1), (4, 1, 1), (5, 0, 1)]
    assert led.partial == {}
    assert state.log_history == [{"datacheck_index_hash": "ab" * 16, "datacheck_config_hash": "cfg", "step": 0}]
    cb.on_train_begin(_args(tmp_path), state, control, train_dataloader=loader)  # a second train(): one entry, one recorder
    assert len(state.log_history) == 1 and cb.recorder is loader.batch_sampler
    assert state.global_step == 6
    cb.on_train_end(_args(tmp_path), state, control)
    saved = json.loads((tmp_path / "out" / "trainer_state.json").read_text())
    assert saved["global_step"] == 6 and saved["log_history"][0]["datacheck_config_hash"] == "cfg"


def test_batches_fetched_ahead_by_workers_and_never_trained_are_not_recorded(tmp_path):
    # 12 micro-batches of 2 rows, grad_accum 2, 2 DataLoader workers prefetching 2 batches each; training
    # stops after 2 optimizer steps (max_steps): only the 4 micro-batches of steps 0 and 1 were trained
    loader = DataLoader(list(range(24)), batch_size=2, num_workers=2, prefetch_factor=2)
    cb = DatacheckCallback()
    state, control = TrainerState(), TrainerControl()
    cb.on_train_begin(_args(tmp_path), state, control, train_dataloader=loader)
    trained = _train_epoch(cb, loader, _args(tmp_path), state, control, stop_after_steps=2)
    cb.on_train_end(_args(tmp_path), state, control)
    assert trained == [[0, 1], [2, 3], [4, 5], [6, 7]] and cb.recorder.pending == 0
    led = read_ledger(tmp_path / "out")
    assert {s: [list(b.indices) for b in led.batches[0][s]] for s in led.steps} == {0: [[0, 1], [2, 3]],
                                                                                   1: [[4, 5], [6, 7]]}
    assert led.partial == {}


@pytest.mark.parametrize("action", ["stop", "warn"])
def test_a_guard_failure_stops_or_warns(tmp_path, action):
    x = torch.zeros(6, 2)
    x[3, 0] = float("nan")
    guard = BatchGuard(on_error="warn")
    loader = DataLoader([{"x": r} for r in x], batch_size=2, collate_fn=guard)
    cb = DatacheckCallback(guard=guard, on_guard_error=action)
    state, control = TrainerState(), TrainerControl()
    cb.on_train_begin(_args(tmp_path, ga=1), state, control, train_dataloader=loader)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        it = iter(loader)
        next(it)
        cb.on_step_end(_args(tmp_path, ga=1), state, control)
        assert not control.should_training_stop and cb.guard_failures == []
        next(it)  # rows 2, 3: step 1
        cb.on_step_end(_args(tmp_path, ga=1), state, control)
    assert control.should_training_stop == (action == "stop")
    assert cb.guard_failures[0]["tag"]["step"] == 1 and cb.guard_failures[0]["checks"] == {"finite.nan": [1]}
    msgs = [str(w.message) for w in caught if str(w.message).startswith("datacheck:")]
    assert msgs and msgs[0].startswith("datacheck: step 1 micro-batch 0") and ("stopping" in msgs[0]) == (action == "stop")


def test_bad_arguments(tmp_path):
    with pytest.raises(UsageError, match="on_guard_error"):
        DatacheckCallback(on_guard_error="skip")
    with pytest.raises(UsageError, match="not a readable report.json"):
        DatacheckCallback(str(tmp_path / "missing.json"))
    with pytest.raises(UsageError, match="index_hash and config_hash"):
        DatacheckCallback({"index_hash": "ab"})
    (tmp_path / "report.json").write_text(json.dumps({"index_hash": "cd" * 16, "config_hash": "x"}))
    assert DatacheckCallback(str(tmp_path / "report.json")).identity == {"index_hash": "cd" * 16, "config_hash": "x"}
    with pytest.warns(RuntimeWarning, match="on_error='warn' or 'skip'"):
        DatacheckCallback(guard=BatchGuard(on_error="raise"))


def test_transformers_stays_optional():
    code = ("import sys; sys.modules['transformers'] = None\n"
            "import datacheck, datacheck.torch\n"
            "assert 'transformers' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
            "from datacheck.model.errors import OptionalDependencyError\n"
            "try:\n    from datacheck.torch.hf import DatacheckCallback\nexcept OptionalDependencyError as e:\n"
            "    print('refused:', e)\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "refused: datacheck.torch.hf needs transformers" in r.stdout, r.stderr


def test_failures_in_dataloader_workers_reach_the_callback_through_the_dumps(tmp_path):
    x = torch.zeros(16, 2)
    x[9, 1] = float("inf")  # batch 2 (rows 8..11), loaded by worker 0 of 2
    guard = BatchGuard(on_error="warn", dump_dir=tmp_path / "dumps")
    loader = DataLoader([{"x": r} for r in x], batch_size=4, num_workers=2, collate_fn=guard)
    cb = DatacheckCallback(guard=guard, on_guard_error="stop")
    state, control = TrainerState(), TrainerControl()
    cb.on_train_begin(_args(tmp_path, ga=1), state, control, train_dataloader=loader)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert len(list(loader)) == 4
        assert guard.failures == []  # the failure happened in a worker process
        cb.on_step_end(_args(tmp_path, ga=1), state, control)
        cb.on_step_end(_args(tmp_path, ga=1), state, control)  # each dump is reported once
    assert control.should_training_stop and len(cb.guard_failures) == 1
    f = cb.guard_failures[0]
    assert f["tag"]["step"] == 2 and f["worker"] == 0 and f["checks"] == {"finite.inf": [1]}
    assert f["dump"].endswith("batch-r0-s0000002-m0-e0.pt")
    assert sum(str(w.message).startswith("datacheck: step 2 micro-batch 0") for w in caught) == 1


class _Rows(torch.utils.data.IterableDataset):
    def __iter__(self):
        return iter(range(6))


def test_an_iterable_dataset_is_warned_and_not_recorded(tmp_path):
    # its batch sampler (over _InfiniteConstantSampler) yields None for every row: recording it once
    # raised TypeError inside the Trainer's loop, ending the training the callback only watches
    loader = DataLoader(_Rows(), batch_size=2)
    cb = DatacheckCallback()
    with pytest.warns(RuntimeWarning, match=r"iterates an IterableDataset \(_Rows\).*the ledger is not written"):
        cb.on_train_begin(_args(tmp_path), TrainerState(), TrainerControl(), train_dataloader=loader)
    assert cb.recorder is None and not isinstance(loader.batch_sampler, RecordingBatchSampler)
    assert [b.tolist() for b in loader] == [[0, 1], [2, 3], [4, 5]]
    assert not (tmp_path / "out" / "data-indices").exists()
