"""Content hashes of files: ``iter_file_hashes`` (several threads taking each file's chunks in turn)
gives, file by file, what ``hash_file`` and xxh3-128 over the whole bytes give, and the same errors."""
from __future__ import annotations

import ctypes
import mmap
import os
import sys
import threading
import time
from pathlib import Path

import pytest
import xxhash
from conftest import examples
from fdhelp import open_fds
from hypothesis import given, settings
from hypothesis import strategies as st

from datacheck.io import hashing
from datacheck.io.hashing import hash_file, iter_file_hashes

CHUNK = hashing._CHUNK
SIZES = [0, 1, 17, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK, 3 * CHUNK + 17, 5 * CHUNK - 3]


def expected(data: bytes) -> tuple[str, int]:
    return f"xxh3-128:{xxhash.xxh3_128_hexdigest(data)}", len(data)


def write_files(folder: Path, sizes: list[int], seed: int = 0) -> list[tuple[Path, bytes]]:
    out = []
    for i, n in enumerate(sizes):
        data = (seed + i).to_bytes(8, "little") * (n // 8 + 1)
        data = bytes(b ^ (j * 31 % 251) for j, b in enumerate(data[:n])) if n < 5000 else data[:n]
        p = folder / f"f{i:03d}.bin"
        p.write_bytes(data)
        out.append((p, data))
    return out


def held(files: list[tuple[Path, bytes]]) -> int:
    """Descriptors of this process open on ``files`` (the process's other descriptors and threads are
    left aside: a file of an earlier test in this worker may be closed by one of pyarrow's I/O threads
    at any moment)."""
    return sum(open_fds(p) for p, _ in files)


def hash_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "datacheck-hash"]


@pytest.fixture(params=[1, 2, 3], ids=["1-thread", "2-threads", "3-threads"])
def threads(request, monkeypatch):
    monkeypatch.setattr(hashing, "_threads_available", lambda: request.param)
    return request.param


def test_every_size_hashes_as_the_whole_bytes(tmp_path, threads):
    files = write_files(tmp_path, SIZES)
    got = list(iter_file_hashes([p for p, _ in files]))
    assert got == [expected(data) for _, data in files]
    assert got == [hash_file(p) for p, _ in files]


def test_one_file_and_none(tmp_path, threads):
    (p, data), = write_files(tmp_path, [4 * CHUNK + 5])
    assert list(iter_file_hashes([p])) == [expected(data)]
    assert list(iter_file_hashes([])) == []


@settings(max_examples=examples(60), deadline=None)
@given(sizes=st.lists(st.integers(0, 9 * 512 + 3), max_size=7), chunk=st.sampled_from([512, 1024, 4096]),
       n_threads=st.integers(1, 3))
def test_any_sizes_any_chunk(tmp_path_factory, sizes, chunk, n_threads):
    folder = tmp_path_factory.mktemp("h")
    files = write_files(folder, sizes, seed=len(sizes))
    old = (hashing._CHUNK, hashing._threads_available)
    hashing._CHUNK, hashing._threads_available = chunk, lambda: n_threads
    try:
        got = list(iter_file_hashes([p for p, _ in files]))
    finally:
        hashing._CHUNK, hashing._threads_available = old
    assert got == [expected(data) for _, data in files]


def test_an_unreadable_file_is_its_own_error(tmp_path, threads):
    files = write_files(tmp_path, [3 * CHUNK, 10, 2 * CHUNK + 1])
    paths = [p for p, _ in files]
    gone = tmp_path / "removed.bin"  # listed, then removed before it was hashed
    folder = tmp_path / "sub"
    folder.mkdir()
    got = list(iter_file_hashes([paths[0], gone, paths[1], folder, paths[2]]))
    assert got[0] == expected(files[0][1]) and got[2] == expected(files[1][1]) and got[4] == expected(files[2][1])
    with pytest.raises(OSError) as direct:
        hash_file(gone)
    assert isinstance(got[1], FileNotFoundError) and got[1].errno == direct.value.errno
    assert isinstance(got[3], IsADirectoryError)


@pytest.mark.skipif(sys.platform != "linux" or os.geteuid() == 0, reason="root reads a mode-000 file")
def test_a_file_without_permission_is_its_own_error(tmp_path, threads):
    files = write_files(tmp_path, [CHUNK + 3, 5])
    files[0][0].chmod(0)
    got = list(iter_file_hashes([p for p, _ in files]))
    assert isinstance(got[0], PermissionError) and got[1] == expected(files[1][1])


def test_a_file_truncated_while_read_is_read_again(tmp_path, threads, monkeypatch):
    """A chunk that comes back shorter than the size at open: the file is read again from its start
    on the same descriptor, as hash_file would have read it then."""
    if threads == 1:
        pytest.skip("one thread reads as hash_file does (no preadv)")
    (p, data), (q, other) = write_files(tmp_path, [4 * CHUNK, 2 * CHUNK + 9])
    real = os.preadv
    done = []

    def truncating(fd, buffers, offset):
        if not done and os.fstat(fd).st_ino == p.stat().st_ino:
            done.append(1)
            os.truncate(p, CHUNK + 100)
        return real(fd, buffers, offset)

    monkeypatch.setattr(os, "preadv", truncating)
    got = list(iter_file_hashes([p, q]))
    assert got == [expected(data[:CHUNK + 100]), expected(other)]


def test_bytes_appended_after_open_are_read_too(tmp_path, threads, monkeypatch):
    if threads == 1:
        pytest.skip("one thread reads as hash_file does (no preadv)")
    (p, data), = write_files(tmp_path, [2 * CHUNK + 1])
    real = os.preadv
    done = []

    def appending(fd, buffers, offset):
        if not done:
            done.append(1)
            with open(p, "ab") as f:
                f.write(b"tail")
        return real(fd, buffers, offset)

    monkeypatch.setattr(os, "preadv", appending)
    assert list(iter_file_hashes([p])) == [expected(data + b"tail")]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs")
def test_a_fifo_is_read_to_its_end(tmp_path, threads):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    payload = b"fifo bytes " * 50_000

    def feed():
        with open(fifo, "wb") as f:
            f.write(payload)

    writer = threading.Thread(target=feed, daemon=True)
    got = []

    def read():
        got.extend(iter_file_hashes([fifo]))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    time.sleep(0.2)  # the reader first, waiting for a writer (with a helper thread it read as empty)
    writer.start()
    reader.join(30)
    writer.join(30)
    assert not reader.is_alive() and not writer.is_alive()
    assert got == [expected(payload)]


def test_a_fifo_in_the_list_reads_every_file_alone(tmp_path, monkeypatch):
    """A listed path that is not a regular file: every file is hashed by hash_file, one by one."""
    files = write_files(tmp_path, [2 * CHUNK + 5, 7])
    os.mkfifo(tmp_path / "pipe")
    monkeypatch.setattr(hashing, "_threads_available", lambda: 2)
    seen = []
    monkeypatch.setattr(hashing, "hash_file", lambda p: seen.append(str(p)) or ("x", 0))
    paths = [str(files[0][0]), str(tmp_path / "pipe"), str(files[1][0])]
    it = iter_file_hashes(paths)
    assert [next(it), next(it)] == [("x", 0), ("x", 0)] and seen == paths[:2]


def test_stopping_early_closes_everything(tmp_path, threads):
    files = write_files(tmp_path, [2 * CHUNK + 1] * 6)
    it = iter_file_hashes([p for p, _ in files])
    assert next(it) == expected(files[0][1])
    assert len(hash_threads()) == threads - 1
    it.close()
    assert held(files) == 0 and hash_threads() == []
    list(iter_file_hashes([p for p, _ in files]))
    assert held(files) == 0 and hash_threads() == []


def start_of(buffer) -> int:
    """The address of the first byte of a writable buffer (a memoryview, a bytearray)."""
    return ctypes.addressof(ctypes.c_char.from_buffer(buffer))


def test_every_read_lands_on_a_page_boundary(tmp_path, threads, monkeypatch):
    """Every read of hash_file and iter_file_hashes goes into a buffer that starts on a page boundary
    (the kernel's copy out of the page cache into a buffer 16 bytes past one, as a 1 MiB bytearray
    starts, took 41 ms for 105 MiB on the development machine, on one 8-9 ms); each thread reuses
    its hash_file buffer, and the digests are those of the bytes."""
    files = write_files(tmp_path, [3 * CHUNK + 5, 17, 2 * CHUNK])
    starts: list[int] = []
    real_open, real_preadv, real_readv = open, os.preadv, os.readv

    class Spy:
        def __init__(self, f):
            self.f = f

        def readinto(self, buffer):
            starts.append(start_of(buffer))
            return self.f.readinto(buffer)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

    def preadv(fd, buffers, offset):
        starts.extend(start_of(b) for b in buffers)
        return real_preadv(fd, buffers, offset)

    def readv(fd, buffers):
        starts.extend(start_of(b) for b in buffers)
        return real_readv(fd, buffers)

    monkeypatch.setattr(hashing, "open", lambda *a, **k: Spy(real_open(*a, **k)), raising=False)
    monkeypatch.setattr(os, "preadv", preadv)
    monkeypatch.setattr(os, "readv", readv)
    assert [hash_file(p) for p, _ in files] == [expected(data) for _, data in files]
    assert len(set(starts)) == 1  # one buffer for every hash_file of this thread
    assert list(iter_file_hashes([p for p, _ in files])) == [expected(data) for _, data in files]
    assert len(starts) >= 2 * (4 + 1 + 2) and all(s % mmap.PAGESIZE == 0 for s in starts)


def test_a_forked_child_hashes_in_a_buffer_of_its_own(tmp_path):
    """The reused buffer is a private mapping: a child forked after the parent hashed writes its
    reads into its own copy, and the parent's digests stay those of its files."""
    if not hasattr(os, "fork"):
        pytest.skip("no fork")
    (p, data), (q, other) = write_files(tmp_path, [2 * CHUNK + 3, 3 * CHUNK + 1], seed=5)
    assert hash_file(p) == expected(data)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: hash the other file many times while the parent hashes its own
        ok = all(hash_file(q) == expected(other) for _ in range(20))
        os.write(w, b"1" if ok else b"0")
        os._exit(0)
    os.close(w)
    got = [hash_file(p) for _ in range(20)]
    child = os.read(r, 1)
    os.close(r)
    os.waitpid(pid, 0)
    assert got == [expected(data)] * 20 and child == b"1"


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or not hasattr(os, "preadv"), reason="Linux")
@pytest.mark.parametrize(("cores", "load", "want"), [(1, 0.0, 1), (2, 0.0, 2), (2, 0.9, 2), (2, 1.0, 2), (2, 1.1, 1),
                                                     (2, 3.5, 1), (16, 4.0, 2), (16, 15.5, 1)])
def test_a_helper_only_where_a_core_is_idle(monkeypatch, tmp_path, cores, load, want):
    """Where the scheduler's instantaneous count cannot be read: the 1-minute load average."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)))
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    monkeypatch.setattr(hashing, "_LOADAVG", str(tmp_path / "missing"))
    assert hashing._threads_available() == want


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or not hasattr(os, "preadv"), reason="Linux")
@pytest.mark.parametrize(("cores", "running", "want"), [(1, 1, 1), (2, 1, 2), (2, 2, 1), (2, 5, 1), (16, 1, 2),
                                                        (16, 15, 2), (16, 16, 1), (16, 40, 1)])
def test_a_helper_where_a_core_is_idle_right_now(monkeypatch, tmp_path, cores, running, want):
    """The runnable count of /proc/loadavg (this process among them) decides, not the 1-minute average:
    right after a job that kept both cores busy ended, the average is still about 2 but the cores are
    idle, and the 105 MB shard of a cached rerun hashes in 11-12 ms with the helper against 17-21
    alone (see :data:`datacheck.io.hashing._THREADS`)."""
    fake = tmp_path / "loadavg"
    fake.write_text(f"1.98 1.40 0.90 {running}/345 12345\n")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)))
    monkeypatch.setattr(os, "getloadavg", lambda: (2.0, 2.0, 2.0))  # a busy minute just ended: not consulted
    monkeypatch.setattr(hashing, "_LOADAVG", str(fake))
    assert hashing._threads_available() == want


@pytest.mark.parametrize("text", ["", "garbage", "1.0 1.0 1.0 x/12 1\n", "1.0 1.0"])
def test_an_unreadable_scheduler_count_falls_back_to_the_load_average(monkeypatch, tmp_path, text):
    fake = tmp_path / "loadavg"
    fake.write_text(text)
    monkeypatch.setattr(hashing, "_LOADAVG", str(fake))
    assert hashing._others_running() is None


@pytest.mark.skipif(not os.path.exists("/proc/loadavg"), reason="Linux /proc")
def test_the_scheduler_count_is_read_on_linux():
    """This test's own thread is runnable while it reads: the count is known and not negative."""
    assert hashing._others_running() is not None and hashing._others_running() >= 0


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs")
def test_a_fifo_without_a_writer_never_blocks_the_others(tmp_path, monkeypatch):
    """A FIFO with no writer that was a regular file when the call looked (replaced by one after
    that) reads as empty with the helper threads: opening it does not wait for a writer, and the
    files around it are hashed."""
    files = write_files(tmp_path, [3 * CHUNK, 2 * CHUNK])
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    monkeypatch.setattr(hashing, "_threads_available", lambda: 2)
    monkeypatch.setattr(hashing, "_regular_or_missing", lambda path: True)  # as the call's own look saw it
    got = list(iter_file_hashes([files[0][0], fifo, files[1][0]]))
    assert got == [expected(files[0][1]), expected(b""), expected(files[1][1])]
