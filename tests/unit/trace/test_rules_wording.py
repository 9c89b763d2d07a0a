"""What the log rules (datacheck/trace/rules.py) say: log.non_finite's "persistent" and "transient"
from the records after the first non-finite one (a log that ends at it tells neither);
log.skipped_steps' first skip placed by its record's skip count."""
from __future__ import annotations

import re

import pytest
from conftest import SHARED
from tracehelp import trace, verdict, write_jsonl

LOGS = SHARED / "logs"


def _nf(res):
    return next(f for f in res.findings if f.check == "log.non_finite")


@pytest.mark.skipif(not LOGS.is_dir(), reason="shared logs not present")
def test_a_log_cut_at_the_missing_loss_does_not_call_it_persistent():
    # PROVENANCE.md: 3383-3384 normal, 3385 has no lm loss (the counters at 0), the last line cut
    res = trace(LOGS / "issues/megatron_llm_33_nan_loss_counters_zero.txt")
    f = _nf(res)
    assert f.details["step"] == 3385 and f.details["records_after"] == 0 and f.details["persistent"] is None
    assert "persistent" not in f.message and "poisoned" not in f.message
    assert "the log ends at it" in f.message
    v = verdict(res)
    a = next(x for x in v["anomalies"] if x["check"] == "log.non_finite")
    assert "persistent" not in a["why"].replace("persistent or transient is not known", "")
    assert "transient: finite again from step None" not in a["why"]
    ans = v["answers"]["nan_or_inf"]["answer"]
    assert "poisoned" not in ans and "persistent or transient is not known" in ans


@pytest.mark.parametrize("tail, persistent, words", [
    ([], None, "the log ends at it"),
    ([float("nan")], True, "persistent"),
    ([0.5], False, "transient"),
])
def test_persistence_is_said_from_the_records_after_it(tmp_path, tail, persistent, words):
    losses = [1.0 - 0.01 * i for i in range(10)] + [float("nan")] + tail
    res = trace(write_jsonl(tmp_path / "l.jsonl", [{"step": i + 1, "loss": x} for i, x in enumerate(losses)]))
    f = _nf(res)
    assert f.details["step"] == 11 and f.details["records_after"] == len(tail)
    assert f.details["persistent"] is persistent and words in f.message


@pytest.mark.skipif(not LOGS.is_dir(), reason="shared logs not present")
def test_the_first_skipped_step_is_placed_by_the_skip_count_of_its_record():
    # PROVENANCE.md: iteration 10 reports 10 skipped iterations: the first skip is iteration 1 at the latest
    text = (LOGS / "megatron/meg_gpt2_base_n4-1809579.out").read_text()
    first = re.search(r"iteration\s+(\d+)/.*?number of skipped iterations:\s+(\d+)", text)
    step, k = int(first.group(1)), int(first.group(2))
    assert (step, k) == (10, 10)
    f = next(x for x in trace(LOGS / "megatron/meg_gpt2_base_n4-1809579.out").findings if x.check == "log.skipped_steps")
    assert f"the first at step {step - k + 1} at the latest ({k} skipped in the interval logged at step {step})" \
        in f.message
    assert f"the first at step {step};" not in f.message


@pytest.mark.parametrize("skips, where", [
    (10, "step 11 (every one of steps 11..20 skipped)"),
    (3, "steps 11..18 (3 of the 10 steps logged at step 20 skipped)"),
])
def test_a_skip_count_inside_a_logging_interval_bounds_its_first_step(tmp_path, skips, where):
    rows = [{"step": 10, "loss": 2.0, "skipped": 0}, {"step": 20, "loss": 1.9, "skipped": skips}]
    text = "".join(f" iteration {r['step']}/ 100 | lm loss: {r['loss']:E} | loss scale: 1024.0 | "
                   f"number of skipped iterations: {r['skipped']:3d} | number of nan iterations: 0 |\n" for r in rows)
    (tmp_path / "m.out").write_text(text)
    f = next(x for x in trace(tmp_path / "m.out").findings if x.check == "log.skipped_steps")
    assert f"the first at {where}" in f.message, f.message


@pytest.mark.skipif(not LOGS.is_dir(), reason="shared logs not present")
def test_skips_with_no_successful_step_logged_do_not_claim_one():
    # PROVENANCE.md: meg_gpt2_perf_n16: 3 logged iterations, every one skipped, no lm loss;
    # meg_gpt2_base_n4: iterations 10 and 20 skip 10 and 8, iteration 20 has an lm loss
    perf = trace(LOGS / "megatron/meg_gpt2_perf_n16.out")
    f = next(x for x in perf.findings if x.check == "log.skipped_steps")
    assert f.details["success_logged"] is False and "before the first successful step" not in f.message
    assert "no successful step is logged" in f.message
    why = next(n["why"] for n in verdict(perf)["not_anomalies"] if n["check"] == "log.skipped_steps")
    assert "came before the first successful one" not in why and "no successful one is logged" in why
    base = trace(LOGS / "megatron/meg_gpt2_base_n4-1809579.out")
    g = next(x for x in base.findings if x.check == "log.skipped_steps")
    assert g.details["success_logged"] is True and "18 of them before the first successful step logged" in g.message


def test_a_spike_judged_on_few_earlier_values_quotes_the_rule_that_judged_it(tmp_path):
    """Loss 1.0, 1.1, 1.05, then 3.0 (the 4th value: 3 earlier ones, fewer than the robust rule's 8 for a
    median): the threshold is 2x the largest earlier value (2.2), not "max(2x the median, median + 6
    robust sigma) of the last 64 values" as it said beside that number."""
    losses = [1.0, 1.1, 1.05, 3.0] + [1.0 + 0.01 * (i % 3) for i in range(20)]
    res = trace(write_jsonl(tmp_path / "s.jsonl", [{"step": i + 1, "loss": v} for i, v in enumerate(losses)]))
    f = next(f for f in res.findings if f.check == "log.loss_spike")
    thr = 2 * max(losses[:3])
    assert f.details["step"] == 4 and f.details["threshold"] == pytest.approx(thr)
    assert f"is above 2x the largest of the 3 earlier values (the robust rule with fewer than 8 earlier values), " \
           f"threshold {thr:.4g}" in f.message
    assert "median" not in f.message
