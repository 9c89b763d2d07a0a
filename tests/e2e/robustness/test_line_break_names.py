"""A shard whose name holds a line break (``a\\nb.jsonl``; also CR and U+2028, which line readers split
on) keeps one finding on one line in every human-readable output: the name is shown escaped as
``repr`` writes it (``\\n``), in the table, the finding lines, the skip reasons, clean's and inspect's
lines and the error line of exit 2; the JSON report keeps the exact name. Expected findings are counted
here from the rows written."""
from __future__ import annotations

import json

import pytest
from conftest import run_cli

from datacheck.checks.spec import RUNNING_TEXT_MIN_CHARS
from datacheck.model.shown import one_line

NAMES = ["bad\nname.jsonl", "cr\rname.jsonl", "ls\u2028name.jsonl"]
ROWS = [{"text": ""}, {"text": "a"}, {"text": "a"}]  # row 0 empty.text; row 2 repeats row 1


def _escaped(name: str) -> str:
    return ascii(name)[1:-1]


def _data(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    for n in NAMES:
        (d / n).write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return d


def test_one_line_escapes_line_breaks_as_repr_does():
    for ch in "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029":
        text = f"a{ch}b"
        assert len(text.splitlines()) == 2
        assert one_line(text) == ascii(text)[1:-1] and len(one_line(text).splitlines()) == 1
    assert one_line("tab\tünï 中") == "tab\tünï 中"


def test_audit_prints_one_finding_a_line_and_the_json_keeps_the_name(tmp_path):
    data = _data(tmp_path)
    r = run_cli("audit", str(data), "--report-dir", str(tmp_path / "rep"), "--no-cache")
    assert r.returncode == 1, r.stderr
    lines = r.stdout.split("\n")
    assert all(len(ln.splitlines()) <= 1 for ln in lines)  # no CR nor U+2028 left inside a line
    for n in NAMES:
        esc = _escaped(n)
        findings = [ln for ln in lines if ln.startswith(f"  {esc}: ")]
        assert sorted(ln.split(": ")[1].split(" ")[0] for ln in findings) == ["dup.exact_in_shard", "empty.text"]
        assert any(ln.startswith(f"FAIL    {esc}") for ln in lines)  # the table's row
        assert n not in r.stdout
    j = run_cli("audit", str(data), "--report-dir", str(tmp_path / "rep"), "--format", "json")
    assert sorted(s["path"] for s in json.loads(j.stdout)["shards"]) == sorted(NAMES)


def test_clean_and_inspect_print_the_name_escaped(tmp_path):
    data = _data(tmp_path)
    r = run_cli("clean", str(data), "--out", str(tmp_path / "out"), "--drop", "empty.text")
    assert r.returncode == 0, r.stderr
    for n in NAMES:
        assert f"  {_escaped(n)}: {len(ROWS)} in, {len(ROWS) - 1} kept, 1 quarantined (empty.text 1)" in r.stdout.split("\n")
        assert n not in r.stdout
    assert sorted(p.name for p in (tmp_path / "out").iterdir() if p.suffix == ".jsonl") == sorted(NAMES)
    i = run_cli("inspect", str(data / NAMES[0]), "--color", "never")
    assert i.returncode == 1, i.stderr
    assert i.stdout.split("\n")[0].startswith(f"{_escaped(NAMES[0])} (jsonl")


@pytest.mark.parametrize("name", NAMES)
def test_an_error_naming_the_path_stays_on_one_line(tmp_path, name):
    r = run_cli("audit", str(tmp_path / name))
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and _escaped(name) in r.stderr


@pytest.mark.parametrize("suffix", [".jsonl", ".txt"])
def test_clean_quarantines_values_holding_unicode_line_separators(tmp_path, suffix):
    # json.dumps(ensure_ascii=False) writes U+2028, U+2029 and NEL raw: the quarantine's read-back must
    # not cut a record at them (str.splitlines does)
    data = tmp_path / "data"
    data.mkdir()
    texts = ["keep me", "", "x\u2028y\u2029z\x85w " + "long enough to count as a repeated passage " * RUNNING_TEXT_MIN_CHARS]
    if suffix == ".jsonl":
        (data / "a.jsonl").write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts),
                                      encoding="utf-8")
        drop, dropped = "empty.text", [1]
    else:
        (data / "a.txt").write_text("\n".join([texts[0], texts[2], texts[2]]) + "\n", encoding="utf-8")
        drop, dropped = "dup.exact_in_shard", [2]
    r = run_cli("clean", str(data), "--out", str(tmp_path / "out"), "--drop", drop, "--format", "json")
    assert r.returncode == 0, r.stderr
    (shard,) = json.loads(r.stdout)["result"]["shards"]
    assert (shard["input_rows"], shard["quarantined"]) == (3, len(dropped))
