"""The trace output (datacheck/trace/render.py): the HTML charts speak of the same numbers as the
text, "record N" for a log whose records carry no step number, and say when a curve has no finite value."""
from __future__ import annotations

import json
import re

import pytest
from conftest import SHARED, run_cli

LOGS = SHARED / "logs"
pytestmark = pytest.mark.skipif(not LOGS.is_dir(), reason="shared logs not present")

# PROVENANCE.md: Hugging Face Trainer dict lines (no step number), grad_norm nan on every line
MODERNBERT = LOGS / "issues/modernbert_233_hf_trainer_grad_norm_nan.txt"


def _charts(page: str) -> str:
    """The page without its <pre> text block: the charts' own words."""
    return re.sub(r"<pre>.*?</pre>", "", page, flags=re.S)


def test_html_of_a_step_less_log_says_record_as_the_text_does(tmp_path):
    lines = [ln for ln in MODERNBERT.read_text().splitlines() if ln.strip().startswith("{")]
    n = len(lines)  # one record per Trainer dict line, numbered from 1
    out = tmp_path / "t.html"
    r = run_cli("trace", str(MODERNBERT), "--format", "html", "--output", str(out), "--no-progress")
    assert r.returncode == 1, r.stderr
    js = json.loads(run_cli("trace", str(MODERNBERT), "--format", "json", "--no-progress").stdout)["result"]
    assert js["first_bad"]["step_unit"] == "record"
    charts = _charts(out.read_text())
    assert not re.search(r"\bsteps? \d", charts), re.findall(r"[^>]{0,30}\bsteps? \d[^<]{0,20}", charts)
    assert f"records 1..{n}" in charts
    assert f"<title>first anomaly, record {js['first_bad']['step']}</title>" in charts
    assert f"<title>numeric: log.non_finite from record {js['first_bad']['step']}</title>" in charts
    for i in range(1, n + 1):  # every grad norm is nan
        assert f"<title>non-finite at record {i}</title>" in charts


def test_a_curve_without_a_finite_value_gives_no_range(tmp_path):
    n = sum(1 for ln in MODERNBERT.read_text().splitlines() if ln.strip().startswith("{"))
    out = tmp_path / "t.html"
    run_cli("trace", str(MODERNBERT), "--format", "html", "--output", str(out), "--no-progress")
    head = re.search(r">grad_norm \(log axis\): ([^<]*)</text>", out.read_text()).group(1)
    assert head == f"no finite positive value ({n} non-finite), records 1..{n}"  # not a range "0 .. 0"


N_ROWS, BATCH, NAN_STEP, LAST = 40, 4, 4, 10  # 10 optimizer steps of 4 rows; the log counts from 1


def _run(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "part.jsonl").write_text(
        "".join(json.dumps({"x1": float(i), "x2": 1.0, "label": i % 2}) + "\n" for i in range(N_ROWS)))
    (tmp_path / "log.jsonl").write_text("".join(
        json.dumps({"step": s, "loss": float("nan") if s == NAN_STEP else 1.0 - 0.01 * s}) + "\n"
        for s in range(1, LAST + 1)))
    (tmp_path / "dc.toml").write_text('[columns]\nfeatures = ["x1", "x2"]\nlabel = "label"\n[batch]\n'
                                      f"batch_size = {BATCH}\nshuffle = false\n")


@pytest.mark.parametrize("step, window, relation", [
    (NAN_STEP + 3, 0, f"after the anomaly's window {NAN_STEP}..{NAN_STEP}, starting 3 step(s) after it ends"),
    (NAN_STEP + 3, 1, f"after the anomaly's window {NAN_STEP}..{NAN_STEP}, starting 2 step(s) after it ends"),
    (NAN_STEP - 2, 0, f"before the anomaly's window {NAN_STEP}..{NAN_STEP}, ending 2 step(s) before it starts"),
    (NAN_STEP, 2, f"the anomaly's window {NAN_STEP}..{NAN_STEP}, 2 step(s) before it"),
    (NAN_STEP + 1, 2, f"the anomaly's window {NAN_STEP}..{NAN_STEP}, 1 step(s) before it, 1 step(s) after it"),
])
def test_the_audited_window_is_said_from_where_the_step_lies(tmp_path, step, window, relation):
    _run(tmp_path)
    r = run_cli("trace", str(tmp_path / "log.jsonl"), "--data", str(tmp_path / "data"), "--config",
                str(tmp_path / "dc.toml"), "--step", str(step), "--window", str(window), "--no-progress")
    assert r.returncode == 1, r.stdout + r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("first anomaly:"))
    assert line.endswith(f"window {step - window}..{step} audited ({relation})"), line
    assert "and the steps before it" not in r.stdout
    # answer 4 says whose rows these are: the anomaly's only when the audited steps hold it
    lo = step - window
    apart = ("after" if lo > NAN_STEP else "before" if step < NAN_STEP else None)
    where = f"step {step}" if lo == step else f"steps {lo}..{step}"
    answer = next(ln for ln in r.stdout.splitlines() if ln.startswith("4. "))
    rows = (step - lo + 1) * BATCH
    assert answer.startswith(f"4. the rows of that step: {rows} row(s) in {where}"
                             + (f", {apart} the anomaly's step {NAN_STEP} (--step);" if apart else ";")), answer


def test_a_log_axis_chart_gives_the_values_not_their_exponents(tmp_path):
    # PROVENANCE.md: Megatron GPT-2, loss scale 8388608 at iteration 10 .. 16384 at 30; grad norm from 30
    log = LOGS / "megatron/meg_gpt2_base_n4-1809579.out"
    text = log.read_text()
    scales = [float(x) for x in re.findall(r"\| loss scale: ([0-9.]+) \|", text)]
    norms = [float(x) for x in re.findall(r"\| grad norm: ([0-9.]+) \|", text)]
    assert 8388608.0 in scales and 16384.0 in scales
    out = tmp_path / "m.html"
    run_cli("trace", str(log), "--format", "html", "--output", str(out), "--no-progress")
    page = out.read_text()
    got = re.search(r">loss_scale \(log axis\): ([^,<]*),", page).group(1)
    assert got == f"{min(scales):.4g} .. {max(scales):.4g}"
    got = re.search(r">grad_norm \(log axis\): ([^,<]*),", page).group(1)
    assert got == f"{min(norms):.4g} .. {max(norms):.4g}"
