"""The verdict on the real logs of ../shared/logs (PROVENANCE.md): each anomaly at its step with its
class, the clean ones quiet. Expected values are the facts PROVENANCE.md lists, read again from the
files here."""
from __future__ import annotations

import re

import pytest
from conftest import SHARED
from tracehelp import by_check, loud, trace, verdict

LOGS = SHARED / "logs"
pytestmark = pytest.mark.skipif(not LOGS.is_dir(), reason="shared logs not present")


def test_megatron_spike_at_iteration_3_then_divergence_from_its_new_best():
    """lm loss 12.44 at 1-2 jumps to 44.24 at 3 (a spike); it comes back to 11.65 at 31, under its
    start (PROVENANCE.md's "never back to 12" is not what the file says), then rises steadily to
    20.44 at 62: the divergence starts after that new best."""
    p = LOGS / "megatron/meg_ds_3d_gpt2_perf_n16-ds-off.out"
    lm = [(int(m.group(1)), float(m.group(2))) for m in
          re.finditer(r"iteration\s+(\d+)/.*?lm loss: ([0-9.E+-]+)", p.read_text())]
    low_step, low = min(lm[2:], key=lambda x: x[1])
    assert (lm[2][0], low_step) == (3, 31) and lm[2][1] > 3.5 * lm[1][1] and low < lm[0][1]
    res = trace(p)
    f = by_check(res)
    assert f["log.loss_spike"].details["step"] == 3 and f["log.loss_spike"].details["last_good_step"] == 2
    d = f["log.divergence"].details
    assert d["step"] > low_step and d["best_step"] in (low_step - 1, low_step, low_step + 1)
    assert all(v > 1.1 * low for s, v in lm if s >= d["step"])  # out of its band to the end
    assert dict(lm)[d["step"]] > d["band_top"] >= dict(lm)[d["last_good_step"]]
    a = verdict(res)["anomalies"]
    assert [(x["class"], x["check"], x["step"]) for x in a[:1]] == [("dynamics", "log.loss_spike", 3)]


def test_nanogpt_overfit_onset_at_the_eval_minimum():
    text = (LOGS / "nanogpt/output.log").read_text()
    evals = [(int(s), float(v)) for s, v in re.findall(r"step (\d+): train loss [0-9.]+ BPC, val loss ([0-9.]+)", text)]
    best = min(evals, key=lambda e: e[1])
    assert best == (1750, 2.1041)
    res = trace(LOGS / "nanogpt/output.log")
    f = by_check(res)["log.overfit_onset"]
    assert (f.details["step"], f.details["eval_min"], f.details["eval_last"]) == (1750, 2.1041, evals[-1][1])
    # the train loss compared is the one the eval lines report at the eval minimum and at the eval that
    # made the finding (not a median of iteration losses that happened to be iteration 1310's 1.7742)
    train = {int(s): float(v) for s, v in re.findall(r"step (\d+): train loss ([0-9.]+) BPC", text)}
    at = f.details["eval_at"]
    assert (f.details["train_at_min"], f.details["train_now"]) == (train[1750], train[at]) == (1.5877, 1.0642)
    assert f"while the train loss falls ({train[1750]:.4g} at step 1750 -> {train[at]:.4g} at step {at}, the " \
           "train loss the eval lines report)" in f.message
    assert [c for c, _, _ in loud(res)] == ["log.overfit_onset"]
    a = verdict(res)["anomalies"][0]
    assert a["class"] == "dynamics" and "keep the checkpoint of step 1750" in a["next_experiment"]


def test_mlx_lora_divergence_at_75():
    res = trace(LOGS / "issues/mlx_examples_620_lora_loss_spike.txt")
    d = by_check(res)["log.divergence"].details
    assert (d["step"], d["last_good_step"], d["loss"], d["last_good_loss"]) == (75, 50, 3.316, 1.406)


def test_megatron_base_is_quiet_after_the_scale_search():
    res = trace(LOGS / "megatron/meg_gpt2_base_n4-1809579.out")
    assert [c for c, _, _ in loud(res)] == ["log.skipped_steps"]  # the 19 skips of the initial scale search
    v = verdict(res)
    assert v["anomalies"] == [] and v["answers"]["from_step"] is None


def test_megatron_perf_has_no_loss_at_all():
    v = verdict(trace(LOGS / "megatron/meg_gpt2_perf_n16.out"))
    assert [(a["class"], a["check"]) for a in v["anomalies"]] == [("metric", "log.no_loss")]


def _not_run(res) -> dict[str, str]:
    return {n["check"]: n["reason"] for n in res.not_run}


def test_a_logged_lr_of_0_is_logged():
    """perf_n16: every logged iteration carries lr 0 and is skipped (the scale search): the lr rules do not
    judge it, and say why: lr 0 on skipped intervals, never "no learning rate logged"."""
    text = (LOGS / "megatron/meg_gpt2_perf_n16.out").read_text()
    lrs = [float(x) for x in re.findall(r"learning rate: ([0-9.E+-]+)", text)]
    skipped = [int(x) for x in re.findall(r"number of skipped iterations:\s+(\d+)", text)]
    assert lrs == [0.0] * 3 and skipped == [1] * 3
    why = _not_run(trace(LOGS / "megatron/meg_gpt2_perf_n16.out"))
    for check in ("log.zero_lr", "log.post_warmup_spike"):
        assert "no learning rate logged" not in why[check]
        assert f"the learning rate (0) is logged only on records whose whole interval was skipped ({len(lrs)} " \
               "record(s), no update made)" in why[check]


def test_all_grad_norms_nan_is_not_no_grad_norm():
    """ModernBERT#233: grad_norm nan on every line. log.vanishing_grad cannot judge it, and says the grad
    norms are all NaN (log.non_finite's finding), not that none was logged."""
    text = (LOGS / "issues/modernbert_233_hf_trainer_grad_norm_nan.txt").read_text()
    norms = re.findall(r"'grad_norm': (\w+)", text)
    assert norms == ["nan"] * 3
    res = trace(LOGS / "issues/modernbert_233_hf_trainer_grad_norm_nan.txt")
    why = _not_run(res)["log.vanishing_grad"]
    assert "no grad norm logged" not in why
    assert f"every logged grad norm is NaN or inf ({len(norms)} record(s)): log.non_finite's finding" in why
    assert by_check(res)["log.non_finite"].details["step"] == 1


def test_numeric_logs_keep_their_step_and_say_persistent():
    v = verdict(trace(LOGS / "issues/xtuner_187_mmengine_grad_norm_nan.txt"))
    a = v["anomalies"][0]
    assert (a["class"], a["step"]) == ("numeric", 240)
    assert v["answers"]["from_step"]["first"]["window"] == [231, 240]
    assert v["answers"]["from_step"]["last_good"]["step"] == 230
    v = verdict(trace(LOGS / "issues/chinese_llama_alpaca_534_deepspeed_overflow_scale_collapse.txt"))
    assert (v["anomalies"][0]["class"], v["anomalies"][0]["step"]) == ("numeric", 378)


@pytest.mark.parametrize("rel", ["megatron/meg_gpt2_base_n4-1809579.out", "megatron/meg_gpt2_perf_n16.out"])
def test_answer_one_accounts_for_every_finding_at_warn_or_above(rel):
    """Every skipped step of these logs came before the first successful one (the fp16 initial scale
    search): the verdict makes no anomaly of it, and the first answer says so instead of "no anomaly
    at warn or above" above a printed [warn] log.skipped_steps."""
    from conftest import run_cli

    text = (LOGS / rel).read_text()
    skipped = [int(x) for x in re.findall(r"number of skipped iterations:\s+(\d+)", text)]
    losses = re.findall(r"lm loss: ([0-9.E+-]+)", text)
    first_ok = next((i for i, n in enumerate(skipped) if n == 0), len(skipped))  # the first skip-free record
    assert sum(skipped) > 0 and sum(skipped[:first_ok]) == sum(skipped)  # no skip after it
    out = run_cli("trace", str(LOGS / rel)).stdout
    answer = out.splitlines()[0]
    shown = set(re.findall(r"^  \[(?:warn|error)\] (log\.[a-z_]+):", out, re.M))
    assert "log.skipped_steps" in shown
    anomalies = {a["check"] for a in verdict(trace(LOGS / rel))["anomalies"]}
    assert "log.skipped_steps" not in anomalies
    for check in shown - anomalies:
        assert f"{check} [warn] is the fp16 initial loss-scale search" in answer, answer
    assert bool(losses) == ("log.no_loss" not in shown)
