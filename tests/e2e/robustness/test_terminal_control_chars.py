"""Names and values from the data never reach the terminal as control characters: a column name or
file name holding ESC (``\\x1b[2J`` clears the screen, ``\\x1b]0;...\\x07`` retitles the window) or
another C0/C1 control is printed escaped (``\\x1b``) by ``audit`` and ``inspect``, and the name is
still recognizable; plain names are printed unchanged."""
from __future__ import annotations

import json
import unicodedata

from conftest import run_cli

EVIL_COL = "\x1b[31mscore\x1b]0;pwned\x07"


def _controls(text: str) -> list[str]:
    return [c for c in text if unicodedata.category(c) == "Cc" and c not in "\n\t"]


def _data(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    rows = [{"text": "a", "label": 1, EVIL_COL: float("nan")}, {"text": "", "label": 0, EVIL_COL: 1.0}]
    (d / "a\x1b[2J.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return d


def test_terminal_safe_escapes_controls_only():
    from datacheck.render.text import terminal_safe
    assert terminal_safe("plain text, ünïcode, 中文\tand\nlines") == "plain text, ünïcode, 中文\tand\nlines"
    assert terminal_safe("\x1b[2J\x07\x9b\x7f\r") == "\\x1b[2J\\x07\\x9b\\x7f\\r"
    assert terminal_safe("a\u202eb") == "a\\u202eb"  # a bidi override reorders what follows it


def test_audit_text_prints_no_control_characters(tmp_path):
    r = run_cli("audit", str(_data(tmp_path)), "--report-dir", str(tmp_path / "reports"))
    assert r.returncode == 1, r.stderr
    assert "finite.nan" in r.stdout
    assert _controls(r.stdout) == [], repr(r.stdout)
    assert "\\x1b[31mscore" in r.stdout  # the column, escaped
    assert "a\\x1b[2J.jsonl" in r.stdout  # the shard, escaped


def test_inspect_text_prints_no_control_characters(tmp_path):
    data = _data(tmp_path)
    (shard,) = data.iterdir()
    r = run_cli("inspect", str(shard), "--color", "never")
    assert r.returncode == 1, r.stderr
    assert _controls(r.stdout) == [], repr(r.stdout)
    assert "finite.nan:\\x1b[31mscore" in r.stdout


def test_clean_text_prints_no_control_characters(tmp_path):
    r = run_cli("clean", str(_data(tmp_path)), "--out", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    assert "a\\x1b[2J.jsonl" in r.stdout
    assert _controls(r.stdout) == [], repr(r.stdout)


def _two_reports(tmp_path, name: str) -> tuple[str, str]:
    """The reports of a folder before and after a shard named ``name`` (a copy of its shard) is added."""
    data = _data(tmp_path)
    (shard,) = data.iterdir()
    old, new = str(tmp_path / "old.json"), str(tmp_path / "new.json")
    assert run_cli("audit", str(data), "--no-cache", "--report-dir", str(tmp_path / "r"), "-o", old).returncode == 1
    (data / name).write_bytes(shard.read_bytes())
    assert run_cli("audit", str(data), "--no-cache", "--report-dir", str(tmp_path / "r"), "-o", new).returncode == 1
    return old, new


def test_diff_text_and_markdown_print_no_control_characters(tmp_path):
    """``diff`` printed an added shard's name raw: ``ESC [31m`` coloured the terminal (``audit``,
    ``inspect`` and ``clean`` escaped it already)."""
    old, new = _two_reports(tmp_path, "b\x1b[31mred.jsonl")
    for fmt in ("text", "markdown"):
        r = run_cli("diff", old, new, "--format", fmt)
        assert r.returncode == 1, r.stderr  # the copy is a new dup.shard error
        assert _controls(r.stdout) == [], (fmt, r.stdout)
        assert "b\\x1b[31mred.jsonl" in r.stdout


def test_a_line_break_in_a_shard_name_keeps_each_output_line_whole(tmp_path):
    """A shard file named ``b<newline>c.jsonl``: every line of ``audit``'s text, ``diff``'s text and
    markdown that names it shows ``b\\nc.jsonl`` on that line (the name broke the messages and the
    example lines of the audit, and diff's lines, in two)."""
    old, new = _two_reports(tmp_path, "b\nc.jsonl")
    audit = run_cli("audit", str(tmp_path / "data"), "--no-cache", "--report-dir", str(tmp_path / "r"))
    diff = run_cli("diff", old, new).stdout
    md = run_cli("diff", old, new, "--format", "markdown").stdout
    for out in (audit.stdout, diff, md):
        assert "b\\nc.jsonl" in out
        assert not [ln for ln in out.splitlines() if ln.startswith("c.jsonl")], out  # no line begins with its tail
    assert "  + b\\nc.jsonl" in diff.splitlines()
    assert "- added: `b\\nc.jsonl`" in md.splitlines()


def test_inspect_keeps_a_line_broken_shard_name_on_its_line(tmp_path):
    """``inspect`` of a shard file named ``b<newline>c.jsonl`` printed its header across two lines."""
    data = _data(tmp_path)
    (shard,) = data.iterdir()
    odd = data / "b\nc.jsonl"
    shard.rename(odd)
    r = run_cli("inspect", str(odd), "--color", "never")
    assert r.returncode == 1, r.stderr
    assert r.stdout.splitlines()[0].startswith("b\\nc.jsonl (jsonl, ")


def test_clean_keeps_a_line_broken_shard_name_on_its_line(tmp_path):
    """``clean``'s per-shard line of a shard named ``b<newline>c.jsonl`` was split in two."""
    data = _data(tmp_path)
    (shard,) = data.iterdir()
    shard.rename(data / "b\nc.jsonl")
    r = run_cli("clean", str(data), "--out", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    assert any(ln.startswith("  b\\nc.jsonl: 2 in, ") for ln in r.stdout.splitlines()), r.stdout
