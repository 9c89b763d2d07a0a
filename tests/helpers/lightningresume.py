"""One launch of a real one-process PyTorch Lightning CPU run that a test crashes and resumes
(``python lightningresume.py ROOT CRASH_AT [CHECKPOINT]``), a script so that the Trainer's process-wide
state (``seed_everything``) stays out of pytest.

``ROOT/rows.json`` holds the rows (``x1``, ``x2``, ``label``); batch 16 from a ``DataLoader`` over
``DistributedSampler(num_replicas=1, rank=0, shuffle=True, seed=7)`` (``use_distributed_sampler=False``; a
plain DataLoader, no ``state_dict``), SGD, ``max_steps`` 60, ``log_every_n_steps`` 1, ``train_loss`` logged
on step. A ``ModelCheckpoint`` saves ``ROOT/ckpt/step=N.ckpt`` every 5 optimizer steps. The loggers:
``CSVLogger`` and ``TensorBoardLogger`` with ``version=0`` (``ROOT/logs/csv/version_0``,
``ROOT/logs/tb/version_0``: every launch writes into the same folder) and with Lightning's own versions
(``ROOT/logs/csvv``, ``ROOT/logs/tbv``: ``version_0`` for the first launch, ``version_1`` for the next).
``CRASH_AT`` > 0: ``training_step`` raises ``RuntimeError`` when ``global_step`` reaches it (a crash, after
the steps before it were logged); 0: no crash. ``CHECKPOINT``: ``trainer.fit(ckpt_path=CHECKPOINT)``. Each
launch appends to ``ROOT/seen.jsonl`` what each training step saw: ``launch`` (its ordinal, from 0),
``global_step``, ``batch_idx``, the rows."""
from __future__ import annotations

import json
import sys
from pathlib import Path


def main(root: Path, crash_at: int, checkpoint: str | None) -> None:
    import lightning as L
    import torch
    from lightning.pytorch.callbacks import ModelCheckpoint
    from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger
    from torch.utils.data import DataLoader, DistributedSampler

    L.seed_everything(7, workers=False, verbose=False)
    rows = json.loads((root / "rows.json").read_text())
    x = torch.tensor([[r["x1"], r["x2"]] for r in rows], dtype=torch.float32)
    y = torch.tensor([r["label"] for r in rows])
    n = len(rows)
    seen_path = root / "seen.jsonl"
    launch = len({json.loads(t)["launch"] for t in seen_path.read_text().splitlines()}) if seen_path.exists() else 0

    class Module(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.net = torch.nn.Sequential(torch.nn.Linear(2, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))

        def training_step(self, idx, batch_idx):
            if crash_at and self.global_step == crash_at:
                raise RuntimeError(f"crash at step {crash_at}")
            with open(seen_path, "a") as f:
                f.write(json.dumps({"launch": launch, "global_step": self.global_step, "batch_idx": batch_idx,
                                    "rows": idx.tolist()}) + "\n")
            loss = torch.nn.functional.cross_entropy(self.net(x[idx]), y[idx])
            self.log("train_loss", loss)
            return loss

        def train_dataloader(self):
            sampler = DistributedSampler(list(range(n)), num_replicas=1, rank=0, shuffle=True, seed=7)
            return DataLoader(list(range(n)), batch_size=16, sampler=sampler)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.05)

    logs = root / "logs"
    trainer = L.Trainer(accelerator="cpu", devices=1, max_steps=60, log_every_n_steps=1, use_distributed_sampler=False,
                        default_root_dir=str(root), enable_progress_bar=False, enable_model_summary=False,
                        logger=[CSVLogger(logs, name="csv", version=0), TensorBoardLogger(logs, name="tb", version=0),
                                CSVLogger(logs, name="csvv"), TensorBoardLogger(logs, name="tbv")],
                        callbacks=[ModelCheckpoint(dirpath=root / "ckpt", every_n_train_steps=5, save_top_k=-1,
                                                   filename="{step}")])
    trainer.fit(Module(), ckpt_path=checkpoint)


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else None)
