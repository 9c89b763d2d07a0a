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
    # one group without state (its params frozen, or not yet unfrozen, while the other group steps: AdamW
    # keeps no state for a param whose grad is None, so the run itself held none): no finding, as saved
    osd = opt.state_dict()
    for pid in osd["param_groups"][1]["params"]:
        osd["state"].pop(pid)
    p = tmp_path / "bare_group.pt"
    torch.save({**full, "optimizer": osd}, p)
    info = inspect_checkpoint(p)
    assert _checks(info) == []
    assert [(g["params"], g["with_state"]) for g in info.pieces["optimizer"].detail["groups"]] == [(2, 2), (2, 0)]
    # ... and every group without state past step 0: a fresh optimizer's state saved, every moment lost
    osd = opt.state_dict()
    osd["state"].clear()
    p = tmp_path / "bare_all.pt"
    torch.save({**full, "optimizer": osd}, p)
    info = inspect_checkpoint(p)
    assert _checks(info) == ["ckpt.missing_optimizer"]
    assert info.findings[0].details["groups"] == [0, 1]
    p = tmp_path / "mismatch.pt"
    torch.save({**full, "step": 5}, p)
    assert _checks(inspect_checkpoint(p)) == ["ckpt.step_mismatch"]


def _adamw_run(steps):
    """The trial's run: a Linear stepped ``steps`` times by AdamW under a LambdaLR, saved as a plain dict."""
    torch.manual_seed(0)
    m = torch.nn.Linear(4, 3)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    sch = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    for _ in range(steps):
        m(torch.randn(2, 4)).sum().backward()
        opt.step()
        sch.step()
        opt.zero_grad()
    return {"model": m.state_dict(), "optimizer": opt.state_dict(), "scheduler": sch.state_dict(),
            "rng": {"cpu": torch.get_rng_state(), "python": random.getstate(), "numpy": np.random.get_state()},
            "sampler": {"epoch": 1, "consumed_in_epoch": 8}, "step": steps}


@pytest.mark.slow
@pytest.mark.parametrize(("change", "check", "says"), [
    ({"sampler": None}, "ckpt.missing_sampler_state", "[sampler] holds None"),
    ({"sampler": {}}, "ckpt.missing_sampler_state", "[sampler] holds an empty dict"),
    ({"rng": {}}, "ckpt.missing_rng", "[rng] holds an empty dict"),
    ({"rng": None}, "ckpt.missing_rng", "[rng] holds None"),
    ({"rng": {"python": None, "numpy": None, "cpu": None}}, "ckpt.missing_rng", "holds none of the generators"),
    ({"rng": {"cpu": torch.get_rng_state()}}, "ckpt.missing_rng", "lacks the python, numpy generator(s)"),
    ({"optimizer": "empty_state"}, "ckpt.missing_optimizer", "its state is empty"),
    ({"optimizer": "empty_state", "step": "drop"}, "ckpt.missing_optimizer", "scheduler.last_epoch 15"),
    ({"optimizer": "no_tensor"}, "ckpt.missing_optimizer", "params' state holds no tensor"),
])
def test_plain_torch_save_piece_present_by_name_and_hollow(tmp_path, change, check, says):
    """A new user's trial: after 15 AdamW steps, a plain dict whose sampler is None, whose RNG dict is
    empty, or whose optimizer holds no state for any param (scheduler.last_epoch 15) was reported as
    every piece present (exit 0)."""
    full = _adamw_run(15)
    ck = dict(full)
    for k, v in change.items():
        if v == "drop":
            ck.pop(k)
        elif v == "empty_state":
            ck[k] = {"state": {}, "param_groups": full["optimizer"]["param_groups"]}
        elif v == "no_tensor":
            ck[k] = {"state": {p: {"step": s["step"]} for p, s in full["optimizer"]["state"].items()},
                     "param_groups": full["optimizer"]["param_groups"]}
        else:
            ck[k] = v
    torch.save(full, tmp_path / "full.pt")
    assert _checks(inspect_checkpoint(tmp_path / "full.pt")) == []
    p = tmp_path / "hollow.pt"
    torch.save(ck, p)
    info = inspect_checkpoint(p)
    assert _checks(info) == [check]
    assert says in info.findings[0].message
    piece = {"ckpt.missing_sampler_state": "sampler", "ckpt.missing_rng": "rng", "ckpt.missing_optimizer": "optimizer"}
    assert not info.pieces[piece[check]].present
    if check == "ckpt.missing_optimizer":
        n_params = len(full["optimizer"]["param_groups"][0]["params"])
        assert f"{n_params} " in info.findings[0].message and info.findings[0].details["groups"] == [0]
    r = run_cli("checkpoint", str(p))
    assert "every piece of a lossless resume is present" not in r.stdout
    assert r.returncode == (1 if info.findings[0].severity == "error" else 0), r.stdout + r.stderr


@pytest.mark.slow
def test_plain_torch_save_at_step_0_and_empty_weights(tmp_path):
    """An optimizer that never stepped holds an empty state: at step 0 that is complete. A model
    state dict with no tensor is no weights (exit 2); a GradScaler state with no scale is no scaler."""
    full = _adamw_run(0)
    assert full["optimizer"]["state"] == {} and full["scheduler"]["last_epoch"] == 0
    torch.save(full, tmp_path / "step0.pt")
    assert _checks(inspect_checkpoint(tmp_path / "step0.pt")) == []
    torch.save({**full, "model": {}}, tmp_path / "noweights.pt")
    assert not inspect_checkpoint(tmp_path / "noweights.pt").pieces["weights"].present
    assert run_cli("checkpoint", str(tmp_path / "noweights.pt")).returncode == 2
    sc = torch.amp.GradScaler("cpu", init_scale=1024.0).state_dict()
    torch.save({**full, "scaler": sc}, tmp_path / "scaler.pt")
    assert _checks(inspect_checkpoint(tmp_path / "scaler.pt", fp16=True)) == []
    torch.save({**full, "scaler": {**sc, "scale": None}}, tmp_path / "noscale.pt")
    info = inspect_checkpoint(tmp_path / "noscale.pt", fp16=True)
    assert _checks(info) == ["ckpt.missing_scaler"] and "a scale of None" in info.findings[0].message


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
    # each piece's file there and holding nothing a resume restores
    osd = torch.load(tmp_path / "state" / "optimizer.bin", weights_only=True)
    for name, content, check, says in [
            ("optimizer.bin", {"state": {}, "param_groups": osd["param_groups"]}, "ckpt.missing_optimizer",
             "its state is empty"),
            ("scheduler.bin", {}, "ckpt.missing_scheduler", "scheduler.bin holds an empty dict"),
            ("random_states_0.pkl", {"step": 0}, "ckpt.missing_rng", "holds none of the generators"),
            ("dl_state_dict.bin", {}, "ckpt.missing_sampler_state", "dl_state_dict.bin holds an empty dict")]:
        d = tmp_path / f"hollow_{name}"
        shutil.copytree(tmp_path / "state", d)
        torch.save(content, d / name)
        info = inspect_checkpoint(d)
        assert _checks(info) == sorted({check, "ckpt.missing_sampler_state"}), name
        assert any(says in f.message for f in info.findings if f.check == check), name
    # a stateful dataloader's state (keys of torchdata's StatefulDataLoader.state_dict, what save_state writes
    # under use_stateful_dataloader; torchdata is not installed here) is a data position
    d = tmp_path / "dl_state"
    shutil.copytree(tmp_path / "state", d)
    torch.save({"_num_yielded": 3, "_sampler_iter_yielded": 3, "_iterator_finished": False}, d / "dl_state_dict.bin")
    assert _checks(inspect_checkpoint(d)) == []


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
    # the optimizer's state emptied past step 0, the scheduler's state emptied, a scaler state with no scale
    ck = torch.load(first, weights_only=True)
    assert "MixedPrecision" not in ck  # 32-bit: Lightning writes no precision plugin state
    ck["optimizer_states"] = [{"state": {}, "param_groups": o["param_groups"]} for o in ck["optimizer_states"]]
    ck["lr_schedulers"] = [{}]
    ck["MixedPrecision"] = torch.amp.GradScaler("cpu", enabled=False).state_dict()
    torch.save(ck, tmp_path / "hollow.ckpt")
    info = inspect_checkpoint(tmp_path / "hollow.ckpt", fp16=True)
    assert _checks(info) == ["ckpt.missing_optimizer", "ckpt.missing_rng", "ckpt.missing_sampler_state",
                             "ckpt.missing_scaler", "ckpt.missing_scheduler"]
    msgs = {f.check: f.message for f in info.findings}
    assert f"global_step {every}" in msgs["ckpt.missing_optimizer"]
    assert "lr_schedulers holds [0] an empty dict" in msgs["ckpt.missing_scheduler"]
    assert "MixedPrecision holds an empty dict" in msgs["ckpt.missing_scaler"]


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
    # the client state's lr_scheduler there and empty
    ns = deepspeed_folder(tmp_path / "es")
    ms_path = ns / "global_step6" / "mp_rank_00_model_states.pt"
    ms = torch.load(ms_path, weights_only=False)
    torch.save({**ms, "lr_scheduler": {}}, ms_path)
    info = inspect_checkpoint(ns)
    assert "ckpt.missing_scheduler" in _checks(info)
    assert any("lr_scheduler holds an empty dict" in f.message for f in info.findings)
    r = run_cli("checkpoint", str(tmp_path / "rank"), "--format", "json")
    assert r.returncode == 1
    assert json.loads(r.stdout)["result"]["layout"] == "deepspeed"


def test_unknown_folder_is_a_usage_error(tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    r = run_cli("checkpoint", str(tmp_path))
    assert r.returncode == 2 and "not a checkpoint datacheck recognises" in r.stderr


@pytest.mark.slow
def test_frozen_params_handed_to_the_optimizer_are_no_missing_state(tmp_path):
    """A frozen backbone (``requires_grad=False``) whose params are still handed to AdamW, as a whole
    ``model.parameters()`` or as a param group of its own (gradual unfreezing): AdamW keeps no state for
    them in the run itself, so the checkpoint misses nothing (a false ckpt.missing_optimizer before)."""
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 2))
    for prm in m[0].parameters():
        prm.requires_grad_(False)
    for name, groups in (("whole", m.parameters()),
                         ("groups", [{"params": m[0].parameters(), "lr": 1e-5}, {"params": m[1].parameters()}])):
        opt = torch.optim.AdamW(groups, lr=1e-3)
        sch = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
        for _ in range(5):
            m(torch.randn(8, 4)).pow(2).mean().backward()
            opt.step()
            sch.step()
            opt.zero_grad()
        osd = opt.state_dict()
        assert len(osd["state"]) == 2  # the head's weight and bias only: the run's own optimizer state
        p = tmp_path / f"{name}.pt"
        torch.save({"model": m.state_dict(), "optimizer": osd, "scheduler": sch.state_dict(), "step": 5,
                    "sampler": {"epoch": 0, "seed": 0},
                    "rng": {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}}, p)
        info = inspect_checkpoint(p)
        assert _checks(info) == [], name
        assert info.pieces["optimizer"].present
