"""Keyed formats: one mapping of metric name -> value per step (JSONL lines, CSV rows, Hugging Face
``log_history`` entries, grouped TensorBoard scalars) into a :class:`StepRecord`."""
from __future__ import annotations

from typing import Any, Mapping

from datacheck.trace.readers.fields import EVAL_KEYS, BadValue, field_of, to_float, to_int
from datacheck.trace.record import StepRecord

__all__ = ["record_from_mapping"]

_INT_FIELDS = ("step", "rank", "skipped", "nan_steps")


def record_from_mapping(d: Mapping[str, Any], source: str, line: int | None, rank: int | None = None,
                        fallback_step: int | None = None) -> StepRecord | None:
    """The record of one keyed entry, or None when it holds no training or eval metric (e.g. a
    Hugging Face run summary, a CSV row of test metrics).

    Args:
        d: metric name -> value (names per :mod:`datacheck.trace.readers.fields`).
        source, line: where it came from (messages).
        rank: the rank from the file name, used when the entry has no rank key.
        fallback_step: the step to use when the entry names none (then ``step_inferred``); None
            makes an entry without a step a :class:`BadValue`.

    Raises:
        BadValue: a metric value is not a number, or no step is given and there is no fallback.
    """
    vals: dict[str, Any] = {}
    eval_loss = None
    for k, v in d.items():
        kl = str(k).strip().lower()
        if kl in EVAL_KEYS:
            eval_loss = to_float(v, str(k))
            continue
        f = field_of(kl)
        if f is None or f in vals:
            continue
        vals[f] = to_int(v, str(k)) if f in _INT_FIELDS else to_float(v, str(k))
    metrics = [vals.get(f) for f in ("loss", "grad_norm", "lr", "loss_scale")]
    split = "train"
    if all(m is None for m in metrics):
        if eval_loss is None:
            return None
        split, vals["loss"] = "eval", eval_loss
    inferred = False
    if vals.get("step") is None:
        if fallback_step is None:
            raise BadValue("no step key (step, global_step, _step, iter, iteration)")
        vals["step"], inferred = fallback_step, True
    if vals.get("rank") is None:
        vals["rank"] = rank
    return StepRecord(source=source, line=line, split=split, step_inferred=inferred, **vals)
