"""Real CPU runs of the Hugging Face Trainer whose first logged values already tell of a bad step.

``logging_steps=5``: the Trainer logs steps 5, 10 (its ``global_step``, counted after the update, from
1); a NaN feature in the batch of 0-based optimizer step 1 (the Trainer's step 2) poisons the weights,
so the first logged record (step 5) already has a NaN grad norm and nothing before it was logged. The
first bad step is any of 1..5 (the interval, 5, read from the first two records): trace must audit
steps 1..5 and find the row in step 2 (it once audited step 5 alone, whose rows are clean).

``logging_nan_inf_filter=False`` with a micro-batch whose every label is ``-100``: its mean
cross-entropy is 0/0 = NaN while its gradients are zero (torch's ``nll_loss`` backward writes no
gradient for an ignored target), so the update and the weights stay finite; the Trainer adds each
step's loss into ``tr_loss`` and subtracts the logged part (NaN - NaN = NaN), so every later logged loss
is NaN while every grad norm is finite. trace must not call the weights poisoned.

Data: realruns.write_nan_feature_rows (640 two-feature rows); the Trainer's order is accelerate's
SeedableRandomSampler, ``torch.randperm`` from a generator seeded ``seed + epoch``, step ``s`` of
gradient accumulation ``ga`` holding micro-batches ``s x ga .. s x ga + ga - 1`` of it; the rows the
model's forward saw confirm it. Expected values are computed here, never read from datacheck.
"""
from __future__ import annotations

import contextlib
import io
import json
import math
import warnings

import pytest
from hftiny import linear_model, row_dataset
from realruns import trace_json, write_nan_feature_rows, write_shards

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")
pytestmark = pytest.mark.slow  # a Trainer run each

N, SIZES, B, SEED = 640, (200, 240, 200), 16, 7
FEATURES = '[columns]\nfeatures = ["x1", "x2"]\nlabel = "label"\n'


def _perm() -> list[int]:
    g = torch.Generator()
    g.manual_seed(SEED + 0)
    return torch.randperm(N, generator=g).tolist()


def _train(root, rows, *, ga: int, logging_steps: int, max_steps: int, nan_filter: bool):
    """Train on ``rows``; (the micro-batches the model saw, the Trainer's log_history). Writes
    ``root/trainer_state.json`` as the Trainer writes it in a checkpoint."""
    x = torch.tensor([[r["x1"], r["x2"]] for r in rows], dtype=torch.float32)
    y = torch.tensor([r["label"] for r in rows])
    seen: list[list[int]] = []
    torch.manual_seed(0)
    args = transformers.TrainingArguments(
        str(root / "out"), use_cpu=True, per_device_train_batch_size=B, gradient_accumulation_steps=ga,
        max_steps=max_steps, logging_steps=logging_steps, seed=SEED, report_to=[], save_strategy="no",
        disable_tqdm=True, logging_nan_inf_filter=nan_filter, remove_unused_columns=False, learning_rate=0.1)
    trainer = transformers.Trainer(model=linear_model(torch, seen.append), args=args,
                                   train_dataset=row_dataset(torch, x, y, n=N))
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.train()
    trainer.state.save_to_json(str(root / "trainer_state.json"))
    return seen, trainer.state.log_history


def test_a_nan_before_the_first_logged_step_audits_the_first_interval(tmp_path):
    step, every = 1, 5  # 0-based optimizer step of the NaN row; logging_steps
    bad = _perm()[step * B + 3]
    rows = write_nan_feature_rows(torch, tmp_path, bad, SIZES)
    seen, hist = _train(tmp_path, rows, ga=1, logging_steps=every, max_steps=2 * every, nan_filter=True)
    assert [k for k, s in enumerate(seen) if bad in s] == [step]
    train = [h for h in hist if "loss" in h]
    assert [h["step"] for h in train] == [every, 2 * every] and math.isnan(train[0]["grad_norm"])
    (tmp_path / "datacheck.toml").write_text(FEATURES + f"[batch]\nbatch_size = {B}\nseed = {SEED}\n")
    rc, res, err = trace_json(str(tmp_path / "trainer_state.json"), "--data", str(tmp_path / "data"), "--config",
                              str(tmp_path / "datacheck.toml"))
    assert rc == 1, err
    fb = res["first_bad"]
    assert fb["check"] == "log.non_finite" and fb["step"] == every and fb["window"] == [1, every]
    d = res["data"]
    assert d["audited_steps"] == [1, every] and d["audited_optimizer_steps"] == [0, every - 1]
    assert bad in d["rows"]["steps"][str(step + 1)]["0"]  # the Trainer's step 2
    assert d["rows"]["row_checks"] == {str(bad): ["finite.nan:x1"]}
    assert d["replay_step"] == step + 1
    finding = next(f for f in res["findings"] if f["check"] == "log.non_finite")
    assert f"steps 1..{every} (logged every {every}" in finding["message"]


def test_a_nan_loss_the_logger_carries_on_is_no_poisoned_weights(tmp_path):
    step, ga = 3, 2  # every label of micro-batch 0 of 0-based optimizer step 3 is ignored
    perm = _perm()
    ignored = set(perm[step * ga * B:(step * ga + 1) * B])
    rows = write_nan_feature_rows(torch, tmp_path, perm[-1], SIZES)
    rows[perm[-1]]["x1"] = 0.5  # no NaN feature: the ignored labels alone
    for i in ignored:
        rows[i]["label"] = -100
    write_shards(tmp_path / "data", rows, SIZES)
    seen, hist = _train(tmp_path, rows, ga=ga, logging_steps=1, max_steps=8, nan_filter=False)
    assert set(seen[step * ga]) == ignored
    train = [h for h in hist if "loss" in h]
    first = min(h["step"] for h in train if not math.isfinite(h["loss"]))
    assert first == step + 1  # the Trainer's count
    after = [h for h in train if h["step"] >= first]
    assert all(math.isnan(h["loss"]) for h in after) and all(math.isfinite(h["grad_norm"]) for h in after)
    rc, res, err = trace_json(str(tmp_path / "trainer_state.json"))
    assert rc == 1, err
    nf = next(f for f in res["findings"] if f["check"] == "log.non_finite")
    assert nf["details"]["step"] == step + 1 and nf["details"]["metric"] == "loss"
    assert nf["details"]["grad_stays_finite"] is True and nf["details"]["persistent"] is False
    assert nf["details"]["finite_grad_norms"] == len(after) - 1
    assert "the weights are poisoned" not in nf["message"] and "the weights are not poisoned" in nf["message"]
    answer = res["verdict"]["answers"]["nan_or_inf"]["answer"]
    assert "the weights are not poisoned" in answer and "persistent" not in answer
    assert json.dumps(res["verdict"]).count("the weights are poisoned") == 0
