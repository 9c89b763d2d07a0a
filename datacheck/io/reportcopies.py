"""The config copies of the report folder on disk: their folder names (what keys a copy), their
writing (safe beside a concurrent prune) and their pruning (a bounded number kept per index hash).

An audit (or a merge) stores its report as ``<report-dir>/<index_hash>/report.json`` (the DESIGN.md
contract: the latest audit of that data) and, with the same bytes, as a **config copy**
``<report-dir>/<index_hash>/<name>/report.json`` whose folder ``<name>`` (:func:`copy_name`) is made of
everything an audit is told that changes the report's bytes besides the data:

- the hex digits of ``config_hash`` (all of them: two configs never share a folder);
- ``.fail-on-warn`` / ``.fail-on-never``: the gate's ``--fail-on`` when not the default ``error``;
- ``.against-<16 hex>``: ``--against`` (the datasets compared with: :func:`against_key`), whose
  ``dup.split_overlap`` findings the report then holds;
- ``.allow-check-errors``: ``--allow-check-errors`` when the report has check errors (the flag then
  decides ``summary.status``; without a check error the report is the same byte for byte with or
  without it, and so is the exit code, so the copy is the same one);
- ``.part-K-of-N``: the report of part K of a split audit (``--num-parts N --part K``), whose index
  hash is that of its part's shards: the same as the whole audit's when the part holds every shard.

Bounded (:func:`prune_copies`): after a copy is written, the copies of its index hash beyond the
:data:`MAX_COPIES` most recently written (their ``report.json`` modification time) are deleted; the
contract file ``<index_hash>/report.json`` and the copy just written are never deleted. A copy is
deleted by renaming its folder to a hidden name (``.<name>.pruned-<pid>-<random>``: no reader
resolves it) and then removing that; a copy rewritten by another audit between the choice and the
rename is renamed back. A writer whose copy folder vanished under it (:func:`write_copy`) writes
again. Stdlib only (the whole-audit memo's replay writes copies before anything heavy is imported).
"""
from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import xxhash

from datacheck.io.outputs import os_error_message
from datacheck.io.stores import is_url
from datacheck.model.constants import FAIL_ON
from datacheck.model.errors import UsageError

__all__ = ["MAX_COPIES", "COPY_NAME", "against_key", "copy_name", "parse_copy_name", "write_copy", "prune_copies"]

#: The most config copies kept per index hash (:func:`prune_copies`): a dataset gated under a few
#: configs, each with up to three ``--fail-on``, with and without ``--against``, fits; a script that
#: audits the same data under a new config every run no longer grows the report folder without bound.
MAX_COPIES = 32
#: A hidden folder a prune renamed a copy to and did not finish removing (killed) is removed by a
#: later prune when older than this many seconds (the result cache's rule for its temporary files).
STALE_PRUNED_S = 3600.0
#: How many times :func:`write_copy` writes a copy whose folder a concurrent prune removed under it
#: (8 tries were used up once, by 8 threads writing and pruning 7 shared names on a loaded 2-core
#: machine: tests/unit/io/test_reportcopies.py); between tries it waits 1 ms more each time, at most
#: :data:`_WRITE_WAIT_S` (32 tries: at most about 0.3 s in all)
_WRITE_TRIES = 32
_WRITE_WAIT_S = 0.01
_AGAINST_DIGITS = 16
#: What follows the gate in a copy's folder name (:func:`copy_name`): ``--against``, allowed check
#: errors, the part (a pattern without anchors, also in ``INDEX/CONFIG`` references)
EXTRA = r"(?:\.against-[0-9a-f]{%d})?(?:\.allow-check-errors)?(?:\.part-[0-9]{1,6}-of-[0-9]{1,6})?" % _AGAINST_DIGITS
#: A config copy's folder name (:func:`copy_name`): config digits, gate, then :data:`EXTRA`.
COPY_NAME = re.compile(r"^([0-9a-f]{16,128})(?:\.fail-on-(warn|never))?(%s)$" % EXTRA)
_PRUNED = ".pruned-"

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing on a cached rerun's path (3 ms)
if TYPE_CHECKING:
    from typing import TypeVar

    T = TypeVar("T")


def against_key(paths: Iterable[str] | None) -> str | None:
    """The ``--against`` part of a copy's key: the first 16 hex digits of the xxh3-128 of the
    datasets compared with, each as an absolute path (a URL as given), sorted and without repeats
    (``train/`` and ``./train`` name one dataset); None when there is none.

    The key names the datasets, not their bytes: an audit against the same folder after it changed
    replaces that copy, as the contract file holds the latest audit."""
    names = sorted({p if is_url(p) else os.path.abspath(p) for p in (paths or ()) if p})
    if not names:
        return None
    blob = "\0".join(names).encode("utf-8", "surrogateescape")
    return xxhash.xxh3_128_hexdigest(blob)[:_AGAINST_DIGITS]


def copy_name(config_hash: str, fail_on: str = "error", against: str | None = None,
              allow_check_errors: bool = False, part: tuple[int, int] | None = None) -> str:
    """The folder name of a config copy (module docstring): ``<config digits>[.fail-on-X][.against-K]
    [.allow-check-errors][.part-K-of-N]``. ``against``: :func:`against_key`; ``allow_check_errors``:
    True only when the flag was given and the report has check errors; ``part``: (K, N) of a part report.

    Raises:
        UsageError: ``config_hash`` is not an algorithm-prefixed hex digest, ``fail_on`` is not one of
            :data:`~datacheck.model.constants.FAIL_ON`, or ``against`` is not 16 hex digits (never a
            folder name that could leave the index hash's folder).
    """
    digest = config_hash.rpartition(":")[2]
    if (not re.fullmatch(r"[0-9a-f]{16,128}", digest) or fail_on not in FAIL_ON
            or (against is not None and not re.fullmatch(r"[0-9a-f]{%d}" % _AGAINST_DIGITS, against))
            or (part is not None and not all(isinstance(x, int) and 0 <= x < 10**6 for x in part))):
        raise UsageError(f"config hash {config_hash!r} / fail_on {fail_on!r} / against {against!r} / part {part!r}: "
                         "cannot store a report under them")
    return (digest + ("" if fail_on == "error" else f".fail-on-{fail_on}")
            + ("" if against is None else f".against-{against}") + (".allow-check-errors" if allow_check_errors else "")
            + ("" if part is None else f".part-{part[0]}-of-{part[1]}"))


def parse_copy_name(name: str) -> tuple[str, str, str] | None:
    """(config digits, ``fail_on``, what follows the gate: :data:`EXTRA`, ``""`` for none) of a copy's
    folder name; None for any other name."""
    m = COPY_NAME.match(name)
    if m is None:
        return None
    return m.group(1), m.group(2) or "error", m.group(3)


def write_copy(path: str | os.PathLike[str], write: Callable[[Path], T]) -> T:
    """``write(path)`` (an atomic writer of a copy's file), done again when it failed because the
    copy's folder was removed under it by a concurrent :func:`prune_copies` (between its creation and
    the rename into it): a ``FileNotFoundError`` or ``FileExistsError`` raised by ``write`` (an
    ``os_errors`` writer: :func:`~datacheck.io.outputs.write_atomic`), or a :class:`UsageError` while
    the folder is missing (a writer that says its failures as one). Tried :data:`_WRITE_TRIES` times.

    Raises:
        UsageError: the last failure (an ``OSError`` said as :func:`~datacheck.io.outputs.write_atomic` says it).
    """
    p = Path(path)
    for attempt in range(_WRITE_TRIES):
        last = attempt == _WRITE_TRIES - 1
        try:
            return write(p)
        except (FileNotFoundError, FileExistsError) as exc:
            if last:
                raise UsageError(os_error_message(str(p), exc) or str(exc)) from None
        except OSError as exc:
            raise UsageError(os_error_message(str(p), exc) or str(exc)) from None
        except UsageError:
            if last or os.path.isdir(p.parent):
                raise
        time.sleep(min(0.001 * attempt, _WRITE_WAIT_S))  # another prune may be at work: let it finish
    raise AssertionError("unreachable")  # pragma: no cover


def _report_state(folder: Path) -> tuple[int, int] | None:
    """(modification time in ns, inode) of ``folder/report.json`` when it is a regular file; else None."""
    try:
        st = os.stat(folder / "report.json", follow_symlinks=False)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_ino) if st.st_mode & 0o170000 == 0o100000 else None


def prune_copies(index_folder: str | os.PathLike[str], keep: str, max_copies: int | None = None) -> list[str]:
    """Delete the config copies of ``index_folder`` (``<report-dir>/<index_hash>``) beyond the
    ``max_copies`` (None: :data:`MAX_COPIES`) most recently written, never ``keep`` (the name of the copy just written) nor
    anything that is not a copy's folder (the contract file ``report.json``, a part's sidecar, a
    file of the user's); and the hidden folders of a prune that was killed, once older than
    :data:`STALE_PRUNED_S`. Returns the names of the copies deleted. Nothing is raised: a copy that
    cannot be deleted is kept (the next prune tries again)."""
    folder = Path(index_folder)
    max_copies = MAX_COPIES if max_copies is None else max_copies
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    now = time.time()
    found = []
    for name in names:
        if name.startswith(".") and _PRUNED in name:
            try:
                if now - os.lstat(folder / name).st_mtime > STALE_PRUNED_S:
                    shutil.rmtree(folder / name, ignore_errors=True)
            except OSError:
                pass
            continue
        if name == keep or COPY_NAME.match(name) is None:
            continue
        state = _report_state(folder / name)
        if state is not None:
            found.append((state, name))
    found.sort(reverse=True)  # newest first; a tie broken by name, the same order every time
    removed = []
    for state, name in found[max(0, max_copies - 1):]:  # ``keep`` is one of the max_copies kept
        if _remove_copy(folder, name, state):
            removed.append(name)
    return removed


def _remove_copy(folder: Path, name: str, state: tuple[int, int]) -> bool:
    """Remove the copy ``folder/name`` whose ``report.json`` had ``state`` when it was chosen: its
    folder renamed to a hidden name first (atomic: a reader finds the whole copy or none), put back
    when its report was rewritten in between (a concurrent audit stored that copy again)."""
    trash = folder / f".{name}{_PRUNED}{os.getpid()}-{os.urandom(4).hex()}"
    try:
        os.rename(folder / name, trash)
    except OSError:  # removed by another prune, or it cannot be: kept
        return False
    if _report_state(trash) != state:
        try:
            os.rename(trash, folder / name)  # replaces at most an empty folder a writer has just made
            return False
        except OSError:  # a newer copy of that name stands there now: this one goes
            pass
    shutil.rmtree(trash, ignore_errors=True)
    return True
