"""Checkpoint builders for the ``datacheck checkpoint`` tests: a tiny model, optimizer and scheduler
stepped on the CPU, and a folder laid out as DeepSpeed's ``save_checkpoint`` writes it."""
from __future__ import annotations

import torch

__all__ = ["model_opt_sched", "deepspeed_folder"]


def model_opt_sched(steps):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    opt = torch.optim.AdamW([{"params": model[0].parameters()}, {"params": model[2].parameters(), "lr": 1e-3}])
    sched = torch.optim.lr_scheduler.LinearLR(opt, 0.1, 1.0, total_iters=10)
    for _ in range(steps):
        model(torch.randn(2, 4)).pow(2).mean().backward()
        opt.step()
        sched.step()
        opt.zero_grad()
    return model, opt, sched


def deepspeed_folder(root, *, dp=2, step=6, fp16=True, scaler=True, drop_rank=None, scheduler=True):
    """The files DeepSpeed's ``save_checkpoint`` writes under ZeRO-1/2 (engine.py ``_save_checkpoint`` and
    ``_save_zero_checkpoint``), with the dicts' keys DeepSpeed uses; the loss scaler as the state DeepSpeed's
    ``DynamicLossScaler`` holds (DeepSpeed pickles the object itself)."""
    model, opt, sched = model_opt_sched(step)
    tag = root / f"global_step{step}"
    tag.mkdir(parents=True)
    (root / "latest").write_text(f"global_step{step}")
    ds_config = {"train_micro_batch_size_per_gpu": 2, "fp16": {"enabled": fp16}, "zero_optimization": {"stage": 2}}
    torch.save({"module": model.state_dict(), "buffer_names": [], "optimizer": None,
                "lr_scheduler": ({"last_batch_iteration": step - 1, "warmup_num_steps": 10} if scheduler else None),
                "data_sampler": None, "sparse_tensor_module_names": set(), "skipped_steps": 0,
                "global_steps": step, "global_samples": step * 4, "dp_world_size": dp, "mp_world_size": 1,
                "ds_config": ds_config, "ds_version": "0.19.8"}, tag / "mp_rank_00_model_states.pt")
    for r in range(dp):
        if r == drop_rank:
            continue
        inner = {"zero_stage": 2, "partition_count": [dp], "base_optimizer_state": [opt.state_dict()["state"][0]],
                 "single_partition_of_fp32_groups": [torch.zeros(4)]}
        if scaler:
            inner.update(loss_scaler={"cur_scale": 2.0 ** 16, "cur_iter": step}, dynamic_loss_scale=True, overflow=False)
        torch.save({"optimizer_state_dict": inner, "ds_config": ds_config, "ds_version": "0.19.8"},
                   tag / f"zero_pp_rank_{r}_mp_rank_00_optim_states.pt")
    return root
