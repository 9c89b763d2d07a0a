"""Lines that state a bad value outside the metrics line: a warning or an error a trainer prints
when it sees a NaN/inf, e.g.

- ``Bad grad_norm detected (grad_norm=nan)`` (a warning before Megatron's iteration line);
- ``Loss is Infinity`` / ``Loss is nan, stopping training`` (BigDL / ipex fine-tuning scripts, timm,
  MAE and DeiT loops);
- Megatron-LM's ``Rank 1, node n, device 0, iteration 42: Unexpected result nan (message='found NaN in
  local grad norm ...')`` (``check_for_nan_in_grad``).

Each is a record of the stated value (``stated`` holds the line), placed on the step the line names,
else on the next metrics record of the same rank (the warning precedes the line that logs its
interval), else after the previous one.
"""
from __future__ import annotations

import re
from typing import Any

from datacheck.trace.readers.fields import count_text

__all__ = ["NAME", "parse_line"]

NAME = "stated"
_BAD = r"(nan|-?inf(?:inity)?)"
_DETECTED = re.compile(rf"(?i)bad\s+(grad[_ ]norm|loss)\s+detected\s*\(\s*(grad[_ ]norm|loss)\s*=\s*{_BAD}\s*\)")
_LOSS_IS = re.compile(rf"(?i)\bloss\s+is\s+{_BAD}\b")
#: Megatron's ``Rank N: found NaN in local grad norm ... unexpected result nan``-style check: the value
#: (``_MEGATRON``), then later on the line what held it (``_MEGATRON_WHERE``, its last mention), searched
#: one after the other (one pattern with ``.*`` between them retried the rest of the line from every
#: ``unexpected result``: quadratic time on a line of many)
_MEGATRON = re.compile(rf"(?i)unexpected result\s+{_BAD}\b")
_MEGATRON_WHERE = re.compile(r"(?i)found\s+(nan|inf)\s+in\s+(?:local\s+)?(grad norm|loss)")
_RANK = re.compile(r"\bRank\s+(\d+)\b")
_ITER = re.compile(r"\biteration\s+(\d+)\s*:")


def _value(text: str) -> float:
    t = text.lower()
    return float("nan") if t == "nan" else float("-inf") if t.startswith("-") else float("inf")


def parse_line(text: str) -> dict[str, Any] | None:
    """``{"loss" or "grad_norm": the stated value, "stated": the line, ...}`` (with ``step`` and
    ``rank`` when the line names them), or None for any other line.

    Raises:
        BadValue: the rank or iteration the line names is beyond a 64-bit integer.
    """
    low = text.lower()
    if "nan" not in low and "inf" not in low:
        return None
    m = _DETECTED.search(text)
    if m:
        field, value = ("loss" if m.group(2).lower() == "loss" else "grad_norm"), _value(m.group(3))
    else:
        m = _MEGATRON.search(text)
        where = None
        if m:
            for where in _MEGATRON_WHERE.finditer(text, m.end()):  # the last, as a greedy .* between them took
                pass
        if m and where:
            field, value = ("loss" if where.group(2).lower() == "loss" else "grad_norm"), _value(m.group(1))
        else:
            m = _LOSS_IS.search(text)
            if not m:
                return None
            field, value = "loss", _value(m.group(1))
    out: dict[str, Any] = {field: value, "stated": text.strip()[:200]}
    r = _RANK.search(text)
    if r:
        out["rank"] = count_text(r.group(1), "Rank")
    it = _ITER.search(text)
    if it:
        out["step"] = count_text(it.group(1), "iteration", "step")
    return out
