"""A tiny real Hugging Face ``accelerate`` training loop, run as a script (``python acceleraterun.py
ROOT SPEC``) so that accelerate's process-wide ``AcceleratorState`` stays out of pytest.

``ROOT/rows.json`` holds the rows (``x1``, ``x2`` features, ``label`` 0/1); ``SPEC`` is a JSON object:
``seed``, ``batch``, ``ga`` (``gradient_accumulation_steps``), ``max_steps`` (optimizer steps),
``tracker`` (``"tensorboard"``: accelerate's ``TensorBoardTracker``, event files under
``ROOT/logs/run``; ``"jsonl"``: :class:`JsonlTracker`, ``ROOT/logs/run/metrics.jsonl``), and ``step``,
what the loop passes as ``accelerator.log(..., step=)``:

- ``"completed"``: once per optimizer step (``accelerator.sync_gradients``), the count of completed
  optimizer steps after this one (from 1: the ``completed_steps`` of accelerate's and transformers'
  ``*_no_trainer`` examples), the mean loss of the step's micro-batches;
- ``"micro"``: every micro-batch, its ``enumerate`` index (a count of micro-batches, not of updates),
  that micro-batch's loss.

The loader: a ``DistributedSampler(num_replicas=1, shuffle=True, seed)`` DataLoader wrapped in
``record_batches`` (ledger ``ROOT/run``), then ``accelerator.prepare``. What each micro-batch held is
written to ``ROOT/seen.jsonl`` (its index, the optimizer step it belongs to from 0, its rows)."""
from __future__ import annotations

import json
import sys
from pathlib import Path


def main(root: Path, spec: dict) -> None:
    import torch
    from accelerate import Accelerator
    from accelerate.tracking import GeneralTracker
    from accelerate.utils import set_seed
    from torch.utils.data import DataLoader, DistributedSampler

    from datacheck.torch import record_batches

    class JsonlTracker(GeneralTracker):
        """A user's tracker: one JSON object per ``accelerator.log`` call, ``{"step": step, **values}``."""

        name = "jsonl"
        requires_logging_directory = True

        def __init__(self, run_name: str, logging_dir: Path):
            super().__init__()
            (logging_dir / run_name).mkdir(parents=True, exist_ok=True)
            self.f = open(logging_dir / run_name / "metrics.jsonl", "w")

        @property
        def tracker(self):
            return self.f

        def store_init_configuration(self, values: dict) -> None:
            pass

        def log(self, values: dict, step: int | None = None, **kwargs) -> None:
            self.f.write(json.dumps({"step": step, **values}) + "\n")
            self.f.flush()

        def finish(self) -> None:
            self.f.close()

    set_seed(spec["seed"])
    rows = json.loads((root / "rows.json").read_text())
    x = torch.tensor([[r["x1"], r["x2"]] for r in rows], dtype=torch.float32)
    y = torch.tensor([r["label"] for r in rows])
    n, ga = len(rows), spec["ga"]
    tracker = "tensorboard" if spec["tracker"] == "tensorboard" else JsonlTracker("run", root / "logs")
    acc = Accelerator(cpu=True, gradient_accumulation_steps=ga, log_with=tracker, project_dir=str(root / "logs"))
    acc.init_trackers("run")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(2, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    sampler = DistributedSampler(list(range(n)), num_replicas=1, rank=0, shuffle=True, seed=spec["seed"])
    loader = record_batches(DataLoader(list(range(n)), batch_size=spec["batch"], sampler=sampler), root / "run",
                            grad_accum=ga)
    model, opt, loader = acc.prepare(model, opt, loader)
    completed, losses = 0, []
    with open(root / "seen.jsonl", "w") as seen:
        for k, idx in enumerate(loader):
            seen.write(json.dumps({"micro_batch": k, "optimizer_step": completed, "rows": idx.tolist()}) + "\n")
            with acc.accumulate(model):
                loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
                acc.backward(loss)
                opt.step()
                opt.zero_grad()
            losses.append(loss.item())
            if spec["step"] == "micro":
                acc.log({"train_loss": loss.item()}, step=k)
            if acc.sync_gradients:
                completed += 1
                if spec["step"] == "completed":
                    acc.log({"train_loss": sum(losses) / len(losses), "lr": 0.05}, step=completed)
                losses = []
                if completed >= spec["max_steps"]:
                    break
    acc.end_training()


if __name__ == "__main__":
    main(Path(sys.argv[1]), json.loads(sys.argv[2]))
