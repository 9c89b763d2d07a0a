"""Shard formats: parquet, Arrow IPC file and stream, Hugging Face save_to_disk folders, JSONL
(plain, .gz, .zst), CSV/TSV and other separators; PATH as file, folder and glob."""
from __future__ import annotations

import gzip
import json

import polars as pl
import pyarrow as pa
import pytest
import zstandard
from checkhelp import findings, one  # noqa: E402

import datacheck  # noqa: E402

# one frame with an empty text (row 1), an out-of-range label (row 2) and a duplicate (row 3)
ROWS = [{"text": "good", "label": 0}, {"text": "", "label": 1}, {"text": "bad", "label": 5},
        {"text": "good", "label": 0}]
CFG = {"labels": {"num_classes": 2}}


def _expect_planted(rep, lines: bool = False, header_lines: int = 0) -> None:
    assert rep.summary["rows"] == 4
    assert one(rep, "empty.text", "text").rows == (1,)
    assert one(rep, "labels.out_of_range", "label").rows == (2,)
    assert one(rep, "dup.exact_in_shard").rows == (3,)
    if lines:
        assert one(rep, "empty.text").lines == (2 + header_lines,)
        assert one(rep, "labels.out_of_range").lines == (3 + header_lines,)
    else:
        assert one(rep, "empty.text").lines == ()


def _jsonl_bytes() -> bytes:
    return "".join(json.dumps(r) + "\n" for r in ROWS).encode()


def test_parquet(tmp_path):
    pl.DataFrame(ROWS).write_parquet(tmp_path / "s.parquet")
    rep = datacheck.audit(str(tmp_path / "s.parquet"), config=CFG)
    _expect_planted(rep)
    assert rep.shards[0].format == "parquet"


def test_arrow_ipc_file(tmp_path):
    pl.DataFrame(ROWS).write_ipc(tmp_path / "s.arrow")
    rep = datacheck.audit(str(tmp_path), config=CFG)
    _expect_planted(rep)
    assert rep.shards[0].format == "arrow"


@pytest.mark.parametrize("ext", [".arrow", ".feather", ".ipc"])
def test_arrow_ipc_stream(tmp_path, ext):
    table = pa.Table.from_pylist(ROWS)
    with pa.OSFile(str(tmp_path / f"s{ext}"), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table, max_chunksize=2)  # two record batches
    rep = datacheck.audit(str(tmp_path), config=CFG)
    _expect_planted(rep)


def test_hf_save_to_disk_folder(tmp_path):
    """The layout ``DatasetDict.save_to_disk`` writes: metadata JSON beside Arrow IPC stream shards."""
    root = tmp_path / "ds"
    (root).mkdir()
    (root / "dataset_dict.json").write_text(json.dumps({"splits": ["train", "test"]}))
    for split, rows in (("train", ROWS), ("test", ROWS[:1])):
        d = root / split
        d.mkdir()
        table = pa.Table.from_pylist(rows, schema=pa.schema([("text", pa.large_string()), ("label", pa.int64())]))
        with pa.OSFile(str(d / "data-00000-of-00001.arrow"), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as w:
            w.write_table(table)
        (d / "state.json").write_text(json.dumps({"_data_files": [{"filename": "data-00000-of-00001.arrow"}]}))
        (d / "dataset_info.json").write_text("{}")
    rep = datacheck.audit(str(root), config=CFG)
    assert [s.path for s in rep.shards] == ["test/data-00000-of-00001.arrow", "train/data-00000-of-00001.arrow"]
    train = rep.shards[1]
    assert train.rows == 4 and train.columns == {"text": "String", "label": "Int64"}
    assert [(f.check, f.rows) for f in train.findings] == [
        ("dup.exact_in_shard", (3,)), ("empty.text", (1,)), ("labels.out_of_range", (2,))]
    assert findings(rep, "index.numbering_gap") == []


def test_hf_save_to_disk_real(realdata):
    rep = datacheck.audit(str(realdata / "dkhate_danish_offensive" / "dkhate_processed_hf"),
                          config={"labels": {"num_classes": 2}})
    assert [(s.path, s.rows, s.format) for s in rep.shards] == [
        ("test/data-00000-of-00001.arrow", 329, "arrow"), ("train/data-00000-of-00001.arrow", 2960, "arrow")]
    assert rep.roles["text"] == {"columns": ["text"], "inferred": True}
    assert rep.roles["label"] == {"columns": "label", "inferred": True}
    assert rep.stats["labels"]["counts"] == [[0, 2576 + 288], [1, 384 + 41]]


@pytest.mark.parametrize("name, encode", [
    ("s.jsonl", lambda b: b),
    ("s.jsonl.gz", gzip.compress),
    ("s.jsonl.zst", lambda b: zstandard.ZstdCompressor().compress(b)),
    ("s.ndjson", lambda b: b),
])
def test_jsonl_plain_and_compressed(tmp_path, name, encode):
    (tmp_path / name).write_bytes(encode(_jsonl_bytes()))
    rep = datacheck.audit(str(tmp_path / name), config=CFG)
    _expect_planted(rep, lines=True)
    assert rep.shards[0].format == "jsonl"


def test_jsonl_lines_follow_skipped_lines(tmp_path):
    """Row numbers count records; line numbers count lines (blank and broken lines included)."""
    text = ('{"text": "a", "label": 0}\n\n{"text": "x", "label": 1}\n{broken\n{"text": "", "label": 1}\n')
    (tmp_path / "s.jsonl").write_text(text)
    rep = datacheck.audit(str(tmp_path / "s.jsonl"), config=CFG)
    f = one(rep, "empty.text")
    assert (f.rows, f.lines) == ((2,), (5,))
    bad = [f for f in findings(rep, "decode.bad_record") if f.severity == "error"]
    assert bad[0].lines == (4,)


def test_csv(tmp_path):
    pl.DataFrame(ROWS).write_csv(tmp_path / "s.csv")
    rep = datacheck.audit(str(tmp_path / "s.csv"), config=CFG)
    _expect_planted(rep, lines=True, header_lines=1)
    assert rep.shards[0].format == "csv"


def test_tsv_by_extension(tmp_path):
    pl.DataFrame(ROWS).write_csv(tmp_path / "s.tsv", separator="\t")
    rep = datacheck.audit(str(tmp_path / "s.tsv"), config=CFG)
    _expect_planted(rep, lines=True, header_lines=1)
    assert rep.shards[0].columns == {"text": "String", "label": "Int64"}


def test_semicolon_separator(tmp_path):
    pl.DataFrame(ROWS).write_csv(tmp_path / "s.txt", separator=";")
    rep = datacheck.audit(str(tmp_path / "s.txt"), config={**CFG, "dataset": {"format": "csv", "separator": ";"}})
    _expect_planted(rep, lines=True, header_lines=1)


def test_semicolon_separator_real_emotion(realdata):
    rep = datacheck.audit(str(realdata / "emotion"), config={"dataset": {"format": "csv", "separator": ";"}})
    assert [(s.path, s.rows) for s in rep.shards] == [("test.txt", 2000), ("train.txt", 16000), ("val.txt", 2000)]
    assert rep.shards[1].columns == {"text": "String", "label_name": "String"}
    assert not findings(rep, "decode.bad_record")
    dups = {s.path: [f.count for f in s.findings if f.check == "dup.exact_in_shard"] for s in rep.shards}
    # 'label_name' is the class label (a class name): a copy repeats an earlier row's text AND label
    want = {}
    for s in rep.shards:
        rows = [tuple(ln.rsplit(";", 1)) for ln in (realdata / "emotion" / s.path).read_text().splitlines()[1:]]
        want[s.path] = [n] if (n := len(rows) - len(set(rows))) else []
    assert dups == want
    texts = [ln.rsplit(";", 1)[0] for ln in (realdata / "emotion" / "train.txt").read_text().splitlines()[1:]]
    assert len(texts) - len(set(texts)) == 31  # PROVENANCE: 31 duplicate texts in train, most of them relabelled


@pytest.mark.parametrize("fmt, written, default", [("csv", ";", ","), ("csv", "\t", ","), ("csv", "|", ","),
                                                   ("tsv", ",", "\t")])
def test_a_file_of_another_separator_is_refused_not_read_as_one_column(tmp_path, fmt, written, default):
    """Read under the default separator, a file written with another is one column that no check has a
    role for, and its audit passed. It is decode.unreadable, naming the separator to set; with that
    separator set, the rows are audited."""
    name = "s.tsv" if fmt == "tsv" else "s.csv"
    pl.DataFrame(ROWS).write_csv(tmp_path / name, separator=written)
    header = (tmp_path / name).read_text().splitlines()[0]
    assert default not in header and written in header
    rep = datacheck.audit(str(tmp_path / name), config=CFG)
    f = one(rep, "decode.unreadable")
    assert f.severity == "error" and rep.summary["status"] == "fail" and rep.shards[0].rows is None
    assert f"separator = {json.dumps(written)}" in f.message and repr(header) in f.message
    assert f"into {len(ROWS[0])} columns" in f.message
    rep = datacheck.audit(str(tmp_path / name), config={**CFG, "dataset": {"separator": written}})
    _expect_planted(rep, lines=True, header_lines=1)
    # a separator given, even the default, is taken as given: one column, no refusal
    rep = datacheck.audit(str(tmp_path / name), config={**CFG, "dataset": {"separator": default}})
    assert not findings(rep, "decode.unreadable") and list(rep.shards[0].columns) == [header]


def test_one_column_text_holding_other_separators_is_read(tmp_path):
    """A one-column file whose header does not split, or whose records split unlike the header, is read
    as written (text with semicolons and pipes is common)."""
    (tmp_path / "a.csv").write_text("text\nhello; world\na | b | c\n")
    (tmp_path / "b.csv").write_text("x;y\nonly one\n1;2\n")
    rep = datacheck.audit(str(tmp_path), config={})
    assert not findings(rep, "decode.unreadable")
    assert {s.path: s.rows for s in rep.shards} == {"a.csv": 2, "b.csv": 2}


def test_real_emotion_without_its_separator_names_it(realdata):
    rep = datacheck.audit(str(realdata / "emotion"), config={"dataset": {"format": "csv"}})
    assert [f.check for f in rep.findings] == ["decode.unreadable"] * 3
    assert all("separator = \";\"" in f.message for f in rep.findings)


def test_csv_without_header_uses_names(tmp_path):
    (tmp_path / "s.csv").write_text("0,good\n1,\n5,bad\n0,good\n")
    rep = datacheck.audit(str(tmp_path / "s.csv"), config={
        **CFG, "dataset": {"header": False, "names": ["label", "text"]}})
    _expect_planted(rep, lines=True, header_lines=0)
    assert list(rep.shards[0].columns) == ["label", "text"]


def test_tsv_with_bare_quotes_and_quoting_off(tmp_path):
    (tmp_path / "s.tsv").write_text('text\tlabel\nhe said "hi\t0\n"quoted" text\t1\nplain\t0\n')
    rep = datacheck.audit(str(tmp_path / "s.tsv"), config={"dataset": {"quote_char": ""}})
    assert rep.shards[0].rows == 3
    assert not findings(rep, "decode.bad_record")
    df_text = ['he said "hi', '"quoted" text', "plain"]
    assert rep.stats["lengths"]["histogram"] == sorted([[len(t), 1] for t in df_text])


def test_path_as_file_folder_and_glob(tmp_path):
    for rel in ("a.parquet", "sub/b.parquet", "sub/deeper/c.jsonl"):
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if rel.endswith(".parquet"):
            pl.DataFrame({"text": [rel]}).write_parquet(p)
        else:
            p.write_text(json.dumps({"text": rel}) + "\n")
    (tmp_path / "notes.md").write_text("not a shard")
    (tmp_path / "sub" / "README.txt").write_text("not a shard")

    def paths(arg):
        return [s.path for s in datacheck.audit(arg).shards]

    assert paths(str(tmp_path / "sub" / "b.parquet")) == ["b.parquet"]
    assert paths(str(tmp_path)) == ["a.parquet", "sub/b.parquet", "sub/deeper/c.jsonl"]
    assert paths(str(tmp_path / "**" / "*.parquet")) == ["a.parquet", "sub/b.parquet"]
    assert paths(str(tmp_path / "sub" / "*")) == ["b.parquet"]
    rep = datacheck.audit([str(tmp_path / "a.parquet"), str(tmp_path / "sub" / "deeper")])
    assert [s.path for s in rep.shards] == ["a.parquet", "sub/deeper/c.jsonl"]


def test_fixed_size_list_columns_are_checked(tmp_path):
    """Arrow fixed_size_list (polars Array; HF ``Sequence(length=N)``) columns get every list check."""
    t = pa.table({"input_ids": pa.array([[1, 2, 3], [4, 5, 99]], pa.list_(pa.int64(), 3)),
                  "attention_mask": pa.array([[1, 0, 1], [1, 1, 1]], pa.list_(pa.int8(), 3))})
    import pyarrow.parquet as pq

    pq.write_table(t, tmp_path / "s.parquet")
    rep = datacheck.audit(str(tmp_path), config={"tokens": {"vocab_size": 10, "max_seq_len": 2}})
    assert one(rep, "tokens.out_of_vocab").rows == (1,)
    assert one(rep, "mask.not_contiguous").rows == (0,)
    # over_max counts attended tokens: row 0's mask [1, 0, 1] holds 2, not more than max_seq_len 2
    assert one(rep, "length.over_max").rows == (1,)
    assert not [s for s in rep.skipped if "could not" in s["reason"]]


def test_csv_text_columns_stay_text_when_values_look_numeric(tmp_path):
    (tmp_path / "s.csv").write_text("text,label,note\n1,0,5\n22,1,6\n,1,7\n")
    rep = datacheck.audit(str(tmp_path / "s.csv"))
    assert rep.shards[0].columns == {"text": "String", "label": "Int64", "note": "Int64"}
    assert one(rep, "empty.text").rows == (2,)
    rep = datacheck.audit(str(tmp_path / "s.csv"), config={"columns": {"text": "note"}})
    assert rep.shards[0].columns["note"] == "String"
    assert rep.roles["text"] == {"columns": ["note"], "inferred": False}
