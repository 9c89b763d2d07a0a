"""The config copies of the report folder (:mod:`datacheck.io.reportcopies`): their names, a bounded
number kept per index hash (never the contract file ``<index_hash>/report.json``, never the copy just
written), deleted atomically, and safe beside concurrent writers and pruners."""
from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

import pytest
import xxhash

from datacheck.io import reportcopies as rc
from datacheck.io.outputs import write_atomic, write_json_atomic
from datacheck.model.errors import UsageError

CFG = "sha256:" + "ab" * 32


def _copy(index: Path, name: str, mtime: float) -> Path:
    p = index / name / "report.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(f'{{"name": "{name}"}}\n')
    os.utime(p, (mtime, mtime))
    return p


def _names(n: int) -> list[str]:
    """``n`` copy folder names of distinct configs (64 hex digits each)."""
    return [f"{i:064x}" for i in range(n)]


def test_the_copy_name_spells_every_part_of_the_key():
    digits = CFG.split(":")[1]
    assert rc.copy_name(CFG) == digits
    assert rc.copy_name(CFG, "warn") == f"{digits}.fail-on-warn"
    assert rc.copy_name(CFG, "never", "0123456789abcdef", True) == \
        f"{digits}.fail-on-never.against-0123456789abcdef.allow-check-errors"
    assert rc.copy_name(CFG, against="0123456789abcdef") == f"{digits}.against-0123456789abcdef"
    assert rc.copy_name(CFG, "warn", part=(1, 4)) == f"{digits}.fail-on-warn.part-1-of-4"
    for name, key in ((digits, ("error", "")),
                      (f"{digits}.fail-on-warn.allow-check-errors", ("warn", ".allow-check-errors")),
                      (f"{digits}.against-0123456789abcdef", ("error", ".against-0123456789abcdef")),
                      (f"{digits}.allow-check-errors.part-0-of-2", ("error", ".allow-check-errors.part-0-of-2"))):
        assert rc.parse_copy_name(name) == (digits, *key)
    for bad in ("report.json", f"{digits}.fail-on-error", f"{digits}.against-0123", f".{digits}.pruned-1-aa",
                f"{digits}.allow-check-errors.against-0123456789abcdef", f"{digits}.part-1"):
        assert rc.parse_copy_name(bad) is None
    with pytest.raises(UsageError, match="cannot store a report"):
        rc.copy_name(CFG, against="../../etc")


def test_the_against_key_names_the_datasets_compared_with(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    want = xxhash.xxh3_128_hexdigest(f"{tmp_path / 'a'}\0{tmp_path / 'train'}".encode())[:16]
    assert rc.against_key(["train/", "./a", str(tmp_path / "train")]) == want  # one dataset spelled three ways
    assert rc.against_key(["a", "train"]) == rc.against_key(["train", "a"]) == want
    assert rc.against_key(["s3://b/train"]) == xxhash.xxh3_128_hexdigest(b"s3://b/train")[:16]
    assert rc.against_key(None) is None and rc.against_key([]) is None


def test_prune_keeps_the_most_recent_copies_the_one_just_written_and_the_contract_file(tmp_path):
    index = tmp_path / "r" / ("c" * 32)
    names = _names(10)
    base = time.time() - 1000
    for i, name in enumerate(names):  # names[9] the most recent
        _copy(index, name, base + i)
    (index / "report.json").write_text("{}\n")
    os.utime(index / "report.json", (base - 500, base - 500))  # older than every copy: still never pruned
    (index / "report.results.dcr").write_bytes(b"x")  # a part's sidecar beside the contract file
    (index / "notes.txt").write_text("the user's")
    (index / "deadbeef").mkdir()  # no copy's name: not ours
    keep = names[0]  # the copy just written (here the oldest by its time, e.g. a clock step back)
    removed = rc.prune_copies(index, keep=keep, max_copies=4)
    assert sorted(removed) == sorted(names[1:7])  # 4 kept: the one written and the 3 most recent
    assert sorted(p.name for p in index.iterdir() if p.is_dir()) == sorted([keep, *names[7:], "deadbeef"])
    assert (index / "report.json").read_text() == "{}\n"
    assert (index / "report.results.dcr").exists() and (index / "notes.txt").exists()
    assert rc.prune_copies(index, keep=keep, max_copies=4) == []  # bounded: nothing more to do


def test_a_copy_rewritten_after_it_was_chosen_is_put_back(tmp_path):
    index = tmp_path / ("c" * 32)
    (old,) = _names(1)
    p = _copy(index, old, time.time() - 100)
    st = os.stat(p)
    chosen = (st.st_mtime_ns, st.st_ino)
    write_json_atomic(p, '{"rewritten": true}\n')  # another audit stores that copy again meanwhile
    assert rc._remove_copy(index, old, chosen) is False
    assert p.read_text() == '{"rewritten": true}\n'
    assert [x.name for x in index.iterdir()] == [old]  # no hidden folder left behind
    st = os.stat(p)
    assert rc._remove_copy(index, old, (st.st_mtime_ns, st.st_ino)) is True
    assert list(index.iterdir()) == []


def test_a_killed_prunes_hidden_folder_goes_once_stale(tmp_path):
    index = tmp_path / ("c" * 32)
    fresh, stale = index / f".{'a' * 64}.pruned-1-00", index / f".{'b' * 64}.pruned-2-00"
    for d in (fresh, stale):
        (d / "report.json").parent.mkdir(parents=True)
        (d / "report.json").write_text("{}")
    old = time.time() - rc.STALE_PRUNED_S - 60
    os.utime(stale, (old, old))
    rc.prune_copies(index, keep="x")
    assert fresh.exists() and not stale.exists()


def test_a_writer_whose_copy_folder_vanished_writes_again(tmp_path):
    target = tmp_path / ("c" * 32) / ("a" * 64) / "report.json"
    calls = []

    def write(p: Path):
        calls.append(1)
        write_json_atomic(p, "{}\n")
        if len(calls) == 1:  # a prune renamed the folder away before the rename into it: the file is gone
            shutil.rmtree(p.parent)
            raise FileNotFoundError(2, "No such file or directory", str(p))
        return p

    assert rc.write_copy(target, write) == target and len(calls) == 2 and target.read_text() == "{}\n"
    calls.clear()

    def refused(p: Path):  # any other failure (the folder stands): raised at once
        calls.append(1)
        raise PermissionError(13, "Permission denied")

    with pytest.raises(UsageError, match="Permission denied"):
        rc.write_copy(target, refused)
    assert len(calls) == 1


def test_concurrent_writers_and_pruners_keep_every_write_and_the_bound(tmp_path):
    """8 threads each store 60 copies of one index hash (the config copy, then the contract file, then a
    prune, as an audit does), of 7 names they share (the same copy stored by several audits, pruned by
    the others meanwhile); at the end no write failed, the contract file is whole, and no more than
    ``max_copies`` copies are left, each whole."""
    index = tmp_path / "r" / ("c" * 32)
    errors: list[BaseException] = []
    max_copies = 2

    def audit(t: int) -> None:
        try:
            for i in range(60):
                name = f"{(t + i) % 7:064x}"
                text = f'{{"writer": {t}, "i": {i}}}\n'
                rc.write_copy(index / name / "report.json", lambda p: write_atomic(p, text, os_errors=True))
                write_json_atomic(index / "report.json", text)
                rc.prune_copies(index, keep=name, max_copies=max_copies)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=audit, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert (index / "report.json").read_text().startswith('{"writer": ')
    rc.prune_copies(index, keep="none", max_copies=max_copies)
    left = [d for d in index.iterdir() if d.is_dir()]
    assert 1 <= len(left) <= max_copies and not [d for d in left if d.name.startswith(".")]
    for d in left:
        assert (d / "report.json").read_text().startswith('{"writer": ')
        assert [f.name for f in d.iterdir()] == ["report.json"]  # no temporary file left
