"""A Megatron log holding two launches of a run (../shared/logs PROVENANCE.md, megatron/
meg_gpt2_base_n4-1809579.out: iterations 10..200 every 10, 19 skipped updates in the fp16 scale search,
lm loss 12.03 at 20 and 22.475 at 30): appended to itself, a run restarted from scratch into the same
file (its own arguments block, the step counter back to 10), each launch's run is judged on its own
and the report names the second; a launch that resumes from a checkpoint (back to 150, after the run's
first step) stays one run, a resume."""
from __future__ import annotations

import re

import pytest
from conftest import SHARED
from tracehelp import trace

from datacheck.trace.verdict import build_verdict

LOG = SHARED / "logs" / "megatron" / "meg_gpt2_base_n4-1809579.out"
pytestmark = pytest.mark.skipif(not LOG.is_file(), reason="shared logs not present")


def _facts(text: str) -> tuple[list[int], list[int]]:
    """The iteration numbers and the lines the arguments blocks begin at, by the test's own patterns."""
    lines = text.splitlines()
    iters = [int(m.group(1)) for t in lines if (m := re.match(r"\s*iteration\s+(\d+)/", t))]
    args = [i for i, t in enumerate(lines, 1) if re.search(r"-+ arguments -+", t)]
    return iters, args


def _loud(res):
    return sorted((f.check, f.severity, f.message.split(": ", 1)[1]) for f in res.findings
                  if f.severity in ("warn", "error"))


def test_a_run_restarted_from_scratch_into_the_same_log_is_judged_run_by_run(tmp_path):
    text = LOG.read_text(errors="replace")
    iters, args = _facts(text)
    assert iters == list(range(10, 201, 10)) and len(args) == 1
    p = tmp_path / "two.out"
    p.write_text(text + text)
    one, two = trace(LOG), trace(p)
    # the single log: skipped steps (the scale search) only; the 1.9x loss at 30 is no spike there
    assert [c for c, _, _ in _loud(one)] == ["log.skipped_steps"]
    # appended: the restart made the second run's warmup a "restarted warmup", its first losses spikes
    # against the run before and its scale search skips after a good step; now each run as the single log
    got = _loud(two)
    assert [c for c, _, _ in got] == ["log.skipped_steps", "log.skipped_steps"]
    first_iter = len(text.splitlines()) + next(i for i, t in enumerate(text.splitlines(), 1)
                                               if re.match(r"\s*iteration\s+10/", t))
    name = f"{p}, run 2 (restarted at {p}:{first_iter})"
    assert {m for _, _, m in got} == {m for _, _, m in _loud(one)}  # each run says what the single log says
    assert [f.details["rank"] for f in two.findings if f.check == "log.skipped_steps"] == [str(p), name]
    assert [(e["from_step"], e["step"], e["where"]) for e in two.events if e["kind"] == "restart"] == \
        [(200, 10, f"{p}:{first_iter}")]
    assert "log.step_regression" not in {f.check for f in two.findings}  # a restart, not a resume


def test_a_launch_that_resumes_from_a_checkpoint_stays_one_run(tmp_path):
    text = LOG.read_text(errors="replace")
    lines = text.splitlines()
    _, (a,) = _facts(text)
    end = next(i for i, t in enumerate(lines, 1) if "end of arguments" in t)
    resumed = lines[a - 1:end] + [t for t in lines if (m := re.match(r"\s*iteration\s+(\d+)/", t)) and int(m.group(1)) >= 150]
    p = tmp_path / "resumed.out"
    p.write_text(text + "\n".join(resumed) + "\n")
    res = trace(p)
    assert not [e for e in res.events if e["kind"] == "restart"]
    reg = {f.check: f for f in res.findings}["log.step_regression"]
    assert [(r["from_step"], r["to_step"]) for r in reg.details["resumes"]] == [(200, 150)]


def test_a_nan_in_the_restarted_run_is_that_runs_not_a_ranks(tmp_path):
    """The restarted run's last loss (iteration 200) made NaN: the first anomaly is log.non_finite at 200
    in run 2, and the answer "all ranks or one" is the log's (no rank named): a restarted run is no rank."""
    text = LOG.read_text(errors="replace")
    lines = text.splitlines()
    i = next(k for k, t in enumerate(lines) if re.match(r"\s*iteration\s+200/", t))
    assert "lm loss:" in lines[i]
    lines[i] = re.sub(r"lm loss: \S+", "lm loss: nan", lines[i])
    p = tmp_path / "two.out"
    p.write_text(text + "\n".join(lines) + "\n")
    res = trace(p)
    assert (res.first_bad["check"], res.first_bad["step"]) == ("log.non_finite", 200)
    assert ", run 2 (restarted at " in res.first_bad["rank"]
    assert build_verdict(res, None)["answers"]["ranks"]["answer"] == "one log, no rank named"
