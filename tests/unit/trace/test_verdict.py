"""The verdict (datacheck/trace/verdict.py): one class per anomaly from deterministic rules, with its
evidence and next experiment; the four answers the text output starts with; what could not run."""
from __future__ import annotations

import json
import math
import re

import pytest
from conftest import SHARED, run_cli
from peerlogs import gradsnitch_csv, gradsnitch_synthetic, trainproof_gallery
from tracehelp import trace, verdict, write_jsonl

from datacheck.trace.steps import resolve_convention
from datacheck.trace.verdict import _evidence_line, verdict_text

LOGS = SHARED / "logs"


def _first(v):
    return v["anomalies"][0]


def test_numeric_persistent_and_transient(tmp_path):
    v = verdict(trace(LOGS / "issues/gradnorm_tf_17_epoch_loss_nan.txt"))
    a = _first(v)
    assert (a["class"], a["check"], a["step"]) == ("numeric", "log.non_finite", 3451)
    assert "persistent" in a["why"] and "resume from the checkpoint before step 3451" in a["next_experiment"]
    assert "train mode, eval mode and fp32" in a["next_experiment"]
    assert v["answers"]["nan_or_inf"]["kind"] == "NaN" and v["answers"]["nan_or_inf"]["persistent"] is True
    w = verdict(trace(trainproof_gallery("fp16_nan", tmp_path / "trainer_state.json")))
    b = _first(w)
    assert (b["class"], b["step"]) == ("numeric", 20) and "transient: finite again from step 25" in b["why"]
    assert w["answers"]["nan_or_inf"]["kind"] == "inf"


def test_dynamics_with_evidence_lines(tmp_path):
    v = verdict(trace(trainproof_gallery("lr_hot", tmp_path / "trainer_state.json")))
    a = next(x for x in v["anomalies"] if x["check"] == "log.divergence")
    assert (a["class"], a["step"]) == ("dynamics", 10)
    steps = [e["step"] for e in a["evidence"]]
    assert steps[1:3] == [5, 10] and a["evidence"][2]["loss"] == 3.3023
    assert "lower the peak lr" in a["next_experiment"]
    first = v["answers"]["from_step"]
    assert first["first"]["step"] == 10 and first["last_good"]["step"] == 5
    assert (first["first"]["lr"], first["first"]["grad_norm"]) == (0.009, 672.21)
    assert (first["last_good"]["lr"], first["last_good"]["grad_norm"]) == (0.004, 0.73032)


def test_metric_class_for_a_log_without_a_loss(tmp_path):
    p = write_jsonl(tmp_path / "m.jsonl", [{"step": i, "lr": 1e-4} for i in range(1, 11)])
    v = verdict(trace(p))
    assert [(a["class"], a["check"]) for a in v["anomalies"]] == [("metric", "log.no_loss")]
    assert v["answers"]["from_step"] is None or v["answers"]["from_step"]["first"] is None


def test_resume_class_near_a_resume_point(tmp_path):
    rows = [{"step": i, "loss": 2.0 - 0.005 * i, "lr": 1e-3} for i in range(1, 101)]
    rows += [{"step": i, "loss": (9.0 if i == 82 else 2.0 - 0.005 * i), "lr": 1e-3} for i in range(80, 121)]
    v = verdict(trace(write_jsonl(tmp_path / "r.jsonl", rows)))
    spike = next(a for a in v["anomalies"] if a["check"] == "log.loss_spike")
    assert spike["step"] == 82 and spike["class"] == "resume" and "resume to step 80" in spike["why"]


def test_rank_class_when_one_rank_goes_non_finite(tmp_path):
    r0 = write_jsonl(tmp_path / "rank0.jsonl", [{"step": i, "loss": 2.0} for i in range(1, 31)])
    r1 = write_jsonl(tmp_path / "rank1.jsonl", [{"step": i, "loss": 2.0 if i < 20 else math.nan} for i in range(1, 31)])
    v = verdict(trace(r0, r1))
    a = _first(v)
    assert (a["class"], a["step"], a["rank"]) == ("rank", 20, "rank 1")
    assert v["answers"]["ranks"]["answer"] == "rank 1 only (of 2)"


def test_data_class_when_the_step_s_rows_fail_checks():
    res = trace(LOGS / "issues/gradnorm_tf_17_epoch_loss_nan.txt")
    data = {"message": "m", "source": {"kind": "ledger"}, "audited_steps": [3451, 3451],
            "rows": {"steps": {"3451": {"0": [7, 8]}}, "row_checks": {"8": ["numeric.non_finite:x"]}, "findings": []}}
    v = verdict(res, data)
    a = _first(v)
    assert a["class"] == "data" and {"row": 8, "checks": ["numeric.non_finite:x"]} in a["evidence"]
    assert v["answers"]["rows"]["bad_rows"] == [8] and "row 8: numeric.non_finite:x" in v["answers"]["rows"]["answer"]


def test_text_starts_with_the_four_answers_and_json_has_class_evidence_next(tmp_path):
    p = trainproof_gallery("lr_hot", tmp_path / "trainer_state.json")
    r = run_cli("trace", str(p))
    lines = r.stdout.splitlines()
    assert [ln[:3] for ln in lines[:4]] == ["1. ", "2. ", "3. ", "4. "]
    # logged every 5 steps: the first bad step is bounded to 6..10
    assert lines[0] == ("1. from which step: steps 6..10 (logged every 5) (log.divergence): lr 0.009, loss scale -, "
                        "grad norm 672.2; last good step 5: lr 0.004, loss scale -, grad norm 0.7303")
    assert lines[2] == "3. NaN or inf: neither: every logged loss and grad norm is finite"
    j = json.loads(run_cli("trace", str(p), "--format", "json").stdout)["result"]["verdict"]
    assert all({"class", "evidence", "next_experiment"} <= a.keys() for a in j["anomalies"])


def test_nothing_to_judge_says_which_checks_could_not_run(tmp_path):
    p = write_jsonl(tmp_path / "s.jsonl", [{"step": 1, "loss": 2.0}, {"step": 2, "loss": 1.9}])
    r = run_cli("trace", str(p))
    assert "first anomaly: none at warn or above;" in r.stdout and "not judged:" in r.stdout
    for cid in ("log.divergence", "log.zero_lr", "log.overfit_onset", "log.vanishing_grad"):
        assert f"  {cid}: " in r.stdout
    assert "no eval loss logged" in r.stdout and "no learning rate logged" in r.stdout


def test_html_marks_each_anomaly_band_with_its_class_and_eval_beside_train(tmp_path):
    rows = []
    for i in range(1, 401):
        rows.append({"step": i, "loss": 2.0 * math.exp(-i / 150) + 0.2, "lr": 1e-3, "grad_norm": 1.0})
        if i % 40 == 0:
            rows.append({"step": i, "eval_loss": 1.5 - 0.1 * (i // 40) if i <= 160 else 1.1 + 0.08 * ((i - 160) // 40)})
    out = tmp_path / "t.html"
    r = run_cli("trace", str(write_jsonl(tmp_path / "o.jsonl", rows)), "--format", "html", "--output", str(out))
    assert r.returncode == 0
    h = out.read_text()
    assert "<title>dynamics: log.overfit_onset from step 160</title>" in h and ">dynamics</text>" in h
    assert "<title>eval loss</title>" in h and "eval loss (dashed)" in h
    assert "<script" not in h


def test_a_grad_norm_rise_that_leads_the_loss_spike_is_named(tmp_path):
    rows = [{"step": i, "loss": 2.0 - 0.001 * i, "grad_norm": 1.0 + 0.01 * (i % 3)} for i in range(1, 101)]
    rows[59]["grad_norm"] = 40.0  # step 60: the grad norm first
    rows[61]["loss"] = 9.0  # step 62: then the loss
    v = verdict(trace(write_jsonl(tmp_path / "g.jsonl", rows)))
    spike = next(a for a in v["anomalies"] if a["check"] == "log.loss_spike")
    assert spike["step"] == 62 and "the grad norm rose first, at step 60" in spike["why"]
    assert spike["grad_rise_step"] == 60


def test_grad_rise_leads_the_loss_spike_on_gradsnitch_planted_spike(tmp_path):
    """gradsnitch's spike: grad norm 30 at step 200, the loss + 1.5 on steps 201..209."""
    cols = gradsnitch_synthetic("spike")
    g, lo = cols["grad_norm"], cols["train_loss"]
    grad_step = max(range(len(g)), key=lambda i: g[i])
    loss_step = next(i for i in range(1, len(lo)) if lo[i] - lo[i - 1] > 1.0)
    assert (grad_step, loss_step) == (200, 201)
    res = trace(gradsnitch_csv("spike", tmp_path / "s.csv"))
    f = next(x for x in res.findings if x.check == "log.loss_spike")
    assert f.details["step"] == loss_step and f.details["grad_rise_step"] == grad_step
    assert f"the grad norm spiked first, at step {grad_step}" in f.message
    v = verdict(res)
    a = next(x for x in v["anomalies"] if x["check"] == "log.loss_spike")
    assert a["grad_rise_step"] == grad_step
    assert a["evidence"][1] == {"what": "the grad norm rose first", "step": grad_step, "grad_norm": g[grad_step]}
    text = "\n".join(verdict_text(v))
    assert f"log.loss_spike at step {loss_step}" in text and f"the grad norm rose first, at step {grad_step}" in text
    assert f"evidence: the grad norm rose first, step {grad_step}: grad_norm {g[grad_step]:.4g}" in text


def test_no_grad_rise_without_a_grad_spike_before_the_loss_spike(tmp_path):
    rows = [{"step": i, "loss": 2.0 - 0.001 * i, "grad_norm": 1.0 + 0.01 * (i % 3)} for i in range(1, 101)]
    rows[61]["loss"] = 9.0  # step 62, grad norm flat
    f = next(x for x in trace(write_jsonl(tmp_path / "g.jsonl", rows)).findings if x.check == "log.loss_spike")
    assert f.details["step"] == 62 and f.details["grad_rise_step"] is None


def test_a_loud_finding_without_a_step_is_not_called_no_anomaly(tmp_path):
    # every record has a step, an lr and a grad norm but no loss: log.no_loss (an error) names no step,
    # so the text must not answer "no anomaly" above that error
    rows = [{"step": s, "lr": 0.1, "grad_norm": 1.0 + s / 10} for s in range(1, 4)]
    p = write_jsonl(tmp_path / "noloss.jsonl", rows)
    r = run_cli("trace", str(p))
    assert r.returncode == 1, r.stderr
    lines = r.stdout.splitlines()
    assert "  [error] log.no_loss: none of the 3 training record(s) carries a loss" in r.stdout
    assert "no anomaly at warn or above" not in lines[0]
    assert lines[0].startswith("1. from which step: no first bad step: 1 anomaly(ies) at warn or above (log.no_loss)")
    first = next(ln for ln in lines if ln.startswith("first anomaly: "))
    assert first.startswith("first anomaly: none placed at a step: the finding(s) at warn or above below "
                            "(log.no_loss) mark no first bad step")


def test_data_evidence_names_each_failing_row_s_shard_and_row():
    """A failing row of the audited step is evidence by its shard and row in the shard (the data
    result's failing_rows), never a bare global index after an empty location."""
    res = trace(LOGS / "issues/gradnorm_tf_17_epoch_loss_nan.txt")
    data = {"message": "m", "source": {"kind": "ledger"}, "audited_steps": [3451, 3451],
            "rows": {"steps": {"3451": {"0": [7, 8]}}, "row_checks": {"8": ["numeric.non_finite:x"]}, "findings": [],
                     "failing_rows": [{"row": 8, "shard": "part-00001.parquet", "shard_row": 3, "severity": "error",
                                       "checks": ["numeric.non_finite:x"]}]}}
    v = verdict(res, data)
    a = _first(v)
    assert a["class"] == "data"
    assert {"row": 8, "checks": ["numeric.non_finite:x"], "shard": "part-00001.parquet", "shard_row": 3} in a["evidence"]
    assert "part-00001.parquet row 3 (global 8): numeric.non_finite:x" in v["answers"]["rows"]["answer"]
    lines = verdict_text(v)
    assert "    evidence: part-00001.parquet row 3 (global 8): fails numeric.non_finite:x" in lines
    assert not any(ln.startswith("    evidence: :") for ln in lines)


def test_evidence_line_without_a_place_has_no_leading_colon():
    assert _evidence_line({"row": 8, "checks": ["finite.nan:x"]}) == "global row 8: fails finite.nan:x"
    assert _evidence_line({"loss": 2.5}) == "loss 2.5"
    assert _evidence_line({"where": "a.log:3", "step": 4, "loss": 2.5}) == "a.log:3, step 4: loss 2.5"


def test_rank_less_records_beside_named_ranks_are_no_rank_of_their_own(tmp_path):
    """A log whose records name ranks 0 and 1, and some records that name none (one of those processes
    printed them): two ranks, not three; the rank-less stream is no rank of its own."""
    rows = []
    for s in range(1, 21):
        rows += [{"step": s, "rank": 0, "loss": 2.0 - s / 40}, {"step": s, "rank": 1, "loss": 2.0 - s / 40}]
        if s % 5 == 0:
            rows.append({"step": s, "loss": 2.0 - s / 40})
    rows.append({"step": 21, "rank": 1, "loss": float("nan")})
    res = trace(write_jsonl(tmp_path / "m.jsonl", rows))
    assert len(res.streams) == 3  # rank 0, rank 1 and the log's rank-less records
    ranks = verdict(res)["answers"]["ranks"]
    assert ranks["seen"] == ["rank 0", "rank 1"] and ranks["affected"] == ["rank 1"]
    assert ranks["answer"] == "rank 1 only (of 2)"


def test_answer_3_places_a_nan_logged_at_an_interval_end_in_its_window_as_answer_1_does():
    # PROVENANCE.md: mmengine 'Epoch(train) [1][N/735]': finite until iteration 230, grad_norm nan from 240
    log = (LOGS / "issues/xtuner_187_mmengine_grad_norm_nan.txt").read_text()
    its = [int(m.group(1)) for m in re.finditer(r"\[1\]\[\s*(\d+)/735\]", log)]
    nan_at = 240
    prev = max(i for i in its if i < nan_at)  # the last finite record
    v = verdict(trace(LOGS / "issues/xtuner_187_mmengine_grad_norm_nan.txt"))
    window = f"steps {prev + 1}..{nan_at} (logged every {nan_at - prev}: the first bad step is in this window)"
    text = "\n".join(verdict_text(v))
    assert f"1. from which step: steps {prev + 1}..{nan_at} (logged every {nan_at - prev})" in text
    assert v["answers"]["nan_or_inf"]["answer"].startswith(f"NaN at {window} (grad_norm nan)")
    a = next(x for x in v["anomalies"] if x["check"] == "log.non_finite")
    assert f"non-finite at {window}" in a["next_experiment"] and f"trained from step {nan_at}" not in a["next_experiment"]


def test_a_step_less_log_s_replay_names_the_step_that_the_record_logs():
    v = verdict(trace(LOGS / "issues/modernbert_233_hf_trainer_grad_norm_nan.txt"))
    assert "the fixed batch of the step that record 1 logs" in _first(v)["next_experiment"]


def test_answer_4_of_a_step_less_log_says_why_no_rows_are_named_not_to_give_data(tmp_path):
    # PROVENANCE.md: apex 'Gradient overflow. Skipping step' lines: no step number on any line
    log = LOGS / "issues/apex_834_loss_scale_to_zero.txt"
    res = trace(log)
    res.join(resolve_convention(res.logs, None))
    ans = verdict(res)["answers"]["rows"]["answer"]
    assert "give --data" not in ans and ans.startswith(f"not looked at: record {res.first_bad['step']} carries no step")
    assert "trace the run's log that prints the step" in ans
    # the advice it replaces would be refused: --data cannot name rows from record numbers
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "p.jsonl").write_text("".join(json.dumps({"x": float(i), "label": i % 2}) + "\n" for i in range(8)))
    (tmp_path / "dc.toml").write_text('[columns]\nfeatures = ["x"]\nlabel = "label"\n[batch]\nbatch_size = 2\n')
    r = run_cli("trace", str(log), "--data", str(tmp_path / "d"), "--config", str(tmp_path / "dc.toml"), "--no-progress")
    assert r.returncode == 2 and "cannot place the log's records on optimizer steps" in r.stderr


def test_overfit_onset_s_step_is_the_last_good_one_not_without_one():
    # PROVENANCE.md: nanoGPT validation loss lowest at step 1750 (2.1041), rising to 2.4492 at 5000
    text = "\n".join(verdict_text(verdict(trace(LOGS / "nanogpt/output.log"))))
    line = next(ln for ln in text.splitlines() if ln.startswith("1. "))
    assert line.startswith("1. from which step: step 1750 (log.overfit_onset)")
    assert "none before it" not in line and "last good step 1750 itself: the eval minimum" in line


def test_a_nan_logged_at_an_interval_end_is_replayed_over_its_whole_window():
    """xtuner#187 logs every 10 iterations (PROVENANCE.md: finite until 230, grad_norm nan at 240): the bad
    step is any of 231..240, so the advice replays that window's batches from the checkpoint before its
    first step, not the logged step's batch alone (which may be a clean one)."""
    log = (LOGS / "issues/xtuner_187_mmengine_grad_norm_nan.txt").read_text()
    its = [int(m.group(1)) for m in re.finditer(r"\[1\]\[\s*(\d+)/735\]", log)]
    nan_at = 240
    first = max(i for i in its if i < nan_at) + 1
    a = next(x for x in verdict(trace(LOGS / "issues/xtuner_187_mmengine_grad_norm_nan.txt"))["anomalies"]
             if x["check"] == "log.non_finite")
    assert f"replay the fixed batches of steps {first}..{nan_at} in order from the checkpoint before step {first}" \
        in a["next_experiment"]
    assert f"replay the fixed batch of step {nan_at}" not in a["next_experiment"]


@pytest.mark.parametrize(("nan_from", "answer"), [
    ({0: 8, 1: 5}, "rank 1 first, at step 5 (ranks [0] still finite there, non-finite later)"),
    ({0: 5, 1: 5}, "all ranks")])
def test_the_rank_answer_names_the_rank_that_went_non_finite_first(tmp_path, nan_from, answer):
    """Every rank's loss ends NaN, rank 1's from step 5 and rank 0's from step 8 (processes whose models
    are their own: tests/e2e/trace/test_real_runs_accelerate_uneven_ranks.py): "all ranks" hid rank 1.
    Both from step 5: all ranks."""
    rows = [{"step": s, "rank": r, "loss": float("nan") if s >= nan_from[r] else 2.0 - s / 40}
            for s in range(1, 13) for r in (0, 1)]
    res = trace(write_jsonl(tmp_path / "m.jsonl", rows))
    ranks = verdict(res)["answers"]["ranks"]
    assert ranks["affected"] == ["rank 0", "rank 1"] and ranks["answer"] == answer
