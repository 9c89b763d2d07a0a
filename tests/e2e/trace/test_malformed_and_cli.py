"""Malformed logs give clear errors or counted lines, never a traceback; the verb's outputs and exit codes."""
from __future__ import annotations

import contextlib
import io
import json
from types import SimpleNamespace

import pytest
from conftest import REALDATA

from datacheck.cli.main import main
from datacheck.model.errors import UsageError
from datacheck.trace import TraceOptions, open_log, parse_spike_rule, trace_logs
from datacheck.trace.spikes import SpikeDetector


def cli(*args: str) -> SimpleNamespace:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(args))
    assert "Traceback" not in err.getvalue()
    return SimpleNamespace(returncode=rc, stdout=out.getvalue(), stderr=err.getvalue())


def _t(*paths, spike="olmo", world_size=None, **kw):
    return trace_logs([open_log(str(p), **kw) for p in paths],
                      TraceOptions(spike=parse_spike_rule(spike), world_size=world_size))


def test_truncated_json_lines_are_counted_not_fatal(tmp_path):
    p = tmp_path / "m.jsonl"
    p.write_text('{"step": 1, "loss": 2.0}\n{"step": 2, "loss": 1.9}\n{"step": 3, "lo\n{"step": 4, "loss": NaN}\n')
    lf = open_log(str(p))
    res = trace_logs([lf], TraceOptions(spike=parse_spike_rule("olmo")))
    st = res.logs[0]
    assert (st.format, st.records, st.bad_lines, st.bad_examples[0][0]) == ("jsonl", 3, 1, 3)
    assert res.first_bad["step"] == 4 and res.first_bad["last_good_step"] == 2


def test_empty_file_and_binary_garbage_are_usage_errors(tmp_path):
    e = tmp_path / "empty.log"
    e.write_bytes(b"")
    with pytest.raises(UsageError, match="no training step found.*empty.log: read as text, 0 line"):
        _t(e)
    g = tmp_path / "g.bin"
    g.write_bytes(bytes(range(256)) * 10)
    r = cli("trace", str(g))
    assert r.returncode == 2 and "no training step found" in r.stderr
    assert "Give the format with --log-format (" in r.stderr  # the flag that exists (--format is the output's)
    r = cli("trace", str(tmp_path / "missing.log"))
    assert r.returncode == 2 and "does not exist" in r.stderr


SST2 = REALDATA / "sst2_vi_glue_parquet/validation-00000-of-00001.parquet"
MEGATRON_BIN = REALDATA / "megatron_gpt2_openwebtext/meg-gpt2-openwebtext_text_document.bin"


@pytest.mark.parametrize("shard,fmt", [(SST2, "parquet"), (MEGATRON_BIN, "megatron")])
def test_a_data_shard_given_as_the_log_is_named_as_data(shard, fmt):
    """``datacheck trace data.parquet`` (the data where the log goes, on the real shards of
    ../shared/realdata) said only "read as text, N line(s)": it now names the shard's format and
    where the data goes (--data)."""
    if not shard.is_file():
        pytest.skip(f"{shard} not present")
    r = cli("trace", str(shard))
    assert r.returncode == 2
    assert f"(a {fmt} data shard, not a training log: give the run's log, and the data with --data" in r.stderr


def test_a_text_log_that_holds_no_step_gets_no_data_hint(tmp_path):
    e = tmp_path / "notes.txt"  # .txt is a shard format too (a plain-text corpus): no hint for it
    e.write_text("hello\nworld\n")
    r = cli("trace", str(e))
    assert r.returncode == 2 and "no training step found" in r.stderr and "data shard" not in r.stderr


def test_mixed_formats_and_non_monotonic_steps(tmp_path):
    p = tmp_path / "mixed.log"
    p.write_text("step=1 loss=2.0 lr=1e-3\n"
                 " iteration        2/ 100 | learning rate: 1.000E-03 | lm loss: 1.9 | loss scale: 1024.0 |\n"
                 "{'loss': 1.8, 'learning_rate': 0.001, 'epoch': 0.1}\n"
                 "step=2 loss=1.85 lr=1e-3\n"   # a resume: step goes back from 3 to 2, lr restored
                 "step=3 loss=1.7 lr=5e-3\n"    # but at step 3 the lr differs from the 1e-3 seen before? (3 not seen)
                 "step=2 loss=1.7 lr=9e-3\n"    # resume to 2: lr 9e-3 vs 1e-3 logged at step 2 before (back to
                 # step 1, the log's first, would be a run restarted from scratch: test_restarted_log_formats.py)
                 "loss: ??? step 4\n")
    res = _t(p)
    st = res.logs[0]
    assert st.line_formats == {"hf_console": 1, "key_value": 4, "megatron": 1}
    assert st.bad_lines == 1
    f = {x.check: x for x in res.findings}
    reg = f["log.step_regression"]
    assert [(r["from_step"], r["to_step"]) for r in reg.details["resumes"]] == [(3, 2), (3, 2)]
    lr = f["log.lr_discontinuity"]
    assert lr.details["step"] == 2 and lr.details["lr_before_resume"] == 1e-3 and lr.details["lr"] == 9e-3


def test_warmup_restart_and_ranks(tmp_path):
    for r, losses in ((0, [2.0, 1.9, 1.8, 1.7]), (1, [2.0, 1.9, float("nan"), float("nan")])):
        (tmp_path / f"rank{r}.jsonl").write_text("".join(
            json.dumps({"step": i, "loss": v, "lr": [1e-3, 1e-3, 1e-5, 5e-4][i]}) + "\n" for i, v in enumerate(losses)))
    res = _t(tmp_path / "rank0.jsonl", tmp_path / "rank1.jsonl", world_size=4)
    f = {}
    for x in res.findings:
        f.setdefault(x.check, []).append(x)
    nf = f["log.non_finite"]
    assert [(x.details["rank"], x.details["step"]) for x in nf] == [("rank 1", 2)]
    rd = {x.message.split(" ")[0]: x for x in f["log.rank_divergence"]}
    assert rd["ranks"].details["missing"] == [2, 3]
    assert rd["rank"].details["finite_ranks"] == [0]
    warm = f["log.lr_discontinuity"][0]
    assert warm.details["step"] == 2 and "warmup restarted" in warm.message


@pytest.mark.parametrize("rule, values, spike_at", [
    ("ratio:2:3", [1, 1, 1, 2.5, 1], [3]),
    ("megatron", [1.0] * 100 + [9.9, 10.5], [101]),
    ("olmo", [1.0, 1.1] * 10 + [1.05, 5.0], [21]),
    ("foundry", [1.0] * 10 + [5.0] * 6, [14]),  # the 5th value of the run (patience 4) completes it
])
def test_spike_presets_against_a_plain_reference(rule, values, spike_at):
    det = SpikeDetector(parse_spike_rule(rule))
    assert [i for i, v in enumerate(values) if det.feed(v)] == spike_at


def test_bad_flags_are_usage_errors(tmp_path):
    p = tmp_path / "a.log"
    p.write_text("step=1 loss=1\n")
    assert cli("trace", str(p), "--spike", "ratio:0.5:3").returncode == 2
    assert cli("trace", str(p), "--regex", "([").returncode == 2
    assert cli("trace", str(p), "--regex", "loss (?P<loss>\\S+)").returncode == 2
    assert cli("trace", str(p), "--data", str(tmp_path)).returncode == 2  # --data: no shard in that folder
    r = cli("trace", str(p), "--regex", r"step=(?P<step>\d+) loss=(?P<loss>\S+)", "--format", "json")
    assert r.returncode == 0 and json.loads(r.stdout)["result"]["logs"][0]["format"] == "regex"


def test_html_is_one_offline_file_with_curves(tmp_path):
    p = tmp_path / "a.log"
    p.write_text("".join(f"step={i} loss={1.0 / (i + 1) if i != 30 else 'nan'} lr=1e-3 grad_norm=1.0\n"
                         for i in range(50)))
    out = tmp_path / "t.html"
    r = cli("trace", str(p), "--format", "html", "--output", str(out))
    assert r.returncode == 1
    h = out.read_text()
    assert h.count("<svg") == 3 and "first anomaly, step 30" in h and "<script" not in h and "http" not in \
        h.replace("http://www.w3.org/2000/svg", "")


def test_spike_rule_history_is_a_note_not_a_silent_none(tmp_path):
    """A loss that quadruples in a 6-value log: the olmo rule (10 values of history) judges none of it.
    "first anomaly: none" alone read as a verdict; now a note says the values were not judged."""
    p = tmp_path / "m.jsonl"
    p.write_text("".join(f'{{"step": {i}, "loss": {x}}}\n' for i, x in enumerate([1.6, 1.4, 3.3, 6.4, 5.5, 4.9])))
    res = _t(p)
    assert res.first_bad is None
    assert res.notes == ["log.loss_spike: 6 of 6 finite loss value(s) (1 stream(s)) came before the spike rule could "
                         "judge them (olmo: it needs 10 earlier values); none of them was judged. For a short log, "
                         "choose a rule with --spike (e.g. ratio:2:4)"]
    assert _t(p, spike="ratio:2:4").notes == []  # only the first value, which no rule can judge
    r = cli("trace", str(p), "--spike", "olmo")
    assert r.returncode == 0 and "  note: log.loss_spike: 6 of 6" in r.stdout
    r = cli("trace", str(p), "--spike", "olmo", "--format", "json")
    assert json.loads(r.stdout)["result"]["notes"] == res.notes
    # the default rule (robust) judges from the third value: 3.3 > 2 x 1.6, the largest of 1.6 and 1.4
    r = cli("trace", str(p), "--format", "json")
    spike = next(f for f in json.loads(r.stdout)["result"]["findings"] if f["check"] == "log.loss_spike")
    assert spike["details"]["step"] == 2 and spike["details"]["threshold"] == pytest.approx(2 * 1.6)
    long = tmp_path / "long.jsonl"
    long.write_text("".join(f'{{"step": {i}, "loss": {2.0 + 0.01 * (i % 3)}}}\n' for i in range(40)))
    assert _t(long).notes == ["log.loss_spike: 10 of 40 finite loss value(s) (1 stream(s)) came before the spike "
                              "rule could judge them (olmo: it needs 10 earlier values); those were never judged "
                              "as spikes. For a short log, choose a rule with --spike (e.g. ratio:2:4)"]
    assert _t(long, spike="megatron").notes[0].startswith("log.loss_spike: 40 of 40 finite loss value(s) (1 stream(s)) "
                                                         "came before the spike rule could judge them (megatron: its "
                                                         "reference is the first 100 values); none of them was judged")


def test_options_that_need_data_are_named_in_words(tmp_path):
    log = tmp_path / "m.jsonl"
    log.write_text("".join(json.dumps({"step": s, "loss": 1.0}) + "\n" for s in range(1, 9)))
    r = cli("trace", str(log), "--ledger", str(tmp_path))
    assert r.returncode == 2 and "--ledger needs --data PATH" in r.stderr
    r = cli("trace", str(log), "--ledger", str(tmp_path), "--step", "3")
    assert r.returncode == 2 and "--ledger and --step need --data PATH" in r.stderr
    r = cli("trace", str(log), "--ledger", str(tmp_path), "--step", "3", "--window", "2")
    assert r.returncode == 2 and "--ledger, --step and --window need --data PATH" in r.stderr


def test_a_plan_without_steps_is_said_in_words(tmp_path):
    """3 rows in batches of 8 with drop_last: the plan has 0 steps; the refusal says "no log step",
    never a range "1..0"."""
    pytest.importorskip("torch")
    rows, batch = 3, 8
    assert rows // batch == 0
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"x": float(i)}) + "\n" for i in range(rows)))
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text(f"[batch]\nbatch_size = {batch}\ndrop_last = true\n")
    log = tmp_path / "m.jsonl"
    log.write_text("".join(json.dumps({"step": s, "loss": 1.0 if s != 5 else float("nan")}) + "\n" for s in range(1, 9)))
    r = cli("trace", str(log), "--data", str(data), "--config", str(cfg), "--first-step", "1")
    assert r.returncode == 2
    assert "log step 5 is outside the simulated plan (it has no log step: 0 per epoch" in r.stderr
    assert "..0" not in r.stderr and "..-1" not in r.stderr
