"""Coqui TTS trainer console blocks (the ``trainer`` package's ``ConsoleLogger``)::

     --> TIME: 2023-04-11 10:21:54 -- STEP: 24/406 -- GLOBAL_STEP: 25
     | > loss: 0.52837  (0.61020)
     | > current_lr: 0.0001
     | > grad_norm: 1.2  (1.3)
     | > step_time: 0.35  (0.34)

One block is one record: the step is ``GLOBAL_STEP``, each ``| > key: value  (running average)``
line a metric (keys as in :mod:`datacheck.trace.readers.fields`; the running average in parentheses
is not read). An evaluation block (``--> EVAL PERFORMANCE`` followed by ``| > avg_loss: ...``) is an
eval record at the last training block's step. The block ends at the next line that is not a
``| >`` line.
"""
from __future__ import annotations

import re
from typing import Any

from datacheck.trace.readers.fields import BadValue, count_text

__all__ = ["NAME", "CoquiBlocks"]

NAME = "coqui"
#: a block's head is ``--> TIME:`` followed, later on the line, by ``GLOBAL_STEP: N``; the two are
#: searched one after the other (one pattern ``-->\s*TIME:.*?GLOBAL_STEP:`` retried the rest of the
#: line from every ``-->``: quadratic time on a line of many)
_HEAD = re.compile(r"-->\s*TIME:")
_GLOBAL_STEP = re.compile(r"GLOBAL_STEP:\s*(\d+)")
#: metrics kept per block
_MAX_KEYS = 256
#: a metric line starts ``| >``; its key runs to the first ``:`` and its value is the first word after
#: it (split by str methods: the pattern ``\s*([^:]+?)\s*:\s*(\S+)`` backtracked in cubic time over
#: a line of blanks without a ``:``)
_ITEM_START = re.compile(r"\s*\|\s*>")


def _item(text: str) -> tuple[str, str] | None:
    """``(key, value text)`` of a ``| > key: value`` line, or None when the line is not one (no key
    before its first ``:``, or no value after it)."""
    m = _ITEM_START.match(text)
    if m is None:
        return None
    key, sep, rest = text[m.end():].partition(":")
    value = rest.split(None, 1)
    if not sep or not key or not value:
        return None
    return key.strip(), value[0]


def _head_step(text: str) -> int | None:
    """The ``GLOBAL_STEP`` of a block's head line, or None when ``text`` is not one (a step of more
    digits than a 64-bit integer holds included: the line is then no head)."""
    h = _HEAD.search(text)
    g = _GLOBAL_STEP.search(text, h.end()) if h is not None else None
    if g is None:
        return None
    try:
        return count_text(g.group(1), "GLOBAL_STEP", "step")
    except BadValue:
        return None


class CoquiBlocks:
    """Feed lines in order; :meth:`feed` returns ``(line of the block, {key: value text})`` of a block
    that the line completes (with ``"step"``, and ``"\\0eval"`` for an eval block), and whether the
    line belonged to a block (so other parsers skip it)."""

    def __init__(self) -> None:
        self.block: dict[str, Any] | None = None
        self.line = 0
        self.last_step: int | None = None

    def feed(self, n: int, text: str) -> tuple[tuple[int, dict[str, Any]] | None, bool]:
        done = None
        if self.block is not None:
            item = _item(text)
            if item is not None:
                if len(self.block) < _MAX_KEYS:  # a block of endless distinct keys holds a bounded few
                    self.block[item[0]] = item[1]
                return None, True
            done = self.finish()
        if "-->" in text:
            step = _head_step(text)
            if step is not None:
                self.block, self.line = {"step": step}, n
                self.last_step = step
                return done, True
            if "EVAL PERFORMANCE" in text and self.last_step is not None:
                self.block, self.line = {"step": self.last_step, "\0eval": True}, n
                return done, True
        return done, False

    def finish(self) -> tuple[int, dict[str, Any]] | None:
        """The block being read, if any (at the end of the log)."""
        b, self.block = self.block, None
        if b is None or len(b) <= (2 if "\0eval" in b else 1):
            return None
        return self.line, b
