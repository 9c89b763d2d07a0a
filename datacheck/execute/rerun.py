"""The whole-audit memo: a rerun of ``datacheck audit`` over unchanged inputs answered without
auditing (ccache's "direct mode" for a whole audit).

Stdlib and xxhash only (no polars, numpy, pyarrow or pydantic), so a rerun that hits costs an
interpreter start, a walk of the audited folders, the hash of every file's bytes and the writes of
the outputs.

A memo record is stored in the result cache folder (``--cache-dir``) under
``memo/v<layout>/<k[:2]>/<k>.dcm``, ``k`` the **direct key** (:func:`direct_key`), the xxh3-128 of:

- the record layout, datacheck's version and :func:`code_fingerprint` (its own source and data files),
- :func:`runtime_fingerprint`: the Python version and, for each package an audit's output depends on
  (polars, pyarrow, numpy, xxhash, polars-hash, pydantic, pandera, transformers, tokenizers, jinja2,
  PyYAML, zstandard: ``.zst`` shards, fsspec), where it is installed and the size, modification and status-change times and inode of its
  ``__init__.py`` (an upgrade or a reinstall rewrites it);
- what the caller says decides the output (the CLI: its flags but those that only choose how the work
  runs, the working folder, the ``DATACHECK_*``/``POLARS_*`` environment, the config file's path and
  the xxh3-128 of its bytes);
- the **listing** of every audited folder as discovery walks it (``os.walk`` order, hidden folders
  left out but ``.~*`` ones, as :func:`datacheck.io.discover.discover` does): each folder and regular
  file by relative name. A symlink, FIFO, device or socket anywhere in it means no memo (discovery
  gives such entries meanings that depend on what lies outside the folder).

The record holds the content hash (xxh3-128, :func:`~datacheck.io.hashing.hash_file`) and file state
(size, modification and status-change times in ns, inode) of every listed file, the content hash of
every other file the audit reads (:attr:`Snapshot.externals`: the files the config names, and the
files of folders it names, outside the listing; the dataset card above the audited folder,
:func:`datacheck.io.cardpath.card_path`, whose path the caller's part of the key holds), the listing of every folder the config names
(:attr:`Snapshot.external_folders`), and the outputs: the report's JSON text, what was printed
and the exit code. A lookup (:func:`lookup`) hits only when every named folder still lists the
recorded files and every external file and every listed file still has its recorded content hash: each file's bytes are hashed again, as a rerun through the
per-shard cache hashes every shard, unless the caller allows file states to be trusted
(``--trust-mtime``): then a file whose state equals the recorded one exactly is taken as unchanged
(the rule of :meth:`datacheck.execute.cache.ShardCache.known_hash`). The report's ``created_at`` is
the only part made anew (:func:`now_created_at`, the format of :func:`datacheck.report.build.build_report`).

A record is written (:func:`record`) only when nothing could have changed under the audit: every
file's state after the audit (and after its bytes were hashed for the record) equals its state
before, and every file was last modified at least :data:`SETTLE_NS` before the audit started (a
write within the same clock tick as the first look would leave the times unchanged: git's "racy
clean" rule). Records are written to a temporary file and renamed; one that does not check out
(magic, lengths, digest, JSON) is a miss, never trusted. The code fingerprint remembered beside them
(``memo/code/``, :func:`remember_tree_fingerprint`) carries its own digest the same way: one that does not
check out is ignored and the fingerprint computed from the files.
"""
from __future__ import annotations

import functools
import json
import os
import stat
import struct
import sys
import time
from collections.abc import Iterable
from importlib.util import find_spec
from pathlib import Path

import xxhash

from datacheck._version import __version__
from datacheck.io.hashing import hash_file, iter_file_hashes
from datacheck.io.outputs import replace_file

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing on a cached rerun's path (3 ms)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["MEMO_LAYOUT", "SETTLE_NS", "MAX_EXTERNAL_FILES", "Snapshot", "Hit", "code_fingerprint", "code_memo_dir",
           "tree_fingerprint", "remember_tree_fingerprint",
           "runtime_fingerprint", "observe", "snapshot", "direct_key", "memo_path", "lookup", "record", "now_created_at",
           "created_at_of", "external_files"]

#: Layout version of memo records; part of the direct key.
MEMO_LAYOUT = 1
_MAGIC = b"DCM1\n"
_DIGEST_LEN = 16
#: Magic of a remembered code fingerprint (:func:`remember_tree_fingerprint`): ``DCF1\n``, the 32 hex
#: digits, the xxh3-128 digest (16 bytes) of the magic, the entry's name and the digits.
_CODE_MAGIC = b"DCF1\n"
#: A file modified less than this many ns before it was stat-ed is not trusted by its state: 2 s, the
#: coarsest modification-time step of common file systems (FAT; ext4 and XFS keep ns, NFS servers
#: may round to 1 s).
SETTLE_NS = 2_000_000_000
#: A folder the config names with more files than this is not fingerprinted: no memo is recorded.
MAX_EXTERNAL_FILES = 10_000
#: The packages whose installed version changes an audit's output (see the module docstring).
RUNTIME_PACKAGES = ("polars", "pyarrow", "numpy", "xxhash", "polars_hash", "pydantic", "pandera", "transformers",
                    "tokenizers", "jinja2", "yaml", "zstandard", "fsspec")

State = tuple[int, int, int, int]

#: Content hashes this process computed while a snapshot was being recorded (absolute path -> (file
#: state, content hash)), noted by the per-shard cache's probe (:func:`observe`), so :func:`record`
#: reads no shard a second time; None while no snapshot is taken (nothing is kept then).
_seen: dict[str, tuple[tuple[Any, ...], str]] | None = None


@functools.lru_cache(maxsize=4)
def code_fingerprint(memo_dir: str | None = None) -> str:
    """xxh3-128 over datacheck's own source and data files (``.py``, ``.json``, ``.yaml``: the checks
    and the built-in schemas; sorted relative paths and bytes): :func:`tree_fingerprint` of the package,
    taken from ``memo_dir`` when given and remembered there (the same value, found without reading the
    files while none of them changed; a memo record's writer remembers it there).

    Part of every cache key: results computed by different check code never answer each other,
    even when the version string did not change (editable installs, development).
    """
    return tree_fingerprint(_package_root(), memo_dir=memo_dir)


def _package_root() -> str:
    """The folder of the ``datacheck`` package (links resolved)."""
    return str(Path(__file__).resolve().parent.parent)


def code_memo_dir(cache_dir: str | Path) -> str:
    """Where :func:`code_fingerprint` is remembered for the result cache ``cache_dir``:
    ``<cache_dir>/memo/code`` (removed by the cache's ``--cache-prune`` with the memo records)."""
    return os.path.join(os.fspath(cache_dir), "memo", "code")


def _tree_files(root: str, with_states: bool) -> list[tuple[list[str], str, tuple[int, ...]]]:
    """(relative path's parts, full path, state) of the files :func:`tree_fingerprint` reads, unsorted;
    the state (device, inode, size, modification and status-change times in ns) only ``with_states``
    (else ``()``). Raises OSError when a listed file's state cannot be read."""
    files: list[tuple[list[str], str, tuple[int, ...]]] = []
    stack: list[tuple[str, list[str]]] = [(root, [])]
    seen = {os.path.realpath(root)}
    while stack:  # one scandir a folder, no second stat
        folder, rel = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = list(it)
        except OSError:
            continue
        for e in entries:
            if e.is_dir():
                if e.name == "__pycache__":  # byte code: not walked (it doubles the entries)
                    continue
                if e.is_symlink():
                    real = os.path.realpath(e.path)
                    if real in seen:
                        continue
                    seen.add(real)
                stack.append((e.path, [*rel, e.name]))
            elif e.name.endswith((".py", ".json", ".yaml")) and e.is_file():
                state: tuple[int, ...] = ()
                if with_states:
                    st = e.stat()  # links followed, as the file's bytes are read
                    state = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
                files.append(([*rel, e.name], e.path, state))
    return files


def _states_key(root: str, files: list[tuple[list[str], str, tuple[int, ...]]]) -> str:
    """xxh3-128 (hex) of ``root``'s real path and every file's relative path and state (sorted
    :func:`_tree_files` with states): the name under which a tree's fingerprint is remembered."""
    k = xxhash.xxh3_128(os.path.realpath(root).encode("utf-8", "surrogateescape") + b"\0")
    for parts, _, state in files:
        k.update("/".join(parts).encode("utf-8", "surrogateescape") + b"\0" + struct.pack("<5q", *state))
    return k.hexdigest()


def tree_fingerprint(root: str, memo_dir: str | None = None) -> str:
    """xxh3-128 (32 hex) over the ``.py``, ``.json`` and ``.yaml`` files under folder ``root``: each
    file's path relative to ``root`` (``/``-separated), then its bytes, in sorted path order.
    ``__pycache__`` folders are left out (byte code). A link to a folder is followed (a checkout's
    ``datacheck/builtin_schemas`` links to ``schemas/``: its files are part of the code); a link to
    ``root`` or to a folder already reached through a link is not walked again (a cycle of links ends);
    a folder that cannot be listed is left out, as ``os.walk`` leaves it. Raises OSError when a listed
    file cannot be read.

    With ``memo_dir``, the value remembered there (:func:`remember_tree_fingerprint`) under the
    xxh3-128 of ``root``'s real path and every file's path and state (device, inode, size,
    modification and status-change times in ns) is taken while those are all unchanged: a stat a file
    instead of reading it (datacheck's own tree, about 200 files and 3.3 MB: 2.3 ms read and hashed,
    about 0.6 ms looked up on the 2-core development machine; once per cached rerun). Any write to a
    file changes its status-change time. An entry is trusted only when it checks out as a memo
    record does (:func:`_code_entry_value`: its magic, length, 32 hex digits and the xxh3-128 digest
    over them and the entry's own name); one that is missing, unreadable, truncated, bit-flipped,
    of an earlier layout (bare digits) or copied from another entry's name is ignored (the files are
    read). Nothing is written."""
    files = _tree_files(root, memo_dir is not None)
    files.sort(key=lambda f: f[0])
    if memo_dir is not None:
        name = _states_key(root, files)
        got = _code_entry_value(_read_regular(Path(memo_dir) / name), name)
        if got is not None:
            return got
    h = xxhash.xxh3_128()
    for parts, full, _ in files:
        h.update("/".join(parts).encode() + b"\0")
        fd = os.open(full, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            while data := os.read(fd, 1 << 20):
                h.update(data)
        finally:
            os.close(fd)
        h.update(b"\0")
    return h.hexdigest()


def remember_tree_fingerprint(root: str, memo_dir: str, fingerprint: str) -> bool:
    """Write ``fingerprint`` (:func:`tree_fingerprint` of ``root``, computed by the caller) to
    ``memo_dir`` (which must exist, a folder) under :func:`_states_key`, unless a file of the tree was
    changed less than :data:`SETTLE_NS` ago (a write within the same clock tick leaves the times
    unchanged: git's "racy clean" rule). Written as :func:`_code_entry` (the value with its digest) to a
    temporary file and renamed; True when written, False when not settled or not written (an OSError is
    not raised)."""
    try:
        files = _tree_files(root, True)
    except OSError:
        return False
    settled = time.time_ns() - SETTLE_NS
    if not all(max(state[3], state[4]) <= settled for _, _, state in files):
        return False
    files.sort(key=lambda f: f[0])
    name = _states_key(root, files)
    try:  # no fsync: a torn entry fails its digest and is only a miss
        replace_file(os.path.join(memo_dir, name), _code_entry(name, fingerprint), durable=False)
    except OSError:
        return False
    return True


def _code_entry(name: str, fingerprint: str) -> bytes:
    """The bytes of a remembered code fingerprint stored under ``name`` (:func:`_states_key`):
    :data:`_CODE_MAGIC`, the fingerprint (32 hex digits, ASCII), then the xxh3-128 digest (16 bytes) of
    the magic, ``name`` and the digits; 53 bytes. The name is in the digest so that an entry copied or
    restored under another entry's name does not check out (as a memo record holds its own key)."""
    body = _CODE_MAGIC + fingerprint.encode("ascii")
    return body + xxhash.xxh3_128_digest(_CODE_MAGIC + name.encode("ascii") + b"\0" + body[len(_CODE_MAGIC):])


def _code_entry_value(data: bytes | None, name: str) -> str | None:
    """The fingerprint a remembered entry (:func:`_code_entry`) under ``name`` holds, or None when it
    does not check out: absent, of another length (truncated, padded, the bare digits an earlier
    datacheck wrote), another magic, a digest that does not match (a bit flipped, digits edited, an
    entry of another name) or not 32 lowercase hex digits. Never trusted in part."""
    if data is None or len(data) != len(_CODE_MAGIC) + 32 + _DIGEST_LEN or not data.startswith(_CODE_MAGIC):
        return None
    digits = data[len(_CODE_MAGIC):len(_CODE_MAGIC) + 32]
    if not all(c in b"0123456789abcdef" for c in digits):
        return None
    if data != _code_entry(name, digits.decode("ascii")):
        return None
    return digits.decode("ascii")


@functools.lru_cache(maxsize=1)
def runtime_fingerprint() -> list[Any]:
    """The Python version and, for each of :data:`RUNTIME_PACKAGES`, where it is installed and the
    state of its ``__init__.py`` (None: not installed). Nothing is imported (``find_spec`` of a
    top-level name only locates it)."""
    out: list[Any] = [sys.version, sys.implementation.name]
    for name in RUNTIME_PACKAGES:
        try:
            spec = find_spec(name)
        except (ImportError, ValueError):
            spec = None
        origin = None if spec is None else spec.origin
        if origin is None:
            out.append([name, None])
            continue
        try:
            st = os.stat(origin)
            out.append([name, origin, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino])
        except OSError:
            out.append([name, origin, None])
    return out


def _state(st: os.stat_result) -> State:
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def _walk(root: str) -> tuple[list[str], list[tuple[str, State]]] | None:
    """(folders, files with their states) under ``root`` by relative name, in ``os.walk`` order with
    discovery's rule for hidden folders; None when ``root`` is no folder (a link to one is walked, as
    discovery walks a PATH) or anything in it is neither a folder nor a regular file (a symlink,
    FIFO, device or socket)."""
    try:
        if not stat.S_ISDIR(os.stat(root).st_mode):
            return None
    except OSError:
        return None
    folders: list[str] = []
    files: list[tuple[str, State]] = []
    stack = [""]
    while stack:
        rel = stack.pop()
        folders.append(rel)
        try:
            with os.scandir(os.path.join(root, rel) if rel else root) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            return None
        subs = []
        for e in entries:
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                return None
            name = f"{rel}/{e.name}" if rel else e.name
            if stat.S_ISDIR(st.st_mode):
                if not e.name.startswith(".") or e.name.startswith(".~"):
                    subs.append(name)
            elif stat.S_ISREG(st.st_mode):
                files.append((name, _state(st)))
            else:
                return None
        stack.extend(reversed(subs))
    return folders, files


def folder_listing(folder: str, skip: Iterable[str] = ()) -> list[str] | None:
    """Every file under ``folder`` (``os.walk``, links to folders not followed) as a sorted absolute
    path, but those whose real path starts with one of ``skip`` (folders ending in a separator: the
    audit's own outputs); None when there are more than :data:`MAX_EXTERNAL_FILES`."""
    skip = tuple(skip)
    out: list[str] = []
    for dirpath, _dirs, names in os.walk(folder):
        out.extend(f for f in (os.path.abspath(os.path.join(dirpath, n)) for n in names)
                   if not skip or not os.path.realpath(f).startswith(skip))
        if len(out) > MAX_EXTERNAL_FILES:
            return None
    return sorted(out)


def external_files(values: Iterable[str], anchors: Iterable[str | Path],
                   folders: list[str] | None = None) -> list[str] | None:
    """The files outside the audited folders that ``values`` (the strings of a config) may name: each
    value (and, for ``file.py:Class``, the part before the last ``:``), as given and joined to each
    of ``anchors`` (the config's folder, the working folder), and a ``~`` one expanded too (the audit
    never expands it: a config path is joined to the config's folder as written), that names an existing file, or every
    file under it when it names a folder. Absolute, sorted, without repeats. None when a named folder
    holds more than :data:`MAX_EXTERNAL_FILES` files (no memo). ``folders``: where each named folder
    (absolute) is appended."""
    found: set[str] = set()
    anchor_list = [Path(a) for a in anchors]
    for v in values:
        if not v or "\0" in v or len(v) > 4096:
            continue
        for text in {v, v.rsplit(":", 1)[0]} if ":" in v else {v}:
            p = Path(text)
            cands = [p] if p.is_absolute() else [a / p for a in anchor_list] + [p]
            if text.startswith("~"):  # the audit reads it as written; a ``~user`` form may name another
                cands.append(p.expanduser())
            for c in cands:
                try:
                    if c.is_file():
                        found.add(os.path.abspath(c))
                    elif c.is_dir():
                        if folders is not None and os.path.abspath(c) not in folders:
                            folders.append(os.path.abspath(c))
                        for dirpath, _dirs, names in os.walk(c):
                            found.update(os.path.abspath(os.path.join(dirpath, n)) for n in names)
                            if len(found) > MAX_EXTERNAL_FILES:
                                return None
                except OSError:
                    continue
    return sorted(found)


class Snapshot:
    """The audit's inputs as seen before it ran: the direct key's parts and the listing of the
    audited folders with each file's state (:func:`snapshot`).

    Attributes:
        roots: the audited folders (absolute).
        folders: for each root, its folders by relative name (:func:`_walk`).
        files: for each root, its regular files by relative name with their states.
        static: what the caller says decides the output (:func:`direct_key`).
        started_ns: when the snapshot was taken (ns since the epoch; default now).
        externals: files outside the folders that the audit reads (what the config names), with their states.
        config_raw: the config file's bytes as read for the key (the caller checks that the audit ran
            with the config these bytes give, so the config file itself need not be settled).
        external_folders: the folders the config names with their :func:`folder_listing` (a file added
            to one, e.g. a tokenizer folder's ``chat_template.jinja``, changes what the audit reads).
        external_skip: the ``skip`` of those listings (the audit's own output folders).
    """

    def __init__(self, roots: list[str], folders: list[list[str]], files: list[list[tuple[str, State]]],
                 static: dict[str, Any], started_ns: int | None = None):
        self.roots = roots
        self.folders = folders
        self.files = files
        self.static = static
        self.started_ns = time.time_ns() if started_ns is None else started_ns
        self.externals: list[tuple[str, State]] = []
        self.config_raw: bytes | None = None
        self.external_folders: list[tuple[str, list[str]]] = []
        self.external_skip: list[str] = []

    def add_externals(self, paths: Iterable[str]) -> bool:
        """Add ``paths`` (absolute) with their current states to :attr:`externals`; False when one
        cannot be stat-ed or is no regular file (no memo)."""
        for path in paths:
            try:
                st = os.stat(path)
            except OSError:
                return False
            if not stat.S_ISREG(st.st_mode):
                return False
            self.externals.append((path, _state(st)))
        return True

    def add_external_folders(self, folders: Iterable[str], skip: Iterable[str] = ()) -> bool:
        """Add each of ``folders`` (absolute) with its :func:`folder_listing` to :attr:`external_folders`;
        False when one holds too many files or cannot be walked (no memo)."""
        self.external_skip = list(skip)
        for folder in folders:
            listing = folder_listing(folder, self.external_skip)
            if listing is None:
                return False
            self.external_folders.append((folder, listing))
        return True

    def key(self, memo_dir: str | None = None) -> str:
        """The direct key (:func:`direct_key`; ``memo_dir``: where :func:`code_fingerprint` is remembered)."""
        return direct_key(self.static, self.roots, self.folders, self.files, memo_dir=memo_dir)


def observe(path: str, state: tuple[Any, ...], content_hash: str) -> None:
    """Note that the local file ``path`` held bytes of ``content_hash`` (:func:`~datacheck.io.hashing.hash_file`)
    while its state was ``state`` before and after they were hashed; kept only while a snapshot is
    being recorded (:func:`record` then takes the hash instead of reading the file again)."""
    if _seen is not None:
        _seen[os.path.abspath(path)] = (tuple(state), content_hash)


def snapshot(roots: list[str], static: dict[str, Any]) -> Snapshot | None:
    """Walk the audited folders ``roots`` (each an existing folder, not a link); None when one is not
    or holds an entry that is neither a folder nor a regular file (no memo for such an audit).
    Content hashes noted by :func:`observe` from now on serve the next :func:`record`."""
    global _seen
    _seen = {}
    folders, files = [], []
    for r in roots:
        got = _walk(r)
        if got is None:
            return None
        folders.append(got[0])
        files.append(got[1])
    return Snapshot(roots=[os.path.abspath(r) for r in roots], folders=folders, files=files, static=static)


def direct_key(static: dict[str, Any], roots: list[str], folders: list[list[str]],
               files: list[list[tuple[str, State]]], memo_dir: str | None = None) -> str:
    """xxh3-128 (hex) of the memo layout, datacheck's version, :func:`code_fingerprint`,
    :func:`runtime_fingerprint`, ``static`` (what the caller says decides the output), each root as
    given and with its links resolved, and the listing (folders and file names, not their states)
    of each root. ``memo_dir``: where :func:`code_fingerprint` is remembered (the key is the same)."""
    doc = {"layout": MEMO_LAYOUT, "datacheck": __version__, "code": code_fingerprint(memo_dir),
           "runtime": runtime_fingerprint(), "static": static, "roots": roots,
           "real": [os.path.realpath(r) for r in roots],
           "listing": [[fo, [name for name, _ in fi]] for fo, fi in zip(folders, files)]}
    blob = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return xxhash.xxh3_128_hexdigest(blob.encode("utf-8", "surrogateescape"))


def memo_path(cache_dir: str | Path, key: str) -> Path:
    """``<cache_dir>/memo/v<layout>/<key[:2]>/<key>.dcm``."""
    return Path(cache_dir) / "memo" / f"v{MEMO_LAYOUT}" / key[:2] / f"{key}.dcm"


def now_created_at() -> str:
    """A report's ``created_at`` for now: UTC, whole seconds, ISO 8601 with ``+00:00`` (what
    ``datetime.now(timezone.utc).replace(microsecond=0).isoformat()`` gives, the format of
    :func:`datacheck.report.build.build_report`, without importing ``datetime``)."""
    return created_at_of(time.time())


def created_at_of(seconds: float) -> str:
    """:func:`now_created_at` for ``seconds`` since the epoch (whole seconds: the fraction is dropped)."""
    t = time.gmtime(seconds)
    return f"{t.tm_year:04d}-{t.tm_mon:02d}-{t.tm_mday:02d}T{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}+00:00"


class Hit:
    """What a memo record gives back: the report's JSON text with a new ``created_at``, what the
    audit printed on stdout (``created_at`` made anew there too where it was printed), where the
    report was stored, the exit code, and what it printed on stderr. A plain class (equal when every
    field is): a ``NamedTuple`` is built by ``typing`` and ``eval`` at import, 1-2 ms of a cached rerun."""

    __slots__ = ("report_text", "stdout", "stored", "exit_code", "stderr")

    def __init__(self, report_text: str, stdout: str, stored: str, exit_code: int, stderr: str = ""):
        self.report_text = report_text
        self.stdout = stdout
        self.stored = stored
        self.exit_code = exit_code
        self.stderr = stderr

    def _fields(self) -> tuple[str, str, str, int, str]:
        return (self.report_text, self.stdout, self.stored, self.exit_code, self.stderr)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Hit) and self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return (f"Hit(report_text=<{len(self.report_text)} chars>, stdout=<{len(self.stdout)} chars>, "
                f"stored={self.stored!r}, exit_code={self.exit_code!r}, stderr={self.stderr!r})")


def _encode(header: dict[str, Any], blobs: list[bytes]) -> bytes:
    offsets, pos = [], 0
    for b in blobs:
        offsets.append([pos, len(b)])
        pos += len(b)
    head = json.dumps({**header, "blobs": offsets}, separators=(",", ":"), ensure_ascii=False).encode("utf-8",
                                                                                                    "surrogateescape")
    body = b"".join([_MAGIC, struct.pack("<Q", len(head)), head, *blobs])
    return body + xxhash.xxh3_128_digest(body)


def _decode(data: bytes) -> tuple[dict[str, Any], list[bytes]] | None:
    if len(data) < len(_MAGIC) + 8 + _DIGEST_LEN or not data.startswith(_MAGIC):
        return None
    body, digest = data[:-_DIGEST_LEN], data[-_DIGEST_LEN:]
    if xxhash.xxh3_128_digest(body) != digest:
        return None
    (hlen,) = struct.unpack_from("<Q", body, len(_MAGIC))
    start = len(_MAGIC) + 8
    if start + hlen > len(body):
        return None
    try:
        header = json.loads(body[start:start + hlen].decode("utf-8", "surrogateescape"))
        rest = body[start + hlen:]
        blobs = [rest[off:off + n] for off, n in header["blobs"]]
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(header, dict) or header.get("layout") != MEMO_LAYOUT:
        return None
    return header, blobs


def _read_regular(p: Path) -> bytes | None:
    """The bytes of ``p`` when it is a regular file (never through a link, never blocking on a FIFO)."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(p, flags)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(fd, "rb") as f:
            fd = -1
            return f.read()
    except OSError:
        return None
    finally:
        if fd >= 0:
            os.close(fd)


def _hash(path: str) -> str | None:
    try:
        return hash_file(path)[0]
    except OSError:
        return None


def _hashes_match(pairs: list[tuple[str, str]]) -> bool:
    """Whether every (path, content hash) of ``pairs`` still holds: the files are hashed in order
    (:func:`~datacheck.io.hashing.iter_file_hashes`, several read at once) and the first one that
    differs or cannot be read ends the reading (False)."""
    got = iter_file_hashes([p for p, _ in pairs])
    try:
        for (_, want), h in zip(pairs, got):
            if isinstance(h, OSError) or h[0] != want:
                return False
        return True
    finally:
        got.close()


def lookup(cache_dir: str | Path, snap: Snapshot, *, trust_states: bool = False,
           corrupt: list[str] | None = None) -> Hit | None:
    """The memo's answer for the audit ``snap`` describes, or None (a miss: no record, a record that
    does not check out, an external or listed file whose content hash changed, or a file whose
    bytes cannot be read). ``trust_states``: a listed file whose state equals the recorded one is
    not hashed (``--trust-mtime``); otherwise every file's bytes are hashed. ``corrupt``: where the
    record's path and why it is not trusted are appended when a record stands there but does not
    check out (truncated, garbage, another key's, entries of the wrong shape): only a miss, said by
    the caller."""
    key = snap.key(code_memo_dir(cache_dir))
    path = memo_path(cache_dir, key)
    data = _read_regular(path)
    if data is None:
        return None
    try:
        hit = _answer(data, key, snap, trust_states)
    except (ValueError, KeyError, TypeError, IndexError, AttributeError, struct.error) as exc:
        hit = f"entries of an unexpected shape ({type(exc).__name__})"
    if isinstance(hit, str):
        if corrupt is not None:
            corrupt.append(f"{path} ({hit})")
        return None
    return hit


def _answer(data: bytes, key: str, snap: Snapshot, trust_states: bool) -> Hit | str | None:
    """:func:`lookup` of the record ``data`` read for ``key``: the hit, None (an input changed), or why
    the record does not check out (a string)."""
    got = _decode(data)
    if got is None:
        return f"{len(data)} bytes that are no whole record: truncated or not written by datacheck"
    header, blobs = got
    if header.get("key") != key:
        return "the record of another key"
    skip = header.get("ext_skip", [])
    for folder, listing in header.get("ext_folders", []):
        if not isinstance(folder, str):
            return "a named folder that is no path"
        if folder_listing(folder, skip) != listing:
            return None
    recorded = header["files"]
    if len(recorded) != len(snap.roots):
        return "another number of audited folders"
    to_hash: list[tuple[str, str]] = [(path, h) for path, h in header["externals"]]
    for root, now, then in zip(snap.roots, snap.files, recorded):
        if len(now) != len(then):
            return None
        for (name, state), (name2, size, mtime, ctime, ino, h) in zip(now, then):
            if name != name2 or state[0] != size:
                return None
            if not (trust_states and tuple(state) == (size, mtime, ctime, ino)):
                to_hash.append((os.path.join(root, name), h))
    if not all(isinstance(p, str) and isinstance(h, str) for p, h in to_hash):
        return "file entries that are no paths and hashes"
    if header.get("exit_code") not in (0, 1):  # only an audit that exited 0 or 1 is recorded
        return f"exit code {header.get('exit_code')!r}"
    if not _hashes_match(to_hash):
        return None
    try:
        text = blobs[0].decode("utf-8")
        printed = text if header["stdout_is_report"] else blobs[1].decode("utf-8", "surrogateescape")
        errors = blobs[2].decode("utf-8", "surrogateescape")
        at, old = int(header["created_at_at"]), json.dumps(header["created_at"])
    except (IndexError, KeyError, TypeError, ValueError, UnicodeDecodeError):
        return "outputs that cannot be read back"
    if text[at:at + len(old)] != old:
        return "a report whose created_at is not where it was recorded"
    report_text = text[:at] + json.dumps(now_created_at()) + text[at + len(old):]
    return Hit(report_text=report_text, stdout=report_text if header["stdout_is_report"] else printed,
               stored=str(header["stored"]), exit_code=int(header["exit_code"]), stderr=errors)


def record(cache_dir: str | Path, snap: Snapshot, *, report_text: str, created_at: str, stdout: str, stored: str,
           exit_code: int, stderr: str = "") -> bool:
    """Store what the audit ``snap`` describes gave (its report's JSON text, whose ``created_at`` is
    ``created_at``; what it printed on stdout and on stderr; where it stored the report; its exit
    code) under its direct key,
    with the content hashes of its external files and of every listed file (a file whose hash the
    audit noted with :func:`observe` for its current state is not read again). Nothing is stored (False)
    when one of those files changed since its state was taken, was modified less than :data:`SETTLE_NS`
    before the snapshot, cannot be read, or the report's ``created_at`` does not occur exactly once in its text; a
    failed write is ignored (the next rerun audits)."""
    slot = f'\n  "created_at": {json.dumps(created_at)},\n'
    if report_text.count(slot) != 1:
        return False
    at = report_text.index(slot) + len('\n  "created_at": ')
    stdout_is_report = stdout == report_text
    if (not stdout_is_report and created_at in stdout) or created_at in stderr:  # a printed one would go stale
        return False
    global _seen
    seen, _seen = _seen or {}, None

    def settled_hash(path: str, state: State) -> str | None:
        """The content hash of ``path`` when its state is ``state`` before and after the hash and it
        was last modified :data:`SETTLE_NS` or more before the snapshot; else None."""
        if state[1] > snap.started_ns - SETTLE_NS:
            return None
        noted = seen.get(path)
        h = noted[1] if noted is not None and noted[0] == tuple(state) else _hash(path)
        try:
            after = _state(os.stat(path))
        except OSError:
            return None
        return h if after == tuple(state) else None

    hashed: list[list[Any]] = []
    for root, files in zip(snap.roots, snap.files):
        out = []
        for name, state in files:
            h = settled_hash(os.path.join(root, name), state)
            if h is None:
                return False
            out.append([name, *state, h])
        hashed.append(out)
    ext = []
    for path, state in dict(snap.externals).items():
        h = settled_hash(path, state)
        if h is None:
            return False
        ext.append([path, h])
    for folder, listing in snap.external_folders:  # a file added or removed while the audit ran: no record
        if folder_listing(folder, snap.external_skip) != listing:
            return False
    key = snap.key(code_memo_dir(cache_dir))
    header = {"layout": MEMO_LAYOUT, "key": key, "files": hashed, "externals": ext, "stored": str(stored),
              "ext_folders": [[f, listing] for f, listing in snap.external_folders], "ext_skip": snap.external_skip,
              "exit_code": int(exit_code), "created_at": created_at, "created_at_at": at,
              "stdout_is_report": stdout_is_report}
    # printed text may name a path given on the command line whose bytes are not UTF-8 (held as lone
    # surrogates): stored as those bytes, and decoded back the same way
    data = _encode(header, [report_text.encode("utf-8"), b"" if stdout_is_report else
                            stdout.encode("utf-8", "surrogateescape"), stderr.encode("utf-8", "surrogateescape")])
    p = memo_path(cache_dir, key)
    try:
        Path(cache_dir).mkdir(parents=True, exist_ok=True)  # the folder the user named (a link to one is fine)
        for d in (p.parent.parent.parent, p.parent.parent, p.parent):  # memo/, memo/v<n>/, memo/v<n>/<xx>/
            try:
                os.mkdir(d)
            except FileExistsError:
                pass
            if not stat.S_ISDIR(os.lstat(d).st_mode):  # a link planted there: nothing is made through it
                return False
        replace_file(p, data, durable=False)  # no fsync: a torn record fails its digest and is only a miss
    except OSError:
        return False
    _remember_code(cache_dir)
    return True


def _remember_code(cache_dir: str | Path) -> None:
    """Remember :func:`code_fingerprint` in :func:`code_memo_dir` (its folder made as the records'
    are: never through a link planted there), for the next lookup's key."""
    d = code_memo_dir(cache_dir)
    try:
        try:
            os.mkdir(d)
        except FileExistsError:
            pass
        if not stat.S_ISDIR(os.lstat(d).st_mode):
            return
    except OSError:
        return
    remember_tree_fingerprint(_package_root(), d, code_fingerprint())
