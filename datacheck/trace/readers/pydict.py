"""Hugging Face Trainer console lines: the ``log_history`` entry printed as a Python dict::

    {'loss': 0.2051, 'grad_norm': nan, 'learning_rate': 9.774074342405685e-06, 'epoch': 0.53}

possibly after a tqdm bar on the same line (``50/313 [00:03<00:17, 15.2it/s]{'loss': ...}``, the
bar's count is then the step). transformers 5 prints the floats as strings of 4 significant digits
(``{'loss': '0.6931', 'epoch': '0.1597'}``, ``PrinterCallback`` / ``ProgressCallback``); older
versions print the values (the epoch rounded to 2 or 4 decimals, or not at all). Values are Python reprs (``nan``, ``inf`` unquoted), so the line is
read key by key, not by ``ast.literal_eval``. The dict has no step: the caller places it
(:func:`place_by_epoch`, a tqdm count) from the Trainer's header (:func:`parse_header`).

The Trainer counts ``global_step`` after the update, from 1 (``Trainer._inner_training_loop``:
``self.state.global_step += 1`` then ``_maybe_log_save_evaluate``), and sets ``state.epoch = epoch +
(step + 1) / steps_in_epoch`` with ``step`` the micro-batch of the epoch and ``steps_in_epoch`` the
loader's length: ``epoch x update steps per epoch`` is the global step, over it by less than one step
when the loader's length is not a multiple of the gradient accumulation (the last update of an epoch
takes the remainder).
"""
from __future__ import annotations

import math
import re
from typing import Any

from datacheck.trace.readers.fields import BadValue, count_text

__all__ = ["NAME", "parse_line", "parse_header", "place_by_epoch", "on_whole_step", "epoch_decimals", "HF_FIRST_STEP", "HF_WHY", "BANNER"]

NAME = "hf_console"
HF_FIRST_STEP = 1
HF_WHY = "Hugging Face Trainer: global_step counted after the update, from 1"
_DICT = re.compile(r"\{\s*'[A-Za-z_/]+'\s*:.*\}\s*$")
_PAIR = re.compile(r"'([^']+)'\s*:\s*([^,}]+)")
#: (as deepspeed.TQDM) a tqdm bar's ``n/total [elapsed<``; its counts start where a run of digits starts and hold at most
#: 18 digits (a 64-bit integer's): retried inside a long run of digits, the pattern took quadratic time,
#: and a longer count is no bar
_TQDM = re.compile(r"(?<!\d)(\d{1,18})/(\d{1,18})\s*\[\d[\d:]*<")
#: the Trainer's "***** Running training *****" header lines (``Trainer._inner_training_loop``)
_HEADER = re.compile(r"(Num update steps per epoch|Total optimization steps|Num Epochs|Gradient Accumulation steps)"
                     r"\s*=\s*([\d,]+)\s*$")
_HEADER_KEYS = {"Num update steps per epoch": "steps_per_epoch", "Total optimization steps": "total_steps",
                "Num Epochs": "epochs", "Gradient Accumulation steps": "grad_accum"}


def parse_line(text: str) -> dict[str, Any] | None:
    """``{key: value-text}`` of a printed dict line, or None for any other line; a tqdm count before
    the dict on the same line is returned as ``"\\0tqdm"``.

    Raises:
        BadValue: the line holds such a dict but no ``'key': value`` pair.
    """
    at = text.find("{'")
    if at < 0:
        return None
    m = _DICT.match(text, at)
    if m is None:
        return None
    raw = _PAIR.findall(text, at)
    pairs: dict[str, Any] = {k: v.strip().strip("'\"") for k, v in raw}
    if not pairs:
        raise BadValue("a dict line without 'key': value pairs")
    if any(k == "epoch" and v.strip()[:1] in ("'", '"') for k, v in raw):
        pairs["\0sig4"] = True  # printed by the Trainer's callbacks as f"{v:.4g}"
    if at:
        for t in _TQDM.finditer(text, 0, at):  # the last bar drawn before the dict
            pairs["\0tqdm"] = int(t.group(1))
    return pairs


#: the banner ``Trainer._inner_training_loop`` logs (at INFO) when a launch begins training, before its
#: header lines: printed at every launch, a resume's (then "Continuing training from checkpoint") and a
#: restart's alike
BANNER = "***** Running training *****"


def parse_header(text: str) -> tuple[str, int] | None:
    """``(fact, value)`` of a Trainer header line (``steps_per_epoch``, ``total_steps``, ``epochs``,
    ``grad_accum``), or None."""
    if " = " not in text:
        return None
    m = _HEADER.search(text)
    if m is None:
        return None
    try:
        return _HEADER_KEYS[m.group(1)], count_text(m.group(2).replace(",", ""), m.group(1))
    except BadValue:  # more digits than a 64-bit integer: no header the run could print
        return None


def epoch_decimals(epoch_text: str, sig4: bool = False) -> int:
    """Decimals of a printed epoch: with ``sig4`` (the value was printed as ``f"{v:.4g}"``, as
    transformers' ``PrinterCallback`` and ``ProgressCallback`` print floats, trailing zeros dropped)
    those of 4 significant digits; else the decimals written (16 for an exponent form: a full repr)."""
    if sig4:
        try:
            v = abs(float(epoch_text))
        except ValueError:
            return 0
        return 3 - math.floor(math.log10(v)) if v > 0 and math.isfinite(v) else 16
    return len(epoch_text.split(".", 1)[1]) if "." in epoch_text and "e" not in epoch_text.lower() else 16


def on_whole_step(epoch_text: str, steps_per_epoch: int, decimals: int | None = None) -> bool:
    """Whether ``epoch`` (its printed text) x ``steps_per_epoch`` is a whole step within the printing's
    rounding (``rho`` of :func:`place_by_epoch`, the same ``decimals`` rule), as the epoch a Hugging Face
    Trainer logs after update ``k`` is ``k / steps_per_epoch`` over a loader whose length is a multiple of
    the accumulation. False for a text that is no finite number, or when ``rho`` >= 0.25 (not placed)."""
    try:
        epoch = float(epoch_text)
    except ValueError:
        return False
    if not math.isfinite(epoch) or epoch < 0:
        return False
    rho = steps_per_epoch * 0.5 * 10.0 ** -max(epoch_decimals(epoch_text), decimals or 0)
    x = epoch * steps_per_epoch
    return rho < 0.25 and abs(x - round(x)) <= rho + 1e-6


def place_by_epoch(epoch_text: str, steps_per_epoch: int, decimals: int | None = None) -> tuple[int | None, str | None]:
    """The global step of a record logged at ``epoch`` (its printed text), or None and why.

    ``x = epoch x steps_per_epoch`` is the step, or over it by less than one (a loader length that is
    not a multiple of the accumulation). The printed epoch is rounded (older Trainers round it to 2 or
    4 decimals; Python prints a float's shortest repr, so ``0.4`` may be ``0.4000``): ``decimals`` is the
    most decimals the log's epochs have shown (default: this one's), an error of ``rho =
    steps_per_epoch x 0.5 x 10^-decimals`` steps. A value within ``rho`` of an integer is that integer;
    otherwise the integer below. With ``rho`` >= 0.25 the step is not placed.
    """
    try:
        epoch = float(epoch_text)
    except ValueError:
        return None, f"epoch {epoch_text!r} is not a number"
    if not math.isfinite(epoch) or epoch < 0:
        return None, f"epoch {epoch_text!r}"
    digits = max(epoch_decimals(epoch_text), decimals or 0)
    rho = steps_per_epoch * 0.5 * 10.0 ** -digits
    if rho >= 0.25:
        return None, (f"the epoch is printed with {digits} decimal(s): x {steps_per_epoch} steps per epoch it is "
                      f"only known to +/-{rho:.2g} steps")
    x = epoch * steps_per_epoch
    k = round(x)
    return (k if abs(x - k) <= rho + 1e-6 else math.floor(x)), None
