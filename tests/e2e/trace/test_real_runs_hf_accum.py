"""Does the Hugging Face Trainer log a bad row one update late, as Lightning does (which makes trace
audit the update before a Lightning log's first non-finite loss)? Real CPU runs of
``transformers.Trainer`` with ``gradient_accumulation_steps=2`` and ``logging_steps=1`` say no: the
first non-finite value it logs is at the step whose batch holds the row, so trace audits that step
alone (the update-before audit stays Lightning's).

Why, in the Trainer's own loop (transformers 5.x ``_inner_training_loop`` and
``_maybe_log_save_evaluate``): the logged ``loss`` sums every micro-batch's loss of the logging
interval (``tr_loss += tr_loss_step``, gathered over every process and averaged, divided by the steps
since the last log), and ``grad_norm`` is the norm of the whole update's gradients (every micro-batch
and process), computed at every optimizer step whether or not ``max_grad_norm`` clips
(``_get_grad_norm``). With ``logging_nan_inf_filter`` on (the default) a NaN micro-batch loss is
replaced by the interval's running mean, so the loss of that step may stay finite: the grad norm is
NaN at that step all the same. Lightning logs the last micro-batch's loss of rank 0 and no grad norm
by default: there the row shows one step late.

Data: 640 two-feature rows (realruns.write_nan_feature_rows), one with a NaN feature, placed in
micro-batch 0 or 1 of 0-based optimizer step 5 (the Trainer's step 6) from the Trainer's sampler
(accelerate's SeedableRandomSampler: ``torch.randperm`` from a generator seeded ``seed + epoch``) and
checked against the rows the model's forward saw. Expected values computed here, never read from
datacheck.
"""
from __future__ import annotations

import contextlib
import io
import math
import warnings

import pytest
from hftiny import linear_model, row_dataset
from realruns import trace_json, write_nan_feature_rows

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")
pytestmark = pytest.mark.slow  # a Trainer run each

N, SIZES, B, GA, SEED, STEP, POS, STEPS = 640, (200, 240, 200), 16, 2, 7, 5, 3, 9
CONFIG = ('[columns]\nfeatures = ["x1", "x2"]\nlabel = "label"\n'
          f"[batch]\nbatch_size = {B}\ngrad_accum = {GA}\nseed = {SEED}\n")


def _perm() -> list[int]:
    g = torch.Generator()
    g.manual_seed(SEED + 0)
    return torch.randperm(N, generator=g).tolist()


def _run(root, mb: int, max_grad_norm: float, nan_filter: bool):
    """Train; (the NaN row, the micro-batches the model saw, the Trainer's log_history)."""
    bad = _perm()[(STEP * GA + mb) * B + POS]
    rows = write_nan_feature_rows(torch, root, bad, SIZES)
    x = torch.tensor([[r["x1"], r["x2"]] for r in rows], dtype=torch.float32)
    y = torch.tensor([r["label"] for r in rows])
    seen: list[list[int]] = []

    torch.manual_seed(0)
    args = transformers.TrainingArguments(
        str(root / "out"), use_cpu=True, per_device_train_batch_size=B, gradient_accumulation_steps=GA,
        max_steps=STEPS, logging_steps=1, seed=SEED, report_to=[], save_strategy="no", disable_tqdm=True,
        max_grad_norm=max_grad_norm, logging_nan_inf_filter=nan_filter, remove_unused_columns=False)
    trainer = transformers.Trainer(model=linear_model(torch, seen.append), args=args,
                                   train_dataset=row_dataset(torch, x, y, n=N))
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.train()
    trainer.state.save_to_json(str(root / "trainer_state.json"))  # what the Trainer writes in a checkpoint
    (root / "datacheck.toml").write_text(CONFIG)
    return bad, seen, trainer.state.log_history


@pytest.mark.parametrize("mb, max_grad_norm, nan_filter", [(0, 1.0, True), (0, 0.0, True), (1, 0.0, False)],
                         ids=["micro-batch 0, clipped, nan filter", "micro-batch 0, no clipping, nan filter",
                              "micro-batch 1, no clipping, no filter"])
def test_the_trainer_logs_the_row_at_its_own_step(tmp_path, mb, max_grad_norm, nan_filter):
    bad, seen, hist = _run(tmp_path, mb, max_grad_norm, nan_filter)
    assert [k for k, s in enumerate(seen) if bad in s] == [STEP * GA + mb]  # micro-batch mb of optimizer step 5
    hf_step = STEP + 1  # the Trainer counts global_step after the update, from 1
    train = [h for h in hist if "loss" in h]
    first_bad = min(h["step"] for h in train if not (math.isfinite(h["loss"]) and math.isfinite(h["grad_norm"])))
    assert first_bad == hf_step  # the files: the step whose batch holds the row, not one later
    assert all(math.isnan(h["grad_norm"]) for h in train if h["step"] == hf_step)
    rc, res, err = trace_json(str(tmp_path / "trainer_state.json"), "--data", str(tmp_path / "data"), "--config",
                              str(tmp_path / "datacheck.toml"))
    assert rc == 1, err
    assert res["first_bad"]["check"] == "log.non_finite" and res["first_bad"]["step"] == hf_step
    d = res["data"]
    assert d["audited_steps"] == [hf_step, hf_step] and "also log step" not in d["message"]  # no update before
    assert bad in d["rows"]["steps"][str(hf_step)]["0"] and len(d["rows"]["steps"][str(hf_step)]["0"]) == GA * B
    assert d["rows"]["row_checks"] == {str(bad): ["finite.nan:x1"]} and d["replay_step"] == hf_step
    first = next(a for a in res["verdict"]["anomalies"] if a["check"] == "log.non_finite")
    assert first["class"] == "data" and f"replay the fixed batch of step {hf_step} (--data" in first["next_experiment"]
