"""The self-contained HTML report: content, escaping, no external resources, drift highlighted, and a
render in headless Chromium (Debian's package) checked through its DOM text and a screenshot."""
from __future__ import annotations

import dataclasses
import html as _html
import os
import re
import shutil
import subprocess

import pytest
from conftest import ROOT

import datacheck
from datacheck.model.config import config_from_dict, load_config
from datacheck.model.findings import Finding
from datacheck.render.html import render_html
from datacheck.report.model import read_report

SAMPLE = ROOT / "sample_data"
SAMPLE_CFG = SAMPLE / "datacheck.toml"

from conftest import run_cli  # noqa: E402

EVIL = '<script>alert("x")</script><img src=x onerror=alert(1)>'


@pytest.fixture(scope="module")
def sample_report():
    return datacheck.audit([str(SAMPLE)], load_config(SAMPLE_CFG))


def _with_drift(report):
    """The sample report plus a dist.length_drift finding on one shard (as engineer D's checks emit)."""
    shards = list(report.shards)
    k = next(i for i, s in enumerate(shards) if s.path == "lm_clean/train-00001-of-00002.parquet")
    drift = Finding(check="dist.length_drift", severity="warn", count=16,
                    message="length histogram differs from the rest of the dataset (PSI 0.42 > 0.25)")
    shards[k] = dataclasses.replace(shards[k], findings=shards[k].findings + (drift,), status="warn")
    return dataclasses.replace(report, shards=tuple(shards))


def _text(doc: str) -> str:
    return _html.unescape(re.sub(r"<[^>]+>", " ", doc))


def test_content_summary_shards_findings_charts(sample_report):
    doc = render_html(sample_report)
    text = _text(doc)
    s = sample_report.summary
    assert f"{s['shards']}" in text and f"{s['rows']:,}" in text
    for sh in sample_report.shards:
        assert sh.path in text
        for f in sh.findings:
            assert f.check in text
    # per-shard and dataset charts: a length histogram and a label distribution
    assert "dataset: length of input_ids" in text or "dataset: length of" in text
    assert "dataset: labels in label" in text
    assert "lm_clean/train-00000-of-00002.parquet: length of input_ids (tokens)" in text
    assert "cls_clean/test.parquet: labels in label (3 values, 9 rows)" in text
    assert doc.count("<svg") >= 10
    # first rows of a finding: tokens.out_of_vocab in ids.parquet, rows 1, 3, 4
    assert "rows 1, 3, 4" in text


def test_self_contained(sample_report):
    doc = render_html(_with_drift(sample_report))
    assert "<script" not in doc.lower()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", doc, re.I)
    assert "@import" not in doc and "url(" not in doc and "<link" not in doc.lower()
    assert "default-src 'none'" in doc  # CSP: nothing external may load even if added later


def test_drift_highlighted(sample_report):
    doc = render_html(_with_drift(sample_report))
    assert '<section id="drift">' in doc
    assert 'class="drift"' in doc and "DRIFT" in doc
    assert "dist.length_drift" in _text(doc).split("Shards")[0]  # in the drift section before the tables
    # sample_data's one dist.* finding is dist.target_scale on its regression shard (a drift-section
    # check); without dist.* findings there is no drift section
    assert [f.check for f in sample_report.findings if f.check.startswith("dist.")] == ["dist.target_scale"]
    quiet = dataclasses.replace(sample_report, dataset_findings=tuple(
        f for f in sample_report.dataset_findings if not f.check.startswith("dist.")))
    assert '<section id="drift">' not in render_html(quiet)


def test_data_values_are_escaped(tmp_path):
    src = tmp_path / "d"
    src.mkdir()
    line = '{"text": "%s", "label": 7}\n' % EVIL.replace('"', '\\"')
    (src / f"x{'<b>'}.jsonl").write_text(line + line + '{"text": "", "label": 0}\n')
    report = datacheck.audit([str(src)], config_from_dict({"labels": {"num_classes": 2}}))
    doc = render_html(report)
    assert "<script>" not in doc and "<img" not in doc and "<b>" not in doc
    assert "&lt;b&gt;.jsonl" in doc
    assert "labels.out_of_range" in doc
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in doc  # the dup example shows the text


def test_cli_report_html_and_audit_format_html(tmp_path):
    rj = tmp_path / "r.json"
    p = run_cli("audit", str(SAMPLE), "--config", str(SAMPLE_CFG), "--report-dir", str(tmp_path / "rep"),
                "-o", str(rj), "--format", "html", "--html", str(tmp_path / "a.html"), "--no-progress")
    assert p.returncode == 1, p.stderr
    assert p.stdout.startswith("<!DOCTYPE html>") and p.stdout.rstrip().endswith("</html>")
    out = tmp_path / "r.html"
    p = run_cli("report", str(rj), "--html", str(out))
    assert p.returncode == 0, p.stderr
    assert out.read_text() == render_html(read_report(rj)) == (tmp_path / "a.html").read_text()
    p = run_cli("report", str(tmp_path / "missing.json"), "--html", str(out))
    assert p.returncode == 2 and "no such report file" in p.stderr


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def test_renders_in_headless_chromium(tmp_path, sample_report):
    exe = _chromium()
    if exe is None:
        if os.environ.get("DATACHECK_REQUIRE_CHROMIUM"):
            pytest.fail("chromium is required here (DATACHECK_REQUIRE_CHROMIUM=1; .ci/run installs Debian's chromium)")
        pytest.skip("chromium is not installed (apt-get install chromium); .ci/run installs it in CI")
    page = tmp_path / "report.html"
    page.write_text(render_html(_with_drift(sample_report)), encoding="utf-8")
    shot = tmp_path / "shot.png"
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1400,2000", f"--screenshot={shot}",
           "--dump-dom", page.as_uri()]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    dom = p.stdout
    text = _text(dom)
    for sh in sample_report.shards:
        assert sh.path in text
    for check in ("tokens.out_of_vocab", "decode.unreadable", "labels.out_of_range", "dup.shard",
                  "index.numbering_gap", "dist.length_drift"):
        assert check in text
    assert "FAIL" in text and "DRIFT" in text
    assert f"{sample_report.summary['rows']:,}" in text
    # the browser built the SVG charts
    assert dom.count("<svg") >= 10 and "<rect" in dom
    assert shot.is_file() and shot.stat().st_size > 20_000
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_shard_anchors_are_unique_when_names_differ_only_in_punctuation(tmp_path):
    import polars as pl
    names = ["a<b.parquet", "a>b.parquet", "a-b.parquet", "a_b.parquet"]
    for n in names:
        pl.DataFrame({"text": ["x", "y"], "label": [0, 1]}).write_parquet(tmp_path / n)
    page = render_html(datacheck.audit([str(tmp_path)], config_from_dict({}), workers=1))
    ids = re.findall(r'<section id="(shard-[^"]*)" class="shard"><h2>.*?<span class="mono">([^<]*)</span>', page)
    assert len(ids) == len(names) and len({i for i, _ in ids}) == len(names)
    target = {i: _html.unescape(p) for i, p in ids}
    links = re.findall(r'<a href="#(shard-[^"]*)">([^<]*)</a>', page)
    assert sorted(_html.unescape(p) for _, p in links) == sorted(names)
    for anchor, path in links:  # each link of the shards table leads to its own shard's section
        assert target[anchor] == _html.unescape(path)
