"""The HTML report shows each shard's layout (the JSON report's ``layout``, ``layout_source`` and
``layout_why``): one line when the readable shards share it, else one line per layout with its
shards, a layout column in the table of shards and the layout in each shard's heading; escaped like
every other value; the JSON report itself is untouched by rendering it."""
from __future__ import annotations

import dataclasses
import html as _html
import json
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest
from conftest import REALDATA, run_cli

from datacheck.render.html import render_html
from datacheck.report.model import read_report

EVIL = '<script>alert("x")</script><img src=x onerror=alert(1)>'


class _Page(HTMLParser):
    """The cells of the table in ``<section id="shards">``, the items of ``<ul id="layout">`` and the
    text of each shard section's ``<div class="muted">`` layout line, as plain text."""

    def __init__(self) -> None:
        super().__init__()
        self.section: str | None = None
        self.rows: list[list[str]] = []
        self.items: list[str] = []
        self.shard_layout: dict[str, str] = {}
        self._cell: list[str] | None = None
        self._li: list[str] | None = None
        self._div: list[str] | None = None
        self._in_ul = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "section":
            self.section = a.get("id")
        elif tag == "tr" and self.section == "shards":
            self.rows.append([])
        elif tag in ("td", "th") and self.section == "shards":
            self._cell = []
        elif tag == "ul" and a.get("id") == "layout":
            self._in_ul = True
        elif tag == "li" and self._in_ul:
            self._li = []
        elif tag == "div" and a.get("class") == "muted" and (self.section or "").startswith("shard-"):
            self._div = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "li" and self._li is not None:
            self.items.append("".join(self._li).strip())
            self._li = None
        elif tag == "ul":
            self._in_ul = False
        elif tag == "div" and self._div is not None:
            self.shard_layout[self.section or ""] = "".join(self._div).strip()
            self._div = None

    def handle_data(self, data):
        for buf in (self._cell, self._li, self._div):
            if buf is not None:
                buf.append(data)


def _page(doc: str) -> _Page:
    p = _Page()
    p.feed(doc)
    return p


def _audit(folder: Path, tmp: Path) -> tuple[Path, dict]:
    cfg = tmp / "empty.toml"
    cfg.write_text("", encoding="utf-8")
    out = tmp / "report.json"
    r = run_cli("audit", str(folder), "--config", str(cfg), "--no-cache", "--no-progress", "--fail-on", "never",
                "--report-dir", str(tmp / "reports"), "--output", str(out))
    assert r.returncode == 0, r.stderr
    return out, json.loads(out.read_text(encoding="utf-8"))


@pytest.fixture
def mixed(tmp_path):
    """Three real shards of three layouts: SST-2 (``sentence``, ``label``: text classification),
    Megatron GPT-2 ids (``input_ids`` without labels, rows of varying length: causal LM) and AG News
    prompts (three text columns: no layout fits)."""
    if not REALDATA.is_dir():
        pytest.skip("../shared/realdata is not present")
    d = tmp_path / "mix"
    d.mkdir()
    shutil.copy(REALDATA / "sst2_vi_glue_parquet" / "validation-00000-of-00001.parquet", d)
    for ext in ("bin", "idx"):
        shutil.copy(REALDATA / "megatron_toy_duplicates" / f"my-gpt2_text_document.{ext}", d)
    shutil.copy(REALDATA / "agnews_prompts_jsonl" / "ag_news_classify_question_first.jsonl", d)
    return d


def _shown(s: dict) -> str:
    return (f"{s['layout']} ({s['layout_source']}: {s['layout_why']})" if s["layout"] is not None
            else f"unknown ({s['layout_why']})")


@pytest.mark.realdata
def test_shards_of_different_layouts_each_show_theirs(mixed, tmp_path):
    path, rep = _audit(mixed, tmp_path)
    before = path.read_bytes()
    out = tmp_path / "report.html"
    r = run_cli("report", str(path), "--html", str(out))
    assert r.returncode in (0, 1), r.stderr
    assert path.read_bytes() == before  # rendering never rewrites the report
    page = _page(out.read_text(encoding="utf-8"))
    want = {"validation-00000-of-00001.parquet": "text_classification", "my-gpt2_text_document.bin": "causal_lm",
            "ag_news_classify_question_first.jsonl": "unknown"}
    head, *rows = page.rows
    assert head[:4] == ["status", "shard", "format", "layout"]
    assert {row[1]: row[3] for row in rows} == want
    by_path = {s["path"]: s for s in rep["shards"]}
    assert {s["layout"] or "unknown" for s in rep["shards"]} == set(want.values())
    # one line per layout with its shard, in shard order, then the not-applicable counts
    assert page.items[:3] == [f"{_shown(by_path[p])} (1 shard: {p})" for p in sorted(by_path)]
    assert page.items[3:] == [f"{s['not_applicable']:,} checks do not apply to {s['layout']}; datacheck checks "
                              f"--layout {s['layout']} lists them" for p, s in sorted(by_path.items())
                              if s["layout"] is not None and s["not_applicable"]]
    assert {k[len("shard-"):]: v for k, v in page.shard_layout.items()} == {
        "".join(ch if ch.isalnum() else "-" for ch in p): f"layout: {_shown(s)}" for p, s in by_path.items()}


@pytest.mark.realdata
def test_one_layout_is_one_line(tmp_path):
    if not REALDATA.is_dir():
        pytest.skip("../shared/realdata is not present")
    d = tmp_path / "sst2"
    d.mkdir()
    shutil.copy(REALDATA / "sst2_vi_glue_parquet" / "validation-00000-of-00001.parquet", d / "a.parquet")
    shutil.copy(REALDATA / "sst2_vi_glue_parquet" / "test-00000-of-00001.parquet", d / "b.parquet")
    path, rep = _audit(d, tmp_path)
    page = _page(render_html(read_report(path)))
    (s0, s1) = rep["shards"]
    assert _shown(s0) == _shown(s1) and s0["layout"] == "text_classification"
    assert page.items[0] == _shown(s0)  # no shard list: every shard has it
    assert page.rows[0][:4] == ["status", "shard", "format", "rows"]  # no layout column
    assert page.shard_layout == {}


def test_layout_text_is_escaped(tmp_path):
    """A layout's ``why`` quotes column names, which come from the data: escaped like every value."""
    if not REALDATA.is_dir():
        pytest.skip("../shared/realdata is not present")
    d = tmp_path / "one"
    d.mkdir()
    shutil.copy(REALDATA / "sst2_vi_glue_parquet" / "validation-00000-of-00001.parquet", d)
    path, _ = _audit(d, tmp_path)
    report = read_report(path)
    (sh,) = report.shards
    evil = dataclasses.replace(report, shards=(dataclasses.replace(sh, layout_why=EVIL),
                                               dataclasses.replace(sh, path="b.parquet", layout=EVIL)))
    doc = render_html(evil)
    assert "<script>" not in doc and "<img" not in doc
    assert _html.escape(EVIL, quote=True) in doc
    page = _page(doc)
    assert page.items[:2] == [f"text_classification ({sh.layout_source}: {EVIL}) (1 shard: {sh.path})",
                              f"{EVIL} ({sh.layout_source}: {sh.layout_why}) (1 shard: b.parquet)"]
