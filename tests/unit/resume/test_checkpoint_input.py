"""``datacheck checkpoint`` on what is not a whole checkpoint: a text file, random bytes, one piece saved
alone (an optimizer's or a scheduler's state dict), a checkpoint without its weights, and pieces whose
file is a hostile pickle (protocol 2 through torch.save, protocol 0 written by hand). The checkpoint is a
Hugging Face ``checkpoint-4/`` layout written from a real 4-step Adam + LambdaLR run of a tiny linear model."""
from __future__ import annotations

import json
import os
import pickle
import random

import numpy as np
import pytest
from conftest import run_cli

from datacheck.resume.checkpoint import inspect_checkpoint

torch = pytest.importorskip("torch")
safetensors_torch = pytest.importorskip("safetensors.torch")

STEPS = 4


@pytest.fixture
def ckpt(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 2))
    for _ in range(STEPS):
        model(torch.randn(4, 3)).sum().backward()
        opt.step()
        sched.step()
        opt.zero_grad()
    d = tmp_path / f"checkpoint-{STEPS}"
    d.mkdir()
    safetensors_torch.save_file(model.state_dict(), str(d / "model.safetensors"))
    torch.save(opt.state_dict(), d / "optimizer.pt")
    torch.save(sched.state_dict(), d / "scheduler.pt")
    torch.save({"python": random.getstate(), "numpy": np.random.get_state(), "cpu": torch.random.get_rng_state()},
               d / "rng_state.pth")
    (d / "trainer_state.json").write_text(json.dumps({"global_step": STEPS, "epoch": 1.0}))
    return d


def test_a_whole_checkpoint_says_so_and_the_scaler_is_not_needed(ckpt):
    r = run_cli("checkpoint", str(ckpt))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "every piece of a lossless resume is present and the steps agree" in r.stdout
    assert "scaler    not needed (not fp16)" in r.stdout and "MISSING" not in r.stdout


@pytest.mark.parametrize("content", [b"just some notes, not a checkpoint\n", bytes(random.Random(0).randrange(256)
                                                                                    for _ in range(100))])
def test_a_file_that_is_not_a_checkpoint_is_a_usage_error(tmp_path, content):
    f = tmp_path / "thing.pt"
    f.write_bytes(content)
    r = run_cli("checkpoint", str(f))
    assert r.returncode == 2
    assert "not a checkpoint" in r.stderr and "every piece" not in r.stdout


def test_no_weights_is_not_a_resumable_checkpoint(ckpt):
    (ckpt / "model.safetensors").unlink()
    r = run_cli("checkpoint", str(ckpt))
    assert r.returncode == 2
    assert "no model weights found: not a resumable checkpoint" in r.stdout
    assert "every piece" not in r.stdout
    r = run_cli("checkpoint", str(ckpt), "--format", "json")
    assert r.returncode == 2 and json.loads(r.stdout)["result"]["passed"] is False


def test_an_optimizer_or_scheduler_state_dict_alone_is_named(ckpt):
    osd = torch.load(ckpt / "optimizer.pt", weights_only=True)
    groups, with_state = len(osd["param_groups"]), len(osd["state"])
    r = run_cli("checkpoint", str(ckpt / "optimizer.pt"))
    assert r.returncode == 2
    assert (f"an optimizer state dict ({groups} param group(s), {with_state} param(s) with state, step {STEPS})"
            in r.stderr)
    last = torch.load(ckpt / "scheduler.pt", weights_only=True)["last_epoch"]
    r = run_cli("checkpoint", str(ckpt / "scheduler.pt"))
    assert r.returncode == 2 and f"a learning-rate scheduler state dict (last_epoch {last})" in r.stderr


class _Hostile:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_hostile_optimizer_file_is_not_a_present_optimizer(ckpt, tmp_path):
    marker = tmp_path / "pwned"
    torch.save({"state": {}, "param_groups": [], "x": _Hostile(marker)}, ckpt / "optimizer.pt")
    info = inspect_checkpoint(ckpt)
    checks = {f.check for f in info.findings}
    assert {"ckpt.unsafe_pickle", "ckpt.missing_optimizer"} <= checks
    assert not info.pieces["optimizer"].present and not marker.exists()
    unsafe = next(f for f in info.findings if f.check == "ckpt.unsafe_pickle")
    assert any(g in ("posix.system", "os.system", "nt.system") for g in unsafe.details["globals"])
    r = run_cli("checkpoint", str(ckpt))
    assert r.returncode == 1 and "every piece" not in r.stdout and not marker.exists()


def test_a_protocol_0_pickle_as_rng_state_is_named(ckpt, tmp_path):
    marker = tmp_path / "pwned0"
    (ckpt / "rng_state.pth").write_bytes(f"cbuiltins\neval\n(V__import__('os').system('touch {marker}')\ntR.".encode())
    info = inspect_checkpoint(ckpt)
    unsafe = [f for f in info.findings if f.check == "ckpt.unsafe_pickle"]
    assert unsafe and "builtins.eval" in unsafe[0].details["globals"]
    assert "ckpt.missing_rng" in {f.check for f in info.findings} and not info.pieces["rng"].present
    assert not marker.exists()
    proto1 = pickle.dumps(_Hostile(marker), protocol=1)
    (ckpt / "rng_state.pth").write_bytes(proto1)
    info = inspect_checkpoint(ckpt)
    assert any(f.check == "ckpt.unsafe_pickle" for f in info.findings) and not marker.exists()


def test_accelerate_s_own_sampler_pickle_counts_a_hostile_one_does_not(ckpt, tmp_path):
    """accelerate's sampler.bin pickles its SeedableRandomSampler (a global of accelerate itself): not loaded,
    named, and still the sampler piece; a sampler.bin calling os.system is not a sampler state."""
    data_loader = pytest.importorskip("accelerate.data_loader")
    acc = tmp_path / "acc"
    acc.mkdir()
    for src, dst in (("model.safetensors", "model.safetensors"), ("optimizer.pt", "optimizer.bin"),
                     ("scheduler.pt", "scheduler.bin"), ("rng_state.pth", "random_states_0.pkl")):
        (acc / dst).write_bytes((ckpt / src).read_bytes())
    torch.save(data_loader.SeedableRandomSampler(list(range(16))), acc / "sampler.bin")
    info = inspect_checkpoint(acc)
    assert info.layout == "accelerate" and info.pieces["sampler"].present
    assert {f.check for f in info.findings} == {"ckpt.unsafe_pickle"}
    marker = tmp_path / "pwned"
    torch.save(_Hostile(marker), acc / "sampler.bin")
    info = inspect_checkpoint(acc)
    assert not info.pieces["sampler"].present and not marker.exists()
    assert {"ckpt.unsafe_pickle", "ckpt.missing_sampler_state"} <= {f.check for f in info.findings}


def _cut(path, keep):
    path.write_bytes(path.read_bytes()[:keep])


@pytest.mark.parametrize("name, breakit, piece, cid", [
    ("optimizer.pt", lambda p: _cut(p, p.stat().st_size - 100), "optimizer", "ckpt.missing_optimizer"),
    ("optimizer.pt", lambda p: _cut(p, 0), "optimizer", "ckpt.missing_optimizer"),
    ("scheduler.pt", lambda p: p.write_bytes(bytes(random.Random(1).randrange(256) for _ in range(500))), "scheduler",
     "ckpt.missing_scheduler"),
    ("rng_state.pth", lambda p: _cut(p, 50), "rng", "ckpt.missing_rng"),
    ("optimizer.pt", lambda p: (p.unlink(), p.mkdir()), "optimizer", "ckpt.missing_optimizer"),
    ("scheduler.pt", lambda p: (p.unlink(), os.mkfifo(p)), "scheduler", "ckpt.missing_scheduler"),
])
def test_a_piece_no_trainer_can_load_is_not_present(ckpt, name, breakit, piece, cid):
    """A piece whose file is cut short, random bytes, a folder or a FIFO cannot be loaded by the
    resume either: the piece is MISSING with its finding (it was "present, not loaded" and the
    checkpoint passed as a lossless resume; a folder crashed with IsADirectoryError, a FIFO hung)."""
    breakit(ckpt / name)
    info = inspect_checkpoint(ckpt)
    assert info.pieces[piece].present is False and name in info.unusable
    assert cid in info.missing()
    r = run_cli("checkpoint", str(ckpt))
    assert r.returncode == (0 if cid == "ckpt.missing_rng" else 1), r.stdout + r.stderr  # missing_rng is a warning
    assert f"{name} cannot be loaded (" in r.stdout and "every piece" not in r.stdout


@pytest.mark.parametrize("cut", [10, 1])
def test_a_cut_safetensors_file_is_no_weights(ckpt, cut):
    """The safetensors header is read alone, but its tensors must end where the file does, as the
    safetensors loader requires: a weights file cut short is no weights (it passed)."""
    _cut(ckpt / "model.safetensors", (ckpt / "model.safetensors").stat().st_size - cut)
    info = inspect_checkpoint(ckpt)
    assert info.pieces["weights"].present is False
    assert any("model.safetensors: safetensors header unreadable (tensor " in n and "(a file cut short)" in n
               for n in info.notes), info.notes
    assert run_cli("checkpoint", str(ckpt)).returncode == 2


@pytest.mark.parametrize("state, why", [("[]", "a JSON list, not an object"),
                                        ('{"global_step": "four"}', "its global_step is 'four', not a step count")])
def test_a_trainer_state_without_a_step_count_is_no_data_position(ckpt, state, why):
    (ckpt / "trainer_state.json").write_text(state)
    info = inspect_checkpoint(ckpt)  # a list crashed with AttributeError
    assert "ckpt.missing_sampler_state" in info.missing()
    assert any(why in n for n in info.notes), info.notes
