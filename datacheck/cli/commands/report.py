"""``datacheck report REPORT``: render a stored report (text, markdown, JSON or self-contained HTML).

REPORT is a report file, an index hash (or a unique prefix of at least 6 hex digits) looked up
in ``--report-dir`` as ``diff`` does (:func:`datacheck.report.model.find_report`, one resolver): its
``<index_hash>/report.json``, the latest audit of that data; or
``INDEX/CONFIG[.fail-on-X][.against-K][.allow-check-errors][.part-K-of-N]``, a config's copy. An index
hash whose folder also holds copies of other configs (or another ``--fail-on``) is rendered all the same, with a note on stderr naming each of them and the ``INDEX/CONFIG`` that picks it.

Exit codes: 0 rendered; 2 usage error (missing file, not a datacheck report, a newer
``report_version``, unwritable ``--html`` path). The report's own pass/fail status does not change
the exit code here: the gate is ``datacheck audit``.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from datacheck.cli.commands.audit import add_view_arguments
from datacheck.cli.defaults import default_report_dir
from datacheck.io.outputs import check_outputs, write_json_atomic
from datacheck.model.constants import EXIT_OK
from datacheck.render.html import render_html
from datacheck.render.text import render_markdown, render_text
from datacheck.report.model import describe_stored, find_report, read_report, stored_copies

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    a = sub.add_parser("report", help="render a stored report.json (text, markdown, json, or HTML with --html)")
    a.add_argument("report", metavar="REPORT",
                   help="a report file written by datacheck audit; or its index hash (prefix) in --report-dir: "
                        "<index_hash>/report.json, the latest audit of that data; or "
                        "INDEX/CONFIG[.fail-on-X][.against-K][.allow-check-errors][.part-K-of-N] (hash prefixes): that "
                        "config's copy")
    a.add_argument("--report-dir", default=default_report_dir(),
                   help=f"where index hashes are looked up (default {default_report_dir()})")
    a.add_argument("--html", metavar="OUT.html",
                   help="write a self-contained HTML page (inline CSS and SVG charts; works offline)")
    a.add_argument("--format", choices=["text", "markdown", "json", "html"], default=None,
                   help="what to print (default: text, or nothing when --html is given)")
    add_view_arguments(a)
    return a


#: the most other copies a note lists (each one's file is read for its description)
_MAX_LISTED = 10


def _others_note(path: Path, report) -> str:
    """One stderr line naming the config copies stored beside ``path`` (``<index_hash>/report.json`` or
    a copy) of configs or ``--fail-on`` other than ``report``'s, with the ``INDEX/CONFIG`` that picks
    each; "" when there is none."""
    folder = path.parent if path.parent.name == report.index_hash else path.parent.parent
    if folder.name != report.index_hash:
        return ""
    own = (report.config_hash.rpartition(":")[2], report.fail_on)
    try:
        rendered = path.read_bytes()
    except OSError:
        rendered = None
    others = [s for s in stored_copies(folder.parent, folder.name) if s.path != path
              and ((s.config, s.fail_on) != own or _bytes(s.path) != rendered)]
    if not others:
        return ""
    listed = "; ".join(f"{s.ref} ({describe_stored(s.path)})" for s in others[:_MAX_LISTED])
    more = f"; and {len(others) - _MAX_LISTED} more" if len(others) > _MAX_LISTED else ""
    return (f"datacheck: note: {path} is the report of config {report.config_path or 'defaults'} "
            f"(fail_on {report.fail_on}); this data's reports under other configs or --fail-on are stored too: "
            f"{listed}{more}; name one as INDEX/CONFIG\n")


def _bytes(path: Path) -> bytes | None:
    """The bytes of a stored copy (None: unreadable): the copy of the rendered report is the one with
    its bytes (its config and gate alone do not tell the copies of an audit with and without
    ``--against`` apart)."""
    try:
        return path.read_bytes()
    except OSError:
        return None


def run(args: argparse.Namespace) -> int:
    path = find_report(args.report, args.report_dir)
    check_outputs({"--html": args.html}, [str(path)], data=False)  # never over the report it renders
    report = read_report(path)
    if not os.path.lexists(args.report):  # looked up by hash: say which other copies of that data are stored
        print(_others_note(path, report), end="", file=sys.stderr)
    if args.html:
        path = write_json_atomic(args.html, render_html(report))
        print(f"HTML report: {path}", file=sys.stderr)
    fmt = args.format or (None if args.html else "text")
    if fmt == "text":
        sys.stdout.write(render_text(report, show_passing=args.show_passing))
    elif fmt == "markdown":
        sys.stdout.write(render_markdown(report, show_passing=args.show_passing))
    elif fmt == "json":
        sys.stdout.write(report.to_json())
    elif fmt == "html":
        sys.stdout.write(render_html(report))
    return EXIT_OK
