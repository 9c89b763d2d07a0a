"""Corrupt Arrow IPC data: offsets past their buffers killed the process inside
polars (SIGSEGV). Arrow data is fully validated before polars sees it; a shard that fails is
``decode.unreadable`` with the reason, and the other shards are audited.

The two ``crash_inner_list_offsets*.arrow`` files are seeded byte mutants of a 15-row stream
(``ids: list<list<int64>>``, ``text: string``) that crashed ``datacheck audit`` with SIGSEGV (rc 139)
before the fix."""
from __future__ import annotations

import io
import json
import random
import shutil
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest
from conftest import run_cli

DATA = Path(__file__).parent / "data"
CRASHERS = sorted(DATA.glob("crash_inner_list_offsets*.arrow"))


def _corrupt_ipc_file() -> bytes:
    """A seeded byte mutant of an Arrow IPC *file* that opens but fails full validation."""
    t = pa.table({"ids": pa.array([[[1, 2], [3]], [[4]], [[5, 6, 7]]] * 5, pa.list_(pa.list_(pa.int64()))),
                  "text": ["a", "bb", "ccc"] * 5})
    buf = io.BytesIO()
    with pa.ipc.new_file(buf, t.schema) as w:
        w.write_table(t)
    good = buf.getvalue()
    rng = random.Random(0)
    for _ in range(5000):
        m = bytearray(good)
        i = rng.randrange(len(m))
        m[i] = rng.randrange(256)
        try:
            rd = pa.ipc.open_file(pa.BufferReader(bytes(m)))
            batches = [rd.get_batch(k) for k in range(rd.num_record_batches)]
        except Exception:  # noqa: BLE001 - this mutant does not even open: look for one that does
            continue
        try:
            for b in batches:
                b.validate(full=True)
        except pa.ArrowInvalid:
            return bytes(m)
    raise AssertionError("no corrupt-but-openable mutant found")


@pytest.fixture
def folder(tmp_path) -> Path:
    d = tmp_path / "data"
    d.mkdir()
    for k, f in enumerate(CRASHERS):
        shutil.copy(f, d / f"data-0000{k}.arrow")
    (d / "data-file.arrow").write_bytes(_corrupt_ipc_file())
    pl.DataFrame({"text": ["fine", "rows"], "label": [0, 1]}).write_parquet(d / "good.parquet")
    return d


def test_crashers_are_unreadable_and_the_rest_is_audited(tmp_path, folder):
    assert len(CRASHERS) == 2
    p = run_cli("audit", str(folder), "--report-dir", str(tmp_path / "r"), "--format", "json", cwd=tmp_path)
    assert p.returncode == 1, (p.returncode, p.stderr[-2000:])
    rep = json.loads(p.stdout)
    by = {s["path"]: s for s in rep["shards"]}
    assert by["good.parquet"]["rows"] == 2
    for name in ("data-00000.arrow", "data-00001.arrow", "data-file.arrow"):
        un = [f for f in by[name]["findings"] if f["check"] == "decode.unreadable"]
        assert un and "full validation failed" in un[0]["message"], by[name]["findings"]


def test_clean_of_a_crasher_leaves_no_staging_folder(tmp_path, folder):
    out = tmp_path / "out"
    p = run_cli("clean", str(folder), "--out", str(out), cwd=tmp_path)
    assert p.returncode >= 0 and "Traceback" not in p.stderr, (p.returncode, p.stderr[-2000:])
    assert not [x for x in tmp_path.iterdir() if ".tmp-" in x.name or x.name.startswith(".out")], list(tmp_path.iterdir())
    assert (out / "good.parquet").is_file()


@pytest.mark.parametrize("where, name, said", [
    ("nested", b"item", "nested field whose name is not valid UTF-8"),
    ("column", b"ids", "has a name that is not valid UTF-8"),
])
def test_a_field_name_that_is_not_utf8_is_unreadable(tmp_path, where, name, said):
    """A field name whose bytes are not UTF-8 (the fuzz run of benchmarks/fuzz_inputs.py 2000 7 2 made
    one from a list's item field: pyarrow raised UnicodeDecodeError when the name was read, exit 3)
    is ``decode.unreadable`` naming the column; the other shards are audited."""
    t = pa.table({"ids": pa.array([[1, 2], [3]] * 5, pa.list_(pa.int64())), "text": ["a", "bb"] * 5})
    buf = io.BytesIO()
    with pa.ipc.new_file(buf, t.schema) as w:
        w.write_table(t)
    raw = buf.getvalue()
    assert name in raw
    bad = raw.replace(name, b"\xcb" + name[1:])  # 0xcb then an ASCII byte: an invalid UTF-8 sequence
    d = tmp_path / "d"
    d.mkdir()
    (d / "shard.arrow").write_bytes(bad)
    pl.DataFrame({"text": ["x", "y"]}).write_parquet(d / "good.parquet")
    p = run_cli("audit", str(d), "--report-dir", str(tmp_path / "r"), "--format", "json", cwd=tmp_path)
    assert p.returncode == 1, (p.returncode, p.stderr[-2000:])
    by = {s["path"]: s for s in json.loads(p.stdout)["shards"]}
    un = [f for f in by["shard.arrow"]["findings"] if f["check"] == "decode.unreadable"]
    assert len(un) == 1 and said in un[0]["message"] and "column 0" in un[0]["message"], by["shard.arrow"]
    assert by["good.parquet"]["rows"] == 2
