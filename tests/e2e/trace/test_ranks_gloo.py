"""Two ranks over gloo (DistributedDataParallel, DistributedSampler), one NaN feature on a row rank 1
loads: rank 1's loss goes NaN at that step while the all-reduce makes the grad norm NaN on both ranks.
trace names rank 1 and that step, not rank 0 (whose grad norm is NaN at the same step)."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from conftest import run_cli

pytest.importorskip("torch")

SCRIPT = textwrap.dedent('''
    import json, os, sys
    import torch, torch.distributed as dist
    from torch.utils.data import DataLoader, DistributedSampler
    ROWS, BATCH, POISON, out = 256, 8, int(sys.argv[2]), sys.argv[1]

    def main(rank):
        # rendezvous through a file of the test's own folder: no TCP port to pick, none to collide
        dist.init_process_group("gloo", init_method=f"file://{sys.argv[3]}", rank=rank, world_size=2)
        g = torch.Generator().manual_seed(0)
        x = torch.randn(ROWS, 2, generator=g)
        y = (x[:, 0] > 0).long()
        x[POISON, 0] = float("nan")
        torch.manual_seed(0)
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(2, 2))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        sampler = DistributedSampler(range(ROWS), num_replicas=2, rank=rank, shuffle=True, seed=42)
        with open(f"{out}/rank{rank}.jsonl", "w") as log:
            for step, idx in enumerate(DataLoader(range(ROWS), batch_size=BATCH, sampler=sampler), start=1):
                loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
                opt.zero_grad()
                loss.backward()
                gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1e9)
                opt.step()
                log.write(json.dumps({"step": step, "rank": rank, "loss": loss.item(), "grad_norm": gn.item(),
                                      "rows": idx.tolist()}) + "\\n")
        dist.destroy_process_group()

    if __name__ == "__main__":
        import torch.multiprocessing as mp
        procs = [mp.get_context("spawn").Process(target=main, args=(r,)) for r in range(2)]
        [p.start() for p in procs]
        [p.join() for p in procs]
        sys.exit(max(p.exitcode for p in procs))
''')


@pytest.mark.slow
def test_the_rank_whose_loss_went_nan_is_named(tmp_path):
    import torch
    from torch.utils.data import DistributedSampler
    order1 = list(DistributedSampler(range(256), num_replicas=2, rank=1, shuffle=True, seed=42))
    poison = order1[8 * 5 + 3]  # rank 1, step 6 (logged from 1), fourth row of its batch
    (tmp_path / "run.py").write_text(SCRIPT)
    p = subprocess.run([sys.executable, str(tmp_path / "run.py"), str(tmp_path), str(poison), str(tmp_path / "rdv")],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    logs = {r: [json.loads(line) for line in open(tmp_path / f"rank{r}.jsonl")] for r in (0, 1)}
    bad_step = next(e["step"] for e in logs[1] if poison in e["rows"])
    assert bad_step == 6 and torch.isnan(torch.tensor(logs[1][5]["loss"]))
    # the all-reduce: rank 0's loss is finite at that step, its grad norm NaN
    r0 = logs[0][5]
    assert r0["loss"] == r0["loss"] and r0["grad_norm"] != r0["grad_norm"]
    r = run_cli("trace", str(tmp_path / "rank0.jsonl"), str(tmp_path / "rank1.jsonl"), "--format", "json")
    res = json.loads(r.stdout)["result"]
    assert r.returncode == 1
    fb = res["first_bad"]
    assert (fb["check"], fb["step"], fb["rank"], fb["metric"]) == ("log.non_finite", bad_step, "rank 1", "loss")
    div = [f for f in res["findings"] if f["check"] == "log.rank_divergence"]
    assert div and div[0]["details"]["rank"] == "rank 1" and div[0]["details"]["finite_ranks"] == [0]
