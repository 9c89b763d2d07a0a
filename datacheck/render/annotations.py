"""GitHub Actions annotations for a report (workflow commands ``::error``/``::warning``).

Under GitHub Actions (``GITHUB_ACTIONS=true``) each finding of severity ``error`` or ``warn``
becomes one line ``::error file=PATH,line=N,title=CHECK::MESSAGE`` (``::warning`` for warnings and
for errors that the policy lets pass), so it shows on the pull request's "Files changed" tab and
in the run summary. Values are escaped as the runner expects (``%``, CR, LF everywhere; ``:`` and
``,`` in properties). Lines go to stderr, so stdout stays the report (``--format json`` or the
markdown job summary). At most :data:`MAX_ANNOTATIONS` lines are written (GitHub shows only the
first ones of a step anyway); a final ``::notice`` counts the rest.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import TextIO

from datacheck.report.model import Report

__all__ = ["in_github_actions", "annotation_lines", "emit_annotations", "MAX_ANNOTATIONS"]

#: Most annotation lines written for one report. GitHub displays at most 10 errors and 10
#: warnings per step (GitHub docs, "Workflow commands": annotation limits); 50 leaves a margin for logs.
MAX_ANNOTATIONS = 50


def in_github_actions() -> bool:
    """True when running as a GitHub Actions step (the runner sets ``GITHUB_ACTIONS=true``)."""
    return os.environ.get("GITHUB_ACTIONS") == "true"


def _esc_data(s: str) -> str:
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _esc_prop(s: str) -> str:
    return _esc_data(s).replace(":", "%3A").replace(",", "%2C")


def _file_of(shard: str, root: Path | None) -> str:
    """The shard's path relative to the working directory (what GitHub matches against the repo)."""
    if root is None:
        return shard
    p = (root / shard).resolve()
    try:
        return p.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return os.path.relpath(p)


def annotation_lines(report: Report, root: Path | None = None, limit: int = MAX_ANNOTATIONS) -> list[str]:
    """The workflow-command lines for ``report``: failing findings first, then the other errors and
    warnings; ``info`` findings are not annotated.

    Args:
        report: the audit report.
        root: the audited root folder (shard paths are relative to it); None: paths as in the report.
        limit: most lines; a ``::notice`` line counts the ones left out.
    """
    items = []
    for sh in report.shards:
        for f in sh.findings:
            items.append((sh.path, f))
    for f in report.dataset_findings:
        items.append((f.shards[0] if len(f.shards) == 1 else None, f))
    items = [(p, f) for p, f in items if f.severity in ("error", "warn")]
    items.sort(key=lambda pf: (not pf[1].fails_policy, pf[1].severity != "error"))
    out = []
    for path, f in items[:limit]:
        kind = "error" if f.fails_policy else "warning"
        props = []
        if path is not None:
            props.append(f"file={_esc_prop(_file_of(path, root))}")
            if f.lines:
                props.append(f"line={int(f.lines[0])}")
        title = f"datacheck {f.check}" + (f" ({f.column})" if f.column else "")
        props.append(f"title={_esc_prop(title)}")
        where = f"{path}: " if path else ("dataset: " if not f.shards else f"{', '.join(f.shards[:5])}: ")
        if f.message.startswith(where):  # a dataset finding that names its shard first (dist.*): once
            where = ""
        # rows of a finding over several shards are each some shard's row: bare numbers would not say
        # whose (the report's examples and the JUnit text name the shard of each)
        rows = f" first rows {', '.join(map(str, f.rows[:5]))}" if f.rows and path is not None else ""
        counted = f.count or f.rows or f.lines  # decode.unreadable counts no rows: no "count 0"
        msg = f"{where}{f.message} [{f.severity}{f', count {f.count}' if counted else ''}{';' + rows if rows else ''}]"
        out.append(f"::{kind} {','.join(props)}::{_esc_data(msg)}")
    if len(items) > limit:
        out.append(f"::notice title=datacheck::{len(items) - limit} more finding(s) not annotated; see the report")
    return out


def emit_annotations(report: Report, stream: TextIO, root: Path | None = None) -> None:
    """Write :func:`annotation_lines` to ``stream`` (one per line)."""
    for line in annotation_lines(report, root=root):
        stream.write(line + "\n")
    stream.flush()
