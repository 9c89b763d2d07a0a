"""The format registry (datacheck/formats/registry.py, discovery.py): one Format per module, every
format name opened by exactly one reader, discovery's extensions and sniffers from the formats,
companions hashed with their shard, and a shard in a store read by the same reader as a local file."""
from __future__ import annotations

import json
from pathlib import Path

import fsspec
import polars as pl
import pytest

from datacheck.formats import arrow, csv, jsonl, litdata, mds, megatron, parquet, text, webdataset
from datacheck.formats.arrowtypes import write_table
from datacheck.formats.discovery import EXTENSIONS, RULES, discover, format_of
from datacheck.formats.registry import (
    FORMATS,
    companions,
    format_named,
    hash_shard,
    open_shard,
    read_table,
    rewrite_mode,
)
from datacheck.io.shardbytes import Unreadable
from datacheck.model.config import config_from_dict

ROWS = [{"text": f"row {i}", "label": i % 3, "input_ids": [i, i + 1]} for i in range(25)]


def test_one_format_per_module_and_one_reader_per_name():
    mods = (parquet, arrow, jsonl, csv, megatron, mds, webdataset, litdata, text)
    assert len(FORMATS) == len(mods) and all(m.FORMAT in FORMATS for m in mods)
    names = [n for f in FORMATS for n in f.names]
    assert len(names) == len(set(names))
    assert set(names) == {"parquet", "arrow", "jsonl", "json", "csv", "tsv", "megatron", "mds", "webdataset", "litdata",
                          "text"}
    for n in names:
        assert n in format_named(n).names  # type: ignore[union-attr]
    assert format_named("xlsx") is None


@pytest.mark.parametrize("name,fmt", [
    ("a.jsonl.gz", "jsonl"), ("a.ndjson.zst", "jsonl"), ("a.csv.gz", "csv"), ("a.tsv", "tsv"), ("a.pq", "parquet"),
    ("a.feather", "arrow"), ("a.mds.zstd", "mds"), ("a.tar.gz", "webdataset"), ("a.tgz", "webdataset"),
    ("a.txt", "text"), ("a.TXT.gz", "text"), ("a.txt.zst", "text"), ("a.raw", None), ("a.bin", None), ("a.idx", None),
])
def test_extensions_in_auto_mode(tmp_path, name, fmt):
    assert format_of(tmp_path / name) == fmt


def test_compound_extensions_come_before_their_last_part():
    lengths = [len(e) for e, _ in EXTENSIONS]
    assert lengths == sorted(lengths, reverse=True)


def test_forced_format_takes_plausible_files_only(tmp_path):
    assert format_of(tmp_path / "a.txt", "csv") == "csv"
    assert format_of(tmp_path / "noext", "jsonl") == "jsonl"
    assert format_of(tmp_path / "a.parquet", "csv") is None
    assert RULES.why_not("a.parquet", "csv") == "its extension does not fit [dataset] format = 'csv'"


def test_sniffers_decide_json_and_bin_files(tmp_path):
    (tmp_path / "l.json").write_text('{"a": 1}\n{"a": 2}\n')
    (tmp_path / "arr.json").write_text('[{"a": 1}, {"a": 2}]')
    (tmp_path / "doc.json").write_text('{"a": 1}')
    assert [format_of(tmp_path / n) for n in ("l.json", "arr.json", "doc.json")] == ["jsonl", "json", None]
    (tmp_path / "m.bin").write_bytes(b"")
    assert format_of(tmp_path / "m.bin") is None
    (tmp_path / "m.idx").write_bytes(b"")
    assert format_of(tmp_path / "m.bin") == "megatron"
    assert RULES.is_companion(tmp_path / "m.idx", "auto") and not RULES.is_companion(tmp_path / "m.idx", "csv")
    lit = tmp_path / "lit"
    lit.mkdir()
    (lit / "index.json").write_text(json.dumps({"chunks": [], "config": {"data_format": ["int"]}}))
    (lit / "chunk-0-0.bin").write_bytes(b"")
    assert format_of(lit / "chunk-0-0.bin") == "litdata"


def test_companions_and_rewrite_modes():
    assert companions("d/x.bin", "megatron") == ["d/x.idx"]
    assert companions("d/x.parquet", "parquet") == [] and companions("d/x", "unknown") == []
    assert {f: rewrite_mode(f) for f in ("parquet", "arrow", "jsonl", "json", "csv", "tsv")} == {
        "parquet": "table", "arrow": "table", "jsonl": "records", "json": "records", "csv": "records",
        "tsv": "records"}
    assert [rewrite_mode(f) for f in ("megatron", "mds", "webdataset", "litdata")] == [None] * 4


def test_a_companion_changes_the_shard_hash(tmp_path):
    (tmp_path / "m.bin").write_bytes(b"\x01\x02")
    (tmp_path / "m.idx").write_bytes(b"a")
    one = hash_shard(tmp_path / "m.bin", "megatron")
    assert one[1] == 3
    (tmp_path / "m.idx").write_bytes(b"b")
    assert hash_shard(tmp_path / "m.bin", "megatron")[0] != one[0]
    assert hash_shard(tmp_path / "m.bin", "parquet")[1] == 2  # no companion


def test_unknown_format_is_unreadable(tmp_path):
    with pytest.raises(Unreadable, match="unknown format"):
        open_shard(tmp_path / "x", "xlsx", None, 5)


def _memory(name: str, data: bytes) -> str:
    fs = fsspec.filesystem("memory")
    fs.pipe(f"/formats-test/{name}", data)
    return f"memory://formats-test/{name}"


@pytest.mark.parametrize("name,fmt", [("s.jsonl", "jsonl"), ("s.csv", "csv"), ("s.arrow", "arrow"), ("s.parquet", "parquet")])
def test_a_shard_in_a_store_is_read_by_the_same_reader(tmp_path, name, fmt):
    df = pl.DataFrame(ROWS)
    local = tmp_path / name
    if fmt == "jsonl":
        local.write_text("".join(json.dumps(r) + "\n" for r in ROWS) + "not json\n")
    elif fmt == "csv":
        df.drop("input_ids").write_csv(local)
        local.write_bytes(local.read_bytes() + b"1,2,3,4\n")
    elif fmt == "arrow":
        df.write_ipc(local)
    else:
        df.write_parquet(local)
    ds = config_from_dict({}).dataset
    here = open_shard(local, fmt, ds, 5)
    there = open_shard(_memory(name, local.read_bytes()), fmt, ds, 5)
    assert there.stream is None  # held in memory: the copy is gone
    assert there.lf.collect().equals(here.lf.collect())
    assert [f.to_dict() for f in there.decode_findings] == [f.to_dict() for f in here.decode_findings]
    assert there.lines_of(list(range(25))) == here.lines_of(list(range(25)))


def test_a_megatron_shard_in_a_store_is_copied_with_its_index(tmp_path):
    np = pytest.importorskip("numpy")
    tokens = np.arange(10, dtype=np.uint16)
    lengths = np.array([4, 6], dtype=np.int32)
    pointers = np.array([0, 8], dtype=np.int64)
    doc = np.array([0, 1, 2], dtype=np.int64)
    idx = (megatron.MAGIC + np.uint64(1).tobytes() + bytes([8]) + np.uint64(2).tobytes() + np.uint64(3).tobytes()
           + lengths.tobytes() + pointers.tobytes() + doc.tobytes())
    (tmp_path / "m.bin").write_bytes(tokens.tobytes())
    (tmp_path / "m.idx").write_bytes(idx)
    url = _memory("m.bin", tokens.tobytes())
    _memory("m.idx", idx)
    got = open_shard(url, "megatron", None, 5).lf.collect()
    assert got.equals(open_shard(tmp_path / "m.bin", "megatron", None, 5).lf.collect())
    assert got["input_ids"].to_list() == [[0, 1, 2, 3], [4, 5, 6, 7, 8, 9]]
    assert hash_shard(url, "megatron", bytes_only=True) == hash_shard(tmp_path / "m.bin", "megatron")


def test_discovery_asks_the_formats(tmp_path):
    for n in ("a.jsonl", "b.csv", "c.mds", "m.bin", "m.idx", "x.bin", "notes.md"):
        (tmp_path / n).write_bytes(b"")
    disc = discover([str(tmp_path)])
    assert [(s.rel, s.format) for s in disc.shards] == [("a.jsonl", "jsonl"), ("b.csv", "csv"), ("c.mds", "mds"),
                                                         ("m.bin", "megatron")]
    assert [i["path"] for i in disc.ignored_data] == ["x.bin"]
    assert "m.idx" in disc.ignored and Path(tmp_path / "m.idx").exists()


@pytest.mark.parametrize("name,fmt,kind", [("t.parquet", "parquet", "parquet"), ("f.arrow", "arrow", "ipc_file"),
                                           ("s.arrow", "arrow", "ipc_stream")])
def test_clean_reads_and_writes_a_table_shard_in_its_own_form(tmp_path, name, fmt, kind):
    df = pl.DataFrame(ROWS)
    path = tmp_path / name
    if kind == "parquet":
        df.write_parquet(path)
    elif kind == "ipc_file":
        df.write_ipc(path)
    else:
        df.write_ipc_stream(path)
    table, got_kind = read_table(path, fmt)
    assert got_kind == kind and table.num_rows == 25
    there, _ = read_table(_memory(name, path.read_bytes()), fmt)
    assert there.equals(table)
    write_table(table.slice(0, 3), tmp_path / "out" / name, got_kind)
    back, back_kind = read_table(tmp_path / "out" / name, fmt)
    assert back_kind == kind and pl.from_arrow(back).equals(df.head(3))  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="not rewritten as a table"):
        read_table(path, "jsonl")
