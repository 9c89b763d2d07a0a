"""One launch of a real one-process Hugging Face ``Trainer`` CPU run that a test crashes and resumes
(``python hfresume.py ROOT MODE CRASH_AT [CHECKPOINT [LOGGING_STEPS]]``).

``ROOT/rows.json`` holds the rows (``x1``, ``x2``, ``label``); the model is a linear layer returning
the mean cross-entropy; ``per_device_train_batch_size`` 8, 2 epochs, ``logging_steps`` 1 (or
``LOGGING_STEPS``), a checkpoint
every 10 steps in ``ROOT/out``, ``seed`` 42, ``use_cpu=True``. ``MODE``: ``tqdm`` (the default console:
progress bars and dicts) or ``dicts`` (``disable_tqdm``: the printed dicts alone, each with an epoch and no
step). ``CRASH_AT`` > 0: a callback raises ``SystemExit(3)`` at the end of that global step (a crash, after
the dicts of the steps before it); 0: no crash. ``CHECKPOINT``: ``trainer.train(resume_from_checkpoint=
CHECKPOINT)`` (``-``: none). Each launch writes ``ROOT/seen-{launch}.json`` (``launch`` = ``first`` without a checkpoint,
else ``resumed``): the row ids of every micro-batch its forward saw, in order."""
from __future__ import annotations

import json
import sys
from pathlib import Path


def main(root: Path, mode: str, crash_at: int, checkpoint: str | None, logging_steps: int = 1) -> None:
    import torch
    import transformers
    from hftiny import linear_model, row_dataset

    rows = json.loads((root / "rows.json").read_text())
    x = torch.tensor([[r["x1"], r["x2"]] for r in rows], dtype=torch.float32)
    y = torch.tensor([r["label"] for r in rows])
    seen: list[list[int]] = []
    out = root / f"seen-{'resumed' if checkpoint else 'first'}.json"


    class Crash(transformers.TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            if crash_at and state.global_step == crash_at:
                out.write_text(json.dumps(seen))
                raise SystemExit(3)

    torch.manual_seed(0)
    args = transformers.TrainingArguments(
        str(root / "out"), use_cpu=True, per_device_train_batch_size=8, num_train_epochs=2, logging_steps=logging_steps,
        save_strategy="steps", save_steps=10, seed=42, report_to=[], disable_tqdm=mode != "tqdm",
        remove_unused_columns=False, learning_rate=0.05)
    trainer = transformers.Trainer(model=linear_model(torch, seen.append), args=args,
                                   train_dataset=row_dataset(torch, x, y), callbacks=[Crash()])
    trainer.train(resume_from_checkpoint=checkpoint)
    out.write_text(json.dumps(seen))


if __name__ == "__main__":
    ckpt = sys.argv[4] if len(sys.argv) > 4 and sys.argv[4] != "-" else None
    main(Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), ckpt, int(sys.argv[5]) if len(sys.argv) > 5 else 1)
