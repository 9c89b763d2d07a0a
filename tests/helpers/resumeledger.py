"""One process of a real tiny plain-torch run recorded with ``record_batches``, for
tests/unit/torch/test_record_resume_changes.py: rows ``0 .. n-1`` (the dataset's item is its index), torch's
``DistributedSampler(num_replicas=world, rank, shuffle=True, seed)`` under a ``BatchSampler(bs)``, a
``Linear(1, 1)`` trained with SGD on each batch, one optimizer step a batch. With ``world > 1`` the processes
form a gloo group (``torch.multiprocessing.spawn``); each trains its own share (no all-reduce: a test whose
ranks take different numbers of steps must not hang).

A run stops after the optimizer step ``stop_at`` (the checkpoint ``ROOT/ckpt.json`` holds the global step,
the epoch and the rows of the epoch consumed, over every rank), or runs its epochs to the end. A resumed run
reads the checkpoint and, in the epoch it resumes, skips the consumed rows in its own batching:
``skip="islice"`` by ``itertools.islice(loader, k, None)`` over the recording loader (``resume_skips``),
``skip="sampler"`` by a sampler that drops its first ``k x bs`` rows; ``k = consumed // (bs x world)`` batches,
or ``skip_batches[rank]``. ``skip="none"``: a run that passes no ``start_step`` and skips nothing (a new run,
or one resumed at an epoch's end).

What each loop trained is written to ``ROOT/truth-NAME-rank{r}.jsonl`` (``step``, ``epoch``, ``rows`` of each
batch), the warnings the process saw to ``ROOT/warnings-NAME-rank{r}.json``."""
from __future__ import annotations

import itertools
import json
import warnings
from pathlib import Path
from typing import Any


def _skip_sampler(base: Any, skip: int) -> Any:
    """A ``DistributedSampler`` subclass dropping the first ``skip`` rows of the rank's share."""

    class SkipSampler(base):  # type: ignore[misc, valid-type]
        def __iter__(self):
            return iter(list(super().__iter__())[skip:])

        def __len__(self) -> int:
            return super().__len__() - skip

    return SkipSampler


def run_rank(rank: int, world: int, rendezvous: str, root: str, cfg: str) -> None:
    import torch
    import torch.distributed as dist
    from torch.utils.data import BatchSampler, DataLoader, DistributedSampler

    from datacheck.torch import flush_ledgers, record_batches

    c = json.loads(cfg)
    out = Path(root)
    if world > 1:
        dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=world)
    n, bs, seed, name = c["n"], c["bs"], c.get("seed", 0), c["name"]
    torch.manual_seed(0)
    model = torch.nn.Linear(1, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    step, start_epoch, consumed = 0, 0, 0
    if c.get("resume"):
        ck = json.loads((out / "ckpt.json").read_text())
        step, start_epoch, consumed = ck["step"], ck["epoch"], ck["consumed"]
    truth = (out / f"truth-{name}-rank{rank}.jsonl").open("w")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        stopped = False
        for epoch in range(start_epoch, c["epochs"]):
            resumed = bool(c.get("resume")) and epoch == start_epoch and c["skip"] != "none"
            k = (c.get("skip_batches", {}).get(str(rank), consumed // (bs * world))) if resumed else 0
            if resumed and c["skip"] == "sampler":
                sampler = _skip_sampler(DistributedSampler, k * bs)(list(range(n)), num_replicas=world, rank=rank,
                                                                    shuffle=True, seed=seed)
            else:
                sampler = DistributedSampler(list(range(n)), num_replicas=world, rank=rank, shuffle=True, seed=seed)
            sampler.set_epoch(epoch)
            loader = record_batches(DataLoader(list(range(n)), batch_sampler=BatchSampler(sampler, bs, False)), out,
                                    rank=rank, start_step=step if resumed else None,
                                    resume_skips=resumed and c["skip"] == "islice" and c.get("resume_skips", True))
            batches = itertools.islice(loader, k, None) if resumed and c["skip"] == "islice" else loader
            done = k if resumed else 0  # batches of this epoch consumed
            for batch in batches:
                rows = [int(i) for i in batch]
                loss = model(torch.tensor(rows, dtype=torch.float32).unsqueeze(1)).pow(2).mean()
                loss.backward()
                opt.step()
                opt.zero_grad()
                truth.write(json.dumps({"step": step, "epoch": epoch, "rows": rows}) + "\n")
                step, done = step + 1, done + 1
                if step == c.get("stop_at"):
                    flush_ledgers()
                    if rank == 0:  # a stop after the epoch's last batch resumes at the next epoch's start
                        at_end = done == len(loader)
                        (out / "ckpt.json").write_text(json.dumps({"step": step, "epoch": epoch + at_end,
                                                                   "consumed": 0 if at_end else done * bs * world}))
                    stopped = True
                    break
            del batches, loader
            if stopped:
                break
        flush_ledgers()
    truth.close()
    (out / f"warnings-{name}-rank{rank}.json").write_text(json.dumps([str(w.message) for w in caught]))
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()


def spawn(root: Path, world: int, **cfg: Any) -> None:
    """:func:`run_rank` in ``world`` fresh processes (``torch.multiprocessing.spawn``)."""
    import torch

    rendezvous = root / f"rendezvous-{cfg['name']}"
    torch.multiprocessing.spawn(run_rank, args=(world, str(rendezvous), str(root), json.dumps(cfg)), nprocs=world,
                                join=True)
