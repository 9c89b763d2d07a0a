"""Megatron-LM / Megatron-DeepSpeed iteration lines (``training.py training_log``)::

     iteration       30/    1000 | consumed samples:          120 | elapsed time per iteration (ms): 1376.1 |
     learning rate: 1.500E-04 | global batch size:     4 | lm loss: 2.247505E+01 | loss scale: 16384.0 |
     grad norm: 16.999 | number of skipped iterations:   1 | number of nan iterations:   0 |

and validation lines (``validation loss at iteration 100 | lm loss value: 7.9 | lm loss PPL: ...``).
Megatron leaves ``lm loss`` out when every iteration of the logging interval was skipped, and averages
only the iterations that were not skipped (``training_log``: ``total_loss_dict``); ``consumed
samples`` is a sample count (kept as ``tokens``, unit samples). A line cut at its end (a log truncated
mid-write) keeps the fields before the cut; a line a terminal wrapped onto the next (which ends with the
closing ``|``) is joined by the text reader. A line holding a field twice (two processes writing one
stdout, their lines interleaved mid-line) keeps a non-finite value of it over a finite one.
"""
from __future__ import annotations

import math
import re
from typing import Any

from datacheck.trace.readers.fields import BadValue, count_text, to_float, to_int

__all__ = ["NAME", "parse_line", "starts_iteration", "cut_iteration"]

NAME = "megatron"
_ITER = re.compile(r"^\s*iteration\s+(\d+)\s*/\s*(\d+)\s*\|")
_VALID = re.compile(r"validation loss at iteration\s+(\d+)\s*\|(.*)$")
#: an iteration or validation line whose iteration is not a count (``iteration -5/ 20 |``,
#: ``iteration abc/ 20 |``, ``validation loss at iteration -1 |``): an unparsed line, never noise
_ITER_ANY = re.compile(r"^\s*iteration\s+([^\s/|]+)\s*/\s*([^\s|]*)\s*\|")
_VALID_ANY = re.compile(r"validation loss at iteration\s+([^\s|]+)\s*\|")
_INT = re.compile(r"-?\d+")
_KEYS = {
    "consumed samples": "tokens", "elapsed time per iteration (ms)": "wall_time_ms", "learning rate": "lr",
    "lm loss": "loss", "loss scale": "loss_scale", "grad norm": "grad_norm",
    "number of skipped iterations": "skipped", "number of nan iterations": "nan_steps",
}


def _fields(rest: str) -> dict[str, str]:
    out = {}
    for part in rest.split("|"):
        k, sep, v = part.partition(":")
        if sep and v.strip():
            out[k.strip().lower()] = v.strip()
    return out


#: a field's key as it appears between the separators (blanks included) -> record field (None: not
#: one datacheck reads); a log repeats the same keys on every line, so each is normalised once.
_FIELD_OF_RAW: dict[str, str | None] = {}
_RAW_MAX = 1024


def _number(v: str, key: str, field: str) -> float | int | None:
    """``v`` as the field's number by the checked converters (blank -> None, ``1.0`` as a count).

    Raises:
        BadValue: not a number (not an integer for the iteration counts).
    """
    k, v = key.strip(), v.strip()
    return to_int(v, k) if field == "skipped" or field == "nan_steps" else to_float(v, k)


def _count(v: str, key: str) -> int:
    """``v`` as an iteration count.

    Raises:
        BadValue: negative, not an integer, or beyond a 64-bit integer."""
    if _INT.fullmatch(v) is None:
        raise BadValue(f"{key}: {v[:40]!r} is not an integer")
    return count_text(v, key, "step")


def starts_iteration(text: str) -> bool:
    """Whether ``text`` is (the start of) an iteration line."""
    return "iteration" in text and _ITER.match(text) is not None


def cut_iteration(text: str) -> bool:
    """An iteration line that does not end with its closing ``|`` (wrapped, or cut mid-write)."""
    return "iteration" in text and not text.rstrip().endswith("|") and _ITER.match(text) is not None


def parse_line(text: str) -> dict[str, Any] | None:
    """The fields of a Megatron iteration or validation line, or None for any other line.

    Raises:
        BadValue: a known field's value is not a number, or the iteration (or the run's total after
            its ``/``) is not a count: negative, not an integer, or beyond a 64-bit integer (a run of
            digits longer than ``fields.MAX_COUNT_DIGITS`` included); ``consumed samples`` not finite
            (``nan``, or digits beyond any float).
    """
    if "iteration" not in text:  # cheap test first: most lines of a mixed log are not Megatron's
        return None
    m = _ITER.match(text)
    if m is None and _VALID.search(text) is None \
            and (bad := _ITER_ANY.match(text) or _VALID_ANY.search(text)) is not None:
        for i, key in enumerate(("iteration", "iterations")[:len(bad.groups())]):
            _count(bad.group(i + 1), key)  # raises for every line these match that _ITER and _VALID do not
    if m:
        out: dict[str, Any] = {"step": count_text(m.group(1), "iteration", "step")}
        for part in text[m.end():].split("|"):  # split + partition: 1.4x faster than a findall here
            k, _, v = part.partition(":")
            f = _FIELD_OF_RAW.get(k)
            if f is None:
                if k in _FIELD_OF_RAW or len(_FIELD_OF_RAW) >= _RAW_MAX:
                    continue
                f = _FIELD_OF_RAW[k] = _KEYS.get(k.strip().lower())
                if f is None:
                    continue
            try:  # int() / float() accept the blanks around the value; the checked converters when they fail
                x: float | int | None = int(v) if f == "skipped" or f == "nan_steps" else float(v)
            except ValueError:
                x = _number(v, k, f)
            if f == "tokens" and x is not None and not math.isfinite(x):
                raise BadValue(f"consumed samples: {v.strip()[:40]!r} is not a sample count")
            if f == "wall_time_ms":
                out["wall_time"] = None if x is None else x / 1000.0
            elif f in out and isinstance(out[f], float) and not math.isfinite(out[f]):
                continue  # the field twice (two ranks' lines interleaved mid-line): a non-finite value stays
            else:
                out[f] = x
        return out
    m = _VALID.search(text)
    if m:
        vals = _fields(m.group(2))
        v = vals.get("lm loss value")
        if v is None:
            raise BadValue("validation line without 'lm loss value'")
        return {"step": count_text(m.group(1), "iteration", "step"), "loss": to_float(v, "lm loss value"),
                "split": "eval"}
    return None
