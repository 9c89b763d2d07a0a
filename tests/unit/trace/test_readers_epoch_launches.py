"""Hugging Face console dicts placed by a steps-per-epoch from outside the log (``--steps-per-epoch``,
the ``[batch]`` plan): two training records on one step refuse that placing (``ReadStats.epoch_clash``),
unless the second is a new launch's. The Trainer's epoch after update ``k`` is ``k / steps_per_epoch``
and grows with every update of a launch; a resumed launch logs the steps after its checkpoint again
(tests/e2e/trace/test_real_runs_hf_resumed.py runs it for real)."""
from __future__ import annotations

import pytest

from datacheck.trace.readers import open_log
from datacheck.trace.readers.pydict import on_whole_step

SPE = 30


def _dict(step: int, lr: float) -> str:
    return f"{{'loss': '0.5', 'grad_norm': '0.4', 'learning_rate': '{lr:.4g}', 'epoch': '{step / SPE:.4g}'}}\n"


def _lr(step: int) -> float:
    return 0.05 * (1 - step / 60)  # linear decay over 60 steps


def _read(tmp_path, steps: list[int], lrs: list[float]):
    p = tmp_path / "console.log"
    p.write_text("".join(_dict(s, lr) for s, lr in zip(steps, lrs)))
    lf = open_log(str(p), steps_per_epoch=SPE)
    return [r.step for r in lf.records()], lf.stats.epoch_clash


@pytest.mark.parametrize("resume_from", [5, 10, 11])
def test_a_resumed_launch_placed_from_its_own_epochs_is_no_clash(tmp_path, resume_from):
    """Launch 1 logs steps 1..11; launch 2 resumes from checkpoint ``resume_from`` and logs from
    ``resume_from + 1`` (at 11: step 11 again, the same epoch and learning rate printed)."""
    steps = list(range(1, 12)) + list(range(resume_from + 1, 21))
    got, clash = _read(tmp_path, steps, [_lr(s) for s in steps])
    assert got == steps and clash is None


def test_two_steps_one_epoch_apart_in_one_launch_still_clash(tmp_path):
    """Step 11 logged twice with different learning rates: two updates of one launch that the steps per
    epoch put on one step: the placing is refused."""
    steps = list(range(1, 12)) + [11, 12]
    lrs = [_lr(s) for s in range(1, 12)] + [_lr(12), _lr(13)]
    got, clash = _read(tmp_path, steps, lrs)
    assert clash is not None and "lines 11 (epoch 0.3667) and 12 (epoch 0.3667) both fall on step 11" in clash


@pytest.mark.parametrize(("text", "spe", "whole"), [("0.3667", 30, True), ("0.53", 10, False), ("0.50", 10, True),
                                                    ("0.53", 1000, False), ("nan", 30, False)])
def test_on_whole_step(text, spe, whole):
    # 0.3667 x 30 = 11.001 (rounding 30 x 0.5e-4 = 0.0015); 0.53 x 10 = 5.3 (rounding 0.05); 0.50 x 10 = 5.0;
    # 0.53 x 1000: +/-5 steps, not placed
    assert on_whole_step(text, spe) is whole
