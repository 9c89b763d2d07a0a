"""Temporary files and folders of the output writer: named and created as ``tempfile`` makes them
(``PREFIX`` + 8 characters of ``[a-z0-9_]`` + ``SUFFIX``, exclusively, never through a link),
another name tried where one exists, and ``tempfile`` itself not imported by the writer."""
from __future__ import annotations

import os
import re
import stat
import subprocess
import sys

import pytest

from datacheck.io import outputs


def test_a_temp_file_is_new_private_and_named_like_mkstemp(tmp_path):
    fd, path = outputs._mkstemp(tmp_path, ".r.json.", ".tmp")
    os.close(fd)
    assert os.path.isabs(path) and os.path.dirname(path) == str(tmp_path)
    assert re.fullmatch(r"\.r\.json\.[a-z0-9_]{8}\.tmp", os.path.basename(path))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_make_temp_file_gets_the_umask_mode(tmp_path):
    old = os.umask(0o027)
    try:
        fd, path = outputs.make_temp_file(tmp_path, ".x.")
    finally:
        os.umask(old)
    os.close(fd)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640


def test_an_existing_name_or_link_is_never_used(tmp_path, monkeypatch):
    """The first names drawn exist (a file, a link to a file elsewhere): other names are drawn; the
    file and the link's target keep their bytes."""
    draws = iter([b"\x00" * 8, b"\x01" * 8, b"\x02" * 8])
    monkeypatch.setattr(os, "urandom", lambda n: next(draws))
    (tmp_path / "p.aaaaaaaa.tmp").write_bytes(b"keep")
    target = tmp_path / "elsewhere"
    target.write_bytes(b"target")
    (tmp_path / "p.bbbbbbbb.tmp").symlink_to(target)
    fd, path = outputs._mkstemp(tmp_path, "p.", ".tmp")
    os.close(fd)
    assert os.path.basename(path) == "p.cccccccc.tmp"
    assert (tmp_path / "p.aaaaaaaa.tmp").read_bytes() == b"keep" and target.read_bytes() == b"target"


def test_a_temp_folder_likewise(tmp_path, monkeypatch):
    draws = iter([b"\x03" * 8, b"\x04" * 8])
    monkeypatch.setattr(os, "urandom", lambda n: next(draws))
    (tmp_path / ".out-dddddddd").mkdir()
    folder = outputs.make_temp_folder(tmp_path, ".out-")
    assert folder == tmp_path / ".out-eeeeeeee" and folder.is_dir()


def test_no_name_left_is_an_os_error(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "urandom", lambda n: b"\x00" * n)
    monkeypatch.setattr(outputs, "_TEMP_TRIES", 3)
    (tmp_path / "p.aaaaaaaa").write_bytes(b"")
    with pytest.raises(FileExistsError):
        outputs._mkstemp(tmp_path, "p.", "")


def test_a_missing_folder_is_the_os_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        outputs._mkstemp(tmp_path / "missing", "p.", "")


def test_the_writer_does_not_import_tempfile():
    code = "import sys, datacheck.io.outputs; print('tempfile' in sys.modules)"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.stdout.strip() == "False", p.stderr
