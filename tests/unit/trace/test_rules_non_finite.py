"""log.non_finite (datacheck/trace/rules.py): "persistent" and "transient" are said from the records
after the first non-finite one; a log that ends at it tells neither."""
from __future__ import annotations

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
