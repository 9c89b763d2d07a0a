"""The ``datacheck`` command line: a thin layer over :mod:`datacheck.execute.audit`.

Exit codes (DESIGN.md): 0 pass; 1 the policy failed; 2 usage or config error, or an output that
cannot be written (disk full, no permission: the message names the file, or the standard output, and
the OS reason); 3 internal error; 130 interrupted (Ctrl-C, SIGINT); 143 terminated (SIGTERM: ``kill PID``,
a scheduler's preemption). Both signals end the command the same way: the exception unwinds the
verb, so its ``finally`` blocks remove what it made (the audit's spill folder, ``clean``'s staging
folder), outputs are never half-written (they are written atomically), one line is printed.
A closed output pipe (``datacheck audit data/ | head -5``) never changes the
exit code and never prints a traceback: the rest of the output is discarded, as Python's docs
recommend for SIGPIPE/EPIPE (https://docs.python.org/3/library/signal.html#note-on-sigpipe).
``POLARS_MAX_THREADS`` set to a value polars cannot use (polars panics at its first query on
anything but a whole number >= 1) is refused before any verb runs (exit 2).

Start-up cost: the verbs are found by module name (``pkgutil``, nothing imported)
and only the verb named on the command line is imported (``importlib``), so ``datacheck audit`` does
not load what ``inspect``, ``clean``, ``plan`` or ``trace`` need; ``datacheck``, ``datacheck --help``
and an unknown verb import them all to list them. Before numpy is first imported the CLI process
sets ``OPENBLAS_NUM_THREADS=1`` unless the user set it: numpy's OpenBLAS otherwise starts one thread
per core at import that datacheck never uses (no check does linear algebra), each spinning briefly
after every call. ``OMP_NUM_THREADS`` is left alone on purpose: pyarrow's decode pool and torch read it.
"""
from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading
from collections.abc import Sequence

import datacheck.cli.commands as pkg
from datacheck import __version__
from datacheck.cli.rerun import replay as replay_audit
from datacheck.model.constants import (
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_POLICY_FAILED,
    EXIT_TERMINATED,
    EXIT_USAGE,
)
from datacheck.model.environment import check_batch_rows, check_polars_threads, check_spill_rows
from datacheck.model.errors import DatacheckError, OutOfMemory, PolicyFailed, ReportVersionError, UsageError
from datacheck.model.shown import one_line

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing on a cached rerun's path (3 ms)
if TYPE_CHECKING:
    from typing import Any, NoReturn, TextIO

__all__ = ["main", "entry", "build_parser", "Terminated", "check_polars_threads"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # exit 2 with the message, as argparse does, but our wording
        self.print_usage(sys.stderr)
        print(f"datacheck: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def build_parser(verbs: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The ``datacheck`` parser with every verb, or with the verbs named in ``verbs`` only (start-up
    cost: only those verbs' modules and their dependencies are imported; see :func:`verbs_for`)."""
    p = _Parser(prog="datacheck", description="Audit ML training data shards before training.")
    p.add_argument("--version", action="version", version=f"datacheck {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for name in _command_modules() if verbs is None else verbs:
        mod = importlib.import_module(f"datacheck.cli.commands.{name}")
        sp = mod.add_parser(sub)
        sp.set_defaults(_run=mod.run)
    return p


def _command_modules() -> list[str]:
    """Every module in datacheck/cli/commands/ is a verb with ``add_parser(subparsers)`` and ``run(args) -> int``
    (names only: the modules are not imported here)."""
    import pkgutil  # not on a cached rerun's path (answered before any verb is listed)

    names = sorted(m.name for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_"))
    return ["audit"] + [n for n in names if n != "audit"]


def verbs_for(argv: Sequence[str]) -> list[str] | None:
    """The verbs the parser needs for ``argv``: the verb named first when it is a known one, none for
    ``--version`` alone, else None (every verb: no verb, ``--help``, a misspelt verb, whose answers
    list them all)."""
    if argv and argv[0] in _command_modules():
        return [argv[0]]
    if list(argv) == ["--version"]:
        return []
    return None


#: numpy's BLAS pool size, set for the CLI process before numpy is imported unless the user set it
BLAS_THREADS_ENV = {"OPENBLAS_NUM_THREADS": "1"}


def limit_blas_threads() -> None:
    """Set :data:`BLAS_THREADS_ENV` in ``os.environ`` where unset, only while numpy is not yet imported
    (OpenBLAS reads it once, at load; after that setting it would change nothing but the environment
    of child processes). Called by :func:`main` before any verb module is imported."""
    if "numpy" in sys.modules:
        return
    for key, value in BLAS_THREADS_ENV.items():
        os.environ.setdefault(key, value)


#: pyarrow's default memory pool for the CLI process on Linux, unless the user set one (read once, when
#: pyarrow loads). pyarrow >= 18 defaults to mimalloc, which in a fresh process touches far more new
#: memory while decoding parquet token lists than jemalloc does: on the 100,000 x 128 shard of
#: benchmarks/bench_audit.py a process's first decode took 0.09-0.68 s of system time with mimalloc
#: (about 580 huge-page faults: 1.2 GB zeroed) and 0.13-0.16 s with jemalloc, the audit 1.5-2.3 s
#: wall against 0.9-1.0 s (measured on the 2-core development machine). Linux only: pyarrow's Linux wheels
#: are built with jemalloc; elsewhere the variable would name a pool the build may lack.
#: With it, jemalloc's decay (``JE_ARROW_MALLOC_CONF``, read when pyarrow loads; pyarrow builds jemalloc
#: with 1,000 ms): freed pages are returned to the OS over 10 s instead of 1 s, so the next batch or
#: shard reuses them instead of faulting them in again. In one process, a 7,800 x 1024-token shard's
#: decode took 25-34k page faults and 80-110 ms of system time a shard with pyarrow's setting,
#: 0.3-0.8k and 5-17 ms with this one; the 200,000 x 256 shard of benchmarks/bench_table.py
#: (``big256``) 226-252k minor faults and 0.76-0.81 s system time against 167-170k and 0.61-0.64 s,
#: peak RSS 647-706 against 689-700 MiB (measured on the 2-core development machine). A forked pool
#: worker is not affected (jemalloc's background purge threads do not run in a forked child).
#: No ``thp:always`` (jemalloc asking for transparent huge pages, ``madvise(MADV_HUGEPAGE)``, on the
#: memory it maps): it once cut a decoded batch's faults 5-7x (``big256`` 183k -> 27k minor faults,
#: 0.59 -> 0.30 s system time), but on a virtual machine that reports free pages to its host a huge
#: page faulted in again costs far more than its 512 small pages: with it, ``datacheck audit`` of the
#: folders of benchmarks/bench_table.py took ``f9`` 5.6-10.3 CPU s (2.9-7.2 of them system time)
#: against 3.6-3.7 (0.7) without, ``f10`` 16.0-16.8 (8.0-8.7) against 9.3-9.6 (1.0-1.2), ``f100``
#: 7.7-8.0 (2.0-2.6) against 5.7-6.5 (0.4-0.5), ``big128`` 7.5-7.8 against 5.1-5.5, ``big256``
#: 2.5-4.8 against 2.1-2.3, and more wall time on every row (``f10`` 12.9-13.1 s against 7.8-9.0;
#: alternated runs, each after the same settle process, on the 2-core development machine); its
#: system time also swung run to run (``big128`` 0.32-3.47 s with it, 0.56-0.68 without).
ARROW_POOL_ENV = {"ARROW_DEFAULT_MEMORY_POOL": "jemalloc",
                  "JE_ARROW_MALLOC_CONF": "dirty_decay_ms:10000,muzzy_decay_ms:10000"}


def choose_arrow_pool() -> None:
    """Set :data:`ARROW_POOL_ENV` where unset, on Linux, while pyarrow is not yet imported. Called by
    :func:`main` before any verb module is imported; the library (``datacheck.audit``) never changes
    the pool of the process that imports it."""
    if "pyarrow" in sys.modules or not sys.platform.startswith("linux"):
        return
    for key, value in ARROW_POOL_ENV.items():
        os.environ.setdefault(key, value)


#: Arguments that name a file or folder: an empty string there (an unset shell variable) is refused
#: instead of meaning "the current folder". dest -> how the message names it.
_PATH_ARGS = {
    "paths": "PATH", "parts": "PART_REPORT", "against": "--against", "report": "REPORT.json", "old": "OLD",
    "new": "NEW", "config": "--config", "output": "--output", "out": "--out", "html": "--html",
    "junit": "--junit", "export": "--export", "index": "--index", "report_dir": "--report-dir",
    "cache_dir": "--cache-dir", "tokenizer": "--tokenizer", "schema": "--schema",
    "path": "PATH", "run_dir": "RUN", "checkpoints": "--checkpoints",
}


def check_empty_paths(args: argparse.Namespace) -> None:
    """Refuse an empty string given as a path argument (``datacheck audit "$UNSET"``).

    Raises:
        UsageError: "empty PATH ..." naming the argument (exit code 2).
    """
    for dest, name in _PATH_ARGS.items():
        value = getattr(args, dest, None)
        values = value if isinstance(value, list) else [value]
        if any(isinstance(v, str) and not v.strip() for v in values):
            what = "PATH" if dest == "paths" else name
            raise UsageError(f"empty {what}: {name} is an empty string (an unset shell variable?); "
                             "give a file, a folder or a glob")


class _PipeSafe:
    """A text stream proxy that survives a closed pipe: on ``BrokenPipeError`` the stream's file
    descriptor is pointed at ``os.devnull`` (Python's docs, "Note on SIGPIPE") and the rest of the
    output is discarded, so the command still finishes and returns its own exit code. A stream
    Python has none of (``sys.stdout`` is None: the command was started with that descriptor
    closed, ``>&-``) is ``os.devnull``. Any other ``OSError`` of a write or flush (``> /dev/full``:
    ENOSPC, a file over the quota, EIO) also silences the stream; when it has a ``name`` (the
    standard output, whose text is the command's result) a :class:`UsageError` naming it and the OS
    reason is raised once (exit 2), else (stderr: there is nowhere to report to) it is dropped."""

    def __init__(self, stream: TextIO | None, name: str | None = None):
        self.broken = stream is None
        self._name = name
        self._stream: TextIO = stream if stream is not None else open(os.devnull, "w", encoding="utf-8")

    def _silence(self) -> None:
        self.broken = True
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
        except (OSError, ValueError, AttributeError):
            pass  # no real descriptor (an in-memory stream): the writes below are dropped anyway

    def _failed(self, exc: OSError) -> None:
        """Silence the stream after a write failed with ``exc`` (not a closed pipe); raise it as a
        :class:`UsageError` when the stream has a name. The buffered rest goes to ``os.devnull``."""
        self._silence()
        try:
            self._stream.flush()
        except (OSError, ValueError):
            pass
        if self._name is not None:
            raise UsageError(f"cannot write {self._name}: {exc.strerror or exc} (errno {exc.errno}); what was "
                             "printed is incomplete: free space, or send the output elsewhere") from None

    def write(self, text: str) -> int:
        if self.broken:
            return len(text)
        try:
            try:
                return self._stream.write(text)
            except UnicodeEncodeError:  # a name whose bytes are not UTF-8, or a terminal of a narrower encoding
                enc = getattr(self._stream, "encoding", None) or "utf-8"
                return self._stream.write(text.encode(enc, "backslashreplace").decode(enc))
        except BrokenPipeError:
            self._silence()
        except OSError as exc:
            self._failed(exc)
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._silence()
            try:
                self._stream.flush()  # the buffered rest now goes to os.devnull
            except (OSError, ValueError):
                pass
        except OSError as exc:
            self._failed(exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class Terminated(KeyboardInterrupt):
    """Raised in the CLI's main thread when SIGTERM arrives (``kill PID``, a scheduler's preemption)
    while :func:`main` runs. A ``KeyboardInterrupt`` so that every path that ends cleanly on Ctrl-C
    (``finally`` blocks, the pool's shutdown, ``clean``'s ``except BaseException``) does the same on
    SIGTERM; :func:`main` reports it as "terminated" with exit code 143."""


def _raise_terminated(signum: int, _frame: Any) -> None:
    raise Terminated(signum)


def _catch_sigterm() -> Any:
    """Make SIGTERM raise :class:`Terminated` while :func:`main` runs; returns the handler to restore
    (None: nothing was changed). Only in the main thread (Python delivers signals there), and only
    over the default action: a handler the embedding program set is kept."""
    if threading.current_thread() is not threading.main_thread():
        return None
    previous = signal.getsignal(signal.SIGTERM)
    if previous is not signal.SIG_DFL:
        return None
    signal.signal(signal.SIGTERM, _raise_terminated)
    return previous


#: whether the last :func:`main` was answered by the whole-audit memo (:func:`datacheck.cli.rerun.replay`)
#: and did nothing else: what :func:`entry` reads
_answered_by_memo = False


def entry() -> NoReturn:
    """The ``datacheck`` console command and ``python -m datacheck``: :func:`main` on ``sys.argv``,
    then exit with its code as ``sys.exit`` does.

    An audit answered from the whole-audit memo (an unchanged rerun: its outputs written, fsynced and
    renamed, its output printed and flushed; no thread left running, no dataframe library nor
    process pool loaded) ends with ``os._exit`` instead, once the standard streams are flushed:
    Python's teardown of the modules it loaded (5-8 ms on the 2-core development machine, of a
    60-80 ms rerun of one shard) is skipped. Where a flush fails the process exits as ``sys.exit``
    does, which reports it."""
    code = main()
    if _answered_by_memo:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):  # a closed or broken stream: the normal exit says so
            sys.exit(code)
        os._exit(code)
    sys.exit(code)


def main(argv: list[str] | None = None) -> int:
    """Run the ``datacheck`` command line; returns the exit code (see the module docstring)."""
    global _answered_by_memo
    _answered_by_memo = False
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _PipeSafe(out, "the standard output"), _PipeSafe(err)
    previous = _catch_sigterm()
    try:
        code = _main(argv)
        try:
            sys.stdout.flush()  # a full disk under ``> file`` shows here, while stderr can still say so
        except UsageError as exc:
            print(f"datacheck: error: {one_line(str(exc))}", file=sys.stderr)
            code = EXIT_USAGE
        return code
    finally:
        sys.stdout.flush()  # a closed pipe is silenced here, not at interpreter exit (exit code 120)
        sys.stderr.flush()
        sys.stdout, sys.stderr = out, err
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


#: glibc malloc settings for the CLI process (``mallopt``): (M_MMAP_THRESHOLD, bytes), (M_TRIM_THRESHOLD, bytes)
MALLOC_SETTINGS = ((-3, 256 << 20), (-1, 512 << 20))


def keep_freed_memory() -> bool:
    """Let glibc keep freed blocks up to 256 MiB for reuse (``mallopt(M_MMAP_THRESHOLD)`` and
    ``M_TRIM_THRESHOLD``), in the CLI process on Linux with glibc. True when set.

    By default glibc maps a block above its dynamic threshold (at most 32 MiB) fresh from the OS
    and unmaps it when freed, so every batch's numpy arrays above it (the flat token buffers of the
    checks: 4.6M positions of a 36,000 x 128 batch are 37 MiB as int64) are page-faulted in again,
    batch after batch. On this project's 2-core VM the shared position pass over one such batch
    took 34-144 ms CPU, 16-120 ms of it in the kernel, 4,100 page faults a call; with these
    settings 23-30 ms, no fault after the first call (measured on the 2-core development machine).
    Memory stays bounded by the batch (what is freed is reused, not kept beside new blocks).
    Nothing happens elsewhere (musl, macOS, Windows: no ``mallopt``)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes  # not on a cached rerun's path (it returns before this is called)

        libc = ctypes.CDLL("libc.so.6")
        return all(libc.mallopt(param, value) == 1 for param, value in MALLOC_SETTINGS)
    except (OSError, AttributeError):
        return False


def _main(argv: list[str] | None) -> int:
    global _answered_by_memo
    limit_blas_threads()
    choose_arrow_pool()
    given = sys.argv[1:] if argv is None else argv
    try:
        check_polars_threads()
        check_batch_rows()
        check_spill_rows()
        if given and given[0] == "audit":  # an unchanged rerun answered before the verb is imported
            replayed = replay_audit(given[1:])
            if replayed is not None:
                _answered_by_memo = True
                return replayed
        keep_freed_memory()  # before the verb allocates; a rerun answered above allocates no batch
        # one big parquet shard's first batches decoded while the verb imports; its module by name:
        # the parquet decoder is not on a cached rerun's path (answered above)
        with importlib.import_module("datacheck.cli.prefetch").shard_prefetch(given):
            parser = build_parser(verbs_for(given))
            args = parser.parse_args(argv)
            if args.command is None:
                parser.print_help(sys.stderr)
                return EXIT_USAGE
            check_empty_paths(args)
            return args._run(args)
    except (UsageError, ReportVersionError) as exc:
        print(f"datacheck: error: {one_line(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    except PolicyFailed as exc:
        print(f"datacheck: {exc}", file=sys.stderr)
        return EXIT_POLICY_FAILED
    except OutOfMemory as exc:  # the machine, not the data nor a bug: exit 3 as for a worker killed for memory
        print(f"datacheck: out of memory: {exc}", file=sys.stderr)
        return EXIT_INTERNAL
    except MemoryError:
        print("datacheck: out of memory: memory ran out; run again with fewer --workers, smaller batches "
              "(DATACHECK_BATCH_ROWS=N rows a batch), or on a machine with more memory", file=sys.stderr)
        return EXIT_INTERNAL
    except DatacheckError as exc:
        print(f"datacheck: internal error: {one_line(str(exc))}", file=sys.stderr)
        return EXIT_INTERNAL
    except Terminated:
        print("datacheck: terminated (SIGTERM): stopped, temporary files removed, no output half-written",
              file=sys.stderr)
        return EXIT_TERMINATED
    except KeyboardInterrupt:
        print("datacheck: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # a pipe other than stdout/stderr (those are _PipeSafe): no result to trust
        if isinstance(sys.stdout, _PipeSafe):
            sys.stdout._silence()
        return EXIT_INTERNAL
    except Exception:
        print("datacheck: internal error (a bug; please report it with this traceback):", file=sys.stderr)
        sys.__excepthook__(*sys.exc_info())  # what traceback.print_exc() prints, without importing it (2 ms)
        return EXIT_INTERNAL
    except BaseException as exc:
        # a panic in a Rust extension (polars, tokenizers) reaches Python as pyo3's PanicException, a
        # BaseException: uncaught, Python would exit 1, which reads as "the policy failed"; it is an
        # internal error (exit 3), as any other exception here
        if type(exc).__name__ != "PanicException":
            raise
        print("datacheck: internal error (a bug; please report it with this traceback):", file=sys.stderr)
        sys.__excepthook__(*sys.exc_info())
        return EXIT_INTERNAL
