"""``datacheck audit PATH...``: the per-shard audit and the versioned report."""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
from typing import Any

from datacheck.cli import rerun as memo
from datacheck.cli.auditargs import EXIT_CODES_HELP, add_ci_arguments, add_parser, add_view_arguments
from datacheck.cli.defaults import default_cache_dir
from datacheck.cli.progress import progress_enabled, stderr_console
from datacheck.execute.audit import run_audit
from datacheck.execute.cache import CacheWarning
from datacheck.execute.parts import audit_part, check_part_args, write_part
from datacheck.execute.setup import AuditOptions
from datacheck.execute.setup import resolve_config_path as _resolve
from datacheck.formats.discovery import discover
from datacheck.io.outputs import check_output_folders, check_outputs, write_json_atomic
from datacheck.model.config import Config, config_from_bytes, load_config
from datacheck.model.constants import EXIT_INTERNAL, EXIT_OK, EXIT_POLICY_FAILED
from datacheck.model.errors import DatacheckError
from datacheck.render.annotations import emit_annotations, in_github_actions
from datacheck.render.html import render_html
from datacheck.render.junit import write_junit
from datacheck.render.text import render_markdown, render_text
from datacheck.report.model import store_report

__all__ = ["add_parser", "add_view_arguments", "add_ci_arguments", "EXIT_CODES_HELP", "emit_report", "printed_text",
           "annotations_text", "reading_line", "run"]


def emit_report(report, args: argparse.Namespace, stored, root=None, text: str | None = None,
                printed: str | None = None, annotations: str | None = None, copy=None) -> int:
    """Write ``--output``/``--junit``, print the report in ``--format``, emit GitHub Actions
    annotations when ``GITHUB_ACTIONS=true`` (on stderr, so stdout stays the report); return the exit code.
    ``text``: the report's JSON when the caller encoded it already (encoded here only for ``--format json``);
    ``printed``/``annotations``: what :func:`printed_text` / :func:`annotations_text` gave, when the caller has it;
    ``copy``: the config-keyed copy of the stored report (printed under it in text)."""
    if getattr(args, "junit", None):
        write_junit(report, args.junit)
    if getattr(args, "html", None):
        write_json_atomic(args.html, render_html(report))
    sys.stdout.write(printed if printed is not None else printed_text(report, args, stored, text, copy))
    if annotations is None:
        annotations = annotations_text(report, root)
    if annotations:
        sys.stderr.write(annotations)
        sys.stderr.flush()
    return exit_code(report, getattr(args, "allow_check_errors", False))


#: the roles whose columns the read path renders with ``[tokens] tokenizer`` (chat messages, preference pairs)
_RENDERED_FROM = ("messages", "chosen", "rejected")


def unused_tokenizer_note(cfg: Config, report) -> str:
    """A note (one stderr line) when ``[tokens] tokenizer`` is set, no audited shard has a role the
    read path renders with it (``messages``, ``chosen``/``rejected``: ``report.roles``) and it gave
    no ``[tokens]`` fact (``report.tokenizer_facts``: the config sets vocab_size and every pad/eos/bos
    id it declares): nothing was checked against it. "" otherwise (also when a shard has such a
    role, whether or not its rows were rendered)."""
    if cfg.tokens.tokenizer is None or getattr(report, "tokenizer_facts", None) \
            or any(r in (getattr(report, "roles", None) or {}) for r in _RENDERED_FROM):
        return ""
    return (f"datacheck: note: [tokens] tokenizer = {cfg.tokens.tokenizer!r} was not used: no audited shard has "
            "chat messages or preference pairs for it to render, and the config already sets the facts it gives "
            "(an audit reads a tokenizer to render them and for [tokens] vocab_size, pad/eos/bos_token_id when unset)\n")


def annotations_text(report, root=None) -> str:
    """The GitHub Actions annotations of ``report`` (:func:`~datacheck.render.annotations.emit_annotations`)
    when ``GITHUB_ACTIONS=true``, else the empty string."""
    if not in_github_actions():
        return ""
    buf = io.StringIO()
    emit_annotations(report, buf, root=root)
    return buf.getvalue()


def printed_text(report, args: argparse.Namespace, stored, text: str | None = None, copy=None) -> str:
    """What ``--format`` prints on stdout: the JSON report (``text`` when encoded already), markdown,
    HTML, or the text summary followed by ``report: <where it was stored>`` and, when ``copy`` is
    given, ``config copy: <the config-keyed copy>`` (:func:`~datacheck.report.model.config_report_path`)."""
    if args.format == "json":
        return text if text is not None else report.to_json()
    if args.format == "markdown":
        return render_markdown(report, show_passing=getattr(args, "show_passing", False))
    if args.format == "html":
        return render_html(report)
    text_ = render_text(report, show_passing=getattr(args, "show_passing", False))
    line = reading_line(getattr(report, "reading", None))
    if line:  # under the summary's first line: what this run read
        head, _, rest = text_.partition("\n")
        text_ = f"{head}\n{line}\n{rest}"
    return text_ + f"report: {stored}\n" + (f"config copy: {copy}\n" if copy is not None else "")


def reading_line(reading: dict[str, Any] | None, memo: bool = False) -> str:
    """The text summary's line saying how the audit got its shards' results, e.g. ``120 shards: 3 read,
    117 from the cache``; with ``memo`` the line a whole-audit memo replay prints (no shard read).
    "" when no cache was used (``--no-cache``: every shard read) or ``reading`` is unknown."""
    if not reading or reading.get("from_cache") is None:
        return ""
    n = reading["shards"]
    if memo:
        return f"{n:,} shard(s): 0 read, the whole audit answered from the memo of an audit of the same files"
    return f"{n:,} shard(s): {reading['read']:,} read, {reading['from_cache']:,} from the cache"


def exit_code(report, allow_check_errors: bool) -> int:
    """0 pass; 3 when checks failed internally (``summary.check_errors``) and that is not allowed,
    with a message on stderr; else 1 when the policy failed."""
    if report.check_errors and not allow_check_errors:
        names = sorted({s["check"] for s in report.skipped if s.get("error")})
        print(f"datacheck: internal error: {report.check_errors} check error(s): datacheck failed to run "
              f"{', '.join(names[:5])} (see 'skipped' in the report); the data was NOT fully checked. "
              "Pass --allow-check-errors to gate on the findings only.", file=sys.stderr)
        return EXIT_INTERNAL
    return EXIT_OK if report.passed else EXIT_POLICY_FAILED


def _progress_enabled(args: argparse.Namespace) -> bool:
    return progress_enabled(args.no_progress)


@contextlib.contextmanager
def _bar():
    """A rich progress bar over the BYTES of the shard set (sizes from the file system), with the
    shard count and the shard being read: ``auditing ━━━━ 1.2/12.9 GB 3/40 shards 0:01:10 a.parquet``.
    Bytes, not shards, so one big shard shows its size and name at once instead of ``0/?``
    (progress inside one shard's query is not observable; the bar moves when a shard finishes).
    Yields ``(progress, byte_progress)`` callbacks for :func:`datacheck.api.audit`; the task is
    added at the first call, when the total is known, so no frame shows an unknown total.

    The display (and its refresh thread) starts at that first call too, not before: with worker
    processes the first call comes after the pool started, so the audit's process still runs no
    thread of its own when its workers are forked
    (:func:`~datacheck.execute.executors.fork_is_safe`)."""
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(TextColumn("auditing"), BarColumn(), DownloadColumn(), TextColumn("{task.fields[shards]}"),
                   TimeElapsedColumn(), TextColumn("{task.description}"), transient=True,
                   console=stderr_console(), redirect_stdout=False)  # on stderr, whatever stdout is
    state: dict[str, Any] = {"task": None, "shards": ""}

    def tick_bytes(path: str, done: int, total: int) -> None:
        if state["task"] is None:
            bar.start()
            state["task"] = bar.add_task(path, total=total, completed=done, shards=state["shards"])
        bar.update(state["task"], completed=done, total=total, description=path, shards=state["shards"])

    def tick(path: str, done: int, total: int) -> None:
        state["shards"] = f"{done:,}/{total:,} shards"
        if state["task"] is not None:
            bar.update(state["task"], shards=state["shards"])

    try:
        yield tick, tick_bytes
    finally:
        bar.stop()  # nothing to stop when no call came


def resolve_config_path(given: str | None, paths: list[str]) -> str | None:
    """The config to use (one rule for every entry point): see :func:`datacheck.api.resolve_config_path`."""
    return _resolve(given, paths)


def _same(cfg: Config) -> tuple[dict, str | None]:
    """What makes two configs the same for an audit: every value, and the folder relative paths start from."""
    return cfg.to_dict(), getattr(cfg, "_folder", None)


def _config_of(snap, args: argparse.Namespace, config_path: str | None) -> tuple[dict, str | None] | None:
    """:func:`_same` of the config the bytes in the memo's key give (``snap.config_raw``), read as
    :func:`run` reads the file; None when they give none (the audit then records no memo)."""
    try:
        cfg = (config_from_bytes(snap.config_raw, config_path,
                                 allow_python_schema=args.config is not None or args.allow_python_schema)
               if config_path is not None and snap.config_raw is not None else Config())
        return _same(cfg.with_schema(args.schema) if getattr(args, "schema", None) else cfg)
    except DatacheckError:
        return None


def run(args: argparse.Namespace) -> int:
    import warnings

    snap = memo.begin(args)  # before the config is read: a change while the audit runs records nothing
    config_path = resolve_config_path(args.config, args.paths)
    cfg = (load_config(config_path, allow_python_schema=args.config is not None or args.allow_python_schema)
           if config_path is not None else Config())
    if getattr(args, "schema", None):
        cfg = cfg.with_schema(args.schema)
    split = check_part_args(args.num_parts, args.part)  # before any shard is read

    check_outputs({"--output": args.output, "--html": args.html, "--junit": args.junit},
                  [*args.paths, *(getattr(args, "against", None) or [])])
    cache_dir = None if args.no_cache else (args.cache_dir or default_cache_dir())
    check_output_folders({"--report-dir": args.report_dir, "--cache-dir": cache_dir},
                         [*args.paths, *(getattr(args, "against", None) or [])], probe=("--report-dir",))

    opts = AuditOptions(fail_on=args.fail_on, config_path=config_path, cache_dir=cache_dir,
                        prune_cache=args.cache_prune, trust_mtime=args.trust_mtime,
                        allow_check_errors=args.allow_check_errors,
                        workers=args.workers, executor=args.executor, ray_address=args.ray_address,
                        follow_symlinks=args.follow_symlinks, against=tuple(getattr(args, "against", None) or ()))

    if snap is not None and not (_config_of(snap, args, config_path) == _same(cfg)
                                 and memo.name_externals(snap, args, cfg.model_dump(), config_path)):
        snap = None

    def go(progress, byte_progress):
        if split is not None:
            return audit_part(args.paths, cfg, opts, split[0], split[1], progress=progress,
                              byte_progress=byte_progress)
        return run_audit(args.paths, cfg, opts, progress=progress, byte_progress=byte_progress)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CacheWarning)
        if _progress_enabled(args):
            with _bar() as (tick, tick_bytes):
                result = go(tick, tick_bytes)
        else:
            result = go(None, None)
    for w in caught:
        if issubclass(w.category, CacheWarning):
            print(f"datacheck: warning: {w.message}", file=sys.stderr)
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    text: str | None = None
    against = getattr(args, "against", None)
    if split is not None:
        written = {}

        def write(path):
            written[path] = write_part(result, path)

        # the config-keyed copy first: the contract file, written last, is the latest
        stored, copy = store_report(args.report_dir, result.report, "", against, args.allow_check_errors, write=write,
                                    part=(split[1], split[0]))
        report = written[stored]
        if args.output:
            write_part(result, args.output)
    else:
        report = result
        text = report.to_json()
        stored, copy = store_report(args.report_dir, report, text, against, args.allow_check_errors)
        if args.output:
            write_json_atomic(args.output, text)
    root = None
    if os.environ.get("GITHUB_ACTIONS") == "true":
        root = discover(list(args.paths), cfg.dataset.format).root
    printed = printed_text(report, args, stored, text, copy)
    annotations = unused_tokenizer_note(cfg, report) + annotations_text(report, root)  # stderr, kept by the memo
    rc = emit_report(report, args, stored, root, text, printed, annotations)
    if snap is not None and text is not None and not caught and not report.check_errors and rc in (EXIT_OK,
                                                                                                  EXIT_POLICY_FAILED):
        line = reading_line(report.reading)  # a replay reads no shard: it says so
        replayed = printed.replace(f"\n{line}\n", f"\n{reading_line(report.reading, memo=True)}\n", 1) \
            if line and args.format == "text" else printed
        memo.finish(args, snap, report_text=text, created_at=report.created_at, stdout=replayed, stderr=annotations,
                    stored=[str(stored), str(copy)], exit_code=rc)
    return rc
