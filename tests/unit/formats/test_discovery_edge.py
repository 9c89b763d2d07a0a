"""Reader and discovery edge cases: byte order marks, symlinks, corrupt compressed and Arrow data,
non-object JSON lines, header-only CSV."""
from __future__ import annotations

import gzip
import os

import polars as pl
import pyarrow as pa
import pytest
from checkhelp import findings, one  # noqa: E402

import datacheck  # noqa: E402
from datacheck.formats.discovery import discover  # noqa: E402
from datacheck.model.errors import UsageError  # noqa: E402

BOM = b"\xef\xbb\xbf"


def test_jsonl_with_utf8_bom(tmp_path):
    (tmp_path / "s.jsonl").write_bytes(BOM + b'{"text": "a"}\n{"text": ""}\n{"text": "b"\n')
    rep = datacheck.audit(str(tmp_path))
    assert rep.shards[0].rows == 2
    assert one(rep, "empty.text").rows == (1,)
    bad = one(rep, "decode.bad_record")
    assert bad.lines == (3,)
    assert bad.examples[0].byte_offset == 3 + 14 + 13  # offsets count the BOM: they are file offsets


def test_csv_with_utf8_bom_and_invalid_byte_offsets(tmp_path):
    (tmp_path / "s.csv").write_bytes(BOM + b"text,label\nok,1\ncaf\xe9,0\n")
    rep = datacheck.audit(str(tmp_path))
    assert list(rep.shards[0].columns) == ["text", "label"]
    f = one(rep, "decode.invalid_utf8")
    assert f.examples[0].byte_offset == 3 + 11 + 5 + 3


def test_symlinked_shard_keeps_its_name(tmp_path):
    blobs = tmp_path / "blobs"
    blobs.mkdir()
    pl.DataFrame({"text": ["a"]}).write_parquet(blobs / "0123abcd")
    snap = tmp_path / "snapshot"
    snap.mkdir()
    os.symlink(blobs / "0123abcd", snap / "train-00000-of-00001.parquet")
    os.symlink(tmp_path / "missing-blob", snap / "test-00000-of-00001.parquet")
    # Links out of the audited root are not followed unless asked (HF hub cache: asked)
    with pytest.raises(UsageError, match="outside the audited root: not followed .*--follow-symlinks"):
        datacheck.audit(str(snap))
    rep = datacheck.audit(str(snap), follow_symlinks=True)
    assert [(s.path, s.rows) for s in rep.shards] == [("test-00000-of-00001.parquet", None),
                                                       ("train-00000-of-00001.parquet", 1)]
    f = one(rep, "decode.unreadable")
    assert f.message.startswith("test-00000-of-00001.parquet: cannot read file")


def test_corrupt_gzip_is_unreadable(tmp_path):
    (tmp_path / "a.jsonl.gz").write_bytes(b"\x1f\x8bnot really gzip")
    (tmp_path / "b.jsonl.gz").write_bytes(gzip.compress(b'{"text": "x"}\n'))
    rep = datacheck.audit(str(tmp_path))
    assert "cannot decompress .gz data" in one(rep, "decode.unreadable").message
    assert rep.shards[1].rows == 1


def test_truncated_arrow_stream_and_file(tmp_path):
    t = pa.table({"text": ["a"] * 500})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, t.schema) as w:
        w.write_table(t)
    b = sink.getvalue().to_pybytes()
    (tmp_path / "stream.arrow").write_bytes(b[: len(b) // 2])
    pl.DataFrame({"text": ["a"] * 500}).write_ipc(tmp_path / "x.arrow")
    whole = (tmp_path / "x.arrow").read_bytes()
    (tmp_path / "file.arrow").write_bytes(whole[:-30])
    (tmp_path / "x.arrow").unlink()
    (tmp_path / "zero.arrow").write_bytes(b"")
    rep = datacheck.audit(str(tmp_path))
    msgs = {s.path: s.findings[0].message for s in rep.shards}
    assert all(s.rows is None for s in rep.shards)
    assert "not a readable Arrow IPC file or stream (first bytes b'ARROW1" in msgs["file.arrow"]
    assert "not a readable Arrow IPC file or stream" in msgs["stream.arrow"]
    assert "zero-byte file" in msgs["zero.arrow"]


def test_non_object_json_lines_are_bad_records(tmp_path):
    (tmp_path / "s.jsonl").write_text('{"text": "a"}\nnull\n[1, 2]\n5\n"str"\n{"text": "b"}\n')
    rep = datacheck.audit(str(tmp_path))
    f = one(rep, "decode.bad_record")
    assert f.lines == (2, 3, 4, 5)
    assert [e.value.split(":")[0] for e in f.examples] == [
        "a JSON null, not an object", "a JSON array, not an object", "a JSON number, not an object",
        "a JSON string, not an object"]
    assert rep.shards[0].rows == 2


def test_header_only_csv_is_an_empty_shard(tmp_path):
    (tmp_path / "s.csv").write_text("text,label\n")
    rep = datacheck.audit(str(tmp_path))
    assert rep.shards[0].rows == 0
    assert one(rep, "index.empty_shard").severity == "warn"
    assert rep.shards[0].columns == {"text": "String", "label": "String"}


def test_crlf_csv_and_jsonl(tmp_path):
    (tmp_path / "s.csv").write_bytes(b"text,label\r\na,0\r\n,1\r\n")
    (tmp_path / "s.jsonl").write_bytes(b'{"text": "a"}\r\n{"text": " "}\r\n')
    rep = datacheck.audit(str(tmp_path))
    by = {s.path: s for s in rep.shards}
    assert [f.rows for f in by["s.csv"].findings if f.check == "empty.text"] == [(1,)]
    assert [f.lines for f in by["s.jsonl"].findings if f.check == "empty.text"] == [(2,)]


def test_forced_format_reads_other_extensions_but_not_metadata(tmp_path):
    (tmp_path / "a.txt").write_text("text;label\nx;1\n")
    (tmp_path / "dataset_info.json").write_text("{}")
    (tmp_path / "notes.json").write_text("{}")
    disc = discover([str(tmp_path)], "csv")
    assert [s.rel for s in disc.shards] == ["a.txt"]
    assert sorted(disc.ignored) == ["dataset_info.json", "notes.json"]


@pytest.mark.parametrize("name", ["s.parquet", "s.arrow", "s.jsonl", "s.csv"])
def test_every_format_reports_the_same_rows(tmp_path, name):
    df = pl.DataFrame({"text": ["a", "", "b", "a"], "label": [0, 1, 9, 0]})
    getattr(df, {"parquet": "write_parquet", "arrow": "write_ipc", "jsonl": "write_ndjson",
                 "csv": "write_csv"}[name.split(".")[1]])(tmp_path / name)
    rep = datacheck.audit(str(tmp_path / name), config={"labels": {"num_classes": 2}})
    assert [(f.check, f.rows) for f in rep.shards[0].findings] == [
        ("dup.exact_in_shard", (3,)), ("empty.text", (1,)), ("labels.out_of_range", (2,))]
    assert findings(rep, "labels.unexpected_sentinel") == []


def test_csv_quoted_multiline_field_line_numbers(tmp_path):
    (tmp_path / "s.csv").write_text('text,label\n"multi\nline",0\n"",1\nx,9\n')
    rep = datacheck.audit(str(tmp_path / "s.csv"), config={"labels": {"num_classes": 2}})
    assert rep.shards[0].rows == 3
    assert (one(rep, "empty.text").rows, one(rep, "empty.text").lines) == ((1,), (4,))
    assert (one(rep, "labels.out_of_range").rows, one(rep, "labels.out_of_range").lines) == ((2,), (5,))


def test_all_null_role_columns_keep_their_role(tmp_path):
    """JSON/CSV give an all-null column dtype Null; it keeps its role and its rows are reported."""
    (tmp_path / "s.jsonl").write_text('{"text": null, "label": null, "input_ids": null, "labels": null}\n' * 2)
    rep = datacheck.audit(str(tmp_path), config={"labels": {"num_classes": 2}, "tokens": {"vocab_size": 5}})
    assert rep.roles["text"]["columns"] == ["text"] and rep.roles["labels"]["columns"] == "labels"
    assert one(rep, "empty.text").rows == (0, 1)
    assert one(rep, "labels.null", "label").rows == (0, 1)
    assert one(rep, "labels.null", "labels").rows == (0, 1)
    assert one(rep, "empty.sequence").rows == (0, 1)
    assert rep.shards[0].columns["input_ids"] == "List(Int64)"


def test_jsonl_parser_messages(tmp_path):
    (tmp_path / "s.jsonl").write_text('{"text": "a"}\n{"text": "b"}{"text": "c"}\n{"text": "d"} junk\n{"text": \n')
    rep = datacheck.audit(str(tmp_path))
    f = one(rep, "decode.bad_record")
    assert f.lines == (2, 3, 4)
    assert [e.byte_offset for e in f.examples] == [14, 41, 60]
    msgs = [e.value.split(" (column")[0] for e in f.examples]
    assert msgs == ["two JSON values on one line", "extra characters after the JSON value", "Expecting value"]
    assert rep.shards[0].rows == 1


def test_csv_header_with_names_renames_the_header_columns(tmp_path):
    """header = true plus names: the first line is still the header (skipped, never row 0) and
    ``names`` renames its columns in order; header = false: names name the columns."""
    (tmp_path / "s.csv").write_text("sentence,lab\nhello,1\n,0\n")
    rep = datacheck.audit(str(tmp_path), config={"dataset": {"header": True, "names": ["t", "l"]},
                                                 "columns": {"text": "t", "label": "l"}})
    shard = rep.shards[0]
    assert list(shard.columns) == ["t", "l"] and shard.rows == 2
    f = one(rep, "empty.text")
    assert f.rows == (1,) and f.lines == (3,)
    (tmp_path / "s.csv").write_text("hello,1\n,0\n")
    rep = datacheck.audit(str(tmp_path), config={"dataset": {"header": False, "names": ["t", "l"]},
                                                 "columns": {"text": "t"}})
    assert rep.shards[0].rows == 2 and list(rep.shards[0].columns) == ["t", "l"]
    f = one(rep, "empty.text")
    assert f.rows == (1,) and f.lines == (2,)


def test_csv_header_width_differs_from_names(tmp_path):
    (tmp_path / "s.csv").write_text("a,b,c\n1,2,3\n")
    rep = datacheck.audit(str(tmp_path), config={"dataset": {"header": True, "names": ["t", "l"]}})
    f = one(rep, "decode.unreadable")
    assert "[dataset] names lists 2 column(s) but the header line 1 has 3" in f.message


@pytest.mark.parametrize("make, what", [
    (lambda p: os.symlink("../blobs/0123abcd", p), "is a broken symlink (to ../blobs/0123abcd: a file not downloaded"),
    (lambda p: os.symlink(p.name, p), "is a broken symlink (to x.idx: a file not downloaded, or a symlink loop)"),
    (lambda p: p.mkdir(), "is a folder"),
    (lambda p: os.mkfifo(p), "is not a regular file (a FIFO)"),
])
def test_megatron_bin_whose_idx_is_there_but_unreadable_says_so(tmp_path, make, what):
    """A .bin whose .idx is a broken symlink (a hub snapshot not fully downloaded), a folder or a FIFO
    was reported as having no .idx beside it at all; the reason now names the .idx and what it is."""
    d = tmp_path / "d"
    d.mkdir()
    (d / "x.bin").write_bytes(b"\0" * 8)
    make(d / "x.idx")
    (d / "ok.jsonl").write_text('{"text": "a"}\n')
    disc = discover([str(d)])
    reasons = {i["path"]: i["reason"] for i in disc.ignored_data}
    assert reasons["x.bin"].startswith(f"a Megatron .bin whose x.idx beside it {what}")
    assert reasons["x.bin"].endswith(": the pair cannot be read")
    (d / "ok.jsonl").unlink()
    with pytest.raises(UsageError, match="x.bin: a Megatron .bin whose x.idx beside it"):
        discover([str(d)])


@pytest.mark.parametrize("index, what", [
    ("{not json", "a .bin whose folder's index.json does not parse (not valid JSON at line 1"),
    ('{"version": 2}', "a .bin whose folder's index.json is not a litdata index"),
])
def test_litdata_chunk_whose_index_json_is_unusable_says_so(tmp_path, index, what):
    """A litdata chunk folder whose index.json is broken was said to have no index.json at all."""
    (tmp_path / "chunk-0-0.bin").write_bytes(b"\0" * 16)
    (tmp_path / "index.json").write_text(index)
    with pytest.raises(UsageError, match=r"chunk-0-0\.bin: " + what.replace("(", r"\(").replace(".", r"\.")):
        discover([str(tmp_path)])
