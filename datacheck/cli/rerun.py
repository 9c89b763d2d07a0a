"""``datacheck audit`` answered from the whole-audit memo (:mod:`datacheck.execute.rerun`) before
anything heavy is imported: :func:`replay` runs first for every ``audit`` command line
(:func:`datacheck.cli.main.main`); on a miss the verb runs as always and, when it may, records what
it gave (:func:`begin` before the audit, :func:`finish` after it).

Which audits use the memo (:func:`eligible`): the result cache is on (``--cache-dir``, default
``.datacheck/cache``; not ``--no-cache``) and not pruned (``--cache-prune``), no part (``--num-parts``/
``--part``), no ``--against``, ``--junit`` or ``--html``, ``--format`` text or json, every PATH a local
folder (no file, glob or URL) holding only folders and regular files. A record is written only when
the audit raised no warning, had no check error, and exited 0 or 1.

What a hit reproduces: the report files (``<report-dir>/<index_hash>/report.json`` and its config copy
``<report-dir>/<index_hash>/<config hash>[.fail-on-X][.allow-check-errors]/report.json``, the copies of that
index hash then bounded as the audit bounds them: :func:`datacheck.io.reportcopies.prune_copies`) and ``--output``,
byte for byte but ``created_at`` (now), written atomically as the audit writes them; stdout; the
GitHub Actions annotations on stderr (``GITHUB_ACTIONS=true`` is part of the key); the exit code. What it skips: the per-shard cache (no entry is read; the identity records of
``--trust-mtime`` are neither read nor written); the progress bar.
"""
from __future__ import annotations

import argparse
import os
import stat
import sys
import threading
from collections.abc import Iterable, Sequence

import xxhash

from datacheck.cli.auditargs import add_parser
from datacheck.cli.defaults import default_cache_dir
from datacheck.execute import rerun as memo
from datacheck.execute.configpath import resolve_config_path
from datacheck.io.cardpath import card_path
from datacheck.io.outputs import check_output_folders, check_outputs, write_atomic, write_json_atomic
from datacheck.io.reportcopies import prune_copies, write_copy
from datacheck.io.stores import is_url
from datacheck.model.constants import ENV_WORKERS, is_python_schema
from datacheck.model.errors import DatacheckError

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing on a cached rerun's path (3 ms)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["KNOWN_FLAGS", "RUN_ONLY", "replay", "eligible", "begin", "name_externals", "finish", "parse_audit"]

#: ``audit`` flags that choose how the work runs, never what it gives, and ``--output`` (where a copy of
#: the report goes; a hit writes it there): left out of the memo's key (a rerun with ``--trust-mtime``
#: or another ``--workers`` is answered by a record of an audit without).
RUN_ONLY = ("workers", "executor", "ray_address", "trust_mtime", "no_progress", "output")


#: Every ``audit`` flag (argparse ``dest``) whose meaning the memo was written for: the flags that
#: change the output are in the key, those that write other files make an audit ineligible. A flag
#: not listed here (a new one) makes every audit ineligible until it is placed
#: (tests/e2e/ci/test_rerun_memo.py compares this set with the parser's).
KNOWN_FLAGS = frozenset({
    "command", "paths", "follow_symlinks", "allow_python_schema", "config", "report_dir", "output", "format", "html",
    "fail_on", "no_progress", "show_passing", "against", "schema", "junit", "allow_check_errors", "workers",
    "executor", "ray_address", "cache_dir", "no_cache", "trust_mtime", "cache_prune", "num_parts", "part",
})


class _Refused(Exception):
    """The command line is not one the memo answers (the verb parses it and says what is wrong)."""


class _QuietParser(argparse.ArgumentParser):
    """A parser that prints nothing and never exits: an error, ``--help`` or a usage line is
    :class:`_Refused`."""

    def error(self, message: str) -> Any:
        raise _Refused(message)

    def exit(self, status: int = 0, message: str | None = None) -> Any:
        raise _Refused(message or "")

    def print_help(self, file: Any = None) -> None:
        raise _Refused("help")

    def print_usage(self, file: Any = None) -> None:
        raise _Refused("usage")


def parse_audit(argv: Sequence[str]) -> argparse.Namespace:
    """``argv`` (after ``audit``) parsed by the verb's own parser (:func:`datacheck.cli.auditargs.add_parser`).

    Raises:
        _Refused: not a command line the verb would run (a usage error, ``--help``).
    """
    p = _QuietParser(prog="datacheck", add_help=False)
    sub = p.add_subparsers(dest="command")
    add_parser(sub)
    return p.parse_args(["audit", *argv])


def _cache_dir(args: argparse.Namespace) -> str | None:
    return None if args.no_cache else (args.cache_dir or default_cache_dir())


def _strings(v: Any) -> Iterable[str]:
    if isinstance(v, str):
        yield v
    elif isinstance(v, dict):
        for k, x in v.items():
            yield from _strings(k)
            yield from _strings(x)
    elif isinstance(v, (list, tuple, set, frozenset)):
        for x in v:
            yield from _strings(x)


def eligible(args: argparse.Namespace) -> bool:
    """Whether the memo may answer (and record) the audit ``args`` describe (module docstring)."""
    given = {k: v for k, v in vars(args).items() if not k.startswith("_")}
    if any(not s.strip() for s in _strings(list(given.values()))):
        return False  # an empty path argument: the verb refuses it
    if set(given) - KNOWN_FLAGS:
        return False
    return (_cache_dir(args) is not None and not args.cache_prune and args.num_parts is None and args.part is None
            and not args.against and not args.junit and not args.html and args.format in ("text", "json")
            and all(not is_url(p) and not any(ch in p for ch in "*?[") for p in args.paths))


def _static(args: argparse.Namespace, config_path: str | None) -> tuple[dict[str, Any], bytes | None]:
    """The direct key's caller part: the flags but :data:`RUN_ONLY`, the working folder, the config
    file's path and content hash, the ``DATACHECK_*`` (but the workers') and ``POLARS_*`` environment,
    ``HOME`` (the config lookup stops there) and ``GITHUB_ACTIONS`` (annotations); and the config file's bytes. Raises OSError when the
    config cannot be read."""
    flags = {k: v for k, v in sorted(vars(args).items()) if k not in RUN_ONLY and not k.startswith("_")}
    conf, raw = None, None
    if config_path is not None:
        with open(config_path, "rb") as f:
            raw = f.read()
        conf = [os.path.abspath(config_path), xxhash.xxh3_128_hexdigest(raw)]
    env = {k: v for k, v in sorted(os.environ.items())
           if (k.startswith(("DATACHECK_", "POLARS_")) and k != ENV_WORKERS) or k in ("HOME", "GITHUB_ACTIONS")}
    return {"verb": "audit", "cwd": os.getcwd(), "flags": flags, "config": conf, "env": env}, raw


def begin(args: argparse.Namespace) -> memo.Snapshot | None:
    """The memo's view of the inputs of the audit ``args`` describe, taken before it runs (with the
    config file's bytes: the caller checks that the audit's config is the one they give); None when
    the memo does not apply (:func:`eligible`, a folder holding a link or a special file, a config
    that cannot be read)."""
    if not eligible(args):
        return None
    try:
        static, raw = _static(args, resolve_config_path(args.config, args.paths))
    except OSError:
        return None
    snap = memo.snapshot(list(args.paths), static)
    if snap is not None:
        # the dataset card the audit reads (the audited root's README.md, or one above it): which file
        # it is decides the key (one made or removed above the root is a miss); its bytes are an
        # external file's (name_externals)
        snap.static["card"] = card_path(os.path.commonpath(snap.roots)) if snap.roots else None
        snap.config_raw = raw
    return snap


def _tokenizer_folders(config_values: Any, anchors: list[str]) -> list[str]:
    """The folder of ``[tokens] tokenizer`` when it names a file: the audit loads the whole folder
    (:func:`datacheck.derive.chat.load_chat_tokenizer`: ``tokenizer_config.json``, ``chat_template.jinja``
    beside the named file), so every file there is an input (absolute paths, one per anchor that
    finds the file)."""
    tokens = config_values.get("tokens") if isinstance(config_values, dict) else None
    tok = tokens.get("tokenizer") if isinstance(tokens, dict) else None
    if not isinstance(tok, str) or not tok.strip() or "\0" in tok:
        return []
    cands = [tok] if os.path.isabs(tok) else [os.path.join(a, tok) for a in anchors] + [tok]
    if tok.startswith("~"):  # read as written (joined to the config's folder); expanded too, as external_files does
        cands.append(os.path.expanduser(tok))
    out = []
    for c in cands:
        try:
            if os.path.isfile(c):
                out.append(os.path.dirname(os.path.abspath(c)))
        except (OSError, ValueError):
            continue
    return out


def name_externals(snap: memo.Snapshot, args: argparse.Namespace, config_values: Any, config_path: str | None) -> bool:
    """Add to ``snap`` the files the config's string values (``config_values``: the validated config
    as plain data) name that its listing does not hold (and every file of the folder of a
    ``[tokens] tokenizer`` that names a file), found from the working folder and
    the config's folder (:func:`datacheck.execute.rerun.external_files`; the files the listing of the
    audited folders holds, and those in the cache and the report folder, left out; a file in a hidden
    folder of the data, which the listing leaves out, is kept): call it before the audit reads them. False:
    no memo for this audit (a value is a URL, a named folder holds too many files, or a file cannot
    be stat-ed)."""
    cache_dir = _cache_dir(args)
    values = list(_strings(config_values))
    dataset = config_values.get("dataset") if isinstance(config_values, dict) else None
    schema = dataset.get("schema") if isinstance(dataset, dict) else None
    if isinstance(schema, str) and is_python_schema(schema):  # its module's imports are inputs no hash covers
        return False
    if any(is_url(v) for v in values):  # an object the audit may read from a store: not fingerprinted here
        return False
    anchors = [os.getcwd()] + ([os.path.dirname(os.path.abspath(config_path))] if config_path else [])
    values += _tokenizer_folders(config_values, anchors)
    card = snap.static.get("card")
    if isinstance(card, str):
        values.append(card)  # the dataset card, when above the audited folder (inside it, it is listed)
    folders: list[str] = []
    found = memo.external_files(values, anchors, folders)
    if found is None or cache_dir is None:
        return False
    listed = {os.path.join(root, name) for root, files in zip(snap.roots, snap.files) for name, _ in files}
    skip = [os.path.join(os.path.realpath(d), "") for d in (cache_dir, args.report_dir)]  # its own outputs
    return (snap.add_external_folders(folders, skip)
            and snap.add_externals(f for f in found
                                   if f not in listed and not any(os.path.realpath(f).startswith(x) for x in skip)))


def _write_all(paths: list[str], text: str) -> bool:
    """Write ``text`` to every one of ``paths`` (the config copy first) as the audit writes its reports
    (:func:`write_json_atomic`: a temporary file, fsynced, renamed; the copy by
    :func:`~datacheck.io.reportcopies.write_copy`), each in its own thread, so the waits for the disk overlap
    (a 655 KB report written twice: 12 ms one after the other, 8 ms at once, medians on the 2-core
    development machine). False when one of them could not be written (the verb then runs and says
    why); any other error is raised in the calling thread."""
    errors: list[BaseException] = []

    def write(path: str) -> None:
        try:
            if path == paths[0]:  # the config copy: written again when a concurrent prune removed its folder
                write_copy(path, lambda p: write_atomic(p, text, os_errors=True))
            else:
                write_json_atomic(path, text)
        except BaseException as exc:  # noqa: BLE001 - handed to the calling thread below
            errors.append(exc)

    others = [threading.Thread(target=write, args=(p,), name="datacheck-write") for p in paths[1:]]
    for t in others:
        t.start()
    try:
        write(paths[0])
    finally:
        for t in others:
            t.join()
    for exc in errors:
        if not isinstance(exc, (DatacheckError, OSError)):
            raise exc
    return not errors


def _writable_folder(folder: str) -> bool:
    """Whether the cache folder may be written as the verb requires (:class:`~datacheck.execute.cache.ShardCache`:
    a folder with a write permission bit, root too, that this process may write; or none yet)."""
    try:
        st = os.stat(folder)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and bool(st.st_mode & 0o222) and os.access(folder, os.W_OK)


def replay(argv: Sequence[str]) -> int | None:
    """Answer ``datacheck audit ARGV`` from the memo: write the report and ``--output``, print what
    the audit printed and return its exit code; None when the memo does not answer (the verb runs).
    Nothing is written before the answer is known."""
    try:
        args = parse_audit(argv)
    except _Refused:
        return None
    snap = begin(args)
    if snap is None:
        return None
    cache_dir = _cache_dir(args)
    assert cache_dir is not None  # eligible
    try:  # the verb's own refusals: where they would refuse, the verb runs and says so
        check_outputs({"--output": args.output, "--html": args.html, "--junit": args.junit}, list(args.paths))
        check_output_folders({"--report-dir": args.report_dir, "--cache-dir": cache_dir}, list(args.paths),
                             probe=("--report-dir",))
    except (DatacheckError, OSError):
        return None
    if not _writable_folder(cache_dir):  # the verb refuses it (exit 2), whatever the memo holds
        return None
    corrupt: list[str] = []
    try:
        hit = memo.lookup(cache_dir, snap, trust_states=args.trust_mtime, corrupt=corrupt)
    except (OSError, ValueError, KeyError, TypeError, IndexError):  # a record of an unexpected shape: a miss
        hit = None
    for what in corrupt:  # only a miss: the audit runs and records it anew
        print(f"datacheck: note: whole-audit memo record {what} is not trusted; auditing again", file=sys.stderr)
    if hit is None:
        return None
    stored = hit.stored.split("\0")  # the config copy and the contract file (:func:`finish`)
    if len(stored) != 2 or not _write_all([*stored, *([args.output] if args.output else [])], hit.report_text):
        return None
    copy = os.path.dirname(stored[0])
    prune_copies(os.path.dirname(copy), keep=os.path.basename(copy))  # as the audit bounds them
    sys.stdout.write(hit.stdout)
    if hit.stderr:
        sys.stdout.flush()
        sys.stderr.write(hit.stderr)
        sys.stderr.flush()
    return hit.exit_code


def finish(args: argparse.Namespace, snap: memo.Snapshot, *, report_text: str, created_at: str, stdout: str,
           stderr: str, stored: Sequence[str], exit_code: int) -> bool:
    """Record what the audit ``snap`` was taken for gave (:func:`datacheck.execute.rerun.record`);
    True when recorded. ``stored``: the two files the audit stored the report as, the contract's
    ``<index_hash>/report.json`` and its config copy; recorded as one string, the config copy, a NUL
    (never in a path), the contract file: a replay (:func:`replay`) writes both, and a record that
    names one file only is a miss."""
    cache_dir = _cache_dir(args)
    if cache_dir is None:
        return False
    contract, copy = stored
    return memo.record(cache_dir, snap, report_text=report_text, created_at=created_at, stdout=stdout,
                       stderr=stderr, stored=f"{copy}\0{contract}", exit_code=exit_code)
