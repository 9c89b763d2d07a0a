"""fp16 loss-scaler overflow lines: DeepSpeed's ``loss_scaler.py update_scale`` and apex's ``amp``.

DeepSpeed::

    [2023-06-07 22:16:00,018] [INFO] [loss_scaler.py:181:update_scale] [deepspeed] OVERFLOW! Rank 0
    Skipping step. Attempted loss scale: 64, reducing to 32
    ... OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, but hysteresis is 2. Reducing hysteresis to 1

apex (``apex/amp/scaler.py``): ``Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 16384.0``.

Each is one skipped optimizer step. These lines carry no step number: when a tqdm progress bar
(``378/2724 [13:58:09<...``) precedes it on the same line, its count is the step; otherwise the
step is the previous record's step + 1 (``step_inferred``).
"""
from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from datacheck.trace.readers.fields import count_text, to_float

__all__ = ["NAME", "parse_line", "TQDM"]

NAME = "deepspeed"
_DS = re.compile(r"OVERFLOW!\s+Rank\s+(\d+)\s+Skipping step\.\s+Attempted loss scale:\s*([^\s,]+)"
                 r"(?:,\s*reducing to\s*([^\s,]+)|,\s*but hysteresis is\s*(\d+))")
_APEX = re.compile(r"Gradient overflow\.\s+Skipping step,\s+loss scaler\s+(\d+)\s+reducing loss scale to\s*([^\s,]+)")
#: a tqdm bar's ``n/total [elapsed<remaining`` (the step count when it precedes an overflow line)
#: a tqdm bar's ``n/total [elapsed<``; its counts start where a run of digits starts and hold at most
#: 18 digits (a 64-bit integer's): retried inside a long run of digits, the pattern took quadratic time,
#: and a longer count is no bar
TQDM = re.compile(r"(?<!\d)(\d{1,18})/(\d{1,18})\s*\[\d[\d:]*<")
_STAMP = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})\]")


def parse_line(text: str) -> dict[str, Any] | None:
    """The fields of an overflow line (``overflow``, ``loss_scale``, ``prev_scale``, ``rank``,
    ``skipped`` = 1, and ``step`` when a tqdm count precedes it), or None for any other line."""
    if "OVERFLOW!" not in text and "Gradient overflow" not in text:  # cheap test before the regexes
        return None
    m = _DS.search(text)
    if m:
        prev = to_float(m.group(2), "attempted loss scale")
        new = to_float(m.group(3), "reducing to") if m.group(3) else prev  # hysteresis: scale kept
        out: dict[str, Any] = {"overflow": True, "rank": count_text(m.group(1), "Rank"), "prev_scale": prev, "loss_scale": new,
                               "skipped": 1}
    else:
        m = _APEX.search(text)
        if not m:
            return None
        new = to_float(m.group(2), "loss scale")
        out = {"overflow": True, "loss_scale": new, "prev_scale": None if new is None else new * 2.0, "skipped": 1}
    t = TQDM.search(text, 0, m.start())
    if t:
        out["step"] = int(t.group(1))
    s = _STAMP.search(text)
    if s:
        out["wall_time"] = datetime.strptime(s.group(1), "%Y-%m-%d %H:%M:%S").timestamp() + int(s.group(2)) / 1000
    return out
