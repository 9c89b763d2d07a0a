"""``datacheck checkpoint`` on real Hugging Face Trainer checkpoints written by a tiny CPU run, with each
piece removed in turn: the finding names what the resumed run loses."""
from __future__ import annotations

import json
import shutil

import pytest
from ckpthelp import deepspeed_folder
from conftest import run_cli

from datacheck.resume.checkpoint import inspect_checkpoint

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")  # the Trainer needs it

pytestmark = pytest.mark.slow

STEPS, SAVE_EVERY, BATCH, ROWS = 4, 2, 4, 32


@pytest.fixture(scope="module")
def hf_run(tmp_path_factory):
    """A 4-step GPT-2 (1 layer, 8 dims) Trainer run on the CPU, saving checkpoint-2 and checkpoint-4."""
    out = tmp_path_factory.mktemp("hf") / "out"
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=1, n_head=2, n_embd=8, vocab_size=32, n_positions=16)
    model = transformers.GPT2LMHeadModel(cfg)

    class DS(torch.utils.data.Dataset):
        def __len__(self):
            return ROWS

        def __getitem__(self, i):
            ids = torch.tensor([(i + k) % 32 for k in range(8)])
            return {"input_ids": ids, "labels": ids}

    args = transformers.TrainingArguments(
        output_dir=str(out), per_device_train_batch_size=BATCH, max_steps=STEPS, save_steps=SAVE_EVERY,
        save_strategy="steps", use_cpu=True, report_to=[], logging_steps=1, warmup_steps=2, seed=0,
        disable_tqdm=True)
    transformers.Trainer(model=model, args=args, train_dataset=DS()).train()
    return out


def _copy(hf_run, tmp_path, step=STEPS):
    dst = tmp_path / f"checkpoint-{step}"
    shutil.copytree(hf_run / f"checkpoint-{step}", dst)
    return dst


def _checks(info):
    return sorted({f.check for f in info.findings})


def test_a_complete_checkpoint_has_every_piece(hf_run, tmp_path):
    ck = _copy(hf_run, tmp_path)
    info = inspect_checkpoint(ck)
    assert info.layout == "hf_trainer" and _checks(info) == []
    gs = json.loads((ck / "trainer_state.json").read_text())["global_step"]
    assert gs == STEPS
    assert info.steps == {"folder": STEPS, "trainer_state.global_step": gs, "optimizer.step": STEPS,
                          "scheduler.last_epoch": STEPS}
    assert all(info.pieces[p].present for p in ("weights", "optimizer", "scheduler", "rng", "sampler", "step"))
    groups = info.pieces["optimizer"].detail["groups"]
    n_params = len(list(transformers.GPT2LMHeadModel(transformers.GPT2Config(
        n_layer=1, n_head=2, n_embd=8, vocab_size=32, n_positions=16)).parameters()))
    assert sum(g["params"] for g in groups) == n_params  # tied lm_head: parameters() counts it once
    assert all(g["buffers"] == ["exp_avg", "exp_avg_sq"] for g in groups)
    assert info.pieces["rng"].detail["ranks"] == {"0": ["python", "numpy", "torch"]}
    # the output folder resolves to its last checkpoint (what resume_from_checkpoint=True picks)
    assert inspect_checkpoint(hf_run).root.name == f"checkpoint-{STEPS}"
    r = run_cli("checkpoint", str(ck))
    assert r.returncode == 0, r.stdout + r.stderr


def test_an_output_folder_with_its_own_state_and_weights_is_judged_by_its_last_checkpoint(hf_run, tmp_path):
    """A Trainer's output folder after ``trainer.save_state()`` / ``save_model()`` (DatacheckCallback
    writes the same trainer_state.json at the end): its root holds trainer_state.json and the final
    weights but no optimizer, scheduler or RNG state; ``resume_from_checkpoint=True`` takes the last
    checkpoint-N, and so does ``datacheck checkpoint``."""
    out = tmp_path / "out"
    for step in (SAVE_EVERY, STEPS):
        shutil.copytree(hf_run / f"checkpoint-{step}", out / f"checkpoint-{step}")
    shutil.copy(hf_run / f"checkpoint-{STEPS}" / "trainer_state.json", out / "trainer_state.json")
    shutil.copy(hf_run / f"checkpoint-{STEPS}" / "model.safetensors", out / "model.safetensors")
    info = inspect_checkpoint(out)
    assert (info.layout, info.root.name, _checks(info)) == ("hf_trainer", f"checkpoint-{STEPS}", [])
    r = run_cli("checkpoint", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    # a folder holding resume state of its own is judged itself, checkpoint-N beside it or not
    shutil.copy(hf_run / f"checkpoint-{STEPS}" / "optimizer.pt", out / "optimizer.pt")
    assert inspect_checkpoint(out).root == out


@pytest.mark.parametrize(("remove", "check", "says"), [
    ("optimizer.pt", "ckpt.missing_optimizer", "warm start"),
    ("scheduler.pt", "ckpt.missing_scheduler", "warmup reruns"),
    ("rng_state.pth", "ckpt.missing_rng", "dropout"),
    ("trainer_state.json", "ckpt.missing_sampler_state", "data order restarts"),
])
def test_each_piece_removed_in_turn(hf_run, tmp_path, remove, check, says):
    ck = _copy(hf_run, tmp_path)
    (ck / remove).unlink()
    info = inspect_checkpoint(ck)
    assert _checks(info) == [check]
    f = next(f for f in info.findings if f.check == check)
    assert says in f.message
    r = run_cli("checkpoint", str(ck), "--format", "json")
    doc = json.loads(r.stdout)["result"]
    assert [x["check"] for x in doc["findings"]] == [check]
    assert r.returncode == (1 if f.severity == "error" else 0)


def test_weights_removed(hf_run, tmp_path):
    ck = _copy(hf_run, tmp_path)
    (ck / "model.safetensors").unlink()
    info = inspect_checkpoint(ck)
    assert not info.pieces["weights"].present
    assert any("cannot resume" in n for n in info.notes)


def test_scaler_missing_under_fp16(hf_run, tmp_path):
    """A CPU run has no GradScaler (fp16 mixed precision needs CUDA): with --fp16 the absent scaler.pt
    is the finding; without it, no finding (the run may not have used one)."""
    ck = _copy(hf_run, tmp_path)
    assert not (ck / "scaler.pt").exists()
    assert _checks(inspect_checkpoint(ck)) == []
    info = inspect_checkpoint(ck, fp16=True)
    assert _checks(info) == ["ckpt.missing_scaler"]
    assert "65536" in info.findings[0].message
    torch.save(torch.amp.GradScaler("cpu", init_scale=1024.0).state_dict(), ck / "scaler.pt")
    assert _checks(inspect_checkpoint(ck, fp16=True)) == []


def test_a_scheduler_from_another_save_is_a_step_mismatch(hf_run, tmp_path):
    ck = _copy(hf_run, tmp_path)
    shutil.copy(hf_run / f"checkpoint-{SAVE_EVERY}" / "scheduler.pt", ck / "scheduler.pt")
    info = inspect_checkpoint(ck)
    assert _checks(info) == ["ckpt.step_mismatch"]
    assert info.findings[0].details["steps"]["scheduler.last_epoch"] == SAVE_EVERY
    assert info.findings[0].details["steps"]["folder"] == STEPS


def test_a_rank_s_rng_file_missing(hf_run, tmp_path):
    """Made like a 2-process run (rng_state_<rank>.pth per process, as the Trainer names them): rank 0's
    file absent."""
    ck = _copy(hf_run, tmp_path)
    (ck / "rng_state.pth").rename(ck / "rng_state_1.pth")
    info = inspect_checkpoint(ck)
    assert _checks(info) == ["ckpt.rank_missing"]
    assert info.findings[0].details["ranks"] == [0]
    (ck / "rng_state_1.pth").rename(ck / "rng_state_0.pth")
    assert _checks(inspect_checkpoint(ck, world_size=3)) == ["ckpt.rank_missing"]
    assert inspect_checkpoint(ck, world_size=3).findings[0].details["ranks"] == [1, 2]


def test_a_world_size_below_the_ranks_found_is_refused(hf_run, tmp_path):
    """rng_state_<rank>.pth of ranks 0 .. 2 (a 3-process run) but --world-size 2: the given size
    contradicts the checkpoint, so it is refused (exit 2) naming the ranks found."""
    import datacheck

    ck = _copy(hf_run, tmp_path)
    ranks = [0, 1, 2]
    for r in ranks:
        shutil.copy(ck / "rng_state.pth", ck / f"rng_state_{r}.pth")
    (ck / "rng_state.pth").unlink()
    ws = 2
    with pytest.raises(datacheck.UsageError, match=(
            rf"--world-size is {ws} \(ranks 0 \.\. {ws - 1}\), but .* holds per-rank files of rank\(s\) 2 \(ranks "
            rf"found: 0, 1, 2\): give the run's world size \(at least {max(ranks) + 1}\)")):
        inspect_checkpoint(ck, world_size=ws)
    assert not _checks(inspect_checkpoint(ck, world_size=len(ranks)))
    r = run_cli("checkpoint", str(ck), "--world-size", str(ws))
    assert r.returncode == 2 and "ranks found: 0, 1, 2" in r.stderr, r.stderr


def test_a_trainer_checkpoint_saved_under_deepspeed(hf_run, tmp_path):
    """Made like the Trainer under DeepSpeed: no optimizer.pt / scheduler.pt (the engine saves both in its
    own global_stepN/ with latest, DeepSpeed's layout), the Trainer's rng_state and trainer_state beside them."""
    ck = _copy(hf_run, tmp_path)
    (ck / "optimizer.pt").unlink()
    (ck / "scheduler.pt").unlink()
    deepspeed_folder(ck, dp=1, step=STEPS, fp16=True)
    info = inspect_checkpoint(ck)
    assert _checks(info) == []
    assert info.pieces["optimizer"].files == [f"global_step{STEPS}/zero_pp_rank_0_mp_rank_00_optim_states.pt"]
    assert info.steps["deepspeed.global_steps"] == STEPS and info.steps["trainer_state.global_step"] == STEPS
    (ck / f"global_step{STEPS}" / "zero_pp_rank_0_mp_rank_00_optim_states.pt").unlink()
    deepspeed_folder(tmp_path / "two", dp=2, step=STEPS, drop_rank=1)
    shutil.rmtree(ck / f"global_step{STEPS}")
    shutil.copytree(tmp_path / "two" / f"global_step{STEPS}", ck / f"global_step{STEPS}")
    info = inspect_checkpoint(ck)
    assert _checks(info) == ["ckpt.rank_missing"]
    assert info.findings[0].details["files"] == ["zero_pp_rank_1_mp_rank_00"]


def _hollow_optimizer(ck):
    """The checkpoint's own optimizer.pt with its ``state`` emptied (its param_groups kept)."""
    osd = torch.load(ck / "optimizer.pt", weights_only=True)
    return {"state": {}, "param_groups": osd["param_groups"]}


@pytest.mark.parametrize(("file", "content", "check", "says"), [
    ("optimizer.pt", _hollow_optimizer, "ckpt.missing_optimizer", "its state is empty"),
    ("optimizer.pt", lambda ck: {}, "ckpt.missing_optimizer", "optimizer.pt holds an empty dict"),
    ("scheduler.pt", lambda ck: {}, "ckpt.missing_scheduler", "scheduler.pt holds an empty dict"),
    ("rng_state.pth", lambda ck: {}, "ckpt.missing_rng", "holds none of the generators"),
    ("rng_state.pth", lambda ck: {"python": None, "numpy": None, "cpu": None}, "ckpt.missing_rng",
     "holds none of the generators"),
])
def test_a_piece_present_by_name_and_hollow(hf_run, tmp_path, file, content, check, says):
    """A Trainer checkpoint whose piece's file is there and holds nothing a resume restores (an
    optimizer state without state past step 0, an empty dict): not present, its finding says what it holds."""
    ck = _copy(hf_run, tmp_path)
    torch.save(content(ck), ck / file)
    info = inspect_checkpoint(ck)
    assert _checks(info) == [check]
    assert says in info.findings[0].message and file in info.findings[0].message
    piece = {"optimizer.pt": "optimizer", "scheduler.pt": "scheduler", "rng_state.pth": "rng"}[file]
    assert not info.pieces[piece].present
    r = run_cli("checkpoint", str(ck))
    assert "every piece of a lossless resume is present" not in r.stdout
    assert r.returncode == (1 if info.findings[0].severity == "error" else 0)


def test_hollow_optimizer_counts_the_params_of_each_group(hf_run, tmp_path):
    ck = _copy(hf_run, tmp_path)
    osd = _hollow_optimizer(ck)
    torch.save(osd, ck / "optimizer.pt")
    f = inspect_checkpoint(ck).findings[0]
    assert f.details["groups"] == list(range(len(osd["param_groups"])))
    for i, g in enumerate(osd["param_groups"]):
        assert f"group {i}: {len(g['params'])} of {len(g['params'])} params without state" in f.message
    assert f"folder {STEPS}" in f.message


def test_empty_weights_and_scaler(hf_run, tmp_path):
    """model.safetensors holding no tensor is no weights (exit 2); scaler.pt holding a disabled
    GradScaler's state (``{}``) is no loss scale under --fp16."""
    from safetensors.torch import save_file

    ck = _copy(hf_run, tmp_path)
    save_file({}, str(ck / "model.safetensors"))
    info = inspect_checkpoint(ck)
    assert not info.pieces["weights"].present
    assert run_cli("checkpoint", str(ck)).returncode == 2
    ck = _copy(hf_run, tmp_path / "sc")
    disabled = torch.amp.GradScaler("cpu", enabled=False).state_dict()
    assert disabled == {}
    torch.save(disabled, ck / "scaler.pt")
    info = inspect_checkpoint(ck, fp16=True)
    assert _checks(info) == ["ckpt.missing_scaler"]
    assert "scaler.pt holds an empty dict" in info.findings[0].message
    assert _checks(inspect_checkpoint(ck)) == []  # not known to be fp16: the scaler is not judged
