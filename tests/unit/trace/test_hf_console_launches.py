"""A Hugging Face Trainer console (the default: tqdm bars and dicts) holding two launches, the resumed
one logging the first launch's last step again: the training bar drawn again from ``0/T`` before it is the
new launch (``log.step_regression``, a ``resume`` event), and an lr at that step other than the one
logged there before is ``log.lr_discontinuity`` (the scheduler state not restored). One launch of the same
console says neither. Steps and lrs are the test's own: a linear decay ``LR0 * (1 - step / T)``."""
from __future__ import annotations

from tracehelp import trace

T, LR0 = 60, 0.05


def _bar(k: int) -> str:
    return f"\r{100 * k // T:3d}%|          | {k}/{T} [00:00<00:00, 300.00it/s]"


def _dict(step: int, lr: float) -> str:
    return f"\n{{'loss': '0.{60 + step % 7}', 'grad_norm': '0.5', 'learning_rate': '{lr:.4g}', 'epoch': '{step / 30:.4g}'}}\n"


def _launch(steps: range, lr_at=lambda k: LR0 * (1 - k / T)) -> str:
    text = _bar(steps.start - 1 if steps.start > 1 else 0)
    for k in steps:
        text += _dict(k, lr_at(k)) + _bar(k)
    return text + "\n"


def _trace(tmp_path, text: str):
    p = tmp_path / "console.log"
    p.write_text(text)
    return trace(p)


def test_a_launch_logging_the_last_step_again_is_a_resume(tmp_path):
    first = _launch(range(1, 12))
    res = _trace(tmp_path, first + "\r  0%|          | 0/60 [00:00<?, ?it/s]" + _launch(range(11, 20)))
    reg = [f for f in res.findings if f.check == "log.step_regression"]
    assert [(r["from_step"], r["to_step"]) for f in reg for r in f.details["resumes"]] == [(11, 11)]
    assert [(e["from_step"], e["step"]) for e in res.events if e["kind"] == "resume"] == [(11, 11)]
    assert "log.lr_discontinuity" not in {f.check for f in res.findings}  # the lr at 11 as before
    one = _trace(tmp_path, first)
    assert not [f for f in one.findings if f.check == "log.step_regression"]
    assert not [e for e in one.events if e["kind"] == "resume"]


def test_a_resumed_launch_with_its_scheduler_not_restored_is_an_lr_discontinuity(tmp_path):
    text = (_launch(range(1, 12)) + "\r  0%|          | 0/60 [00:00<?, ?it/s]"
            + _launch(range(11, 20), lambda k: LR0 * (1 - (k - 10) / T)))  # the schedule begun again at 11
    res = _trace(tmp_path, text)
    lr = [f for f in res.findings if f.check == "log.lr_discontinuity"]
    assert len(lr) == 1 and lr[0].details["resumed_from"] == 11 and lr[0].details["step"] == 11
