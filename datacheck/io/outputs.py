"""Where datacheck writes: the one atomic-write helper behind every file it produces, and the guard
that keeps outputs out of the audited data.

Writing (:func:`write_atomic`, used by reports, ``--html``, ``--junit``, ``inspect --export``,
``index build``, ``schema infer`` and part sidecars; its rename step, :func:`replace_file`, also
writes the result cache's entries and the whole-audit memo's records):

* a symbolic link is followed: its final target is written (the link stays a link);
* a regular file, or a new one, is written as a temporary file in the target's own folder
  (``.NAME.XXXXXXXX.lk.tmp``: discovery treats ``*.tmp`` as a temporary file, never as a shard),
  held under an exclusive ``flock`` while it is written (so a cleaner tells the file of a killed
  writer from one being written: :func:`temp_writer_gone`), fsynced, given the target's permissions (an existing file keeps its mode; a new one gets
  ``0o666`` minus the umask) and renamed over the target (``os.replace``), so a reader sees the
  old or the new content, never a part of it;
* an existing file that is not a regular file (a character device such as ``/dev/null``, a fifo,
  a terminal) and the process's own streams (``/dev/stdout``, ``/dev/stderr``, ``/dev/fd/N``,
  anything under ``/proc/``) are written directly, opened for appending, never replaced;
* an existing folder is refused (``UsageError``: "... is a folder; give a file path"), as is
  a location that cannot be written (``UsageError`` naming the path and the OS reason).

Guarding (:func:`check_outputs`): an output path that is one of the audited files, or lies inside
an audited folder, is refused before any data is read, so datacheck never overwrites a shard
nor drops its own files among the data. Paths below a hidden folder (``.datacheck/reports``, the
default report folder) are allowed: discovery never reads hidden files or folders.
"""
from __future__ import annotations

import errno
import io
import json
import os
import re
import stat
import sys
import tempfile
from collections.abc import Callable, Collection, Iterable, Mapping
from pathlib import Path

from datacheck.io.stores import is_url
from datacheck.model.errors import UsageError

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing on a cached rerun's path (3 ms)
if TYPE_CHECKING:
    from typing import BinaryIO

    import polars as pl

__all__ = ["write_atomic", "write_frame_atomic", "replace_file", "temp_writer_gone", "TEMP_LOCKED_SUFFIX", "probe_writable", "make_temp_folder", "make_temp_file", "check_outputs", "check_output_folders", "check_output_target", "Content", "os_error_message"]

#: What :func:`write_atomic` writes: text (UTF-8), bytes, or a function that writes the whole
#: content to the binary file object it is given (e.g. ``df.write_parquet``).
Content = str | bytes | Callable[["BinaryIO"], None]

# The process's own streams: written in place, whatever they point at (a pipe, a tty, a file).
_STREAM_FDS = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}
_STREAM_PREFIXES = ("/dev/fd/", "/proc/")
# Symbolic links followed at most (the Linux limit, MAXSYMLINKS = 40).
_MAX_LINKS = 40
#: The end of the name of :func:`replace_file`'s temporary files: files its writer holds an exclusive
#: ``flock`` on until it has renamed them (:func:`temp_writer_gone`).
TEMP_LOCKED_SUFFIX = ".lk.tmp"


def _stream(given: str) -> tuple[bool, int | None]:
    """(does ``given``, or a link it leads through, name one of the process's streams?, the file
    descriptor it names: 1 for ``/dev/stdout``, N for ``/dev/fd/N`` or ``/proc/self/fd/N``, else None)."""
    p = os.path.abspath(given)
    for _ in range(_MAX_LINKS):
        if p in _STREAM_FDS:
            return True, _STREAM_FDS[p]
        if p.startswith(_STREAM_PREFIXES):
            for prefix in ("/dev/fd/", "/proc/self/fd/", f"/proc/{os.getpid()}/fd/"):
                if p.startswith(prefix) and p[len(prefix):].isdigit():
                    return True, int(p[len(prefix):])
            return True, None
        if not os.path.islink(p):
            return False, None
        p = os.path.normpath(os.path.join(os.path.dirname(p), os.readlink(p)))
    return False, None


def _plan(given: str) -> tuple[str, bool, int | None, int | None]:
    """(file to write, write it directly instead of rename?, mode of an existing regular file,
    the process's own file descriptor to write to (``/dev/stdout``: 1) or None).

    Raises:
        OSError: ``EISDIR`` for a folder (or a path ending in ``/``), ``ELOOP`` for a link loop,
            or the error of ``stat``.
    """
    if given.endswith(os.sep) or (os.altsep and given.endswith(os.altsep)):
        raise IsADirectoryError(errno.EISDIR, "names a folder", given)
    is_stream, fd = _stream(given)
    if is_stream:
        return given, True, None, fd
    try:
        st = os.stat(given)  # follows symbolic links
    except FileNotFoundError:
        st = None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a folder", given)
        if not stat.S_ISREG(st.st_mode):
            return given, True, None, None
    target = os.path.realpath(given)
    if os.path.islink(target):  # realpath stops at a loop
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), given)
    return target, False, None if st is None else stat.S_IMODE(st.st_mode), None


def _put(f: BinaryIO, content: Content) -> None:
    """Write ``content`` to ``f``: text as UTF-8, where a lone surrogate (a file name that is not
    UTF-8, as Python decodes it: ``b"\\xe9"`` -> ``"\\udce9"``) is written as the escape ``\\udce9``:
    in a JSON string that is the same character again (``json.loads`` gives the name back), in any
    other text a visible escape; never a byte that is not UTF-8."""
    if isinstance(content, str):
        f.write(content.encode("utf-8", "backslashreplace"))
    elif isinstance(content, (bytes, bytearray, memoryview)):
        f.write(content)
    else:
        content(f)


def _umask() -> int:
    # os.umask is the only portable way to read it; set it back at once (the CLI is single-threaded
    # while it writes; Linux >= 4.7 shows it in /proc/self/status but that is not portable)
    umask = os.umask(0)
    os.umask(umask)
    return umask


def _new_file_mode() -> int:
    return 0o666 & ~_umask()


def _new_folder_mode() -> int:
    return 0o777 & ~_umask()


def make_temp_folder(parent: str | os.PathLike[str], prefix: str) -> Path:
    """Create a fresh temporary folder in ``parent`` with the permissions ``mkdir`` would give it.

    ``tempfile.mkdtemp`` creates its folder ``0o700``; a folder that is later renamed into place as
    an output (``clean --out``) must instead get ``0o777`` minus the umask, like any folder the
    user makes. The name is ``PREFIX`` + random characters (unique, created with ``O_EXCL``
    semantics by ``mkdtemp``).

    Args:
        parent: an existing folder to create it in.
        prefix: the start of the folder's name (e.g. ``.out.tmp-123-``: hidden, never a shard).

    Returns:
        The new folder's path.

    Raises:
        OSError: it cannot be created (the caller turns it into a ``UsageError`` naming its flag).
    """
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    try:
        os.chmod(folder, _new_folder_mode())
    except OSError:
        os.rmdir(folder)
        raise
    return folder


def make_temp_file(folder: str | os.PathLike[str], prefix: str, suffix: str = ".tmp") -> tuple[int, str]:
    """``tempfile.mkstemp`` in ``folder`` whose file gets ``0o666`` minus the umask (not ``0o600``).

    For a file that is renamed into place as an output (a cache entry shared by a team, a report).

    Returns:
        ``(fd, path)``: an open descriptor (the caller closes it) and the file's path.

    Raises:
        OSError: it cannot be created.
    """
    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=folder)
    try:
        os.fchmod(fd, _new_file_mode())
    except OSError:
        os.close(fd)
        os.unlink(tmp)
        raise
    return fd, tmp


def probe_writable(folder: str | os.PathLike[str]) -> None:
    """Prove that a file can be created in the existing ``folder``: a ``.probe-*`` file made and
    removed at once (nothing is left). Raises the ``OSError`` of the failure."""
    fd, tmp = tempfile.mkstemp(prefix=".probe-", dir=folder)
    os.close(fd)
    os.unlink(tmp)


def _fsync_dir(folder: str) -> None:
    """Make the rename durable (best effort: some file systems refuse to fsync a folder)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def replace_file(path: str | os.PathLike[str], content: Content, *, durable: bool = True,
                 mode: int | None = None) -> None:
    """Put ``content`` at ``path`` by rename, the one temporary-file writer of datacheck: a
    temporary file ``.NAME.XXXXXXXX.lk.tmp`` in ``path``'s folder (which must exist; :func:`make_temp_file`),
    held under an exclusive ``flock`` until it is renamed (best effort: none on a file system without
    them; :func:`temp_writer_gone`), given ``mode`` (None: ``0o666`` minus the umask), written, fsynced when ``durable``, then renamed over
    ``path`` (``os.replace``: a reader sees the old or the new content, never a part of it; whatever
    stands at ``path``, a file or a symbolic link, is replaced, never written through). On any failure,
    an interrupt too, the temporary file is removed and ``path`` is untouched.

    :func:`write_atomic` (every output) calls it after resolving links and devices; the result cache
    and the whole-audit memo (:mod:`datacheck.execute.cache`, :mod:`datacheck.execute.rerun`) call it on
    their own entries, without ``durable`` for records whose torn copy only reads as a miss.

    Raises:
        OSError: the file cannot be created, written or renamed (also the OS error a content writer
            such as polars wraps in its own exception: "... (os error 28)").
    """
    target = os.fspath(path)
    fd, tmp = make_temp_file(os.path.dirname(target) or ".", f".{os.path.basename(target)}.", TEMP_LOCKED_SUFFIX)
    try:
        try:  # released when the file is closed, or by the kernel when the writer dies
            locked = _flock(fd, exclusive=True)
        except OSError:  # no flock here (not POSIX, a file system without locks): told apart by age only
            locked = False
        if mode is not None:
            os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            try:
                _put(f, content)
            except OSError:
                raise
            except Exception as exc:  # a writer (polars, pyarrow) that wraps the OS error in its own type
                os_exc = _os_error_in(exc)
                if os_exc is None:
                    raise
                raise os_exc from None
            f.flush()
            if durable:
                os.fsync(f.fileno())
            if locked:
                os.replace(tmp, target)  # still locked: a cleaner never takes the file between close and rename
        if not locked:  # renamed once closed (Windows cannot rename an open file)
            os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _flock(fd: int, exclusive: bool) -> bool:
    """``flock(fd, LOCK_EX)`` (the writer: waits while a cleaner's look holds its shared lock, an
    instant) or ``flock(fd, LOCK_SH | LOCK_NB)`` (a cleaner's look): True when taken; False when another
    open file holds a conflicting lock (the look only). Raises OSError when the file system has no such
    locks (or no ``fcntl``: ``ENOLCK``); :func:`replace_file` ignores that (its file is then told apart
    by age only)."""
    try:
        import fcntl
    except ImportError:  # not POSIX
        raise OSError(errno.ENOLCK, "no flock on this platform") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def temp_writer_gone(path: str | os.PathLike[str]) -> bool | None:
    """Whether the writer of :func:`replace_file`'s temporary file ``path`` (a name ending in
    :data:`TEMP_LOCKED_SUFFIX`) is gone: True when no open file holds its ``flock`` (the writer was
    killed, even by SIGKILL: the kernel releases a dead process's locks; or it had not yet taken the
    lock, a moment after creating the file: the caller allows for that by the file's age); False while
    a writer holds it (in any process of this machine, or of another one where the file system shares
    ``flock``s, as NFS does); None when it cannot be told (no such file, not a regular file, a file
    system without ``flock``). The file is opened read-only, never through a link, never blocking."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return _flock(fd, exclusive=False)
    except OSError:
        return None
    finally:
        os.close(fd)


def _write(given: str, content: Content) -> None:
    target, direct, mode, own_fd = _plan(given)
    if direct:
        try:
            if own_fd is not None:
                # the process's own stream: write through a duplicate of its descriptor, so the
                # output shares its offset (``> file``) and order with what was printed before
                for stream in (sys.stdout, sys.stderr):
                    stream.flush()
                with os.fdopen(os.dup(own_fd), "wb") as f:
                    _put(f, content)
            else:
                with open(target, "ab") as f:
                    _put(f, content)
        except BrokenPipeError:
            pass  # the reader of a pipe went away: nothing more to deliver, not datacheck's failure
        return
    folder = os.path.dirname(target) or "."
    os.makedirs(folder, exist_ok=True)
    replace_file(target, content, mode=mode)  # an existing file keeps its mode
    _fsync_dir(folder)


def _os_error_in(exc: BaseException) -> OSError | None:
    """The OS error a library exception reports in its message (polars: "... (os error 28)"), else None."""
    m = re.search(r"\(os error (\d+)\)", str(exc))
    if m is None:
        return None
    code = int(m.group(1))
    return OSError(code, os.strerror(code))


def _usage_error(given: str, exc: OSError) -> UsageError:
    if exc.errno == errno.EISDIR:
        return UsageError(f"{given} is a folder; give a file path")
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return UsageError(f"cannot write {given}: no space left on the device (or the disk quota is used up); "
                          "nothing was written: free space or choose another location")
    return UsageError(f"cannot write {given}: {exc.strerror or exc}; choose a writable location")


def write_atomic(path: str | os.PathLike[str], content: Content, *, os_errors: bool = False) -> Path:
    """Write ``content`` to ``path`` atomically (see the module docstring for links, devices, fifos).

    Args:
        path: the file to write; its folder is created when missing.
        content: ``str`` (written as UTF-8), ``bytes``, or a function given an open binary file
            object that writes the whole content (e.g. ``lambda f: df.write_parquet(f)``).
        os_errors: raise the ``OSError`` itself instead of :class:`UsageError` (for callers that
            treat a failed write as a warning, e.g. the result cache).

    Returns:
        ``path`` as given (a link keeps its name in messages; the file written is its target).

    Raises:
        UsageError: ``path`` is an existing folder ("... is a folder; give a file path") or cannot
            be written (no permission, a parent that is a file, a link loop, disk full); the message
            names the path and the reason. Nothing is left behind: the temporary file is removed
            and an existing target keeps its old content.
        OSError: the same failures, when ``os_errors`` is True.
    """
    given = os.fspath(path)
    if not given:
        raise UsageError("empty output path; give a file path")
    try:
        _write(given, content)
    except OSError as exc:
        if os_errors:
            raise
        raise _usage_error(given, exc) from None
    return Path(given)


def check_output_target(flag: str, path: str | os.PathLike[str]) -> None:
    """Refuse, before any work, an output path :func:`write_atomic` would refuse: an empty path, an
    existing folder (or a path ending in ``/``), a symbolic link loop.

    Raises:
        UsageError: naming ``flag`` and the path ("... is a folder; give a file path").
    """
    given = os.fspath(path)
    if not given:
        raise UsageError(f"{flag}: empty path; give a file path")
    try:
        _plan(given)
    except OSError as exc:
        raise UsageError(f"{flag} {_usage_error(given, exc)}") from None


def _is_hidden_below(path: Path, folder: Path) -> bool:
    """True when ``path`` (inside ``folder``) lies below a hidden name, which discovery never reads
    (``.datacheck/``, ``.report.json``; not ``.~*``, which discovery reports as a temporary file)."""
    return any(part.startswith(".") and not part.startswith(".~") for part in path.relative_to(folder).parts)


def _inputs(paths: Iterable[str], with_folders: bool = False) -> list[tuple[str, Path]]:
    """(argument as given, resolved path) of every audited file or folder a PATH argument names.
    ``with_folders``: also the folder of each audited file (a single-file PATH or a glob match), whose
    next audit as a folder would read an output written there as a shard."""
    out: list[tuple[str, Path]] = []
    for arg in paths:
        arg = os.fspath(arg)
        if not arg or is_url(arg):  # an object-store URL: outputs are local, never inside it
            continue
        if any(ch in arg for ch in "*?["):
            import glob  # a glob PATH is never answered by the whole-audit memo: not on its path

            out += [(m, Path(os.path.realpath(m))) for m in sorted(glob.glob(arg, recursive=True))]
        elif os.path.exists(arg):
            out.append((arg, Path(os.path.realpath(arg))))
    if with_folders:
        out += sorted({(f"the folder of {arg}", real.parent) for arg, real in out if not real.is_dir()})
    return out


def check_output_folders(folders: Mapping[str, str | os.PathLike[str] | None], inputs: Iterable[str], *,
                         probe: Collection[str] = ()) -> None:
    """Refuse output *folders* (``--report-dir``, ``--cache-dir``) inside the audited data, and prove
    each one writable, before any shard is read: a folder inside an audited folder (a folder PATH, a
    folder a glob matches, or the folder of an audited file, as for :func:`check_outputs`: auditing
    that folder next would list the reports written there among the data) is refused unless it lies
    below a hidden name there (``.datacheck/``, which discovery never reads); a folder whose flag is
    in ``probe`` that cannot be created or written is refused too, so a failure is not found only
    after the whole audit (the probe leaves nothing).

    Raises:
        UsageError: naming the flag, the folder and the audited path, or the OS reason (exit code 2).
    """
    audited = _inputs(inputs, with_folders=True)
    for flag, folder in folders.items():
        if folder is None:
            continue
        target = Path(os.path.realpath(os.fspath(folder)))
        for arg, real in audited:
            if real.is_dir() and (target == real or target.is_relative_to(real)) and not _is_hidden_below(target, real):
                raise UsageError(f"{flag} {folder}: lies inside the audited data ({arg}); datacheck does not write "
                                 "among the data it audits; choose a folder outside it (or below a hidden folder "
                                 "there, e.g. .datacheck/)")
        if flag not in probe:
            continue
        created: list[Path] = []  # folders the probe makes are removed again: nothing is left if the run stops
        try:
            for d in [*reversed(target.parents), target]:
                if not os.path.lexists(d):
                    os.mkdir(d)
                    created.append(d)
            probe_writable(target)
        except OSError as exc:
            raise UsageError(f"{flag} {folder}: {_usage_error(str(folder), exc)}") from None
        finally:
            for d in reversed(created):
                try:
                    os.rmdir(d)
                except OSError:
                    pass


def check_outputs(outputs: Mapping[str, str | os.PathLike[str] | None], inputs: Iterable[str], *,
                  allow_names: Collection[str] = (), data: bool = True) -> None:
    """Refuse output paths that would overwrite or land among the audited data, before any data is read.

    Each output (symbolic links resolved) is refused when it is one of the audited files (a PATH
    that is a file, or a file a glob matches), or lies inside an audited folder (a PATH that is a
    folder, or a folder a glob matches) -- unless it lies below a hidden name there, which
    discovery never reads (the default report folder ``.datacheck/reports`` is one), or its file
    name is in ``allow_names`` (``index build`` allows ``index.json``, the metadata name discovery
    never reads as a shard, which ``[dataset] index`` points at). An existing folder as output is
    refused too (:func:`check_output_target`).

    Args:
        outputs: flag -> output path (``{"--output": "r.json", "--html": None}``); None is skipped.
        inputs: the PATH arguments (files, folders, globs) of the command.
        allow_names: file names allowed directly inside an audited folder (not over an audited file,
            nor over an existing file of another format: a MosaicML ``index.json`` is never replaced).
        data: the inputs are data (the default): the folder of an audited file (a single-file PATH or
            a glob match) counts as audited too, since auditing that folder next would read an output
            written there as a shard. False for inputs that are reports (``report``, ``merge``).

    Raises:
        UsageError: naming the flag, the output and the audited file or folder (exit code 2).
    """
    audited = _inputs(inputs, with_folders=data)
    for flag, out in outputs.items():
        if out is None:
            continue
        check_output_target(flag, out)
        target = Path(os.path.realpath(os.fspath(out)))
        for arg, real in audited:
            if target == real and not real.is_dir():
                raise UsageError(f"{flag} {out}: this is the audited file {arg}; refusing to overwrite the "
                                 "data; write the output outside the audited data")
            if real.is_dir() and target.is_relative_to(real) and target != real:
                if _is_hidden_below(target, real):
                    continue
                if target.name in allow_names and target.parent == real and not target.is_dir():
                    if target.is_file() and not _is_datacheck_file(target):
                        raise UsageError(f"{flag} {out}: an existing {target.name} that datacheck did not write "
                                         "(e.g. a MosaicML index.json, which lists the dataset's shards) is "
                                         "there; refusing to overwrite it; write the output elsewhere")
                    continue
                if target.is_file():
                    raise UsageError(f"{flag} {out}: this file is part of {_audited_folder(arg)}; refusing to "
                                     "overwrite the data; write the output outside that folder")
                raise UsageError(f"{flag} {out}: lies inside {_audited_folder(arg)}; datacheck does not "
                                 "write among the data it audits; write the output outside that folder "
                                 "(or below a hidden folder there, e.g. .datacheck/)")


def _audited_folder(arg: str) -> str:
    """How a message names an audited folder: ``"the audited folder data"``, or for the folder of an
    audited file (``"the folder of data/x.parquet"``) ``"the folder of data/x.parquet (audited data:
    its next audit reads it)"`` rather than "the audited folder the folder of ..."."""
    if arg.startswith("the folder of "):
        return f"{arg} (audited data: its next audit reads it)"
    return f"the audited folder {arg}"


def _is_datacheck_file(path: Path) -> bool:
    """True when ``path`` starts like a file datacheck writes (a data index: ``"format": "datacheck-..."``)."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    return b'"format": "datacheck' in head or b'"format":"datacheck' in head


def write_json_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` (any text: JSON, HTML, XML, YAML) to ``path`` as UTF-8, atomically.

    Delegates to :func:`datacheck.io.outputs.write_atomic`: a link is written through to its target, a
    regular file is replaced by rename from a temporary file in the same folder (fsynced), a
    device or fifo (``/dev/null``, ``/dev/stdout``) is written in place, never replaced.

    Returns:
        ``path`` as given.

    Raises:
        UsageError: ``path`` is an existing folder, or cannot be written (the message names it).
    """
    return write_atomic(path, text)


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through :func:`datacheck.io.outputs.write_atomic` (temporary file in
    the same folder, fsync, ``os.replace``; a link is written through to its target).

    Raises:
        OSError: the file cannot be written (the cache turns this into a :class:`~datacheck.execute.cache.CacheWarning`).
    """
    write_atomic(path, data, os_errors=True)


def os_error_message(given: str, exc: BaseException) -> str | None:
    """The usage-error message for a failed write of ``given`` (an ``OSError``, or a library error
    that wraps one, such as polars' "No space left on device (os error 28)"); None when ``exc`` is
    no OS error (then it is a bug, not the disk)."""
    os_exc = exc if isinstance(exc, OSError) else _os_error_in(exc)
    return None if os_exc is None else str(_usage_error(given, os_exc))


def write_frame_atomic(df: pl.DataFrame, path: str | Path,
                       write_parquet: Callable[[BinaryIO], None] | None = None) -> Path:
    """Write ``df`` as parquet (``.parquet``/``.pq``) or JSONL (``.jsonl``/``.ndjson``) atomically,
    through :func:`write_atomic` (temporary file in the target's folder, fsync,
    rename; a link is written through to its target, a device or fifo is written in place).
    ``write_parquet``: for a parquet file, the function that writes the same rows to the binary file
    it is given, instead of ``df.write_parquet`` (e.g. ``pyarrow.parquet.write_table`` of the rows
    with the field types and schema metadata of the shard they come from); unused for JSONL.

    Raises:
        UsageError: another extension, ``path`` is an existing folder, or it cannot be written.
    """
    name = Path(path).name.lower()
    if not name.endswith((".parquet", ".pq", ".jsonl", ".ndjson")):
        raise UsageError(f"--export {path}: write .parquet or .jsonl (the format follows the extension)")
    if name.endswith((".parquet", ".pq")):
        if write_parquet is not None:
            return write_atomic(path, write_parquet)
        return write_atomic(path, lambda f: df.write_parquet(f))
    body = ndjson_bytes(df, path)
    return write_atomic(path, body)


def ndjson_bytes(df: pl.DataFrame, path: str | Path) -> bytes:
    """``df`` as JSON Lines that datacheck's JSONL reader reads back to the same values: polars'
    ``write_ndjson``, but a non-finite float (anywhere: a column, a list item, a struct field) written
    as ``NaN``, ``Infinity`` or ``-Infinity`` (the tokens Python's ``json`` writes and the reader takes
    as floats, so ``finite.*`` sees them), never as ``null`` (a null is another finding).

    Raises:
        UsageError: a column holds bytes (``Binary``, also inside a list or struct), which JSON has no
            value for (``path`` named: write ``.parquet``)."""
    import polars as pl  # a third-party import: this module stays polars-free until a frame is written

    def has(dtype: pl.DataType, want: Callable[[pl.DataType], bool]) -> bool:
        if want(dtype):
            return True
        if isinstance(dtype, (pl.List, pl.Array)):
            return has(dtype.inner, want)
        if isinstance(dtype, pl.Struct):
            return any(has(f.dtype, want) for f in dtype.fields)
        return False

    binary = [c for c, t in df.schema.items() if has(t, lambda d: d == pl.Binary)]
    if binary:
        raise UsageError(f"--export {path}: column(s) {', '.join(map(repr, binary[:5]))} hold bytes, which JSON "
                         "Lines cannot hold; export to a .parquet file instead")
    buf = io.BytesIO()
    df.write_ndjson(buf)
    floats = [c for c, t in df.schema.items() if has(t, lambda d: d.is_float())]
    if not floats or df.height == 0:
        return buf.getvalue()
    lines = buf.getvalue().splitlines(keepends=True)
    if len(lines) != df.height:  # a line per row, as write_ndjson writes them
        return buf.getvalue()
    values = {c: df[c].to_list() for c in floats}

    def non_finite(v: object) -> bool:
        if isinstance(v, float):
            return v != v or v in (float("inf"), float("-inf"))
        if isinstance(v, list):
            return any(non_finite(x) for x in v)
        if isinstance(v, dict):
            return any(non_finite(x) for x in v.values())
        return False

    def merge(written: object, value: object) -> object:
        """The value polars wrote, with each non-finite float of ``value`` put back where it wrote null."""
        if isinstance(value, float) and non_finite(value):
            return value
        if isinstance(value, list) and isinstance(written, list) and len(value) == len(written):
            return [merge(w, v) for w, v in zip(written, value)]
        if isinstance(value, dict) and isinstance(written, dict):
            return {k: merge(w, value.get(k)) for k, w in written.items()}
        return written

    for i in range(df.height):
        if not any(non_finite(values[c][i]) for c in floats):
            continue
        obj = json.loads(lines[i])
        for c in floats:
            obj[c] = merge(obj.get(c), values[c][i])
        lines[i] = (json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=True) + "\n").encode("utf-8")
    return b"".join(lines)

