"""What the accelerate order tests share: accelerate's own ``BatchSamplerShard`` as the reference of the
batches each process gets (``reference_shards``), and runs of ``accelerator.prepare``'s loader for every
process of a data-parallel run inside this one process (``prepare_data_loader`` with an explicit
``num_processes`` and ``process_index``: the same ``DataLoaderShard`` / ``BatchSamplerShard`` each process
of a real run builds), recorded with ``record_batches`` (``record_run``).

The one order of the whole dataset is ``DistributedSampler(rows, num_replicas=1, rank=0, shuffle=True,
seed)``: ``torch.randperm(n, generator seeded seed + epoch)``, which accelerate's DataLoaderShard seeds
with its iteration count as the epoch (``set_epoch(self.iteration)``)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch.utils.data import BatchSampler, DataLoader, DistributedSampler


def permutation(n: int, seed: int, epoch: int) -> list[int]:
    """The epoch's order of the ``n`` rows: ``randperm`` of a generator seeded ``seed + epoch``."""
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed + epoch)).tolist()


def reference_shards(n: int, processes: int, batch: int, seed: int, epoch: int, *, drop_last: bool = False,
                     even_batches: bool = True, split_batches: bool = False) -> list[list[list[int]]]:
    """``shards[p]``: the batches process ``p`` trains on in ``epoch``, from accelerate's own
    ``BatchSamplerShard`` over ``BatchSampler(permutation, loader batch, drop_last)`` (the loader batch is
    ``batch x processes`` with ``split_batches``: each process's slice is ``batch`` rows)."""
    from accelerate.data_loader import BatchSamplerShard
    loader_batch = batch * processes if split_batches else batch
    sampler = BatchSampler(permutation(n, seed, epoch), loader_batch, drop_last)
    return [[list(b) for b in BatchSamplerShard(sampler, processes, p, split_batches=split_batches,
                                                even_batches=even_batches)] for p in range(processes)]


def prepared(n: int, processes: int, index: int, batch: int, seed: int, *, drop_last: bool = False,
             even_batches: bool = True, split_batches: bool = False) -> Any:
    """The loader ``accelerator.prepare`` gives process ``index`` of ``processes`` for
    ``DataLoader(range(n), loader batch, sampler=DistributedSampler(num_replicas=1, seed))``."""
    from accelerate.data_loader import prepare_data_loader
    sampler = DistributedSampler(list(range(n)), num_replicas=1, rank=0, shuffle=True, seed=seed)
    dl = DataLoader(list(range(n)), batch_size=batch * processes if split_batches else batch, sampler=sampler,
                    drop_last=drop_last)
    return prepare_data_loader(dl, num_processes=processes, process_index=index, even_batches=even_batches,
                               split_batches=split_batches)


def record_run(folder: Path, n: int, processes: int, batch: int, seed: int, *, ga: int = 1, epochs: int = 1,
               **kw: Any) -> list[list[list[list[int]]]]:
    """Every process of a run of ``epochs`` epochs, one after the other, through
    ``record_batches(prepared loader, folder, grad_accum=ga)``; returns ``seen[p][epoch]``: the batches
    process ``p`` was given."""
    from datacheck.torch import flush_ledgers, record_batches
    seen = []
    for p in range(processes):
        loader = record_batches(prepared(n, processes, p, batch, seed, **kw), folder, grad_accum=ga)
        seen.append([[b.tolist() for b in loader] for _ in range(epochs)])
    flush_ledgers()
    return seen


def step_rows(shards: list[list[list[int]]], step: int, ga: int) -> dict[int, list[int]]:
    """``{process: rows}`` of in-epoch optimizer step ``step``: each process's micro-batches ``step x ga ..
    step x ga + ga - 1`` concatenated (a process with no micro-batch there is left out)."""
    out = {}
    for p, mbs in enumerate(shards):
        rows = [i for mb in mbs[step * ga:(step + 1) * ga] for i in mb]
        if rows:
            out[p] = rows
    return out
