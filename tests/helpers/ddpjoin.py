"""One process of a real two-process DDP run over gloo with uneven inputs under
``torch.distributed.algorithms.Join`` (``with model.join():``), for tests/e2e/trace/test_real_runs_ddp_join.py.

Rows ``0 .. 25``, batch size 1, 2 epochs: in epoch ``e`` process 0 trains rows ``13e + 0 .. 13e + 6`` (7
steps), process 1 rows ``13e + 7 .. 13e + 12`` (6 steps), each through ``record_batches`` (its ledger under
``ROOT/run``). The model is an embedding of one weight per row and the loss the sum of the batch's
weights, so a row's weight has a gradient exactly when the row was in the backward of some process; after
DDP's all-reduce, process 0 writes, for each of its own steps, the rows whose weights have a gradient
(``ROOT/met.json``: a list per step): the rows of every process that met in that all-reduce (a joined
process shadows it with zeros). ``mode``: ``run``: one ``Join`` context around both epochs; ``epoch``: one
around each epoch (the usual loop)."""
from __future__ import annotations

import contextlib
import json
from pathlib import Path

N_EPOCH, SHARES = 13, (7, 6)


def rows_of(rank: int, epoch: int) -> list[int]:
    """The rows process ``rank`` trains in ``epoch``, in order."""
    start = N_EPOCH * epoch + (0 if rank == 0 else SHARES[0])
    return list(range(start, start + SHARES[rank]))


def join_rank(rank: int, world: int, rendezvous: str, root: str, mode: str, epochs: int) -> None:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader

    from datacheck.torch import record_batches

    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=world)
    done = False
    try:
        model = DDP(torch.nn.Embedding(N_EPOCH * epochs, 1))
        with torch.no_grad():
            model.module.weight.zero_()
        met: list[list[int]] = []

        def epoch_loop(e: int) -> None:
            loader = record_batches(DataLoader(list(range(N_EPOCH * epochs)), batch_size=1, sampler=rows_of(rank, e)), Path(root) / "run", rank=rank,
                                    epoch=e)
            for idx in loader:
                model.zero_grad(set_to_none=False)
                model(torch.as_tensor(idx)).sum().backward()
                if rank == 0:
                    met.append(torch.nonzero(model.module.weight.grad[:, 0]).flatten().tolist())

        if mode == "run":
            with model.join():
                for e in range(epochs):
                    epoch_loop(e)
        else:
            for e in range(epochs):
                with model.join():
                    epoch_loop(e)
        if rank == 0:
            (Path(root) / "met.json").write_text(json.dumps(met))
        done = True
    finally:
        with contextlib.suppress(Exception):
            if done:
                dist.barrier()
                # every process's work is whole (its ledger closed, met.json written): gloo's teardown
                # once aborted a process after this point under load ("terminate called without an
                # active exception"); :func:`spawn_join` tells that from a failure of the run
                (Path(root) / f"done-{rank}").touch()
        dist.destroy_process_group()


def spawn_join(world: int, root: Path, mode: str, epochs: int) -> None:
    """:func:`join_rank` in ``world`` processes (``torch.multiprocessing.spawn``). A process killed by
    SIGABRT after every process marked its work done (``done-RANK``, after the closing barrier: gloo
    aborting in ``destroy_process_group`` under load) is not a failure of the run; any other is raised."""
    import torch

    try:
        torch.multiprocessing.spawn(join_rank, args=(world, str(root / "rendezvous"), str(root), mode, epochs),
                                    nprocs=world, join=True)
    except torch.multiprocessing.ProcessExitedException as exc:
        if exc.signal_name != "SIGABRT" or not all((root / f"done-{r}").exists() for r in range(world)):
            raise
