"""datacheck.io.outputs: the one atomic-write helper (links, folders, fifos, unwritable places) and the
guard that keeps outputs out of the audited data."""
from __future__ import annotations

import errno
import json
import os
import stat
import threading
from pathlib import Path

import polars as pl
import pytest

from datacheck.io import outputs
from datacheck.io.outputs import check_outputs, write_atomic, write_bytes_atomic, write_frame_atomic, write_json_atomic
from datacheck.model.errors import UsageError
from datacheck.report.model import read_report


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


# ------------------------------------------------------------------------------------------ writing
def test_symlink_is_written_through_and_stays_a_link(tmp_path):
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "report.json"
    target.write_text("old\n")
    link = tmp_path / "linkr.json"
    link.symlink_to(target)
    assert write_json_atomic(link, '{"a": 1}\n') == link
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() == '{"a": 1}\n'
    assert _leftovers(tmp_path) == [] and _leftovers(tmp_path / "real") == []


def test_dangling_symlink_creates_its_target(tmp_path):
    link = tmp_path / "out.json"
    link.symlink_to("sub/made.json")  # relative, target folder missing
    write_atomic(link, "x")
    assert link.is_symlink() and (tmp_path / "sub" / "made.json").read_text() == "x"


def test_chain_of_links_is_followed_to_the_last_target(tmp_path):
    target = tmp_path / "t.json"
    (tmp_path / "l1").symlink_to(target)
    (tmp_path / "l2").symlink_to(tmp_path / "l1")
    write_atomic(tmp_path / "l2", b"\x00\x01")
    assert (tmp_path / "l2").is_symlink() and (tmp_path / "l1").is_symlink()
    assert target.read_bytes() == b"\x00\x01"


def test_existing_regular_file_keeps_its_mode(tmp_path):
    p = tmp_path / "r.json"
    p.write_text("old")
    p.chmod(0o640)
    write_atomic(p, "new")
    assert p.read_text() == "new" and stat.S_IMODE(p.stat().st_mode) == 0o640


@pytest.mark.parametrize("make", ["folder", "trailing_slash", "link_to_folder"])
def test_folder_is_refused_naming_the_path(tmp_path, make):
    (tmp_path / "d").mkdir()
    given = {"folder": str(tmp_path / "d"), "trailing_slash": str(tmp_path / "new") + "/",
             "link_to_folder": str(tmp_path / "ld")}[make]
    if make == "link_to_folder":
        (tmp_path / "ld").symlink_to(tmp_path / "d")
    with pytest.raises(UsageError, match="is a folder; give a file path") as e:
        write_atomic(given, "x")
    assert given in str(e.value)
    assert list((tmp_path / "d").iterdir()) == [] and not (tmp_path / "new").exists()


def test_unwritable_location_is_a_usage_error(tmp_path):
    (tmp_path / "file.txt").write_text("I am a file")
    with pytest.raises(UsageError, match=r"cannot write .*file.txt/out.json: Not a directory; choose a writable"):
        write_atomic(tmp_path / "file.txt" / "out.json", "x")
    with pytest.raises(UsageError, match="empty output path"):
        write_atomic("", "x")


def test_symlink_loop_is_a_usage_error(tmp_path):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    with pytest.raises(UsageError, match="cannot write"):
        write_atomic(tmp_path / "a", "x")
    assert (tmp_path / "a").is_symlink() and (tmp_path / "b").is_symlink()


def test_failed_write_keeps_the_old_content_and_leaves_no_temp_file(tmp_path):
    p = tmp_path / "keep.parquet"
    p.write_bytes(b"old")

    def boom(f):
        f.write(b"partial")
        raise RuntimeError("writer failed")

    with pytest.raises(RuntimeError, match="writer failed"):
        write_atomic(p, boom)
    assert p.read_bytes() == b"old" and _leftovers(tmp_path) == []


def _read_fifo(path: Path, got: list[bytes]) -> threading.Thread:
    t = threading.Thread(target=lambda: got.append(path.read_bytes()))
    t.start()
    return t


def test_fifo_is_written_in_place_not_replaced(tmp_path):
    fifo = tmp_path / "ff"
    os.mkfifo(fifo)
    got: list[bytes] = []
    t = _read_fifo(fifo, got)
    write_json_atomic(fifo, '{"report": true}\n')
    t.join(timeout=30)
    assert got == [b'{"report": true}\n']
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    df = pl.DataFrame({"a": [1, 2]})
    t = _read_fifo(fifo, got)
    (tmp_path / "ff.jsonl").symlink_to(fifo)  # the extension decides the format; the link leads to the fifo
    write_frame_atomic(df, tmp_path / "ff.jsonl")
    t.join(timeout=30)
    assert got[1] == b'{"a":1}\n{"a":2}\n'
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and _leftovers(tmp_path) == []


def test_export_through_a_link_writes_the_target(tmp_path):
    target = tmp_path / "real.parquet"
    (tmp_path / "x.parquet").symlink_to(target)
    write_frame_atomic(pl.DataFrame({"a": [1, 2, 3]}), tmp_path / "x.parquet")
    assert (tmp_path / "x.parquet").is_symlink()
    assert pl.read_parquet(target)["a"].to_list() == [1, 2, 3]


def test_cache_writer_keeps_raising_oserror(tmp_path):
    """The result cache turns a failed write into a warning: it gets the OSError, not a UsageError."""
    (tmp_path / "d").mkdir()
    with pytest.raises(IsADirectoryError):
        write_bytes_atomic(tmp_path / "d", b"x")
    write_bytes_atomic(tmp_path / "e" / "entry.dcr", b"abc")
    assert (tmp_path / "e" / "entry.dcr").read_bytes() == b"abc"


# ------------------------------------------------------------------------------------------ guard
@pytest.fixture
def data(tmp_path) -> Path:
    d = tmp_path / "data"
    (d / "train").mkdir(parents=True)
    pl.DataFrame({"text": ["a"], "label": [0]}).write_parquet(d / "train" / "s0.parquet")
    pl.DataFrame({"text": ["b"], "label": [1]}).write_parquet(d / "test.parquet")
    (tmp_path / "elsewhere").mkdir()
    return d


@pytest.mark.parametrize("inputs, output, refused", [
    (["data"], "data/test.parquet", "this file is part of the audited folder data"),
    (["data"], "data/train/new.json", "lies inside the audited folder data"),
    (["data"], "data/report.json", "lies inside the audited folder data"),
    (["data/test.parquet"], "data/test.parquet", "this is the audited file data/test.parquet"),
    (["data/*.parquet"], "data/test.parquet", "this is the audited file data/test.parquet"),
    (["data/**"], "data/train/s0.parquet", "this file is part of the audited folder data/"),
    (["data/train"], "data/train/x.html", "lies inside the audited folder data/train"),
    (["data"], "link-to-shard", "this file is part of the audited folder data"),
    (["data"], "data", "is a folder; give a file path"),
    (["data"], "elsewhere", "is a folder; give a file path"),
    # allowed: outside the data, beside a single audited file, below a hidden folder
    (["data"], "elsewhere/report.json", None),
    (["data"], "report.json", None),
    # Next to a single-file or glob PATH is among the data (the folder's next audit reads it)
    (["data/test.parquet"], "data/report.json", "lies inside the folder of data/test.parquet"),
    (["data/*.parquet"], "data/report.json", "lies inside the folder of data/"),
    (["data"], "data/.datacheck/reports/abc/report.json", None),
    (["data"], "data/.report.json", None),
])
def test_output_guard(data, monkeypatch, inputs, output, refused):
    monkeypatch.chdir(data.parent)
    Path("link-to-shard").symlink_to(data / "test.parquet")
    before = (data / "test.parquet").read_bytes()
    if refused is None:
        check_outputs({"--output": output}, inputs)
        return
    with pytest.raises(UsageError, match=refused) as e:
        check_outputs({"--output": output}, inputs)
    assert str(e.value).startswith(f"--output {output}")
    assert (data / "test.parquet").read_bytes() == before


def test_guard_allow_names_only_directly_in_the_folder(data, monkeypatch):
    monkeypatch.chdir(data.parent)
    check_outputs({"-o": "data/index.json"}, ["data"], allow_names=("index.json",))
    with pytest.raises(UsageError, match="inside the audited folder"):
        check_outputs({"-o": "data/train/index.json"}, ["data"], allow_names=("index.json",))
    with pytest.raises(UsageError, match="inside the audited folder"):
        check_outputs({"-o": "data/index.json"}, ["data"])
    check_outputs({"-o": None, "--html": None}, ["data"])  # flags not given


# ------------------------------------------------------------------------------------------ reading
_MIN = {"report_version": 1, "datacheck_version": "0.1.0", "created_at": "2026-01-01T00:00:00Z",
        "index_hash": "ab" * 16, "config_hash": "cd" * 16, "summary": {"status": "pass"}}


@pytest.mark.parametrize("doc, message", [
    ({"report_version": 1}, "not a datacheck report: missing key 'datacheck_version'"),
    ({k: v for k, v in _MIN.items() if k != "summary"}, "missing key 'summary'"),
    ({**_MIN, "summary": {}}, "missing key 'summary.status'"),
    ({**_MIN, "shards": [{"path": "a.parquet"}]}, "not a datacheck report: missing key 'content_hash'"),
    ({**_MIN, "findings": ["not an object"]}, "not a datacheck report: malformed entry"),
    ([1, 2], "top level is not an object"),
])
def test_read_report_names_what_is_missing(tmp_path, doc, message):
    p = tmp_path / "r.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(UsageError, match=message):
        read_report(p)


def test_read_report_of_a_folder_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="is a folder; give a report file"):
        read_report(tmp_path)


def test_minimal_report_reads(tmp_path):
    p = tmp_path / "r.json"
    p.write_text(json.dumps(_MIN))
    assert read_report(p).status == "pass"


# ----------------------------------------------------------------------------- replace_file: the one rename writer
@pytest.mark.parametrize("durable", [True, False])
def test_replace_file_replaces_a_link_instead_of_writing_through_it(tmp_path, durable):
    from datacheck.io.outputs import replace_file

    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    entry = tmp_path / "entry.dcr"
    entry.symlink_to(outside)
    replace_file(entry, b"new", durable=durable)
    assert not entry.is_symlink() and entry.read_bytes() == b"new"
    assert outside.read_text() == "keep"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["entry.dcr", "outside.txt"]  # no temporary file left


@pytest.mark.parametrize("failure", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_replace_file_leaves_the_old_content_and_no_temporary_file_on_failure(tmp_path, failure):
    from datacheck.io.outputs import replace_file

    entry = tmp_path / "memo.bin"
    entry.write_bytes(b"old")

    def writer(f):
        f.write(b"half")
        raise failure

    with pytest.raises(type(failure)):
        replace_file(entry, writer)
    assert entry.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["memo.bin"]


def test_cache_and_memo_write_through_replace_file(tmp_path, monkeypatch):
    """The result cache's entries and identity records and the whole-audit memo's records are
    written by io/outputs.replace_file (no temporary-file writer of their own)."""
    import datacheck.execute.cache as cache
    import datacheck.execute.rerun as rerun
    import datacheck.io.outputs as outputs

    assert cache.replace_file is outputs.replace_file and rerun.replace_file is outputs.replace_file
    for mod in (cache, rerun):
        assert not hasattr(mod, "make_temp_file") and "os.replace(" not in Path(mod.__file__).read_text()


@pytest.mark.parametrize("err", [errno.ENOLCK, errno.EOPNOTSUPP])
def test_a_file_system_without_flock_still_gets_its_atomic_write(tmp_path, monkeypatch, err):
    """replace_file takes an flock on its temporary file so --cache-prune can tell a killed writer's
    file from one being written; where there is none (no fcntl, an NFS or FUSE mount answering ENOLCK)
    the write goes on, closed then renamed, and leaves no temporary file behind."""
    def no_lock(fd, exclusive):
        raise OSError(err, "no locks here")

    monkeypatch.setattr(outputs, "_flock", no_lock)
    target = tmp_path / "report.json"
    target.write_text("old", encoding="utf-8")
    outputs.replace_file(target, "new content")
    assert target.read_text(encoding="utf-8") == "new content"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]
