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

__all__ = ["NAME", "CoquiBlocks"]

NAME = "coqui"
_HEAD = re.compile(r"-->\s*TIME:.*?GLOBAL_STEP:\s*(\d+)")
#: metrics kept per block
_MAX_KEYS = 256
_ITEM = re.compile(r"^\s*\|\s*>\s*([^:]+?)\s*:\s*(\S+)")


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
            m = _ITEM.match(text)
            if m:
                if len(self.block) < _MAX_KEYS:  # a block of endless distinct keys holds a bounded few
                    self.block[m.group(1).strip()] = m.group(2)
                return None, True
            done = self.finish()
        if "-->" in text:
            h = _HEAD.search(text)
            if h:
                self.block, self.line = {"step": int(h.group(1))}, n
                self.last_step = int(h.group(1))
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
