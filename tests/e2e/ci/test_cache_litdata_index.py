"""A litdata folder whose ``index.json`` config is edited between two cached audits: the index is not
a chunk's bytes, yet decides how each chunk's items split into fields, so the chunks must be read again
under the new config, never answered from results read under the old one (a stale cached answer). A new
chunk listed in the index (the set growing) leaves the config, and the other chunks' entries, as they
were. Real chunks: ``realdata/litdata_images_partial`` (litdata's own writer output); the expected
``decode.bad_record`` count is worked out here from the chunks' bytes."""
from __future__ import annotations

import json
import os
import re
import shutil
import struct
import time
from pathlib import Path

from conftest import run_cli

OLD = time.time() - 3600  # settled files (docs/ci.md)
LINE = re.compile(r"^(\d+) shard\(s\): (\d+) read, (\d+) from the cache", re.M)


def _age(root: Path) -> None:
    for f in root.rglob("*"):
        if f.is_file():
            os.chmod(f, 0o644)
            os.utime(f, (OLD, OLD))


def _counts(stdout: str) -> tuple[int, ...]:
    found = LINE.findall(stdout)
    assert len(found) == 1, stdout
    return tuple(int(x) for x in found[0])


def _items_not_two_ints(chunk: Path) -> int:
    """Items of a litdata chunk (uint32 N, N+1 offsets, each item: a uint32 size per field, then the
    fields) whose two fields are not both 8 bytes: not an ``int`` each (``data_format ["int", "int"]``)."""
    b = chunk.read_bytes()
    (n,) = struct.unpack_from("<I", b, 0)
    offsets = struct.unpack_from(f"<{n + 1}I", b, 4)
    bad = 0
    for i in range(n):
        sizes = struct.unpack_from("<2I", b, offsets[i])
        bad += sizes != (8, 8)
    return bad


def _bad_records(report: dict) -> int:
    return sum(f["count"] for s in report["shards"] for f in s["findings"] if f["check"] == "decode.bad_record")


def test_an_edited_litdata_index_is_never_answered_from_the_cache(tmp_path, realdata):
    data = tmp_path / "lit"
    shutil.copytree(realdata / "litdata_images_partial", data)
    _age(data)
    flags = ["--cache-dir", str(tmp_path / "cache"), "--report-dir", str(tmp_path / "r"), "--no-progress"]
    first = run_cli("audit", str(data), *flags, "-o", str(tmp_path / "a.json"))
    chunks = sorted(data.glob("*.bin"))
    assert _counts(first.stdout) == (len(chunks), len(chunks), 0)
    assert _bad_records(json.loads((tmp_path / "a.json").read_text())) == 0  # jpeg + pickle: any bytes

    index = json.loads((data / "index.json").read_text())
    assert index["config"]["data_format"] == ["jpeg", "pickle"]
    index["config"]["data_format"] = ["int", "int"]  # the fields are now read as 8-byte integers
    (data / "index.json").write_text(json.dumps(index))
    _age(data)
    second = run_cli("audit", str(data), *flags, "-o", str(tmp_path / "b.json"))
    expected = sum(_items_not_two_ints(c) for c in chunks)
    assert expected > 0
    assert _counts(second.stdout) == (len(chunks), len(chunks), 0), second.stdout  # every chunk read again
    assert _bad_records(json.loads((tmp_path / "b.json").read_text())) == expected

    # the set grows: a new chunk entry in the index leaves the config as it was: nothing else is re-read
    index["chunks"].append(dict(index["chunks"][0], filename="chunk-99-0.bin"))
    (data / "index.json").write_text(json.dumps(index))
    shutil.copy(chunks[1], data / "chunk-99-0.bin")
    os.truncate(data / "chunk-99-0.bin", 40)  # other bytes than any chunk: read, unreadable
    _age(data)
    third = run_cli("audit", str(data), *flags)
    assert _counts(third.stdout) == (len(chunks) + 1, 1, len(chunks)), third.stdout
