"""One process of a real two-process Hugging Face ``Trainer`` CPU run (``python hftrainer_ddp.py ROOT
SPEC``), started by the test with torchrun's environment (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``,
``MASTER_ADDR``, ``MASTER_PORT``): ``TrainingArguments(use_cpu=True)`` then joins the gloo process group.

``ROOT/rows.json`` holds the rows (``x1``, ``x2``, ``label``); ``SPEC`` is a JSON object: ``seed``,
``batch`` (``per_device_train_batch_size``), ``ga`` (``gradient_accumulation_steps``), optionally
``even_batches`` (accelerate's, through ``accelerator_config``; default true) and ``max_steps``. The model is a
linear layer returning the mean cross-entropy. Optional keys for a run stopped and resumed: ``epochs``
(``num_train_epochs``, default 1), ``save_steps`` (a checkpoint every so many steps; default none), ``resume``
(the checkpoint folder under ``ROOT/out`` to resume from) and ``tag`` (appended to the ``seen``/``trained``
file names, so the resumed launch keeps the first one's). ``DatacheckCallback`` records the ledger in
``ROOT/out/data-indices/``. Each process writes ``ROOT/seen{rank}.json``: the row ids of every
micro-batch its forward saw, in order, and ``ROOT/trained{rank}.json``: ``[state.global_step, row ids]`` of
each (the Trainer's own step count on that process while it trains the micro-batch); the callback writes the Trainer's ``trainer_state.json`` to
``ROOT/out`` at the end of training; the main process prints the Trainer's log dicts on stdout (no
progress bar, no header: each dict carries an epoch, not a step)."""
from __future__ import annotations

import json
import os
import sys
import warnings
from pathlib import Path


def main(root: Path, spec: dict) -> None:
    import torch
    import transformers
    from hftiny import linear_model, row_dataset

    from datacheck.torch.hf import DatacheckCallback

    rows = json.loads((root / "rows.json").read_text())
    x = torch.tensor([[r["x1"], r["x2"]] for r in rows], dtype=torch.float32)
    y = torch.tensor([r["label"] for r in rows])
    seen: list[list[int]] = []
    trained: list[list] = []
    held: list = []  # the Trainer, once built: its state.global_step while a micro-batch is trained

    def record(ids: list[int]) -> None:
        seen.append(ids)
        trained.append([held[0].state.global_step, ids])

    torch.manual_seed(0)
    args = transformers.TrainingArguments(
        str(root / "out"), use_cpu=True, per_device_train_batch_size=spec["batch"],
        gradient_accumulation_steps=spec["ga"], num_train_epochs=spec.get("epochs", 1), logging_steps=1,
        seed=spec["seed"], report_to=[], save_strategy="steps" if spec.get("save_steps") else "no",
        save_steps=spec.get("save_steps") or 500, disable_tqdm=True, remove_unused_columns=False,
        ddp_find_unused_parameters=False, max_steps=spec.get("max_steps", -1),
        accelerator_config={"even_batches": spec.get("even_batches", True)})
    trainer = transformers.Trainer(model=linear_model(torch, record, int(y.max()) + 1), args=args,
                                   train_dataset=row_dataset(torch, x, y), callbacks=[DatacheckCallback()])
    held.append(trainer)
    assert trainer.args.world_size == 2, trainer.args.world_size
    with warnings.catch_warnings():  # the console: the Trainer's printed dicts, on the main process's stdout
        warnings.simplefilter("ignore")
        trainer.train(resume_from_checkpoint=str(root / "out" / spec["resume"]) if spec.get("resume") else None)
    tag = spec.get("tag", "")
    (root / f"seen{tag}{os.environ['RANK']}.json").write_text(json.dumps(seen))
    (root / f"trained{tag}{os.environ['RANK']}.json").write_text(json.dumps(trained))


if __name__ == "__main__":
    main(Path(sys.argv[1]), json.loads(sys.argv[2]))
