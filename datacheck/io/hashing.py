"""Content hashes: xxh3-128 of a shard's bytes (``xxhash`` package), and the index hash.

A shard in an object store (a URL, :mod:`datacheck.io.stores`) is hashed streaming from the store, or
identified by the store's own hash of its bytes where it gives one (``md5:``/``sha256:``; the rules and
why they are safe: :mod:`datacheck.io.stores`).

Stored hashes are always of bytes or of a canonical encoding, never a dataframe library's
internal row hash (those change between versions).
"""
from __future__ import annotations

import json
import mmap
import os
import stat
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import xxhash

from datacheck.io.stores import filesystem, hash_object, is_url, object_state, store_checksum
from datacheck.model.constants import HASH_ALGORITHM

__all__ = ["hash_file", "hash_files", "hash_bytes", "index_hash", "file_state", "iter_file_hashes"]

#: bytes read at a time, into one reused buffer: a fresh 16 MiB ``bytes`` per read cost three times
#: the CPU of hashing (allocation and page faults): 37 vs 12 ms for a 125 MiB file
_CHUNK = 1 << 20


def _page_buffer(size: int) -> memoryview:
    """A fresh writable buffer of ``size`` bytes (> 0) that starts on a page boundary: an anonymous
    private mapping (``mmap``; private, so a forked worker never writes into its parent's buffer).

    Why aligned: the kernel copies a read out of the page cache (whose pages are page-aligned) into
    the buffer, and that copy's speed depends on where the buffer starts. A ``bytearray`` of 1 MiB is
    a block of its own from glibc's ``mmap``, starting 16 bytes past a page boundary; on the 2-core
    development machine (AMD EPYC) the reads of a 105 MiB file into such a buffer took 41 ms, into
    the same buffer 32 bytes or more past the boundary, or on it, 8-9 ms (``benchmarks/bench_table.py``
    ``big256``: the content hash of a cached rerun, docs/benchmarks.md)."""
    flags = {"flags": mmap.MAP_PRIVATE} if hasattr(mmap, "MAP_PRIVATE") else {}  # Windows: private already
    return memoryview(mmap.mmap(-1, size, **flags))


#: each thread's reused :func:`_page_buffer` for :func:`_update_from` (a thread runs one read at a time)
_thread_buffers = threading.local()


def _thread_buffer(size: int) -> memoryview:
    """This thread's page-aligned buffer of ``size`` bytes (:func:`_page_buffer`), made once and reused
    (a fresh mapping for every file costs its page faults again)."""
    view: memoryview | None = getattr(_thread_buffers, "view", None)
    if view is None or len(view) != size:
        view = _thread_buffers.view = _page_buffer(size)
    return view


def _update_from(h: "xxhash.xxh3_128", path: str | Path) -> int:
    """Feed the bytes of ``path`` to ``h``; returns their count. Raises OSError."""
    view = _thread_buffer(_CHUNK)
    size = 0
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(view):
            h.update(view[:n])
            size += n
    return size


#: threads :func:`iter_file_hashes` reads with at most (the caller's and a helper). Measured on the
#: 2-core development machine, files in the page cache, medians of 11: f9 of benchmarks/bench_table.py
#: (9 files, 143 MB) took 23-28 ms to hash one by one and 15-17 ms with two threads while the other core
#: was idle, big256 (one 105 MB file, read in turns) 17-21 and 11-12.5 ms, chat (10 files, 18 MB) 3.4
#: and 2.3 ms, for 10-25 % more CPU. With the other core busy two threads gain nothing and cost that
#: CPU (and as much wall: a thread switch for every chunk read in turns), hence :func:`_threads_available`.
_THREADS = 2


#: Linux's instantaneous scheduler counts (``proc(5)``: its fourth field is "currently runnable
#: kernel scheduling entities / entities that exist", the reading process among the runnable ones)
_LOADAVG = "/proc/loadavg"


def _others_running() -> float | None:
    """How many threads of other processes want a core right now: the runnable count of
    :data:`_LOADAVG` less this process's one, or None where the file is missing or unreadable (not
    Linux). Right now, not the 1-minute load average: that average still counts a job that ended a
    second ago (a finished audit, a build step), which left the cores idle when this one starts."""
    try:
        with open(_LOADAVG, "rb") as f:
            running = int(f.read().split()[3].split(b"/")[0])
    except (OSError, ValueError, IndexError):
        return None
    return max(0, running - 1)


def _threads_available() -> int:
    """Threads for :func:`iter_file_hashes`: :data:`_THREADS`, or 1 where a second one would find no
    idle core: the cores this process may run on, less the one the caller runs on, less the threads of
    other processes runnable right now (:func:`_others_running`), is under 1; where that count is
    unknown, the cores less the 1-minute load average, as ``make -l`` judges it, is under 1; or the
    platform has no ``os.preadv`` (Windows)."""
    if not hasattr(os, "preadv"):
        return 1
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    others = _others_running()
    if others is not None:
        return max(1, min(_THREADS, cores, int(cores - others)))
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # no load average (Windows): as many threads as cores allow
        load = 0.0
    return max(1, min(_THREADS, cores, 1 + int(cores - load)))


#: seconds a thread of :func:`iter_file_hashes` waits before it looks again at what it waits for (it is
#: woken at once by the change it waits for; the timeout only bounds a wait whose wake-up was missed)
_WAIT_S = 0.05


class _Job:
    """One file of :func:`iter_file_hashes`: chunk ``k`` is bytes ``[k*_CHUNK, (k+1)*_CHUNK)`` of the
    size the file had when opened; a thread claims the next chunk (:attr:`claimed`), reads it, and
    feeds it to the hash when ``turn == k``, so the hash sees the bytes in order whoever read them."""

    __slots__ = ("index", "path", "owner", "fd", "size", "chunks", "claimed", "turn", "turn_waiters", "h", "error",
                 "changed", "serial", "users", "consumed")

    def __init__(self, index: int, path: str | Path, owner: int):
        self.index = index
        self.path = path
        self.owner = owner  # the thread that opened it: it reads the file's chunks before any other work
        self.fd = -1
        self.size = 0
        self.chunks = 0
        self.claimed = 0
        self.turn = 0
        self.turn_waiters = 0  # threads waiting for a turn of this file (woken when the turn moves)
        self.h = xxhash.xxh3_128()
        self.error: OSError | None = None
        self.changed = False  # a chunk came back shorter than the size at open: read again, by the caller alone
        self.serial = False  # not a regular file (a FIFO): read on from its position, by the caller alone
        self.users = 0  # threads holding a claimed chunk (reading ``fd``)
        self.consumed = False  # the caller is done with it: the last user closes ``fd``

    def stopped(self) -> bool:
        return self.error is not None or self.changed


class _Reader:
    """What the threads of :func:`iter_file_hashes` share (every field under :attr:`cond`). Files are
    opened in order, each by the first thread that needs work, at most :attr:`AHEAD` past the one the
    caller waits for (a bounded number of open descriptors). A thread with nothing to read on the
    file it is on prefers a file nobody has started (so several files are read at once, each by one
    thread, without waiting for turns), else joins a started file that has chunks left (one big file
    is read by all threads, in turns)."""

    #: files opened ahead of the one the caller waits for
    AHEAD = 2

    def __init__(self, paths: Sequence[str | Path]):
        self.paths = paths
        self.jobs: dict[int, _Job] = {}
        self.cond = threading.Condition()
        self.opened = 0  # files opened so far, in order
        self.current = 0  # the file the caller waits for
        self.cancelled = False  # the caller stopped: the helpers return
        self.helper_failed = False  # a helper died of an unexpected error: the caller reads alone

    def gone(self, job: _Job) -> bool:
        return job.stopped() or self.cancelled or self.helper_failed

    def _open_next(self, me: int) -> _Job:
        job = self.jobs[self.opened] = _Job(self.opened, self.paths[self.opened], me)
        self.opened += 1
        try:
            # never blocks here, under the lock (a FIFO without a writer would block open() itself)
            job.fd = os.open(job.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0))
            st = os.fstat(job.fd)
            if stat.S_ISREG(st.st_mode):
                job.size = st.st_size
                job.chunks = -(-st.st_size // _CHUNK)
            else:  # read by the caller alone, blocking as hash_file reads it
                os.set_blocking(job.fd, True)
                job.serial = True
        except OSError as exc:
            job.error = exc
        if job.chunks > 1:  # chunks another thread with nothing to do may join
            self.cond.notify_all()
        return job

    @staticmethod
    def _claim(job: _Job) -> int | None:
        if job.claimed < job.chunks and not job.stopped():
            job.claimed += 1
            job.users += 1
            return job.claimed - 1
        return None

    def _close_if_done(self, job: _Job) -> None:
        if job.consumed and job.users == 0:
            if job.fd >= 0:
                os.close(job.fd)
                job.fd = -1
            self.jobs.pop(job.index, None)

    def _next_work(self, me: int) -> tuple[_Job, int] | None:
        """The next chunk thread ``me`` reads: of a file it started (the lowest first), else the first
        chunk of the next unopened file (within :attr:`AHEAD` of the caller's; thread ``me`` starts it),
        else the next chunk of the lowest started file that has one left (joining another thread there)."""
        jobs = sorted(self.jobs.values(), key=lambda j: j.index)
        for job in jobs:
            if job.owner == me and not job.consumed:
                k = self._claim(job)
                if k is not None:
                    return job, k
        while self.opened < len(self.paths) and self.opened <= self.current + self.AHEAD:
            job = self._open_next(me)
            k = self._claim(job)
            if k is not None:
                return job, k
        for job in jobs:
            if not job.consumed:
                k = self._claim(job)
                if k is not None:
                    return job, k
        return None

    def _work(self, job: _Job, k: int, view: memoryview) -> None:
        """Read claimed chunk ``k`` of ``job`` into ``view``, wait for its turn, feed it to the hash."""
        want = min(_CHUNK, job.size - k * _CHUNK)
        n, error = -1, None
        try:
            n = os.preadv(job.fd, [view[:want]], k * _CHUNK)
        except OSError as exc:
            error = exc
        ok = False
        with self.cond:
            if error is not None:
                job.error = job.error or error
            else:
                job.turn_waiters += 1
                while job.turn != k and not self.gone(job):
                    self.cond.wait(_WAIT_S)
                job.turn_waiters -= 1
                if not self.gone(job):
                    ok = n == want
                    job.changed = not ok
            if not ok:
                job.users -= 1
                self._close_if_done(job)
                self.cond.notify_all()
                return
        job.h.update(view[:n])  # only the thread whose turn it is touches the hash
        with self.cond:
            job.turn = k + 1
            job.users -= 1
            self._close_if_done(job)
            if job.turn_waiters or job.turn == job.chunks:  # wake only who waits for it: a switch costs
                self.cond.notify_all()

    def helper(self, me: int) -> None:
        """Helper thread ``me`` (1, 2, ...): read what :meth:`_next_work` gives until every file is
        opened and every chunk claimed, or the caller stops."""
        view = _page_buffer(_CHUNK)
        try:
            while True:
                with self.cond:
                    while True:
                        if self.cancelled:
                            return
                        got = self._next_work(me)
                        if got is not None:
                            break
                        if self.opened == len(self.paths):
                            return  # every file opened, every chunk claimed
                        self.cond.wait(_WAIT_S)
                self._work(*got, view)
        except BaseException:
            with self.cond:
                self.helper_failed = True
                self.cond.notify_all()
            raise

    def result(self, i: int, view: memoryview) -> tuple[str, int] | OSError:
        """File ``i``'s (hash, size) or error; the calling thread reads chunks of file ``i`` (or, while
        the others hold them, other work) until file ``i`` is hashed."""
        with self.cond:
            self.current = i
            self.cond.notify_all()
            while self.opened <= i:
                self._open_next(0)
            job = self.jobs[i]
        try:
            while job.error is None and not job.serial:
                with self.cond:
                    while True:
                        got: tuple[_Job, int] | None = None
                        if self.gone(job) or job.turn == job.chunks:
                            break
                        got = self._next_work(0)
                        if got is not None:
                            break
                        self.cond.wait(_WAIT_S)
                if got is None:
                    break
                self._work(*got, view)
            if job.error is not None:
                return job.error
            if job.serial:  # read on from where it stands (a FIFO has no offsets)
                return self._read_on(job, view, None)
            if job.turn != job.chunks:  # truncated while read (or a helper failed): again from the start, alone
                job.h = xxhash.xxh3_128()
                return self._read_on(job, view, 0)
            return self._read_on(job, view, job.size)  # and on past the size at open, as hash_file reads
        except OSError as exc:
            return exc
        finally:
            with self.cond:
                job.consumed = True
                self._close_if_done(job)
                self.cond.notify_all()

    @staticmethod
    def _read_on(job: _Job, view: memoryview, pos: int | None) -> tuple[str, int]:
        """Feed ``job``'s hash the bytes from ``pos`` (None: from the descriptor's position, the start)
        to the end; returns (hash, ``pos`` + the bytes read). Raises OSError."""
        total = pos or 0
        while n := (os.readv(job.fd, [view]) if pos is None else os.preadv(job.fd, [view], total)):
            job.h.update(view[:n])
            total += n
        return f"{HASH_ALGORITHM}:{job.h.hexdigest()}", total


def _regular_or_missing(path: str | Path) -> bool:
    """Whether ``path`` is a regular file (links followed), or cannot be stat'ed (its open then fails
    and says why, on any path)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return True


def iter_file_hashes(paths: Sequence[str | Path]) -> Iterator[tuple[str, int] | OSError]:
    """For each local file of ``paths``, in order: what :func:`hash_file` gives for it (``"xxh3-128:<hex>"``,
    size in bytes), or the ``OSError`` it would raise (a file that cannot be opened or read): the same
    digest, byte for byte.

    Faster than one by one where a second core is free: the calling thread and a helper (at most
    :data:`_THREADS` threads, no more than the cores this process may use) read chunks of
    :data:`_CHUNK` bytes with ``os.preadv`` into their own buffers; the copy out of the page cache and
    xxh3's update both release the GIL. Several files are read at once, each by one thread; one big
    file (or the last one) by both, taking its chunks in turn, each chunk fed to the file's hash in
    order (:class:`_Reader`). A file is read to the end it had when opened and on to the end it has
    then (bytes appended meanwhile are read, as :func:`hash_file` reads to the end); one that came back
    shorter (truncated while read) is read again from its start on the same descriptor. Where a path
    is not a regular file when the call starts (a FIFO, a device: ``os.stat``), every file is read by
    the calling thread alone with :func:`hash_file` (a FIFO read to its end, its open waiting for a
    writer as :func:`hash_file`'s does); one that becomes a FIFO after that is opened without waiting
    for a writer and read on from its start (one that has none reads as empty: a digest that matches
    no regular file's but an empty one's).

    Closing the iterator early (a caller that stops at the first mismatch) stops the helper: nothing
    is read on and every descriptor is closed.
    """
    threads = _threads_available() if len(paths) else 1
    if threads > 1 and not all(map(_regular_or_missing, paths)):
        threads = 1
    if threads < 2:
        for p in paths:
            try:
                yield hash_file(p)
            except OSError as exc:
                yield exc
        return
    reader = _Reader(paths)
    helpers = [threading.Thread(target=reader.helper, args=(t,), name="datacheck-hash", daemon=True)
               for t in range(1, threads)]
    for th in helpers:
        th.start()
    view = _page_buffer(_CHUNK)
    try:
        for i in range(len(paths)):
            yield reader.result(i, view)
    finally:
        with reader.cond:
            reader.cancelled = True
            reader.cond.notify_all()
        for th in helpers:
            th.join()
        for job in reader.jobs.values():  # files opened ahead of a caller that stopped early
            if job.fd >= 0:
                os.close(job.fd)
                job.fd = -1


def hash_bytes(data: bytes) -> str:
    """``"xxh3-128:<32 hex>"`` of ``data``."""
    return f"{HASH_ALGORITHM}:{xxhash.xxh3_128_hexdigest(data)}"


def hash_file(path: str | Path) -> tuple[str, int]:
    """Stream ``path`` through xxh3-128. Returns (``"xxh3-128:<hex>"``, size in bytes).

    Raises:
        OSError: the file cannot be read (the caller reports the shard as unreadable).
    """
    h = xxhash.xxh3_128()
    size = _update_from(h, path)
    return f"{HASH_ALGORITHM}:{h.hexdigest()}", size


def _hash_url(url: str, companions: list[str], bytes_only: bool) -> tuple[str, int]:
    fs, p = filesystem(url)
    paths = [*companions, p]
    try:
        if len(paths) == 1 and not bytes_only:
            info = fs.info(paths[0])  # type: ignore[attr-defined]
            checksum = store_checksum(fs, paths[0], info)
            if checksum is not None:
                return checksum, int(info.get("size") or 0)
        return hash_object(fs, paths)
    except OSError as exc:
        raise OSError(f"{url}: {exc.strerror or exc}") from None
    except Exception as exc:  # noqa: BLE001 - a store client's error after its retries is a failed read
        raise OSError(f"{url}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None


def hash_files(path: str | Path, companions: list[str], *, bytes_only: bool = False) -> tuple[str, int]:
    """Content hash and size of a shard as :func:`hash_file`, over every file the shard is read from:
    its ``companions`` (the files that belong to it, e.g. a Megatron ``.idx``: in the same folder, or
    keys of the same store) then its own bytes, as one stream, so a changed companion changes the hash
    (and the cache key). Which files a shard has: :func:`datacheck.formats.registry.hash_shard`.

    ``path`` may be the URL of an object in a store: its bytes are hashed streaming, or, unless
    ``bytes_only`` (the data index needs xxh3-128 of the bytes) or it has companions, the store's hash
    of the bytes is used (:func:`datacheck.io.stores.store_checksum`: ``md5:<hex>``/``sha256:<hex>``,
    no data read).

    Raises:
        OSError: a file cannot be read (for a URL: after the store client's retries; the message names it).
    """
    if isinstance(path, str) and is_url(path):
        return _hash_url(path, companions, bytes_only)
    files = [*(Path(c) for c in companions), Path(path)]
    h = xxhash.xxh3_128()
    size = sum(_update_from(h, p) for p in files)
    return f"{HASH_ALGORITHM}:{h.hexdigest()}", size


def file_state(path: str | Path) -> tuple[int, int, int, int]:  # for a URL: (int, str, str, str)
    """(size in bytes, modification time in ns, status-change time in ns, inode) of ``path``: equal
    before and after a read when no writer touched the file in between (an append, a rewrite in
    place, or a replacement by rename all change one of them).

    ``path`` may be the URL of an object in a store: (size, modified, version tag, version tag) from
    a fresh metadata request (:func:`datacheck.io.stores.object_state`).

    Raises:
        OSError: the file cannot be stat'ed.
    """
    if isinstance(path, str) and is_url(path):
        fs, p = filesystem(path)
        try:
            return object_state(fs, p)  # type: ignore[return-value]
        except OSError as exc:
            raise OSError(f"{path}: {exc.strerror or exc}") from None
    st = os.stat(path)
    return st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino


def index_hash(pairs: list[tuple[str, str]]) -> str:
    """Hash of the canonical, sorted list of (relative POSIX path, content hash) pairs.

    The canonical form is compact JSON (``[["a.parquet","xxh3-128:…"],…]``, sorted by path, UTF-8).
    The same bytes give the same key on any machine; any changed byte or path gives a new key.
    Returns 32 hex digits (xxh3-128), usable as a folder name.
    """
    canon = json.dumps(sorted([list(p) for p in pairs]), separators=(",", ":"), ensure_ascii=False)
    return xxhash.xxh3_128_hexdigest(canon.encode("utf-8"))
