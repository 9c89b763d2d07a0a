"""Which files are shards (datacheck/io/discover.py): a forced ``[dataset] format`` applies only to
plausible data files of that format, ``.json`` JSON Lines files are sniffed in auto mode, files
that look like data but are left out are listed in the report's ``ignored``, and the "no shard
files" message gives advice that works."""
from __future__ import annotations

import gzip
import json

import pytest
from conftest import run_cli

import datacheck
from datacheck.formats.discovery import discover
from datacheck.formats.jsonl import sniff_json_lines
from datacheck.model.errors import UsageError

JSONL = '{"text": "a", "label": 0}\n{"text": "b", "label": 1}\n'


def _folder(tmp_path):
    """A folder with shards and the usual non-data companions."""
    d = tmp_path / "fmt"
    d.mkdir()
    (d / "a.json").write_text(JSONL)  # JSON Lines despite the extension
    (d / "b.jsonl").write_text(JSONL.replace('"a"', '"c"').replace('"b"', '"d"'))
    (d / "meta.json").write_text('{\n  "description": "not lines",\n  "n": 2\n}\n')
    (d / "generate.py").write_text("print('hi')\n")
    (d / "NOTES.txt").write_text("how this data was made\n")
    (d / "README.md").write_text("# data\n")
    (d / "conf.yaml").write_text("a: 1\n")
    (d / "dataset_info.json").write_text("{}")
    (d / "state.json").write_text("{}")
    return d


def test_auto_sniffs_json_lines_and_lists_other_json_as_ignored(tmp_path):
    d = _folder(tmp_path)
    disc = discover([str(d)])
    assert [(s.rel, s.format) for s in disc.shards] == [("a.json", "jsonl"), ("b.jsonl", "jsonl")]
    assert [i["path"] for i in disc.ignored_data] == ["NOTES.txt", "meta.json"]
    rep = datacheck.audit(str(d), {})
    assert [s.path for s in rep.shards] == ["a.json", "b.jsonl"] and rep.shards[0].rows == 2
    assert [i["path"] for i in rep.ignored] == ["NOTES.txt", "meta.json"]
    assert "not JSON Lines" in rep.ignored[1]["reason"]


@pytest.mark.parametrize("text, expect", [
    (JSONL, True),
    ('\n\n  {"a": 1}\n\n{"a": 2}', True),  # blank lines and indentation before the objects
    ('\ufeff{"a": 1}\n{"a": 2}\n', True),  # a UTF-8 BOM
    ('{"a": 1}\n', False),  # one object: a JSON document
    ('{\n  "a": 1\n}\n', False),  # pretty-printed
    ('[{"a": 1},\n{"a": 2}]\n', False),  # an array
    ("", False),
])
def test_sniff_json_lines(tmp_path, text, expect):
    p = tmp_path / "x.json"
    p.write_text(text, encoding="utf-8")
    assert sniff_json_lines(p) is expect


def test_forced_jsonl_reads_json_but_never_metadata_code_or_docs(tmp_path):
    d = _folder(tmp_path)
    disc = discover([str(d)], "jsonl")
    assert [s.rel for s in disc.shards] == ["NOTES.txt", "a.json", "b.jsonl", "meta.json"]
    assert {"dataset_info.json", "state.json", "generate.py", "README.md", "conf.yaml"} <= set(disc.ignored)


def test_forced_jsonl_single_json_file_is_audited(tmp_path):
    """`audit fmt2/a.json` with format = "jsonl" audits it (it used to be refused)."""
    d = tmp_path / "fmt2"
    d.mkdir()
    (d / "a.json").write_text(JSONL)
    cfg = tmp_path / "j.toml"
    cfg.write_text('[dataset]\nformat = "jsonl"\n')
    p = run_cli("audit", str(d / "a.json"), "--config", str(cfg), "--report-dir", str(tmp_path / "r"),
                "--no-cache", "--no-progress", "--format", "json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert [(s["path"], s["format"], s["rows"]) for s in doc["shards"]] == [("a.json", "jsonl", 2)]


def test_forced_parquet_skips_code_and_notes(tmp_path):
    """generate.py and NOTES.txt are no longer decode.unreadable under format = "parquet"."""
    import polars as pl

    d = _folder(tmp_path)
    pl.DataFrame({"text": ["x"]}).write_parquet(d / "part.pq")
    pl.DataFrame({"text": ["y"]}).write_parquet(d / "blob")  # no extension: accepted
    rep = datacheck.audit(str(d), {"dataset": {"format": "parquet"}})
    assert [s.path for s in rep.shards] == ["blob", "part.pq"]
    assert not [f for f in rep.findings if f.check == "decode.unreadable"]
    ign = {i["path"]: i["reason"] for i in rep.ignored}
    assert set(ign) == {"NOTES.txt", "a.json", "b.jsonl", "meta.json"}
    assert "does not fit [dataset] format = 'parquet'" in ign["b.jsonl"]


def test_forced_csv_accepts_its_extensions(tmp_path):
    d = tmp_path / "c"
    d.mkdir()
    for name in ("a.csv", "b.txt", "c.data", "d.tsv"):
        (d / name).write_text("text;label\nx;1\n")
    with gzip.open(d / "e.csv.gz", "wt") as f:
        f.write("text;label\nx;1\n")
    (d / "f.json").write_text("{}")
    (d / "g.parquet").write_bytes(b"PAR1")
    disc = discover([str(d)], "csv")
    assert [s.rel for s in disc.shards] == ["a.csv", "b.txt", "c.data", "d.tsv", "e.csv.gz"]
    assert [i["path"] for i in disc.ignored_data] == ["f.json", "g.parquet"]


@pytest.mark.parametrize("fmt, ok", [
    ("arrow", ["s.arrow", "s.feather", "s.ipc"]),
    ("parquet", ["s.parquet", "s.pq"]),
    ("jsonl", ["s.json", "s.json.gz", "s.jsonl", "s.jsonl.zst", "s.ndjson", "s.txt"]),
])
def test_forced_format_extension_table(tmp_path, fmt, ok):
    names = ["s.arrow", "s.feather", "s.ipc", "s.parquet", "s.pq", "s.json", "s.json.gz", "s.jsonl",
             "s.jsonl.zst", "s.ndjson", "s.txt", "s.sh", "s.cfg", "s.ini", "s.lock", "s.yml", "s.toml"]
    for n in names:
        (tmp_path / n).write_bytes(b"x")
    assert [s.rel for s in discover([str(tmp_path)], fmt).shards] == sorted(ok)


def test_no_shard_message_gives_advice_that_works(tmp_path):
    d = tmp_path / "only"
    d.mkdir()
    (d / "notes.py").write_text("x = 1\n")
    with pytest.raises(UsageError) as e:
        discover([str(d)], "parquet")
    msg = str(e.value)
    assert "with [dataset] format = 'parquet' datacheck reads files ending in .parquet, .pq or without an extension" in msg
    assert "set [dataset] format to read other extensions" not in msg
    (d / "doc.json").write_text('{"a": 1}\n')
    with pytest.raises(UsageError) as e:
        discover([str(d)])
    assert "doc.json: a .json file that is not JSON Lines" in str(e.value)


def test_text_output_lists_ignored_files(tmp_path):
    d = _folder(tmp_path)
    p = run_cli("audit", str(d), "--report-dir", str(tmp_path / "r"), "--no-cache", "--no-progress")
    assert p.returncode == 0, p.stderr
    assert "Ignored (2 file(s) that look like data were not audited):" in p.stdout
    assert "  meta.json: a .json file that is not JSON Lines" in p.stdout


def test_a_glob_that_matches_nothing_says_so(tmp_path):
    (tmp_path / "train-00000.parquet").write_bytes(b"x")
    with pytest.raises(UsageError) as e:
        discover([str(tmp_path / "eval-*.parquet")])
    assert f"no shard files under {tmp_path / 'eval-*.parquet'} (the pattern matches no file)" in str(e.value)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UsageError) as e:
        discover([str(empty)])
    assert "(the paths hold no files)" in str(e.value)


def test_a_file_url_names_the_local_path(tmp_path):
    d = tmp_path / "my data"
    d.mkdir()
    (d / "a.jsonl").write_text("{\"text\": \"a\"}\n")
    url = "file://" + str(d).replace(" ", "%20")
    p = run_cli("audit", url, "--report-dir", str(tmp_path / "r"), cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert f"{url}: a file:// URL; give the local path itself ({d})" in p.stderr, p.stderr
