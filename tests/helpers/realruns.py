"""What the real-run trace tests share: shards written as JSONL, the expected place of a global row
(shard, shard row) from the shard sizes, torch's ``DistributedSampler`` order replayed from its seeding
rule, the CLI called in process, and the per-rank body of the two-rank gloo run (a spawned process
imports it from here: tests/helpers is on the pythonpath of the parent, and spawn passes sys.path on).

Expected values are computed here from the data and the sampler arithmetic, never read from datacheck."""
from __future__ import annotations

import contextlib
import io
import json
import math
from pathlib import Path
from typing import Any

SHARD_NAMES = ("part-00000.jsonl", "part-00001.jsonl", "part-00002.jsonl")


def write_shards(folder: Path, rows: list[dict[str, Any]], sizes: tuple[int, ...]) -> None:
    """Write ``rows`` as JSONL shards ``part-0000k.jsonl`` of ``sizes`` rows, in order (NaN/inf as
    Python's json writes them: ``NaN``, ``Infinity``)."""
    assert sum(sizes) == len(rows) and len(sizes) <= len(SHARD_NAMES)
    folder.mkdir(parents=True, exist_ok=True)
    start = 0
    for name, n in zip(SHARD_NAMES, sizes):
        with open(folder / name, "w") as f:
            for r in rows[start:start + n]:
                f.write(json.dumps(r) + "\n")
        start += n


def write_nan_feature_rows(torch: Any, root: Path, bad: int, sizes: tuple[int, ...]) -> list[dict[str, Any]]:
    """Two-feature classification rows (``x1``, ``x2`` ~ N(0, 1) from generator seed 3, ``label`` =
    ``x1 + x2 > 0``), ``x1`` of row ``bad`` NaN, written as shards of ``sizes`` under ``root/data`` and
    whole as ``root/rows.json`` (the training scripts read it); returns the rows."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(sum(sizes), 2, generator=g)
    rows = [{"x1": float(a), "x2": float(b), "label": int(a + b > 0)} for a, b in x.tolist()]
    rows[bad]["x1"] = float("nan")
    write_shards(root / "data", rows, sizes)
    (root / "rows.json").write_text(json.dumps(rows))
    return rows


def place(g: int, sizes: tuple[int, ...]) -> tuple[str, int]:
    """(shard name, 0-based row in it) of global row ``g``: shards in name order, rows in file order."""
    start = 0
    for name, n in zip(SHARD_NAMES, sizes):
        if g < start + n:
            return name, g - start
        start += n
    raise IndexError(g)


def distributed_order(torch: Any, n: int, world: int, rank: int, seed: int, epoch: int = 0) -> list[int]:
    """The indices torch's ``DistributedSampler(shuffle=True, drop_last=False)`` gives ``rank``: a
    ``torch.Generator`` seeded ``seed + epoch`` draws ``randperm(n)``, the list is padded from its start
    to a multiple of ``world``, and rank ``r`` takes every ``world``-th index from ``r``."""
    g = torch.Generator()
    g.manual_seed(seed + epoch)
    idx = torch.randperm(n, generator=g).tolist()
    total = math.ceil(n / world) * world
    idx += (idx * math.ceil(total / len(idx)))[:total - len(idx)]
    return idx[rank:total:world]


def step_of(order: list[int], g: int, batch: int, grad_accum: int) -> tuple[int, int]:
    """(0-based optimizer step, micro-batch in it) of row ``g`` in a rank's ``order``."""
    mb = order.index(g) // batch
    return mb // grad_accum, mb % grad_accum


def cli(*args: str) -> tuple[int, str, str]:
    """``datacheck ARGS`` in this process: (exit code, stdout, stderr)."""
    from datacheck.cli.main import main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(args))
    assert "Traceback" not in err.getvalue(), err.getvalue()
    return rc, out.getvalue(), err.getvalue()


def trace_json(*args: str) -> tuple[int, dict[str, Any], str]:
    """``datacheck trace ARGS --format json``: (exit code, the result, stderr)."""
    rc, out, err = cli("trace", *args, "--format", "json")
    return rc, (json.loads(out)["result"] if out.strip() else {}), err


def gloo_rank(rank: int, world: int, rendezvous: str, root: str, n: int, batch: int, seed: int, steps: int) -> None:
    """One rank of the two-rank run: DDP over gloo, torch's DistributedSampler, record_batches, and a
    per-rank JSONL log (0-based ``step``, this rank's ``loss``, the all-reduced ``grad_norm``). The ranks
    meet through the file ``rendezvous`` (absent beforehand; torch's FileStore), not a TCP port."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader, DistributedSampler

    from datacheck.torch import record_batches

    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=world)
    done = False
    try:
        data = json.loads((Path(root) / "rows.json").read_text())
        x = torch.tensor([[r["x1"], r["x2"]] for r in data], dtype=torch.float32)
        y = torch.tensor([r["y"] for r in data], dtype=torch.float32)
        torch.manual_seed(0)
        model = DDP(torch.nn.Sequential(torch.nn.Linear(2, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1)))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        sampler = DistributedSampler(list(range(n)), num_replicas=world, rank=rank, shuffle=True, seed=seed)
        loader = record_batches(DataLoader(list(range(n)), batch_size=batch, sampler=sampler), Path(root) / "run",
                                rank=rank)
        sampler.set_epoch(0)
        with open(Path(root) / "run" / f"metrics-rank{rank}.jsonl", "w") as log:
            for step, idx in enumerate(loader):
                if step >= steps:
                    break
                loss = torch.nn.functional.mse_loss(model(x[idx]).squeeze(1), y[idx])
                opt.zero_grad()
                loss.backward()
                gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1e9)
                opt.step()
                log.write(json.dumps({"step": step, "rank": rank, "loss": loss.item(), "grad_norm": gn.item()}) + "\n")
        done = True
    finally:
        if done:  # both ranks out of their last collective before either tears gloo down (a rank that
            dist.barrier()  # destroyed its group while the other still ran once aborted: "terminate called")
        dist.destroy_process_group()
