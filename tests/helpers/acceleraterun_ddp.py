"""One process of a real two-process Hugging Face ``accelerate`` CPU run (``python acceleraterun_ddp.py ROOT
SPEC``), started by the test with accelerate's environment (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``,
``MASTER_ADDR``, ``MASTER_PORT``): ``Accelerator(cpu=True)`` then joins the gloo process group.

``ROOT/rows.json`` holds the rows (``x1``, ``x2``, ``label``); ``SPEC`` is a JSON object: ``seed``,
``batch``, ``ga`` (``gradient_accumulation_steps``), ``epochs``, ``order``, ``even_batches`` (default true; false:
``DataLoaderConfiguration(even_batches=False)``; then the model is not prepared (no DDP: its all-reduce
would wait for the process with fewer batches, and ``join_uneven_inputs`` does nothing on CPU), each
process counts its own steps and the main process logs its own loss, with no gather):

- ``"prepared"``: ``record_batches(accelerator.prepare(loader), ROOT/run)`` (rank left out);
- ``"raw"``: ``accelerator.prepare(record_batches(loader, ROOT/run, rank=accelerator.process_index))``.

The loader: ``DataLoader(range(n), batch_size, sampler=DistributedSampler(num_replicas=1, rank=0,
shuffle=True, seed))``, one global order that accelerate's ``BatchSamplerShard`` deals out: process ``p``
takes batches ``p, p + 2, ...``. Each process writes ``ROOT/seen{process_index}.jsonl`` (per micro-batch:
epoch, its index in the epoch, the optimizer step from 0 counted over the run, its rows); the main
process logs ``ROOT/log.jsonl``: per optimizer step ``{"step": step from 0, "train_loss": the mean over
every process of the step's micro-batch losses}`` (``accelerator.gather``), and ``ROOT/log_micro.jsonl``: per
micro-batch of its own ``{"step": its count from 0 across epochs, "train_loss": its loss}`` (a loop that
logs every micro-batch with its own counter). Every process also writes ``ROOT/log-rank{process_index}.jsonl``:
per optimizer step ``{"step": its own count from 0 across epochs, "train_loss": the mean of its own
micro-batch losses}`` (a loop that logs each process's loss under its rank, no gather)."""
from __future__ import annotations

import json
import sys
from pathlib import Path


def main(root: Path, spec: dict) -> None:
    import torch
    from accelerate import Accelerator, DataLoaderConfiguration
    from accelerate.utils import set_seed
    from torch.utils.data import DataLoader, DistributedSampler

    from datacheck.torch import record_batches

    set_seed(spec["seed"])
    rows = json.loads((root / "rows.json").read_text())
    x = torch.tensor([[r["x1"], r["x2"]] for r in rows], dtype=torch.float32)
    y = torch.tensor([r["label"] for r in rows])
    n, ga = len(rows), spec["ga"]
    even = spec.get("even_batches", True)
    acc = Accelerator(cpu=True, gradient_accumulation_steps=ga,
                      dataloader_config=DataLoaderConfiguration(even_batches=even))
    assert acc.num_processes == 2, acc.num_processes
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(2, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    sampler = DistributedSampler(list(range(n)), num_replicas=1, rank=0, shuffle=True, seed=spec["seed"])
    dl = DataLoader(list(range(n)), batch_size=spec["batch"], sampler=sampler)
    if spec["order"] == "prepared" and not even:
        opt, dl = acc.prepare(opt, dl)
        loader = record_batches(dl, root / "run", grad_accum=ga)
    elif spec["order"] == "prepared":
        model, opt, dl = acc.prepare(model, opt, dl)
        loader = record_batches(dl, root / "run", grad_accum=ga)
    else:
        loader = record_batches(dl, root / "run", rank=acc.process_index, grad_accum=ga)
        model, opt, loader = acc.prepare(model, opt, loader)
    step, losses = 0, []
    log = open(root / "log.jsonl", "w") if acc.is_main_process else None
    log_micro = open(root / "log_micro.jsonl", "w") if acc.is_main_process else None
    micro = 0
    own = open(root / f"log-rank{acc.process_index}.jsonl", "w")
    with open(root / f"seen{acc.process_index}.jsonl", "w") as seen:
        for epoch in range(spec["epochs"]):
            for k, idx in enumerate(loader):
                seen.write(json.dumps({"epoch": epoch, "micro_batch": k, "optimizer_step": step,
                                       "rows": idx.tolist()}) + "\n")
                with acc.accumulate(model):
                    loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
                    acc.backward(loss)
                    opt.step()
                    opt.zero_grad()
                losses.append(loss.detach())
                if log_micro is not None:
                    log_micro.write(json.dumps({"step": micro, "train_loss": loss.item()}) + "\n")
                micro += 1
                if acc.sync_gradients:
                    own.write(json.dumps({"step": step, "train_loss": torch.stack(losses).mean().item()}) + "\n")
                    mean = torch.stack(losses).mean().reshape(1)
                    mean = (acc.gather(mean) if even else mean).mean().item()
                    if log is not None:
                        log.write(json.dumps({"step": step, "train_loss": mean}) + "\n")
                        log.flush()
                    step, losses = step + 1, []
    own.close()
    if log_micro is not None:
        log_micro.close()
    acc.wait_for_everyone()
    acc.end_training()


if __name__ == "__main__":
    main(Path(sys.argv[1]), json.loads(sys.argv[2]))
