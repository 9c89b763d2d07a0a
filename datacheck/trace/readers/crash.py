"""A run that crashed: the Python traceback a console log ends with.

A training process that stops on an exception (an embedding's ``IndexError`` on a token id beyond the
vocabulary, a CUDA device-side assert's ``RuntimeError``, a loss that raises) prints Python's
``Traceback (most recent call last):`` line, the frames (indented), and the exception's line
(``IndexError: index out of range in self``, at the start of the line) on stderr; a console log that
captures stderr ends with it. The header is its line's own, or follows a tqdm bar on it (the bar,
redrawn with ``\r`` and no newline, is still on the line when the traceback starts). Other output may come between (tqdm's bar, other processes' lines: a
launcher's rank prefix, torchrun's ``[rank1]:``, is taken off before a line comes here, and tells the
traceback's rank).

A traceback is a crash only when it is complete (its exception line was read) and no training record
of its rank (or of any rank, when the traceback or the record names none) comes after it (a traceback a
launcher merged from the process's separate stderr, torchrun's ``--tee`` ``[defaultN]:`` or OpenMPI's
tags, may come before the last records the process wrote to stdout: up to :data:`MAX_REORDERED` of
its rank's records after it are taken as such): a traceback
a loop caught and logged in the middle of a healthy run (``logger.exception``), or the word
``Traceback`` inside a logged message, is no crash. Of chained tracebacks ("During handling of the
above exception ...") the last one's exception is the one that ended the process.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from datacheck.trace.readers.deepspeed import TQDM

__all__ = ["HEADER", "Tracebacks"]

#: the line Python starts a traceback with (at the start of its line, after a launcher's prefix)
HEADER = "Traceback (most recent call last):"
#: an exception's line, not indented: a (dotted) class name as exceptions are named, then its message
_EXCEPTION = re.compile(
    r"((?:[A-Za-z_]\w*\.)*(?:[A-Za-z_]\w*(?:Error|Exception|Interrupt|Failure|Fault)|SystemExit|StopIteration"
    r"|GeneratorExit))(?::[ \t]?(.*))?[ \t\r]*$")
#: lines a traceback may span (frames and other output between) before its header is let go
MAX_TRACEBACK_LINES = 5000
#: records of its rank a launcher-merged traceback may come before (its stdout read behind its stderr)
MAX_REORDERED = 3
#: characters of the exception's line kept
_TEXT = 300


@dataclass
class Tracebacks:
    """The complete tracebacks of a console log not followed by a training record of their rank, fed
    line by line (:meth:`line`, :meth:`trained`); :meth:`crash` is the first of them (by line).

    Attributes:
        open: per rank (None: no launcher prefix), the line of a traceback header whose exception line
            has not come yet.
        done: per rank, the last complete traceback no training record of that rank has followed:
            ``{"line" (the exception's line, 1-based), "traceback_line" (its header's), "exception"
            (the class name), "message", "text" (the exception line, at most 300 characters), "rank"}``.
    """

    open: dict[int | None, int] = field(default_factory=dict)
    done: dict[int | None, dict[str, Any]] = field(default_factory=dict)

    def line(self, n: int, text: str, rank: int | None, tee: bool = False) -> None:
        """Read line ``n`` (1-based; ``text`` without the launcher's prefix; ``rank`` the prefix's, or None;
        ``tee``: a launcher merged it from the process's separate stdout and stderr)."""
        if not self.open and "Traceback" not in text:
            return
        stripped = text.strip()
        if stripped == HEADER or (stripped.endswith(HEADER) and TQDM.search(stripped[:-len(HEADER)]) is not None):
            self.open[rank] = n  # a chained traceback's header replaces the one before
            return
        start = self.open.get(rank)
        if start is None:
            return
        if text[:1] not in (" ", "\t") and (m := _EXCEPTION.match(text)) is not None:
            del self.open[rank]
            self.done[rank] = {"line": n, "traceback_line": start, "exception": m.group(1),
                               "message": (m.group(2) or "").strip()[:_TEXT], "text": stripped[:_TEXT],
                               "rank": rank, "reordered": MAX_REORDERED if tee else 0}
        elif n - start > MAX_TRACEBACK_LINES:
            del self.open[rank]

    def trained(self, rank: int | None, line: int | None) -> None:
        """A training record of ``rank`` at line ``line``: the tracebacks before that line of that rank
        (or all, for a record or traceback without a rank) stopped no run."""
        if self.done:
            for r in [r for r, c in self.done.items() if (line is None or c["line"] < line) and (r is None or rank is None or r == rank)]:
                if self.done[r]["reordered"] > 0:  # a record its rank wrote to stdout before the crash
                    self.done[r]["reordered"] -= 1
                else:
                    del self.done[r]

    def crash(self) -> dict[str, Any] | None:
        """The first (by line) traceback no training record followed (see :attr:`done`), None when none."""
        first = min(self.done.values(), key=lambda c: c["line"], default=None)
        return None if first is None else {k: v for k, v in first.items() if k != "reordered"}
