"""The shard set: committed index (build/verify, [dataset] index), shipped shard lists (Hugging Face
state.json, MosaicML index.json), and the shard-set checks that need no index, on multi-shard
folders with planted faults; bad index input."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest
from conftest import run_cli
from dshelp import by_check, hf_split, one, run, write

import datacheck
from datacheck.io.dataindex import INDEX_FORMAT_VERSION, read_index, safe_relpath
from datacheck.model.errors import UsageError


def _shards(root: Path) -> Path:
    for i in range(3):
        write(root, f"data-{i:05d}-of-00003.parquet", {"text": [f"r{i}-{k}" for k in range(4)], "label": [0, 1, 0, 1]})
    return root


@pytest.fixture
def ds(tmp_path):
    return _shards(tmp_path / "ds")


def _build(ds: Path, out: Path) -> dict:
    p = run_cli("index", "build", str(ds), "-o", str(out))
    assert p.returncode == 0, p.stderr
    return json.loads(out.read_text())


def test_build_writes_versioned_sorted_index(ds, tmp_path):
    from datacheck.io.hashing import hash_file, index_hash

    out = tmp_path / "index.json"
    doc = _build(ds, out)
    assert doc["format"] == "datacheck-index"
    assert doc["format_version"] == INDEX_FORMAT_VERSION == 1
    assert doc["hash_algorithm"] == "xxh3-128"
    paths = [s["path"] for s in doc["shards"]]
    assert paths == sorted(paths) == [f"data-{i:05d}-of-00003.parquet" for i in range(3)]
    s0 = doc["shards"][0]
    h, size = hash_file(ds / s0["path"])
    assert s0 == {"path": s0["path"], "bytes": size, "rows": 4, "content_hash": h}
    assert doc["index_hash"] == index_hash([(s["path"], s["content_hash"]) for s in doc["shards"]])
    text = out.read_text()
    assert text == json.dumps(json.loads(text), sort_keys=True, indent=2, ensure_ascii=False) + "\n"
    assert not list(tmp_path.glob(".index.json.*"))  # atomic write leaves no temporary file
    # deterministic: the same bytes give the same file
    assert _build(ds, tmp_path / "again.json") == doc


def test_verify_clean_then_planted_faults(ds, tmp_path):
    idx = tmp_path / "index.json"
    _build(ds, idx)
    p = run_cli("index", "verify", str(ds), "--index", str(idx))
    assert p.returncode == 0 and "match" in p.stdout
    # a changed byte (same size), a rewritten shard with other rows, a missing shard, an extra one
    b = bytearray((ds / "data-00000-of-00003.parquet").read_bytes())
    b[len(b) // 2] ^= 0xFF
    (ds / "data-00000-of-00003.parquet").write_bytes(bytes(b))
    write(ds, "data-00001-of-00003.parquet", {"text": ["only"], "label": [0]})
    (ds / "data-00002-of-00003.parquet").unlink()
    write(ds, "late.parquet", {"text": ["z"], "label": [1]})
    p = run_cli("index", "verify", str(ds), "--index", str(idx), "--format", "json")
    assert p.returncode == 1, p.stderr
    got = {f["check"]: f for f in json.loads(p.stdout)["result"]["findings"]}
    assert set(got) == {"index.changed_shard", "index.missing_shard", "index.extra_shard", "index.row_count_mismatch"}
    assert got["index.changed_shard"]["count"] == 2
    assert got["index.changed_shard"]["shards"] == ["data-00000-of-00003.parquet", "data-00001-of-00003.parquet"]
    assert got["index.missing_shard"]["shards"] == ["data-00002-of-00003.parquet"]
    assert got["index.extra_shard"]["shards"] == ["late.parquet"]
    assert got["index.row_count_mismatch"]["shards"] == ["data-00001-of-00003.parquet"]
    assert got["index.row_count_mismatch"]["details"] == {"index": str(idx), "expected": 4, "actual": 1}


def test_audit_with_committed_index_and_planted_shard_set(ds, tmp_path):
    """[dataset] index in audit, plus every shard-set fault: a duplicate shard, a gap, an empty
    shard, a temporary file and a changed byte against the committed index."""
    _build(ds, ds / "index.json")
    shutil.copy(ds / "data-00000-of-00003.parquet", ds / "copy.parquet")  # duplicate shard (and extra)
    (ds / "data-00001-of-00003.parquet").unlink()  # gap (and missing)
    write(ds, "data-00002-of-00003.parquet", pl.DataFrame(schema={"text": pl.String, "label": pl.Int64}))  # empty (and changed, rows 4 -> 0)
    (ds / "data-00003-of-00004.parquet.tmp").write_bytes(b"partial")  # temp file
    rep = run(ds, {"dataset": {"index": "index.json"}})
    checks = sorted({f.check for f in rep.findings})
    assert checks == ["dup.exact_across_shards", "dup.shard", "index.changed_shard", "index.empty_shard",
                      "index.extra_shard", "index.missing_shard", "index.numbering_gap",
                      "index.row_count_mismatch", "index.temp_file"]
    # the numbered shard first: the copy that clean keeps (a stray copy of it is the one dropped)
    assert one(rep, "dup.shard").shards == ("data-00000-of-00003.parquet", "copy.parquet")
    assert one(rep, "index.missing_shard").shards == ("data-00001-of-00003.parquet",)
    assert one(rep, "index.extra_shard").shards == ("copy.parquet",)
    assert one(rep, "index.changed_shard").shards == ("data-00002-of-00003.parquet",)
    assert one(rep, "index.row_count_mismatch").details["actual"] == 0
    assert one(rep, "index.empty_shard").shards == ("data-00002-of-00003.parquet",)
    assert one(rep, "index.temp_file").shards == ("data-00003-of-00004.parquet.tmp",)
    assert one(rep, "index.numbering_gap").details["missing"] == [1]
    assert one(rep, "dup.exact_across_shards").count == 4  # every row of the copy
    # the CLI fails the gate (errors) with exit 1
    p = run_cli("audit", str(ds), "--no-cache", "--report-dir", str(tmp_path / "rep"), "--no-progress")
    assert p.returncode == 1


def test_changed_byte_same_size_against_index(ds):
    _build(ds, ds / "index.json")
    f = ds / "data-00001-of-00003.parquet"
    b = bytearray(f.read_bytes())
    b[4] ^= 0x01  # inside the first page: same size, same rows
    f.write_bytes(bytes(b))
    rep = run(ds, {"dataset": {"index": "index.json"}})
    ch = one(rep, "index.changed_shard")
    assert ch.shards == ("data-00001-of-00003.parquet",) and "same size" in ch.message
    assert by_check(rep, "index.missing_shard") == by_check(rep, "index.extra_shard") == []


def _rows_on_disk(ds: Path, rel: str) -> int:
    import pyarrow.parquet as pq

    return pq.read_metadata(ds / rel).num_rows


def test_wrong_rows_of_an_unchanged_shard_are_reported(ds, tmp_path):
    """The index lists rows that the shard does not hold while its bytes and hash are the index's: verify
    and the audit compare every listed row count with the shard's (not only those of changed shards)."""
    idx = ds / "index.json"
    doc = _build(ds, idx)
    s0, s1 = doc["shards"][0]["path"], doc["shards"][1]["path"]
    real0, real1 = _rows_on_disk(ds, s0), _rows_on_disk(ds, s1)
    doc["shards"][0]["rows"] = real0 - 3
    doc["shards"][1]["rows"] = real1 + 1000
    idx.write_text(json.dumps(doc))
    want = {s0: {"index": str(idx), "expected": real0 - 3, "actual": real0},
            s1: {"index": str(idx), "expected": real1 + 1000, "actual": real1}}
    p = run_cli("index", "verify", str(ds), "--index", str(idx), "--format", "json")
    assert p.returncode == 1, p.stdout + p.stderr
    got = json.loads(p.stdout)["result"]["findings"]
    assert {f["check"] for f in got} == {"index.row_count_mismatch"}
    assert {f["shards"][0]: f["details"] for f in got} == want
    assert sorted(f["count"] for f in got) == [3, 1000]
    rep = run(ds, {"dataset": {"index": "index.json"}})
    assert by_check(rep, "index.changed_shard") == []
    mis = by_check(rep, "index.row_count_mismatch")
    assert {f.shards[0]: {**f.details, "index": str(idx)} for f in mis} == want


def test_verify_ok_says_what_it_compared(ds, tmp_path):
    idx = tmp_path / "index.json"
    _build(ds, idx)
    p = run_cli("index", "verify", str(ds), "--index", str(idx))
    assert p.returncode == 0
    assert f"ok: the shards match {idx} (paths, bytes, content hashes and row counts)" in p.stdout


def _write_shard(folder: Path, kind: str, texts: list[str]) -> tuple[str, int]:
    """One shard of ``kind`` holding ``texts`` (one row each); (its name, the rows its reader gives:
    computed here from what was written)."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    folder.mkdir(parents=True, exist_ok=True)
    if kind == "jsonl":
        (folder / "a.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
        return "a.jsonl", len(texts)
    if kind == "csv":
        (folder / "a.csv").write_text("text,label\n" + "".join(f"{t},{k % 2}\n" for k, t in enumerate(texts)))
        return "a.csv", len(texts)
    if kind == "txt":  # datasets' text builder: a row per non-blank line
        lines = [t if k % 3 else "" for k, t in enumerate(texts)] + texts
        (folder / "a.txt").write_text("\n".join(lines) + "\n")
        return "a.txt", sum(1 for x in lines if x.strip())
    table = pa.table({"text": texts})
    with pa.OSFile(str(folder / "a.arrow"), "wb") as f:
        # an Arrow IPC file (footer), or the IPC stream datasets' save_to_disk writes, in two record batches
        w = ipc.new_file(f, table.schema) if kind == "arrow-file" else ipc.new_stream(f, table.schema)
        for b in table.to_batches(max_chunksize=max(1, len(texts) // 2)):
            w.write_batch(b)
        w.close()
    return "a.arrow", table.num_rows


FORMATS_READ = ["jsonl", "csv", "txt", "arrow-file", "arrow-stream"]


def _verify_json(ds: Path, idx: Path, *extra: str) -> tuple[int, dict]:
    p = run_cli("index", "verify", str(ds), "--index", str(idx), "--format", "json", *extra)
    assert p.returncode in (0, 1), p.stdout + p.stderr
    return p.returncode, json.loads(p.stdout)["result"]


@pytest.mark.parametrize("kind", FORMATS_READ)
def test_verify_counts_the_rows_of_unchanged_shards_of_every_format(tmp_path, kind):
    """The rows an index records for a shard whose bytes are unchanged are compared for every format the
    audit reads, not only parquet's: a wrong count is index.row_count_mismatch in verify as in the audit."""
    ds = tmp_path / "ds"
    rel, rows = _write_shard(ds, kind, [f"row {k}" for k in range(9)])
    idx = tmp_path / "index.json"
    doc = _build(ds, idx)
    assert doc["shards"][0]["rows"] == rows
    rc, res = _verify_json(ds, idx, "--no-cache")
    assert rc == 0 and res["findings"] == [] and res["rows_not_compared"] == [] and res["rows_from"] == {rel: "read"}
    doc["shards"][0]["rows"] = rows + 2
    idx.write_text(json.dumps(doc))
    rc, res = _verify_json(ds, idx)  # the default flags
    assert rc == 1 and res["rows_not_compared"] == []
    (f,) = res["findings"]
    assert (f["check"], f["shards"], f["count"]) == ("index.row_count_mismatch", [rel], 2)
    assert f["details"] == {"index": str(idx), "expected": rows + 2, "actual": rows}
    rep = run(ds, {"dataset": {"index": str(idx)}})  # the audit compares them alike
    assert one(rep, "index.row_count_mismatch").details == {"index": str(idx), "expected": rows + 2, "actual": rows}
    p = run_cli("index", "verify", str(ds), "--index", str(idx), "--no-cache")
    assert p.returncode == 1 and f"{rel} holds {rows} rows but {idx} lists {rows + 2}" in p.stdout
    assert "rows: 1 shard(s) counted: 1 read from the shards" in p.stdout


@pytest.mark.parametrize("kind", ["jsonl", "arrow-stream"])
def test_verify_takes_the_rows_from_the_audit_result_cache(tmp_path, kind, monkeypatch):
    """With the audit's result cache holding the shard's result, verify takes its rows from there and
    reads no shard (the reader is made to fail); a damaged entry is never trusted: the shard is read."""
    from datacheck.tools import index as index_tool

    ds = tmp_path / "ds"
    rel, rows = _write_shard(ds, kind, [f"row {k}" for k in range(7)])
    rel2 = "b/" + _write_shard(tmp_path / "ds" / "b", kind, [f"other {k}" for k in range(3)])[0]
    idx = tmp_path / "index.json"
    doc = _build(ds, idx)
    cache = tmp_path / "cache"
    a = run_cli("audit", str(ds), "--cache-dir", str(cache), "--fail-on", "never")
    assert a.returncode == 0, a.stderr
    for e in doc["shards"]:
        e["rows"] += 5 if e["path"] == rel else 0
    idx.write_text(json.dumps(doc))
    real = index_tool.count_rows
    monkeypatch.setattr(index_tool, "count_rows", lambda *a, **k: pytest.fail("a shard was read"))
    rc, res = _verify_json(ds, idx, "--cache-dir", str(cache))
    assert rc == 1 and res["rows_from"] == {rel: "cache", rel2: "cache"}
    (f,) = res["findings"]
    assert f["details"] == {"index": str(idx), "expected": rows + 5, "actual": rows} and f["shards"] == [rel]
    p = run_cli("index", "verify", str(ds), "--index", str(idx), "--cache-dir", str(cache))
    assert f"rows: 2 shard(s) counted: 2 from the audit's result cache ({cache})" in p.stdout
    entries = sorted(cache.rglob("*.dcr"))
    assert len(entries) == 2
    for e in entries:  # one truncated, one with a bit flipped: neither is trusted
        data = bytearray(e.read_bytes())
        if e == entries[0]:
            e.write_bytes(bytes(data[:-7]))
        else:
            data[len(data) // 2] ^= 0x10
            e.write_bytes(bytes(data))
    read: list[str] = []
    monkeypatch.setattr(index_tool, "count_rows", lambda src, *a: read.append(str(src)) or real(src, *a))
    rc, res = _verify_json(ds, idx, "--cache-dir", str(cache))
    assert rc == 1 and res["rows_from"] == {rel: "read", rel2: "read"} and len(read) == 2
    assert [f["details"] for f in res["findings"]] == [{"index": str(idx), "expected": rows + 5, "actual": rows}]


def test_verify_never_creates_or_writes_the_cache_folder(tmp_path):
    ds = tmp_path / "ds"
    _write_shard(ds, "jsonl", ["a", "b"])
    idx = tmp_path / "index.json"
    _build(ds, idx)
    rc, res = _verify_json(ds, idx, "--cache-dir", str(tmp_path / "nocache"))
    assert rc == 0 and res["rows_from"] == {"a.jsonl": "read"}
    assert not (tmp_path / "nocache").exists()


def test_verify_names_the_shards_whose_rows_it_cannot_count(tmp_path):
    """An unreadable shard has no row count: the rows its entry records (an index written by hand or by
    another tool) are not compared, and the shard is named (the audit says why)."""
    ds = tmp_path / "ds"
    _write_shard(ds, "jsonl", ["a", "b"])
    (ds / "bad.arrow").write_bytes(b"ARROW1\0\0" + b"\xff" * 64)
    idx = tmp_path / "index.json"
    doc = _build(ds, idx)
    (bad,) = [e for e in doc["shards"] if e["path"] == "bad.arrow"]
    assert bad["rows"] is None  # build counts none
    bad["rows"] = 5
    idx.write_text(json.dumps(doc))
    rc, res = _verify_json(ds, idx, "--no-cache")
    assert rc == 0 and res["findings"] == []
    assert res["rows_not_compared"] == ["bad.arrow"] and res["rows_from"] == {"a.jsonl": "read"}
    p = run_cli("index", "verify", str(ds), "--index", str(idx), "--no-cache")
    assert "note: the row counts of 1 shard(s) were not compared (unreadable" in p.stdout and "bad.arrow" in p.stdout


# --------------------------------------------------------------------------------- bad input


def _index(tmp_path: Path, shards: list, version: int = 1) -> Path:
    p = tmp_path / "bad-index.json"
    p.write_text(json.dumps({"format": "datacheck-index", "format_version": version, "hash_algorithm": "xxh3-128",
                             "shards": shards}))
    return p


@pytest.mark.parametrize("path", ["../../etc/passwd", "/etc/passwd", "a/../../x.parquet", "..\\x.parquet",
                                  "C:/x.parquet"])
def test_index_paths_outside_root_are_refused(ds, tmp_path, path):
    bad = _index(tmp_path, [{"path": path, "bytes": 1, "rows": 1, "content_hash": "xxh3-128:00"}])
    p = run_cli("index", "verify", str(ds), "--index", str(bad))
    assert p.returncode == 2
    assert "outside the dataset root" in p.stderr and "Traceback" not in p.stderr


def test_index_symlink_outside_root_is_refused(ds, tmp_path):
    (tmp_path / "secret").mkdir()
    (ds / "link").symlink_to(tmp_path / "secret")
    with pytest.raises(UsageError, match="resolves outside"):
        safe_relpath("link/x.parquet", ds, "idx")


@pytest.mark.parametrize("content,msg", [
    ("not json {", "not valid JSON"),
    (json.dumps({"format": "datacheck-index", "format_version": 2, "hash_algorithm": "xxh3-128", "shards": []}),
     "format_version 2 is newer"),
    (json.dumps({"version": 2, "hello": 1}), "not a datacheck index"),
    (json.dumps({"format": "datacheck-index", "format_version": 1, "hash_algorithm": "md5", "shards": []}),
     "hash_algorithm 'md5'"),
])
def test_bad_index_file_is_a_usage_error(ds, tmp_path, content, msg):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    p = run_cli("index", "verify", str(ds), "--index", str(bad))
    assert p.returncode == 2 and msg in p.stderr and "Traceback" not in p.stderr
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text(f'[dataset]\nindex = "{bad}"\n')
    p = run_cli("audit", str(ds), "--config", str(cfg), "--no-cache", "--report-dir", str(tmp_path / "rep"))
    assert p.returncode == 2 and msg in p.stderr


def test_bad_index_is_refused_before_any_shard_is_read(ds, tmp_path, monkeypatch):
    bad = _index(tmp_path, [{"path": "../../etc/passwd", "bytes": 1, "rows": 1, "content_hash": "xxh3-128:00"}])
    opened: list[str] = []
    import datacheck.execute.audit as api

    monkeypatch.setattr(api, "audit_shards", lambda *a, **k: opened.append("read") or [])
    with pytest.raises(UsageError, match="outside the dataset root"):
        datacheck.audit(ds, {"dataset": {"index": str(bad)}})
    assert opened == []


@pytest.mark.parametrize("rows", [-1, 2**63, 10**30, 1.5, "4", True])
def test_index_rows_that_are_no_count_are_refused(ds, tmp_path, rows):
    idx = tmp_path / "index.json"
    doc = _build(ds, idx)
    doc["shards"][0]["rows"] = rows
    idx.write_text(json.dumps(doc))
    p = run_cli("index", "verify", str(ds), "--index", str(idx))
    assert p.returncode == 2, p.stdout
    assert "shards[0].rows must be a non-negative integer below 2**63" in p.stderr and "Traceback" not in p.stderr


def test_index_hash_that_is_not_its_entries_hash_is_refused(ds, tmp_path):
    """The index_hash an index records is the hash of its (path, content_hash) pairs; an index where it is
    not (edited by hand after build) contradicts itself and is refused, in verify and in the audit."""
    from datacheck.io.hashing import index_hash

    idx = tmp_path / "index.json"
    doc = _build(ds, idx)
    doc["shards"][0]["content_hash"] = "xxh3-128:" + "1" * 32
    idx.write_text(json.dumps(doc))
    real = index_hash([(s["path"], s["content_hash"]) for s in doc["shards"]])
    for edited in (doc, {**doc, "index_hash": "0" * 32}, {**doc, "index_hash": 7}):
        idx.write_text(json.dumps(edited))
        p = run_cli("index", "verify", str(ds), "--index", str(idx))
        assert p.returncode == 2, p.stdout
        assert f"index_hash {edited['index_hash']!r} is not the hash of its shards' paths and content hashes" in p.stderr
        assert real in p.stderr and "Traceback" not in p.stderr
    with pytest.raises(UsageError, match="is not the hash of its shards"):
        datacheck.audit(ds, {"dataset": {"index": str(idx)}})
    # the content hash restored with the real index hash: a consistent index again, whose shard changed
    doc["index_hash"] = real
    idx.write_text(json.dumps(doc))
    p = run_cli("index", "verify", str(ds), "--index", str(idx), "--format", "json")
    assert p.returncode == 1
    assert [f["check"] for f in json.loads(p.stdout)["result"]["findings"]] == ["index.changed_shard"]


def test_read_index_missing_file(ds, tmp_path):
    with pytest.raises(UsageError, match="no such index file"):
        read_index(tmp_path / "nope.json", ds)


def test_index_cli_needs_a_verb():
    p = run_cli("index")
    assert p.returncode == 2 and "build or verify" in p.stderr


# ------------------------------------------------------------------- shipped shard lists


_hf_split = hf_split


def test_hf_state_json(tmp_path):
    root = tmp_path / "hf"
    _hf_split(root, "train", ["data-00000-of-00002.arrow", "data-00001-of-00002.arrow"], 6,
              ["data-00000-of-00002.arrow", "data-00001-of-00002.arrow"])
    rep = run(root)
    assert [f.check for f in rep.findings if f.check.startswith("index.")] == []
    # a listed file missing, an unlisted Arrow file, and a wrong split size
    _hf_split(root, "test", ["data-00000-of-00001.arrow", "stray.arrow"], 5, ["data-00000-of-00001.arrow", "gone.arrow"])
    rep = run(root)
    assert one(rep, "index.missing_shard").shards == ("test/gone.arrow",)
    assert one(rep, "index.extra_shard").shards == ("test/stray.arrow",)
    # the split is incomplete (gone.arrow), so its row total is not compared
    assert by_check(rep, "index.row_count_mismatch") == []
    (root / "test" / "state.json").write_text(json.dumps({"_data_files": [{"filename": "data-00000-of-00001.arrow"},
                                                                          {"filename": "stray.arrow"}], "_split": "test"}))
    f = one(run(root), "index.row_count_mismatch")
    assert f.details["expected"] == 5 and f.details["actual"] == 6


def test_hf_state_json_outside_root(tmp_path):
    root = tmp_path / "hf"
    _hf_split(root, "train", ["data-00000-of-00001.arrow"], 3, ["../../../etc/passwd"])
    # A hostile list inside the data is a finding about that file, not the end of the audit
    f = one(run(root), "index.missing_shard")
    assert f.shards == ("train/state.json",) and "outside the dataset root" in f.message


def test_realdata_hf_folder_matches_its_state_json(realdata):
    rep = run(realdata / "dkhate_danish_offensive" / "dkhate_mbert")
    assert [f.check for f in rep.findings if f.check.startswith("index.")] == []


def _mosaic(root: Path, shards: list[tuple[str, int]]) -> None:
    doc = {"version": 2, "shards": [{"column_encodings": ["str"], "column_names": ["text"], "format": "json",
                                     "raw_data": {"basename": name, "bytes": (root / name).stat().st_size
                                                  if (root / name).exists() else 10, "hashes": {}},
                                     "samples": n, "size_limit": 67108864, "zip_data": None} for name, n in shards]}
    (root / "index.json").write_text(json.dumps(doc))


def test_mosaicml_index_json(tmp_path):
    root = tmp_path / "mds"
    write(root, "shard.00000.jsonl", {"text": ["a", "b", "c"]})
    write(root, "shard.00001.jsonl", {"text": ["d", "e"]})
    _mosaic(root, [("shard.00000.jsonl", 3), ("shard.00001.jsonl", 2)])
    assert [f.check for f in run(root).findings if f.check.startswith("index.")] == []
    _mosaic(root, [("shard.00000.jsonl", 3), ("shard.00001.jsonl", 4), ("shard.00002.jsonl", 1)])
    rep = run(root)
    assert one(rep, "index.missing_shard").shards == ("shard.00002.jsonl",)
    f = one(rep, "index.row_count_mismatch")
    assert f.shards == ("shard.00001.jsonl",) and f.details["expected"] == 4 and f.details["actual"] == 2
    _mosaic(root, [("../../etc/passwd", 1)])
    f = one(run(root), "index.missing_shard")  # A finding, the shards are audited
    assert f.shards == ("index.json",) and "outside the dataset root" in f.message


# ------------------------- Index verify applies the audit's policy (fails_policy = exit code)


def test_verify_json_fails_policy_agrees_with_the_exit_code(ds, tmp_path):
    idx = tmp_path / "index.json"
    _build(ds, idx)
    (ds / "data-00002-of-00003.parquet").unlink()  # missing: error
    write(ds, "late.parquet", {"text": ["z"], "label": [1]})  # extra: warn
    p = run_cli("index", "verify", str(ds), "--index", str(idx), "--format", "json")
    assert p.returncode == 1, p.stderr
    doc = json.loads(p.stdout)["result"]
    got = {f["check"]: f["fails_policy"] for f in doc["findings"]}
    assert got == {"index.missing_shard": True, "index.extra_shard": False}
    assert doc["passed"] is False and doc["config_path"] is None
    # --fail-on warn: the warning fails too
    p = run_cli("index", "verify", str(ds), "--index", str(idx), "--format", "json", "--fail-on", "warn")
    assert p.returncode == 1 and all(f["fails_policy"] for f in json.loads(p.stdout)["result"]["findings"])
    # [policy]: severity override and ignore, as in the audit
    cfg = tmp_path / "policy.toml"
    cfg.write_text('[policy]\n"index.missing_shard" = { severity = "warn" }\n"index.extra_shard" = { ignore = true }\n')
    p = run_cli("index", "verify", str(ds), "--index", str(idx), "--format", "json", "--config", str(cfg))
    assert p.returncode == 0, p.stdout
    doc = json.loads(p.stdout)["result"]
    assert [(f["check"], f["severity"], f["fails_policy"]) for f in doc["findings"]] == [
        ("index.missing_shard", "warn", False)]
    assert doc["passed"] is True and doc["config_path"] == str(cfg)
    t = run_cli("index", "verify", str(ds), "--index", str(idx), "--config", str(cfg))
    assert t.stdout.splitlines()[0] == f"config: {cfg}"


# ------------------------------- Arrow files a Hugging Face state.json does not list


def _hf_split_with_cache(folder: Path) -> Path:
    write(folder, "data-00000-of-00001.arrow", {"text": [f"t{k}" for k in range(5)], "label": [0, 1, 0, 1, 0]})
    (folder / "state.json").write_text(json.dumps({"_data_files": [{"filename": "data-00000-of-00001.arrow"}],
                                                   "_split": "train"}))
    (folder / "dataset_info.json").write_text(json.dumps({"splits": {"train": {"num_examples": 5}}}))
    shutil.copy(folder / "data-00000-of-00001.arrow", folder / "cache-1234abcd.arrow")  # a .map() cache
    return folder


def test_hf_cache_arrow_is_not_audited_but_reported_as_extra(tmp_path):
    root = tmp_path / "dk"
    _hf_split_with_cache(root / "train")
    rep = run(root)
    assert [s.path for s in rep.shards] == ["train/data-00000-of-00001.arrow"]
    assert by_check(rep, "dup.shard") == [] and by_check(rep, "dup.exact_across_shards") == []
    extra = one(rep, "index.extra_shard")
    assert extra.shards == ("train/cache-1234abcd.arrow",) and "will ignore them" in extra.message
    assert by_check(rep, "index.row_count_mismatch") == [] and by_check(rep, "index.missing_shard") == []
    assert [i["path"] for i in rep.ignored] == ["train/cache-1234abcd.arrow"]
    assert "state.json _data_files" in rep.ignored[0]["reason"]
    # named on the command line, the file is audited (the user asked for it)
    assert [s.path for s in run(root / "train" / "cache-1234abcd.arrow").shards] == ["cache-1234abcd.arrow"]


def test_mds_shard_whose_own_config_differs_from_its_index_entry(tmp_path, realdata):
    """StreamingDataset decodes an MDS shard by its index.json entry's column names, encodings and
    sizes, datacheck by the config in the shard's header: when they differ, the trainer reads other
    values than the audited ones, so it is index.changed_shard naming the shard and the field (it
    passed). The real MosaicML shard, with its own index, stays clean."""
    from hostilegen import mds_bytes, mds_cfg

    root = tmp_path / "x"
    shutil.copytree(realdata / "mds_fixtures" / "joining_sample_dataset" / "x", root)
    for p in root.iterdir():
        p.chmod(0o644)
    assert by_check(run([str(root)]), "index.changed_shard") == []
    index = json.loads((root / "index.json").read_text())
    for field, value in (("column_encodings", ["int64", "ndarray:float64"]), ("column_names", ["_id", "y"]),
                         ("column_sizes", [8, None])):
        doc = json.loads(json.dumps(index))
        doc["shards"][0][field] = value
        (root / "index.json").write_text(json.dumps(doc))
        f = one(run([str(root)]), "index.changed_shard")
        assert f.shards == ("shard.00000.mds",) and f.severity == "error"
        assert f"shard.00000.mds {field} " in f.message and str(value) in f.message
        assert f.details["config_mismatches"] == [{"path": "shard.00000.mds", "field": field, "index": value,
                                                   "shard": index["shards"][0][field]}]
    # a shard written anew under an old index: the header changed, the index did not
    own = tmp_path / "own"
    own.mkdir()
    (own / "shard.00000.mds").write_bytes(mds_bytes(mds_cfg(["label"], ["int8"], [1]), [[b"\x01"]], [1]))
    doc = {"version": 2, "shards": [{"column_names": ["label"], "column_encodings": ["uint8"], "column_sizes": [1],
                                     "compression": None, "format": "mds", "hashes": [],
                                     "raw_data": {"basename": "shard.00000.mds",
                                                  "bytes": (own / "shard.00000.mds").stat().st_size, "hashes": {}},
                                     "samples": 1, "size_limit": 1 << 26, "version": 2, "zip_data": None}]}
    (own / "index.json").write_text(json.dumps(doc))
    f = one(run([str(own)]), "index.changed_shard")
    assert "column_encodings ['int8'] in the shard, ['uint8'] in the index" in f.message
