"""Lightning Trainer loggers' step count read from where they write: ``CSVLogger``'s
``<name>/version_N/metrics.csv`` (sorted header with the Trainer's ``epoch`` and ``step``) and
``TensorBoardLogger``'s ``version_N`` folder (``hparams.yaml`` beside the event files, an ``epoch``
scalar with each step). Their step is ``global_step`` before the update (from 0), so a log written
every 5 steps holds 4, 9, 14 (``(global_step + 1) % log_every_n_steps == 0``,
``_LoggerConnector.should_update_logs``): without the layout the join assumed a count from 1 (no
step 0 logged) and put every step one too early."""
from __future__ import annotations

import pytest

from datacheck.trace import open_log
from datacheck.trace.readers.fields import LIGHTNING_LAYOUT_WHY
from datacheck.trace.steps import resolve_convention

#: Lightning logs every ``EVERY`` steps at global_step EVERY-1, 2*EVERY-1, ...
EVERY = 5
STEPS = [k * EVERY - 1 for k in range(1, 5)]


def _csv(path, header=("epoch", "step", "train_loss")):
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [",".join(header)] + [",".join({"epoch": "0", "step": str(s), "train_loss": "0.5"}[h] for h in header)
                                  for s in STEPS]
    path.write_text("\n".join(lines) + "\n")
    return path


def _conv(path):
    lf = open_log(str(path))
    assert [r.step for r in lf.records()] == STEPS
    return resolve_convention([lf.stats], None)


def test_csvlogger_metrics_csv_counts_from_0(tmp_path):
    conv = _conv(_csv(tmp_path / "lightning_logs" / "version_3" / "metrics.csv"))
    assert (conv.first_step, conv.assumed, conv.source) == (0, False, LIGHTNING_LAYOUT_WHY)
    assert conv.optimizer_step(STEPS[0]) == EVERY - 1


@pytest.mark.parametrize("where,header", [
    ("run/metrics.csv", ("epoch", "step", "train_loss")),  # not in a version_N folder
    ("version_0/losses.csv", ("epoch", "step", "train_loss")),  # not CSVLogger's file name
    ("version_0/metrics.csv", ("step", "train_loss")),  # no epoch: not the Trainer's logger (Fabric's)
])
def test_other_csv_logs_keep_the_assumed_count(tmp_path, where, header):
    conv = _conv(_csv(tmp_path / where, header))
    assert conv.assumed and conv.first_step == 1


def _events(folder, epoch=True, hparams=True):
    torch = pytest.importorskip("torch")
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard import SummaryWriter
    folder.mkdir(parents=True, exist_ok=True)
    if hparams:
        (folder / "hparams.yaml").write_text("{}\n")
    w = SummaryWriter(str(folder))
    for s in STEPS:
        w.add_scalar("train_loss", 0.5, s)
        if epoch:
            w.add_scalar("epoch", 0.0, s)
    w.close()
    del torch
    return folder


@pytest.mark.slow  # importing torch's SummaryWriter takes seconds
def test_tensorboardlogger_version_folder_counts_from_0(tmp_path):
    folder = _events(tmp_path / "tb" / "version_0")
    for path in (folder, next(folder.glob("*tfevents*")), tmp_path / "tb"):
        conv = _conv(path)
        assert (conv.first_step, conv.assumed, conv.source) == (0, False, LIGHTNING_LAYOUT_WHY), path


@pytest.mark.slow
@pytest.mark.parametrize("epoch,hparams,name", [(False, True, "version_0"), (True, False, "version_0"),
                                                 (True, True, "run")])
def test_other_event_files_keep_the_assumed_count(tmp_path, epoch, hparams, name):
    conv = _conv(_events(tmp_path / name, epoch=epoch, hparams=hparams))
    assert conv.assumed and conv.first_step == 1


def test_metrics_csv_line_past_the_bound_is_unparsed_not_read_whole(tmp_path):
    from datacheck.trace.readers.files import MAX_LINE_CHARS

    p = tmp_path / "lightning_logs" / "version_0" / "metrics.csv"
    p.parent.mkdir(parents=True)
    long_line = "0,1," + "9" * (3 * MAX_LINE_CHARS)  # csv read it whole (a 1 GiB line ran out of memory)
    p.write_text("epoch,step,train_loss\n0,0,1.0\n" + long_line + "\n0,2,1.0\n")
    lf = open_log(str(p))
    assert [r.step for r in lf.records()] == [0, 2]
    assert lf.stats.bad_lines == 1 and "line longer than" in lf.stats.bad_examples[0][1]
    assert lf.stats.bad_examples[0][0] == 3  # the file's line 3


@pytest.mark.parametrize("step", ["-5", "-1"])
def test_a_negative_step_is_an_unparsed_line_not_a_resume(tmp_path, step):
    p = tmp_path / "lightning_logs" / "version_0" / "metrics.csv"
    p.parent.mkdir(parents=True)
    p.write_text(f"epoch,step,train_loss\n0,0,1.0\n0,1,1.0\n0,{step},1.0\n0,3,1.0\n")
    lf = open_log(str(p))
    assert [r.step for r in lf.records()] == [0, 1, 3]
    assert lf.stats.bad_lines == 1 and "negative" in lf.stats.bad_examples[0][1]
