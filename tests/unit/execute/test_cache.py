"""The per-shard result cache: exact round trip, hit (no shard data read), miss on a changed shard
or config, corrupt and truncated entries, concurrent writers, read-only folder, --no-cache."""
from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from gatehelp import cli, normalized, write_dataset

import datacheck.engine.shard as runner
import datacheck.execute.audit as api
import datacheck.formats.registry as readers
from datacheck.execute import rerun
from datacheck.execute.cache import CacheWarning, CorruptEntry, ShardCache, decode_results, encode_results
from datacheck.execute.rerun import code_memo_dir
from datacheck.formats.discovery import discover
from datacheck.model.config import Config, config_from_dict
from datacheck.model.findings import Example, Finding, Skipped
from datacheck.model.results import ShardResult

CFG = {"labels": {"num_classes": 3}}


def _same_result(a: ShardResult, b: ShardResult) -> None:
    for name in ("path", "format", "content_hash", "bytes", "rows", "findings", "stats", "skipped", "roles",
                 "columns", "failing_rows"):
        assert getattr(a, name) == getattr(b, name), name
        assert repr(getattr(a, name)) == repr(getattr(b, name)), name  # same types (tuples stay tuples)
    assert list(a.payload) == list(b.payload)
    for k, v in a.payload.items():
        w = b.payload[k]
        assert type(v) is type(w), k
        if isinstance(v, pl.DataFrame):
            assert v.equals(w) and v.schema == w.schema, k
        elif isinstance(v, pl.Series):
            assert v.equals(w) and (v.name, v.dtype) == (w.name, w.dtype), k
        elif isinstance(v, np.ndarray):
            assert v.dtype == w.dtype and np.array_equal(v, w), k
        elif isinstance(v, float) and v != v:
            assert w != w
        else:
            assert v == w and repr(v) == repr(w), k


def _rich_result() -> ShardResult:
    hashes = pl.DataFrame({"h_hi": pl.Series([1, 2**64 - 1, 0], dtype=pl.UInt64),
                           "h_lo": pl.Series([7, 8, 9], dtype=pl.UInt64), "row": pl.Series([0, 1, 2], dtype=pl.UInt32)})
    return ShardResult(
        path="a/b.parquet", format="parquet", content_hash="xxh3-128:" + "0" * 32, bytes=123, rows=3,
        findings=[Finding(check="finite.nan", severity="error", message="2 NaN", column="x", count=2, ratio=2 / 3,
                          rows=(0, 2), lines=(1, 3), examples=(Example(row=0, value="nan", line=1, byte_offset=0),
                                                               Example(row=2, value="nan")),
                          details={"values": [[-1, 2]], "note": None})],
        stats={"lengths": {"histogram": [[1, 2], [3, 1]], "p50": 1}, "labels": {"counts": [[None, 1], [0, 2]]},
               "rows": 3},
        skipped=[Skipped("tokens.out_of_vocab", "no vocab_size")],
        roles={"text": {"columns": ["t"], "inferred": True}, "label": {"columns": "y", "inferred": False}},
        columns={"t": "String", "y": "Int64"},
        failing_rows={"finite.nan:x": [0, 2], "empty.text": []},
        payload={"row_hashes": hashes, "hash128": pl.Series("h", [b"\x00" * 16, b"\xff" * 16], dtype=pl.Binary),
                 "labels_by_hash": pl.Series("lab", [1, None, 3], dtype=pl.Int64), "n": 3, "share": 0.25,
                 "nan": float("nan"), "pair": (1, "x"), "raw": b"\x01\x02", "by_int": {1: [2, 3], (4, 5): "t"},
                 "arr": np.arange(4, dtype=np.int16), "scalar": np.uint64(2**63), "nested": {"s": [pl.Series([1.5])]}},
    )


def test_round_trip_is_exact():
    r = _rich_result()
    (back,), meta = decode_results(encode_results([r], meta={"key": "k"}))
    assert meta == {"key": "k"}
    nested = back.payload.pop("nested")
    r.payload.pop("nested")
    assert nested["s"][0].equals(pl.Series([1.5]))
    _same_result(r, back)


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty", "garbage", "tail"])
def test_corrupt_blob_is_never_trusted(damage):
    data = bytearray(encode_results([_rich_result()], meta={"key": "k"}))
    if damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "flip":
        data[len(data) // 2] ^= 0x01
    elif damage == "empty":
        data = bytearray()
    elif damage == "garbage":
        data = bytearray(b"not an entry at all" * 10)
    else:
        data = data[:-1]
    with pytest.raises(CorruptEntry):
        decode_results(bytes(data))


def _audit(d: Path, cache: Path | None, cfg=CFG):
    return api.audit(d, cfg, cache_dir=cache)


def test_hit_reads_no_shard_data_and_gives_the_same_report(tmp_path, monkeypatch):
    d = write_dataset(tmp_path / "data")
    cache = tmp_path / "cache"
    plain = _audit(d, None)
    first = _audit(d, cache)
    assert normalized(first.to_json()) == normalized(plain.to_json())
    n_entries = len(list(cache.rglob("*.dcr")))
    assert n_entries == len(plain.shards) == 8

    def no_read(*a, **k):
        raise AssertionError("shard data was read on a cache hit")

    monkeypatch.setattr(runner, "open_for_checks", no_read)
    monkeypatch.setattr(readers, "open_shard", no_read)
    monkeypatch.setattr(runner, "audit_shard", no_read)
    for name in ("scan_parquet", "read_parquet", "scan_ipc", "read_ipc", "scan_ndjson", "read_ndjson", "scan_csv",
                 "read_csv"):
        monkeypatch.setattr(pl, name, no_read)
    again = _audit(d, cache)
    assert normalized(again.to_json()) == normalized(plain.to_json())


def test_changed_shard_is_re_audited_others_are_hits(tmp_path, monkeypatch):
    d = write_dataset(tmp_path / "data")
    cache = tmp_path / "cache"
    _audit(d, cache)
    target = d / "shard-00002-of-00007.parquet"
    pl.DataFrame({"text": ["", "", "x"], "label": [0, 9, 1]}).write_parquet(target)
    seen = []
    real = runner.audit_shard

    def spy(ds, *a, **k):
        seen.append(ds.rel)
        return real(ds, *a, **k)

    monkeypatch.setattr(runner, "audit_shard", spy)
    cfg = config_from_dict(CFG)
    c = ShardCache(cache, cfg)
    results = api.audit_shards(discover([str(d)]), cfg, cache=c)
    rep = api.finish_report(cfg, results, root=d, temp_files=["half.parquet.tmp"], fail_on="error")
    assert seen == ["shard-00002-of-00007.parquet"]
    assert (c.stats.hits, c.stats.misses, c.stats.writes) == (7, 1, 1)
    (sh,) = [s for s in rep.shards if s.path == "shard-00002-of-00007.parquet"]
    assert sh.rows == 3
    assert {f.check: f.count for f in sh.findings}["empty.text"] == 2
    assert normalized(rep.to_json()) == normalized(_audit(d, None).to_json())


def test_config_change_misses(tmp_path):
    d = write_dataset(tmp_path / "data")
    cache = tmp_path / "cache"
    _audit(d, cache)
    c = ShardCache(cache, config_from_dict({"labels": {"num_classes": 4}}))
    api.audit_shards(discover([str(d)]), config_from_dict({"labels": {"num_classes": 4}}), cache=c)
    assert (c.stats.hits, c.stats.misses) == (0, 8)


@pytest.mark.parametrize("damage", ["truncate", "flip", "zero"])
def test_corrupt_entry_is_recomputed(tmp_path, damage):
    d = write_dataset(tmp_path / "data")
    cache = tmp_path / "cache"
    plain = _audit(d, cache)
    entries = sorted(cache.rglob("*.dcr"))
    victim = entries[3]
    data = bytearray(victim.read_bytes())
    if damage == "truncate":
        victim.write_bytes(bytes(data[: len(data) - 40]))
    elif damage == "flip":
        data[30] ^= 0xFF
        victim.write_bytes(bytes(data))
    else:
        victim.write_bytes(b"")
    cfg = config_from_dict(CFG)
    c = ShardCache(cache, cfg)
    with pytest.warns(CacheWarning, match="corrupt"):
        results = api.audit_shards(discover([str(d)]), cfg, cache=c)
    assert (c.stats.hits, c.stats.corrupt, c.stats.writes) == (7, 1, 1)
    rep = api.finish_report(cfg, results, root=d, temp_files=["half.parquet.tmp"], fail_on="error")
    assert normalized(rep.to_json()) == normalized(plain.to_json())
    decode_results(victim.read_bytes())  # rewritten, valid again


def _spoil_truncate(p: Path) -> None:
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])


def _spoil_garbage(p: Path) -> None:
    p.write_bytes(b"\x00\xff" * 8)


def _spoil_shape(p: Path) -> None:
    p.write_text('{"hash": 5, "size": "big", "rel": ["x"], "key": null}')  # JSON, not of a record's shape


@pytest.mark.parametrize("spoil", [_spoil_truncate, _spoil_garbage, _spoil_shape])
def test_spoiled_identity_and_move_records_are_misses_said(tmp_path, spoil):
    """Every file identity record (``--trust-mtime``) and move record of the cache spoiled, and one
    shard renamed (looked up through its move record): the rerun hashes each shard, audits the renamed
    one anew, says each spoiled record it reads in a CacheWarning, gives the report of an audit
    without a cache, and writes the records anew (the next rerun says nothing)."""
    d = write_dataset(tmp_path / "data")
    old = os.stat(d).st_mtime - 3600  # settled files: their identities are recorded
    for p in d.rglob("*"):
        os.utime(p, (old, old))
    cache = tmp_path / "cache"
    _audit(d, cache)
    ids = sorted(p for p in cache.rglob("*.json") if p.parent.parent.name == "ids")
    moved = sorted(p for p in cache.rglob("*.json") if p.parent.parent.name == "moved")
    assert len(ids) >= 2 and moved  # the data gives both kinds (an identity record per shard file)
    rel = json.loads(moved[0].read_text())["rel"]
    renamed = (d / rel).with_name("renamed-" + Path(rel).name)
    os.rename(d / rel, renamed)  # same folder, same suffix: found through moved[0]
    for p in [*ids, *moved]:
        spoil(p)
    want = normalized(api.audit([d], config_from_dict(CFG), cache_dir=None).to_json())
    with pytest.warns(CacheWarning) as caught:
        again = api.audit([d], config_from_dict(CFG), cache_dir=cache, trust_mtime=True, workers=1)
    said = [str(w.message) for w in caught]
    assert all(" is corrupt (" in m and m.startswith("cache record ") for m in said), said
    named = {m.split(" is corrupt")[0].removeprefix("cache record ") for m in said}
    assert str(moved[0]) in named  # the renamed shard's move record
    assert len(named & {str(p) for p in ids}) == len(ids) - 1  # every shard's but the renamed one's (new path)
    assert normalized(again.to_json()) == want
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        third = api.audit([d], config_from_dict(CFG), cache_dir=cache, trust_mtime=True, workers=1)
    assert normalized(third.to_json()) == want


def _token_shard(path: Path, v: int) -> None:
    ids = [[1, v, 3 + i] for i in range(10)]
    pl.DataFrame({"input_ids": ids, "labels": ids}).write_parquet(path)


def _settle(*paths: Path) -> None:
    """Modification times an hour back: the files' identities are recorded (ShardCache.remember)."""
    for p in paths:
        t = time.time() - 3600
        os.utime(p, (t, t))


def _edit_hash(rec: dict, day1: str, other: str) -> dict:
    return {**rec, "hash": day1}  # a stale restore of one field: b.parquet's clean day-1 hash


def _edit_other_shard(rec: dict, day1: str, other: str) -> dict:
    return {**rec, "hash": other}  # a.parquet's hash: b would look like a duplicate of a (dup.shard)


def _flip_digit(rec: dict, day1: str, other: str) -> dict:
    h = rec["hash"]
    return {**rec, "hash": h[:-1] + ("0" if h[-1] != "0" else "1")}  # one hex digit of the hash changed


@pytest.mark.parametrize("spoil", ["field", "other_shard", "flip", "byte", "truncate", "empty", "swap"])
def test_a_damaged_identity_record_is_never_trusted(tmp_path, spoil):
    """--trust-mtime: b.parquet audited clean, then rewritten with an out-of-vocabulary id (its record
    rewritten), then its file identity record damaged (a field edited to the day-1 hash or to a.parquet's,
    a hex digit or a byte flipped, truncated, emptied, or swapped with a.parquet's record). The rerun
    says the record in a CacheWarning, hashes b.parquet again and gives the report of an audit without
    the cache: b.parquet's real content hash (xxhash of its bytes), its findings, the same index_hash
    (a hash taken from a damaged record once gave a clean report, or a false dup.shard)."""
    import xxhash

    d = tmp_path / "data"
    d.mkdir()
    a, b = d / "a.parquet", d / "b.parquet"
    cfg = config_from_dict({"tokens": {"vocab_size": 32000}})
    cache = tmp_path / "cache"
    _token_shard(a, 7)
    _token_shard(b, 8)
    _settle(a, b)
    day1 = "xxh3-128:" + xxhash.xxh3_128_hexdigest(b.read_bytes())
    other = "xxh3-128:" + xxhash.xxh3_128_hexdigest(a.read_bytes())
    first = api.audit([d], cfg, cache_dir=cache, trust_mtime=True, workers=1)
    assert not [f for s in first.shards for f in s.findings]
    _token_shard(b, 99999)
    _settle(b)
    real = "xxh3-128:" + xxhash.xxh3_128_hexdigest(b.read_bytes())
    want = normalized(api.audit([d], cfg, cache_dir=None).to_json())
    second = api.audit([d], cfg, cache_dir=cache, trust_mtime=True, workers=1)
    assert normalized(second.to_json()) == want
    ids = ShardCache(cache, cfg)
    rec_b, rec_a = ids.identity_path([str(b)]), ids.identity_path([str(a)])
    rec = json.loads(rec_b.read_text())
    assert rec["hash"] == real
    edits = {"field": _edit_hash, "other_shard": _edit_other_shard, "flip": _flip_digit}
    if spoil in edits:
        rec_b.write_text(json.dumps(edits[spoil](rec, day1, other), separators=(",", ":")))
    elif spoil == "byte":
        data = bytearray(rec_b.read_bytes())
        at = data.index(b'"size":') + len(b'"size":')
        data[at] = ord("9") if data[at] != ord("9") else ord("8")  # the size's first digit
        rec_b.write_bytes(bytes(data))
    elif spoil == "truncate":
        rec_b.write_bytes(rec_b.read_bytes()[: rec_b.stat().st_size // 2])
    elif spoil == "empty":
        rec_b.write_bytes(b"")
    else:
        ta, tb = rec_a.read_bytes(), rec_b.read_bytes()
        rec_a.write_bytes(tb)
        rec_b.write_bytes(ta)
    with pytest.warns(CacheWarning) as caught:
        third = api.audit([d], cfg, cache_dir=cache, trust_mtime=True, workers=1)
    said = [str(w.message) for w in caught]
    assert any(m.startswith(f"cache record {rec_b} is corrupt (") for m in said), said
    assert normalized(third.to_json()) == want
    (shard_b,) = [s for s in third.shards if s.path == "b.parquet"]
    assert shard_b.content_hash == real
    assert {f.check for f in shard_b.findings} == {"tokens.out_of_vocab", "labels.out_of_range"}
    assert json.loads(rec_b.read_text())["hash"] == real  # written anew
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        fourth = api.audit([d], cfg, cache_dir=cache, trust_mtime=True, workers=1)
    assert normalized(fourth.to_json()) == want


@pytest.mark.slow
def test_concurrent_audits_share_one_cache(tmp_path):
    """Four CLI processes audit the same folder into one cache at the same time."""
    d = write_dataset(tmp_path / "data", n_shards=10)
    cache = tmp_path / "cache"
    procs = [subprocess.Popen([sys.executable, "-m", "datacheck", "audit", str(d), "--cache-dir", str(cache),
                               "--format", "json", "--report-dir", str(tmp_path / f"r{i}")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(4)]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 1, err
        assert "warning" not in err
        outs.append(normalized(out))
    expected = normalized(_audit(d, None).to_json())
    assert outs == [expected] * 4
    entries = sorted(cache.rglob("*.dcr"))
    assert len(entries) == 12
    for e in entries:
        decode_results(e.read_bytes())  # every entry complete and valid
    ids = [p for p in cache.rglob("*") if p.is_file() and p.parent.parent.name == "ids"]  # file identity records
    for p in ids:
        assert p.suffix == ".json" and isinstance(json.loads(p.read_text()), dict)  # each complete
    memos = [p for p in cache.rglob("*.dcm")]  # whole-audit memo records (datacheck/execute/rerun.py)
    for p in memos:
        assert p.relative_to(cache).parts[:2] == ("memo", "v1") and p.read_bytes().startswith(b"DCM1\n")
    moved = [p for p in cache.rglob("*") if p.is_file() and p.parent.parent.name == "moved"]  # move records
    for p in moved:  # (ShardCache.get_moved: a renamed shard's bytes answered from the cache)
        assert p.suffix == ".json" and isinstance(json.loads(p.read_text()), dict)  # each complete
    code = [p for p in cache.rglob("*") if p.is_file() and p.parent == Path(code_memo_dir(cache))]
    for p in code:  # the remembered code fingerprint (rerun.remember_tree_fingerprint): whole, its digest checks out
        assert re.fullmatch(r"[0-9a-f]{32}", p.name) and rerun._code_entry_value(p.read_bytes(), p.name) is not None
    assert not [p for p in cache.rglob("*") if p.is_file() and p.suffix != ".dcr" and p not in ids
                and p not in memos and p not in moved and p not in code]  # no temp file
    assert normalized(_audit(d, cache).to_json()) == expected


def test_racing_writers_and_readers_on_one_key(tmp_path):
    """Writers replace one entry again and again while readers read it: a reader gets either a
    miss or the exact result, never a partial entry.

    The warnings of every thread are recorded by one ``catch_warnings`` around them all (it swaps
    process-wide state: one per reader thread lost or misplaced warnings), and the race runs until
    the readers had ``HITS`` hits (at least a second, at most a minute), not for a fixed second
    that a loaded machine may spend before the first write lands."""
    cache = ShardCache(tmp_path / "cache", Config())
    r = _rich_result()
    key = cache.key("a/b.parquet", "parquet", r.content_hash)
    stop = threading.Event()
    bad: list[str] = []
    hits = [0, 0]

    def write():
        while not stop.is_set():
            cache.put(key, r)

    def read(k: int):
        while not stop.is_set():
            got = cache.get(key, "a/b.parquet")
            if got is not None:
                hits[k] += 1
                if got.findings != r.findings:
                    bad.append("different result")

    HITS = 50
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        threads = [threading.Thread(target=write) for _ in range(2)]
        threads += [threading.Thread(target=read, args=(k,)) for k in range(2)]
        for t in threads:
            t.start()
        t0 = time.monotonic()
        while time.monotonic() - t0 < 60 and (time.monotonic() - t0 < 1.0 or sum(hits) < HITS):
            time.sleep(0.05)
        stop.set()
        for t in threads:
            t.join()
    assert [str(w.message) for w in caught] == []
    assert bad == []
    assert sum(hits) >= HITS and cache.stats.corrupt == 0


def test_a_folder_another_writer_creates_first_is_no_write_error(tmp_path, monkeypatch):
    """Two writers of new entries in one new ``<xx>/`` folder: both see it missing, one creates it
    first; the other's ``mkdir`` fails with EEXIST, which is no write error (CI caught this race in
    the racing test above: "cannot write (File exists)")."""
    cache = ShardCache(tmp_path / "cache", Config())
    r = _rich_result()
    key = cache.key("a/b.parquet", "parquet", r.content_hash)
    real_mkdir = os.mkdir

    def mkdir_after_another_writer(path, *args, **kwargs):
        real_mkdir(path, *args, **kwargs)  # the other writer, a moment earlier
        real_mkdir(path, *args, **kwargs)  # this writer: FileExistsError

    monkeypatch.setattr(os, "mkdir", mkdir_after_another_writer)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        cache.put(key, r)
    monkeypatch.setattr(os, "mkdir", real_mkdir)
    assert cache.stats.write_errors == 0 and cache.stats.writes == 1
    assert cache.get(key, "a/b.parquet").findings == r.findings


def test_read_only_cache_folder_is_exit_2(tmp_path, monkeypatch):
    d = write_dataset(tmp_path / "data")
    ro = tmp_path / "ro-cache"
    ro.mkdir()
    ro.chmod(stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP)
    try:
        r = cli("audit", str(d), "--cache-dir", str(ro), "--report-dir", str(tmp_path / "r"), monkeypatch=monkeypatch)
    finally:
        ro.chmod(0o755)
    assert r.returncode == 2
    assert f"cache folder {ro} is read-only" in r.stderr
    assert "--no-cache" in r.stderr and "Traceback" not in r.stderr
    assert list(ro.iterdir()) == []
    assert not (tmp_path / "r").exists()


def test_cache_folder_that_is_a_file_is_exit_2(tmp_path, monkeypatch):
    d = write_dataset(tmp_path / "data")
    f = tmp_path / "file"
    f.write_text("x")
    r = cli("audit", str(d), "--cache-dir", str(f / "sub"), "--report-dir", str(tmp_path / "r"), monkeypatch=monkeypatch)
    assert r.returncode == 2 and "cache folder" in r.stderr


def test_cli_default_cache_and_no_cache(tmp_path, monkeypatch):
    monkeypatch.delenv("DATACHECK_DIR")  # the real default: .datacheck/ under the working directory
    d = write_dataset(tmp_path / "data")
    work = tmp_path / "work"
    work.mkdir()
    r = cli("audit", str(d), "--no-cache", "--format", "json", cwd=work, monkeypatch=monkeypatch)
    assert r.returncode == 1
    assert not (work / ".datacheck" / "cache").exists()
    r2 = cli("audit", str(d), "--format", "json", cwd=work, monkeypatch=monkeypatch)
    assert len(list((work / ".datacheck" / "cache").rglob("*.dcr"))) == 8
    r3 = cli("audit", str(d), "--format", "json", cwd=work, monkeypatch=monkeypatch)
    assert normalized(r.stdout) == normalized(r2.stdout) == normalized(r3.stdout)


def test_prune_keeps_only_the_entries_of_this_audit(tmp_path, monkeypatch):
    d = write_dataset(tmp_path / "data")
    cache = tmp_path / "cache"
    args = ["audit", str(d), "--cache-dir", str(cache), "--report-dir", str(tmp_path / "r"), "--format", "json"]
    first = cli(*args, monkeypatch=monkeypatch)
    old = {p.name for p in cache.rglob("*.dcr")}
    assert len(old) == 8
    pl.DataFrame({"text": ["v2"], "label": [0]}).write_parquet(d / "shard-00004-of-00007.parquet")
    (d / "extra.jsonl").unlink()
    stale_tmp = cache / "v1" / "00" / ".x.dcr.abc.tmp"
    stale_tmp.parent.mkdir(parents=True, exist_ok=True)
    stale_tmp.write_bytes(b"half")
    os.utime(stale_tmp, (1, 1))
    cli(*args, monkeypatch=monkeypatch)  # without --cache-prune: old entries stay
    assert len(list(cache.rglob("*.dcr"))) == 9
    r = cli(*args, "--cache-prune", monkeypatch=monkeypatch)
    now = {p.name for p in cache.rglob("*.dcr")}
    assert len(now) == 7 and len(old & now) == 6  # 6 unchanged shards kept, 1 new version, 2 gone
    assert not stale_tmp.exists()
    assert json.loads(r.stdout)["summary"]["shards"] == 7
    assert json.loads(first.stdout)["summary"]["shards"] == 8


def test_single_shard_entry_never_answers_a_multi_shard_audit(tmp_path):
    """``cross_shard`` is part of the key: a one-shard audit caches its result without the row-hash
    payload; a later audit of the whole folder must re-audit that shard (not take the entry), or the
    row it shares with the other shard would go unnoticed."""
    d = tmp_path / "data"
    d.mkdir()
    pl.DataFrame({"text": ["same row", "a1"]}).write_parquet(d / "a.parquet")
    pl.DataFrame({"text": ["same row", "b1"]}).write_parquet(d / "b.parquet")
    cache_dir = tmp_path / "cache"
    one = api.audit(d / "a.parquet", cache_dir=cache_dir)
    assert [s.path for s in one.shards] == ["a.parquet"]
    (entry,) = list(cache_dir.rglob("*.dcr"))
    (cached,), _meta = decode_results(entry.read_bytes())
    assert cached.payload == {}  # the single-shard result carries no row hashes
    both = api.audit(d, cache_dir=cache_dir)
    dups = [f for f in both.findings if f.check == "dup.exact_across_shards"]
    assert [(f.count, f.shards) for f in dups] == [(1, ("a.parquet", "b.parquet"))]
    # the one-shard entry is still there beside the two new ones (a different key, not overwritten)
    assert len(list(cache_dir.rglob("*.dcr"))) == 3
    cache = ShardCache(cache_dir, Config())
    assert cache.key("a.parquet", "parquet", "xxh3-128:0", cross_shard=False) != \
        cache.key("a.parquet", "parquet", "xxh3-128:0", cross_shard=True)


def test_datacheck_dir_moves_the_default_report_and_cache_folders(tmp_path, monkeypatch):
    d = write_dataset(tmp_path / "data")
    work, state = tmp_path / "work", tmp_path / "state"
    work.mkdir()
    r = cli("audit", str(d), "--format", "json", cwd=work, env={"DATACHECK_DIR": str(state)}, monkeypatch=monkeypatch)
    assert r.returncode == 1
    index_hash = json.loads(r.stdout)["index_hash"]
    assert (state / "reports" / index_hash / "report.json").is_file()
    assert len(list((state / "cache").rglob("*.dcr"))) == 8
    assert not (work / ".datacheck").exists()


def test_a_prune_removes_the_remembered_code_fingerprints(tmp_path):
    """``memo/code/`` (:func:`datacheck.execute.rerun.code_memo_dir`) goes with the memo records."""
    cache = tmp_path / "cache"
    assert code_memo_dir(cache) == str(cache / "memo" / "code")
    entry = cache / "memo" / "code" / ("a" * 32)
    entry.parent.mkdir(parents=True)
    entry.write_text("b" * 32)
    assert ShardCache(cache, Config()).prune() == 1 and not entry.exists()


_WRITER = """
import sys, time
from datacheck.io.outputs import replace_file
def half(f):
    f.write(b"half an entry")
    f.flush()
    print("ready", flush=True)
    time.sleep(120)
replace_file(sys.argv[1], half)
"""


def test_prune_removes_the_temp_files_of_killed_writers_only(tmp_path):
    """Two writers stopped while writing a cache entry and a file identity record: one killed by
    SIGKILL (its temporary file left behind), one still running. A prune removes the killed one's
    temporary file at once (no process holds its lock), keeps the running writer's, and keeps a fresh
    unlocked ``*.tmp`` of an earlier datacheck (an hour's rule); the running writer then completes."""
    cache = ShardCache(tmp_path / "cache", Config())
    killed_at = cache.entry_path("ab" * 16)
    live_at = cache.identity_path([str(tmp_path / "x.parquet")])
    old_style = cache.root / "v1" / "cd" / ".y.dcr.abcd1234.tmp"
    for p in (killed_at, live_at, old_style):
        p.parent.mkdir(parents=True, exist_ok=True)
    old_style.write_bytes(b"half")
    env = {**os.environ, "PYTHONPATH": str(Path(api.__file__).parents[2])}
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(p)], stdout=subprocess.PIPE, text=True, env=env)
             for p in (killed_at, live_at)]
    try:
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        killed_tmp = list(killed_at.parent.glob(f".{killed_at.name}.*.tmp"))
        live_tmp = list(live_at.parent.glob(f".{live_at.name}.*.tmp"))
        assert len(killed_tmp) == len(live_tmp) == 1
        procs[0].kill()
        procs[0].wait(timeout=30)
        past = time.time() - 10  # beyond the grace for a writer that has not yet taken its lock
        for p in (*killed_tmp, *live_tmp):
            os.utime(p, (past, past))
        assert cache.prune() >= 1
        assert not killed_tmp[0].exists() and not killed_at.exists()
        assert live_tmp[0].exists() and old_style.exists()
        procs[1].kill()
        procs[1].wait(timeout=30)
        assert cache.prune() == 1  # its writer gone too (the earlier datacheck's fresh file still kept)
        assert not live_tmp[0].exists() and not live_at.exists() and old_style.exists()
    finally:
        for proc in procs:
            proc.kill()
            proc.wait(timeout=30)
