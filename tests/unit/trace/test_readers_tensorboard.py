"""TensorBoard tags of the trainers trace reads: Coqui TTS's TrainIterStats/EvalStats, Lightning's
lr-<Optimizer>/pg<i>, and an eval value logged at the same step as the training values (kept)."""
from __future__ import annotations

import pytest

from datacheck.trace import open_log

pytest.importorskip("tensorboard")
pytestmark = pytest.mark.slow  # importing torch and its SummaryWriter takes seconds
torch = pytest.importorskip("torch")
from torch.utils.tensorboard import SummaryWriter  # noqa: E402


def test_coqui_tags_and_eval_at_a_training_step(tmp_path):
    w = SummaryWriter(str(tmp_path / "tb"))
    for s in range(1, 7):
        w.add_scalar("TrainIterStats/loss", 1.0 / s, s)
        w.add_scalar("TrainIterStats/current_lr", 1e-4, s)
        w.add_scalar("TrainIterStats/grad_norm", float("nan") if s == 5 else 2.0, s)
        if s % 3 == 0:
            w.add_scalar("EvalStats/avg_loss", 2.0 / s, s)
    w.close()
    lf = open_log(str(tmp_path / "tb"))
    recs = list(lf.records())
    train = [(r.step, r.loss, r.lr) for r in recs if r.split == "train"]
    assert train == [(s, pytest.approx(1.0 / s), pytest.approx(1e-4)) for s in range(1, 7)]
    assert [(r.step, r.loss) for r in recs if r.split == "eval"] == [(3, pytest.approx(2 / 3)), (6, pytest.approx(1 / 3))]
    assert [r.step for r in recs if r.grad_norm is not None and r.grad_norm != r.grad_norm] == [5]


def test_lightning_learning_rate_monitor_tag(tmp_path):
    w = SummaryWriter(str(tmp_path / "tb"))
    for s in range(3):
        w.add_scalar("train_loss_step", 2.0 - s, s)
        w.add_scalar("lr-AdamW/pg1", 0.01, s)
        w.add_scalar("val_loss", 3.0, s)
    w.close()
    lf = open_log(str(tmp_path / "tb"))
    recs = list(lf.records())
    assert [(r.step, r.loss, r.lr) for r in recs if r.split == "train"] == [
        (s, 2.0 - s, pytest.approx(0.01)) for s in range(3)]
    assert [r.step for r in recs if r.split == "eval"] == [0, 1, 2]
    assert lf.stats.first_step == 0  # Lightning counts global_step from 0


def test_an_event_file_under_another_name_is_sniffed(tmp_path):
    w = SummaryWriter(str(tmp_path / "tb"))
    w.add_scalar("train/loss", float("nan"), 7)
    w.close()
    ev = next((tmp_path / "tb").iterdir())
    renamed = tmp_path / "run.events"
    renamed.write_bytes(ev.read_bytes())
    lf = open_log(str(renamed))
    assert lf.format == "tensorboard" and [r.step for r in lf.records()] == [7]


def test_an_event_file_cut_or_corrupt_says_where_the_read_stopped(tmp_path):
    """tensorboard's loader stops quietly at a record whose checksum fails or that is cut (it waits for
    a live file to grow): the events after it, here the NaN at step 30, were lost while the log passed.
    The read is now said to have stopped, with the records the file holds past it."""
    w = SummaryWriter(str(tmp_path / "tb"))
    for s in range(1, 51):
        w.add_scalar("train/loss", float("nan") if s == 30 else 2.0 - s * 0.01, s)
    w.close()
    (ev,) = (tmp_path / "tb").iterdir()
    whole = ev.read_bytes()
    lf = open_log(str(tmp_path / "tb"))
    assert len([r for r in lf.records()]) == 50 and lf.stats.bad_lines == 0
    flipped = bytearray(whole)
    flipped[len(whole) // 2] ^= 0xFF
    ev.write_bytes(bytes(flipped))
    lf = open_log(str(tmp_path / "tb"))
    recs = list(lf.records())
    assert len(recs) < 30 and lf.stats.bad_lines == 1
    ((_n, what),) = lf.stats.bad_examples
    assert "read stopped after 25 event(s), at byte " in what and "the rest is not read" in what
    ev.write_bytes(whole[:-7])  # the last record (step 50) cut: every event before it is read
    lf = open_log(str(tmp_path / "tb"))
    assert len(list(lf.records())) == 49 and lf.stats.bad_lines == 1
    assert "read stopped after 50 event(s)" in lf.stats.bad_examples[0][1]  # the file-version event + 49
    flipped = bytearray(whole)
    flipped[-3] ^= 0xFF  # the last record's data checksum
    ev.write_bytes(bytes(flipped))
    lf = open_log(str(tmp_path / "tb"))
    assert len(list(lf.records())) == 49
    assert "read stopped at event 51 of 51: it fails its checksum" in lf.stats.bad_examples[0][1]


def test_event_files_written_one_after_another_are_launches_in_turn(tmp_path):
    """A run resumed from its step-10 checkpoint after logging steps 0..11 opens a new writer in the same
    folder and logs 10..19: its steps come after the first launch's (the step goes back from 11 to 10),
    not merged into them; its values of steps 10 and 11 are its own."""
    import time

    first = SummaryWriter(str(tmp_path / "tb"))
    for s in range(12):
        first.add_scalar("train/loss", 1.0, s)
    first.close()
    time.sleep(0.05)  # the second launch opens its writer after the first's last event
    second = SummaryWriter(str(tmp_path / "tb"))
    for s in range(10, 20):
        second.add_scalar("train/loss", 2.0, s)
    second.close()
    assert len(list((tmp_path / "tb").glob("events.out.tfevents.*"))) == 2
    recs = list(open_log(str(tmp_path / "tb")).records())
    assert [(r.step, r.loss) for r in recs] == [(s, 1.0) for s in range(12)] + [(s, 2.0) for s in range(10, 20)]


def test_event_files_written_at_the_same_time_are_merged_by_step(tmp_path):
    """Two writers of one launch open at once (the loss in one, the lr in the other): one record per step."""
    a, b = SummaryWriter(str(tmp_path / "tb")), SummaryWriter(str(tmp_path / "tb"))
    for s in range(6):
        a.add_scalar("train/loss", 1.0 / (s + 1), s)
        b.add_scalar("train/learning_rate", 0.1, s)
    a.close()
    b.close()
    recs = list(open_log(str(tmp_path / "tb")).records())
    assert [(r.step, r.loss, r.lr) for r in recs] == [(s, pytest.approx(1.0 / (s + 1)), pytest.approx(0.1))
                                                      for s in range(6)]
