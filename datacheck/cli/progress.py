"""Progress displays of the CLI verbs that can run for more than a few seconds (audit, clean,
index build and verify, schema infer, plan, trace --data): drawn on **stderr**, and only when stderr is a
terminal, whatever stdout is (``datacheck audit data/ > report.txt`` still shows the bar; a
``2>log`` or a CI job never gets one).

Shown when :func:`progress_enabled`: stderr is a TTY, ``--no-progress`` was not given, ``$CI`` is
unset and ``$TERM`` is not ``dumb``. The display is a ``rich`` progress bar on a console bound to
stderr, transient (erased when the verb ends). What a verb prints to stdout while it is drawn
goes to stdout: when stdout is a terminal too it is printed above the bar (``rich``'s stdout
redirection, onto the same screen), else it is not touched (a pipe or file gets every byte).
"""
from __future__ import annotations

import contextlib
import os
import sys
from typing import Any, Iterator

__all__ = ["Ticker", "progress_enabled", "activity", "stderr_console"]


def progress_enabled(no_progress: bool = False) -> bool:
    """Whether to draw progress: stderr is a terminal, not ``--no-progress``, not ``$CI``, not ``TERM=dumb``."""
    return (not no_progress and sys.stderr.isatty() and not os.environ.get("CI")
            and os.environ.get("TERM") != "dumb")


def stderr_console() -> Any:
    """A ``rich`` console writing to stderr (the one every progress display draws on)."""
    from rich.console import Console

    return Console(stderr=True)


class Ticker:
    """What a verb reports progress to: ``ticker(what, done, total)`` (a step of a known number, e.g.
    ``("writing a.parquet", 3, 8)``) or ``ticker.stage(what)`` (a step of unknown length: a spinner
    and the elapsed time). A disabled ticker (no terminal) does nothing."""

    def __init__(self, bar: Any = None, task: Any = None):
        self._bar, self._task = bar, task

    def __call__(self, what: str, done: int, total: int) -> None:
        if self._bar is not None:
            self._bar.update(self._task, description=what, completed=done, total=max(total, 1))

    def stage(self, what: str) -> None:
        if self._bar is not None:
            self._bar.update(self._task, description=what, completed=0, total=None)


@contextlib.contextmanager
def activity(label: str, *, no_progress: bool = False) -> Iterator[Ticker]:
    """A progress display for the block: ``label ━━━━ 3/8 0:00:04 writing a.parquet`` on stderr when
    :func:`progress_enabled`, else a ticker that does nothing. The task exists from the first frame
    (a spinner until the first count arrives)."""
    if not progress_enabled(no_progress):
        yield Ticker()
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(SpinnerColumn(), TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.description}"), console=stderr_console(), transient=True,
                  redirect_stdout=sys.stdout.isatty()) as bar:
        yield Ticker(bar, bar.add_task("", total=None))
