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
    head = re.search(r">grad_norm \(log10\): ([^<]*)</text>", out.read_text()).group(1)
    assert head == f"no finite positive value ({n} non-finite), records 1..{n}"  # not a range "0 .. 0"
