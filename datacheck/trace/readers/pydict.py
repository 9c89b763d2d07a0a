"""Hugging Face Trainer console lines: the ``log_history`` entry printed as a Python dict::

    {'loss': 0.2051, 'grad_norm': nan, 'learning_rate': 9.774074342405685e-06, 'epoch': 0.53}

Values are Python reprs (``nan``, ``inf`` unquoted), so the line is read key by key, not by
``ast.literal_eval``. The line has no step: the caller supplies it (a tqdm count on an earlier line,
or the previous record's step + 1).
"""
from __future__ import annotations

import re
from typing import Any

from datacheck.trace.readers.fields import BadValue

__all__ = ["NAME", "parse_line"]

NAME = "hf_console"
_LINE = re.compile(r"^\s*\{\s*'[A-Za-z_/]+'\s*:.*\}\s*$")
_PAIR = re.compile(r"'([^']+)'\s*:\s*([^,}]+)")


def parse_line(text: str) -> dict[str, Any] | None:
    """``{key: value-text}`` of a printed dict line, or None for any other line.

    Raises:
        BadValue: the line opens like such a dict but holds no ``'key': value`` pair.
    """
    if "{'" not in text or not _LINE.match(text):
        return None
    pairs = {k: v.strip().strip("'\"") for k, v in _PAIR.findall(text)}
    if not pairs:
        raise BadValue("a dict line without 'key': value pairs")
    return pairs
