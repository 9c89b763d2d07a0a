"""A tiny real PyTorch Lightning run, run as a script (``python lightningrun.py ROOT SPEC``) so that
Lightning's ``strategy="ddp"`` can launch its other ranks by running this same script again, and so
that the Trainer's process-wide state (``seed_everything``, ``PL_GLOBAL_SEED``) stays out of pytest.

``ROOT/rows.json`` holds the rows (``x1``, ``x2`` features, ``label`` 0/1); ``SPEC`` is a JSON object:
``seed``, ``batch``, ``ga`` (``accumulate_grad_batches``), ``devices``, ``strategy`` (``"auto"`` or
``"ddp"``), ``max_steps``, ``every`` (``log_every_n_steps``, default 1), ``ledger`` (True: the run builds its own ``DistributedSampler`` per rank,
``use_distributed_sampler=False``, and wraps the DataLoader in ``record_batches`` writing ``ROOT/run``;
False: a plain shuffled DataLoader and, under ``ddp``, the ``DistributedSampler`` Lightning puts in,
seeded by ``seed_everything``). The run logs ``train_loss`` (``self.log``, on_step) to a ``CSVLogger``
and a ``TensorBoardLogger`` under ``ROOT/logs`` (``csv/version_0/metrics.csv``,
``tb/version_0/events.out.tfevents.*``), and writes what each training step saw to
``ROOT/seen-rank{R}.jsonl`` (``global_step`` at the call, ``batch_idx``, the batch's row indices)."""
from __future__ import annotations

import json
import sys
from pathlib import Path


def main(root: Path, spec: dict) -> None:
    import lightning as L
    import torch
    from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger
    from torch.utils.data import DataLoader, DistributedSampler

    from datacheck.torch import record_batches

    L.seed_everything(spec["seed"], workers=False, verbose=False)
    rows = json.loads((root / "rows.json").read_text())
    x = torch.tensor([[r["x1"], r["x2"]] for r in rows], dtype=torch.float32)
    y = torch.tensor([r["label"] for r in rows])
    n = len(rows)

    class Module(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.net = torch.nn.Sequential(torch.nn.Linear(2, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
            self.seen = None

        def training_step(self, idx, batch_idx):
            if self.seen is None:
                self.seen = open(root / f"seen-rank{self.global_rank}.jsonl", "w")
            self.seen.write(json.dumps({"global_step": self.global_step, "batch_idx": batch_idx,
                                        "rows": idx.tolist()}) + "\n")
            self.seen.flush()
            loss = torch.nn.functional.cross_entropy(self.net(x[idx]), y[idx])
            self.log("train_loss", loss)
            return loss

        def train_dataloader(self):
            if not spec["ledger"]:
                return DataLoader(list(range(n)), batch_size=spec["batch"], shuffle=True)
            world, rank = self.trainer.world_size, self.global_rank
            sampler = DistributedSampler(list(range(n)), num_replicas=world, rank=rank, shuffle=True,
                                         seed=spec["seed"])
            return record_batches(DataLoader(list(range(n)), batch_size=spec["batch"], sampler=sampler),
                                  root / "run", rank=rank, grad_accum=spec["ga"])

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.05)

    trainer = L.Trainer(accelerator="cpu", devices=spec["devices"], strategy=spec["strategy"],
                        max_steps=spec["max_steps"], log_every_n_steps=spec.get("every", 1), accumulate_grad_batches=spec["ga"],
                        use_distributed_sampler=not spec["ledger"], default_root_dir=str(root),
                        logger=[CSVLogger(root / "logs", name="csv"), TensorBoardLogger(root / "logs", name="tb")],
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(Module())


if __name__ == "__main__":
    main(Path(sys.argv[1]), json.loads(sys.argv[2]))
