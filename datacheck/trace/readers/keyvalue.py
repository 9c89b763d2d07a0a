"""Plain-text metric lines: ``key value``, ``key: value`` or ``key=value`` pairs on one line, e.g.

- nanoGPT: ``iter 10: loss 4.6810, time 52.57ms, mfu 7.09%`` and ``step 250: train loss 1.9, val loss 2.1``;
- mlx-lm: ``Iter 50: Train loss 1.406, Learning Rate 7.000e-05, It/sec 0.942, ...``;
- mmengine: ``Epoch(train) [1][200/735]  lr: 1.9870e-04 ... loss: 2.7522  grad_norm: 3.0608``
  (iteration within the epoch: the step is ``(epoch - 1) * iters_per_epoch + iter``);
- ``epoch: 3451 loss: nan`` (a loop that logs once per epoch: the epoch is the step);
- ``step=10 loss=2.31 lr=1e-4``;
- llm.c's ``main.log``: ``s:120 trl:3.2812 lr:0.000600 norm:0.91`` (training), ``s:250 tel:3.41``
  (validation), ``s:250 eval:0.29`` (HellaSwag accuracy: not a loss, not read).

How the trainer counts (:mod:`datacheck.trace.steps`) is returned as ``"\0first"`` when the line's
shape names it: nanoGPT's ``iter N: loss`` and llm.c's ``s:N`` from 0, mlx-lm's ``Iter N: Train loss``
and mmengine's ``Epoch(train) [e][i/n]`` from 1.

A line is a record when it names a step (``iter``, ``iteration``, ``step``, ``epoch``) and at least
one of loss / grad norm / learning rate; a value is a number as
:func:`~datacheck.trace.readers.fields.number_text` reads it (``nan``/``inf``, MSVC's ``1.#QNAN``, a
printed ``tensor(2.31, device='cuda:0')``); a line whose loss or grad norm is not a number
(``loss: ???``), or whose only metrics are not numbers, is counted as unparsed, never read without
that value. A line with ``val loss`` / ``Val loss`` is an eval record; a train loss on it (nanoGPT's
``train loss A``) is its ``eval_train_loss``.
"""
from __future__ import annotations

import re
from typing import Any

from datacheck.trace.readers.fields import BadValue, count_text, number_text, to_float

__all__ = ["NAME", "parse_line", "parse_with_regex"]

NAME = "key_value"
_NUM = r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|nan|inf|infinity)(?![\w.])"
_KEY = {  # normalised key (lower case, "_" as " ") -> field; "eval" = a validation loss
    "iter": "step", "iteration": "step", "step": "step", "global step": "step", "epoch": "epoch",
    "loss": "loss", "train loss": "loss", "lm loss": "loss",
    "val loss": "eval", "eval loss": "eval", "validation loss": "eval",
    "lr": "lr", "learning rate": "lr",
    "grad norm": "grad_norm", "gnorm": "grad_norm",
    "loss scale": "loss_scale",
    "rank": "rank", "tokens": "tokens", "trained tokens": "tokens",
}
_KEYS_RE = "|".join(sorted((re.escape(k).replace(r"\ ", "[ _]") for k in _KEY), key=len, reverse=True))
_PAIR = re.compile(rf"(?i)(?<![\w/])({_KEYS_RE})\s*[:=]?\s*(\S+?)(?=[\s,;:|%]|ms\b|$)")
_MMENGINE = re.compile(r"Epoch\((train|val)\)\s*\[(\d+)\]\[\s*(\d+)\s*/\s*(\d+)\]")
_NUM_RE = re.compile(rf"(?i)^{_NUM}$")
_LLMC = re.compile(r"^\s*s:(\d+)\s+(trl|tel):(\S+)(?:\s+lr:(\S+))?(?:\s+norm:(\S+))?")
_NANOGPT = re.compile(r"^\s*iter \d+: loss ")
_MLX = re.compile(r"^\s*Iter \d+: Train loss ")
FIRST_LLMC = (0, "llm.c: s:N is the 0-based step of the update")
FIRST_NANOGPT = (0, "nanoGPT: iter counts the updates done before this one, from 0")
FIRST_MLX = (1, "mlx-lm: Iter counts from 1")
FIRST_MMENGINE = (1, "mmengine: Epoch(train) [e][i/n] counts iterations from 1")


def _llmc(text: str) -> dict[str, Any] | None:
    m = _LLMC.match(text)
    if m is None:
        return None
    out: dict[str, Any] = {"step": count_text(m.group(1), "s", "step"), "\0first": FIRST_LLMC}
    out["loss"] = to_float(m.group(3), m.group(2))
    if m.group(2) == "tel":
        out["split"] = "eval"
    if m.group(4) is not None:
        out["lr"] = to_float(m.group(4), "lr")
    if m.group(5) is not None:
        out["grad_norm"] = to_float(m.group(5), "norm")
    return out


def parse_line(text: str) -> dict[str, Any] | None:
    """The fields of a metric line, or None when the line is not one (no step key, or no metric).

    Raises:
        BadValue: a step and a metric key are present but a metric's value is not a number.
    """
    if text.lstrip().startswith("s:"):
        return _llmc(text)
    low = text.lower()
    if "iter" not in low and "step" not in low and "epoch" not in low:  # no step key: not a metric line
        return None
    found: dict[str, Any] = {}
    bad: list[str] = []
    judged_bad = False
    mm = _MMENGINE.search(text)
    if mm:
        epoch, it, per = (count_text(mm.group(i), "Epoch(train)") for i in (2, 3, 4))
        found["step"] = (epoch - 1) * per + it
        found["epoch"] = float(epoch)
        if mm.group(1) == "val":
            found["split"] = "eval"
        found["\0first"] = FIRST_MMENGINE
        text = text[mm.end():]
    for key, value in _PAIR.findall(text):
        f = _KEY.get(re.sub(r"[ _]+", " ", key.lower()))
        if f is None or f in found:
            continue
        v = float(value) if _NUM_RE.match(value) else number_text(value)
        if v is None:
            bad.append(f"{key}: {value!r}")
            if f in ("loss", "eval", "grad_norm"):
                judged_bad = True
            continue
        found[f] = int(v) if f in ("step", "rank") and v.is_integer() else v
    if "step" not in found and isinstance(found.get("epoch"), float) and found["epoch"].is_integer():
        found["step"] = int(found["epoch"])  # a loop that logs once per epoch
        found["\0epoch_step"] = True
    metrics = [k for k in ("loss", "lr", "grad_norm", "eval", "loss_scale") if k in found]
    if "step" not in found or not (metrics or bad):
        return None
    if bad and (judged_bad or not metrics):  # a loss or grad norm that is no number is never dropped silently
        raise BadValue("; ".join(bad) + ": not a number")
    if "\0first" not in found:
        first = FIRST_NANOGPT if _NANOGPT.match(text) else FIRST_MLX if _MLX.match(text) else None
        if first is not None:
            found["\0first"] = first
    if "eval" in found:  # a validation line (nanoGPT's "step N: train loss A, val loss B" is one too)
        found["split"] = "eval"
        if "loss" in found:  # the train loss measured at the eval (nanoGPT's estimate_loss)
            found["eval_train_loss"] = found["loss"]
        found["loss"] = found.pop("eval")
    return found


def parse_with_regex(text: str, rx: re.Pattern[str]) -> dict[str, Any] | None:
    """The named groups of a user's ``--regex`` (``step``, ``loss``, ``lr``, ``grad_norm``,
    ``loss_scale``, ``rank``, ``epoch``, ``tokens``) on a line it matches, or None.

    Raises:
        BadValue: a group's text is not a number.
    """
    m = rx.search(text)
    if not m:
        return None
    out: dict[str, Any] = {}
    for k, v in m.groupdict().items():
        if v is None:
            continue
        f = to_float(v, k)
        out[k] = int(f) if k in ("step", "rank") and f is not None and f.is_integer() else f
    if "step" not in out:
        raise BadValue("the --regex matched but its (?P<step>...) group did not")
    return out
