"""``datacheck trace --checkpoints DIR``: a tiny CPU run with a linear warmup saves a checkpoint every 4
steps, the one of step 8 without its scheduler; the run dies after step 10 and resumes from step 8 with a
fresh scheduler. The log's lr jump at the resume point is joined to the checkpoint's missing scheduler."""
from __future__ import annotations

import json
import random

import numpy as np
import pytest
from conftest import run_cli

from datacheck.model.findings import Finding
from datacheck.resume.join import checkpoint_steps, resume_checkpoints

torch = pytest.importorskip("torch")

WARMUP, SAVE, CRASH, END = 6, 4, 10, 14


def _state(model, opt, sched, step, with_scheduler):
    d = {"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step,
         "sampler": {"epoch": 0, "position": step},
         "rng": {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}}
    if with_scheduler:
        d["scheduler"] = sched.state_dict()
    return d


def _run(tmp_path):
    ck = tmp_path / "ckpts"
    ck.mkdir()
    log = tmp_path / "train.jsonl"
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / WARMUP))
    lines = []

    def train(first, last):
        for step in range(first, last + 1):
            loss = model(torch.randn(8, 4)).pow(2).mean()
            loss.backward()
            lines.append({"step": step, "loss": float(loss.detach()), "lr": sched.get_last_lr()[0]})
            opt.step()
            sched.step()
            opt.zero_grad()
            if step % SAVE == 0:  # the save code forgets the scheduler at step 8
                torch.save(_state(model, opt, sched, step, with_scheduler=step != 2 * SAVE), ck / f"ckpt-{step}.pt")

    train(1, CRASH)
    state = torch.load(ck / f"ckpt-{2 * SAVE}.pt", weights_only=False)  # the test's own checkpoint: trusted
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    for g in opt.param_groups:
        g["lr"] = g["initial_lr"]
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / WARMUP))  # not restored
    train(2 * SAVE + 1, END)
    log.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return ck, log


@pytest.mark.slow
def test_a_warmup_restart_beside_the_missing_scheduler(tmp_path):
    ck, log = _run(tmp_path)
    assert list(checkpoint_steps(ck)) == [SAVE, 2 * SAVE, 3 * SAVE]
    r = run_cli("trace", str(log), "--checkpoints", str(ck), "--format", "json")
    res = json.loads(r.stdout)["result"]
    resumes = res["checkpoints"]["resumes"]
    assert len(resumes) == 1
    rs = resumes[0]
    assert (rs["step"], rs["from_step"]) == (2 * SAVE + 1, CRASH)
    assert rs["checkpoint"]["step"] == 2 * SAVE and rs["checkpoint"]["layout"] == "torch_save"
    assert rs["lacked"] == ["ckpt.missing_scheduler"]
    assert "log.lr_discontinuity" in rs["symptoms"]
    assert ["log.lr_discontinuity", "ckpt.missing_scheduler"] in rs["explained"]
    assert r.returncode == 1  # the checkpoint's missing scheduler is an error
    text = run_cli("trace", str(log), "--checkpoints", str(ck)).stdout
    assert f"resume at step {2 * SAVE + 1} (the log was at {CRASH}): from checkpoint step {2 * SAVE}" in text
    assert "log.lr_discontinuity here is explained by ckpt.missing_scheduler" in text
    # without the option the result keeps its keys
    assert "checkpoints" not in json.loads(run_cli("trace", str(log), "--format", "json").stdout)["result"]


def test_the_join_picks_the_checkpoint_at_or_below_the_resume(tmp_path):
    for name in ("checkpoint-100", "checkpoint-200", "global_step300"):
        (tmp_path / name).mkdir()
    (tmp_path / "notes.txt").write_text("not a checkpoint")
    assert list(checkpoint_steps(tmp_path)) == [100, 200, 300]
    events = [{"kind": "resume", "step": 150, "from_step": 190, "rank": "0"},
              {"kind": "resume", "step": 50, "from_step": 90, "rank": "0"}]
    lr = Finding(check="log.lr_discontinuity", severity="warn", message="", details={"step": 150})
    out = resume_checkpoints(events, [lr], tmp_path)
    first, second = out["resumes"]
    assert first["checkpoint"]["step"] == 100 and first["symptoms"] == ["log.lr_discontinuity"]
    assert first["error"] and "not a checkpoint datacheck recognises" in first["error"]  # an empty folder
    assert second["checkpoint"] is None  # no checkpoint at or below step 50
