"""``datacheck checkpoint`` on the other layouts: accelerate ``save_state`` and Lightning ``.ckpt`` written
by real tiny CPU runs (skipped where the package is not installed), torch.distributed.checkpoint written
by torch on the CPU (one process), a plain ``torch.save`` dict, and a DeepSpeed folder made like the one
DeepSpeed writes (DeepSpeed does not install on a CPU-only machine: the files hold the dicts its
``save_checkpoint`` writes, under its file names). The tests that step an optimizer are slow: the first
``optimizer.step()`` of a process imports ``torch._dynamo`` (about 5 s)."""
from __future__ import annotations

import json
import random
import shutil

import numpy as np
import pytest
from ckpthelp import deepspeed_folder, model_opt_sched
from conftest import run_cli

from datacheck.resume.checkpoint import inspect_checkpoint

torch = pytest.importorskip("torch")


def _checks(info):
    return sorted({f.check for f in info.findings})


# ---------------------------------------------------------------------------------------------- plain torch.save


@pytest.mark.slow
def test_plain_torch_save_dict(tmp_path):
    model, opt, sched = model_opt_sched(3)
    full = {"model": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
            "step": 3, "sampler": {"epoch": 0, "seed": 0, "position": 6},
            "rng": {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}}
    ck = tmp_path / "full.pt"
    torch.save(full, ck)
    info = inspect_checkpoint(ck)
    assert info.layout == "torch_save" and _checks(info) == []
    assert info.steps == {"step": 3, "optimizer.step": 3, "scheduler.last_epoch": 3}
    assert [g["params"] for g in info.pieces["optimizer"].detail["groups"]] == [2, 2]
    for drop, check in [("optimizer", "ckpt.missing_optimizer"), ("scheduler", "ckpt.missing_scheduler"),
                        ("sampler", "ckpt.missing_sampler_state"), ("rng", "ckpt.missing_rng")]:
        p = tmp_path / f"no_{drop}.pt"
        torch.save({k: v for k, v in full.items() if k != drop}, p)
        assert _checks(inspect_checkpoint(p)) == [check], drop
    # the optimizer's moments of one group gone (a state dict pruned by hand, or saved before that group stepped)
    osd = opt.state_dict()
    for pid in osd["param_groups"][1]["params"]:
        osd["state"].pop(pid)
    p = tmp_path / "bare_group.pt"
    torch.save({**full, "optimizer": osd}, p)
    info = inspect_checkpoint(p)
    assert _checks(info) == ["ckpt.missing_optimizer"]
    assert info.findings[0].details["groups"] == [1]
    p = tmp_path / "mismatch.pt"
    torch.save({**full, "step": 5}, p)
    assert _checks(inspect_checkpoint(p)) == ["ckpt.step_mismatch"]


# ---------------------------------------------------------------------------------------------- torch DCP


@pytest.mark.slow
def test_torch_distributed_checkpoint(tmp_path):
    dcp = pytest.importorskip("torch.distributed.checkpoint")
    model, opt, sched = model_opt_sched(2)
    state = {"model": model.state_dict(), "optim": opt.state_dict(), "scheduler": sched.state_dict(), "step": 2,
             "sampler": {"epoch": 0, "position": 4}, "rng": {"torch": torch.get_rng_state()}}
    with pytest.warns(UserWarning, match="single process"):
        dcp.save(state, checkpoint_id=str(tmp_path / "full"))
    info = inspect_checkpoint(tmp_path / "full")
    assert info.layout == "dcp" and _checks(info) == [] and info.ranks == [0]
    state2 = {"model": model.state_dict(), "step": 2}
    with pytest.warns(UserWarning, match="single process"):
        dcp.save(state2, checkpoint_id=str(tmp_path / "weights_only"))
    assert _checks(inspect_checkpoint(tmp_path / "weights_only")) == [
        "ckpt.missing_optimizer", "ckpt.missing_rng", "ckpt.missing_sampler_state", "ckpt.missing_scheduler"]
    shutil.copytree(tmp_path / "full", tmp_path / "torn")
    for f in (tmp_path / "torn").glob("__0_*.distcp"):
        f.unlink()
    info = inspect_checkpoint(tmp_path / "torn")
    assert _checks(info) == ["ckpt.rank_missing"] and info.findings[0].details["files"] == ["__0_0.distcp"]


# ---------------------------------------------------------------------------------------------- accelerate


@pytest.mark.slow
def test_accelerate_save_state(tmp_path):
    accelerate = pytest.importorskip("accelerate")
    acc = accelerate.Accelerator(cpu=True)
    model, opt, sched = model_opt_sched(0)
    model, opt, sched = acc.prepare(model, opt, sched)
    for _ in range(3):
        acc.backward(model(torch.randn(2, 4)).pow(2).mean())
        opt.step()
        sched.step()
        opt.zero_grad()
    acc.save_state(str(tmp_path / "state"))
    names = sorted(p.name for p in (tmp_path / "state").iterdir())
    assert "random_states_0.pkl" in names and "optimizer.bin" in names
    info = inspect_checkpoint(tmp_path / "state")
    assert info.layout == "accelerate"
    # accelerate restores no data position without a stateful loader or its seedable sampler
    assert _checks(info) == ["ckpt.missing_sampler_state"]
    assert "skip_first_batches" in info.findings[0].message
    assert info.steps == {"optimizer.step": 3, "scheduler.last_epoch": 3}
    assert info.pieces["rng"].detail["ranks"] == {"0": ["python", "numpy", "torch"]}
    for drop, check in [("optimizer.bin", "ckpt.missing_optimizer"), ("scheduler.bin", "ckpt.missing_scheduler"),
                        ("random_states_0.pkl", "ckpt.missing_rng")]:
        d = tmp_path / f"no_{drop}"
        shutil.copytree(tmp_path / "state", d)
        (d / drop).unlink()
        got = _checks(inspect_checkpoint(d))
        assert got == sorted([check, "ckpt.missing_sampler_state"]), drop


# ---------------------------------------------------------------------------------------------- Lightning


@pytest.mark.slow
def test_lightning_ckpt(tmp_path):
    L = pytest.importorskip("lightning")

    class M(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 1)

        def training_step(self, batch, i):
            return self.lin(batch[0]).pow(2).mean()

        def configure_optimizers(self):
            o = torch.optim.AdamW(self.parameters(), lr=1e-2)
            s = torch.optim.lr_scheduler.LinearLR(o, 0.1, 1.0, 5)
            return {"optimizer": o, "lr_scheduler": {"scheduler": s, "interval": "step"}}

    rows, bs = 32, 4
    g = torch.Generator().manual_seed(0)
    dl = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(rows, 4, generator=g)), batch_size=bs,
                                     shuffle=True, generator=g)
    every = 3  # mid-epoch: 3 of rows / bs = 8 batches
    cb = L.pytorch.callbacks.ModelCheckpoint(dirpath=str(tmp_path / "ck"), every_n_train_steps=every, save_top_k=-1)
    t = L.Trainer(max_steps=every * 2 + 2, accelerator="cpu", logger=False, enable_progress_bar=False,
                  enable_model_summary=False, callbacks=[cb], default_root_dir=str(tmp_path))
    torch.manual_seed(0)  # the model's initial weights
    model = M()
    t.fit(model, dl)
    # ModelCheckpoint's default names: the first, mid-epoch, checkpoint by its step (two checkpoints
    # written milliseconds apart can share a modification time)
    assert sorted(p.name for p in (tmp_path / "ck").glob("*.ckpt")) == [f"epoch=0-step={every}.ckpt",
                                                                        f"epoch=0-step={2 * every}.ckpt"]
    first = tmp_path / "ck" / f"epoch=0-step={every}.ckpt"
    info = inspect_checkpoint(first)
    assert info.layout == "lightning"
    assert info.steps == {"global_step": every, "optimizer.step": every}
    # Lightning saves no RNG; a mid-epoch checkpoint of a plain DataLoader restarts the epoch's order
    assert _checks(info) == ["ckpt.missing_rng", "ckpt.missing_sampler_state"]
    assert info.pieces["sampler"].detail["batches_done_in_epoch"] == every
    ck = torch.load(first, weights_only=True)
    ck["optimizer_states"], ck["lr_schedulers"] = [], []  # what save_weights_only=True writes
    torch.save(ck, tmp_path / "weights_only.ckpt")
    got = _checks(inspect_checkpoint(tmp_path / "weights_only.ckpt"))
    assert got == ["ckpt.missing_optimizer", "ckpt.missing_rng", "ckpt.missing_sampler_state",
                   "ckpt.missing_scheduler"]


# ---------------------------------------------------------------------------------------------- DeepSpeed (made like)


@pytest.mark.slow
def test_deepspeed_layout(tmp_path):
    root = deepspeed_folder(tmp_path / "ok")
    info = inspect_checkpoint(root)
    assert info.layout == "deepspeed" and info.root.name == "global_step6"
    assert info.steps == {"folder": 6, "global_steps": 6, "lr_scheduler": 6}
    assert info.world_size == 2 and info.ranks == [0, 1]
    # DeepSpeed saves neither RNG nor a data position of its own
    assert _checks(info) == ["ckpt.missing_rng", "ckpt.missing_sampler_state"]
    info = inspect_checkpoint(deepspeed_folder(tmp_path / "rank", drop_rank=1))
    assert "ckpt.rank_missing" in _checks(info)
    assert next(f for f in info.findings if f.check == "ckpt.rank_missing").details["files"] == [
        "zero_pp_rank_1_mp_rank_00"]
    assert "ckpt.missing_scaler" in _checks(inspect_checkpoint(deepspeed_folder(tmp_path / "sc", scaler=False)))
    assert "ckpt.missing_scaler" not in _checks(inspect_checkpoint(
        deepspeed_folder(tmp_path / "bf", scaler=False, fp16=False)))
    assert "ckpt.missing_scheduler" in _checks(inspect_checkpoint(deepspeed_folder(tmp_path / "ns", scheduler=False)))
    r = run_cli("checkpoint", str(tmp_path / "rank"), "--format", "json")
    assert r.returncode == 1
    assert json.loads(r.stdout)["result"]["layout"] == "deepspeed"


def test_unknown_folder_is_a_usage_error(tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    r = run_cli("checkpoint", str(tmp_path))
    assert r.returncode == 2 and "not a checkpoint datacheck recognises" in r.stderr
