"""Keyed formats: one mapping of metric name -> value per step (JSONL lines, CSV rows, Hugging Face
``log_history`` entries, grouped TensorBoard scalars) into a :class:`StepRecord`."""
from __future__ import annotations

from typing import Any, Mapping

from datacheck.trace.readers.fields import EVAL_KEYS, BadValue, bounded_int, field_of, to_float, to_int
from datacheck.trace.record import StepRecord

__all__ = ["record_from_mapping", "eval_record_beside"]

_INT_FIELDS = frozenset(("step", "rank", "skipped", "nan_steps"))
_EVAL = "\0eval"  # the cache's mark of an eval-loss key
_MISS = object()
#: key as written -> field (or _EVAL, or None): a log repeats the same few keys on every line, so
#: lower-casing and prefix removal run once per distinct key. Bounded (a log with ever-new keys
#: stops adding after this many).
_FIELD_CACHE: dict[Any, str | None] = {}
_FIELD_CACHE_MAX = 4096


def _resolve(k: Any) -> str | None:
    kl = str(k).strip().lower()
    f = _EVAL if kl in EVAL_KEYS else field_of(kl)
    if len(_FIELD_CACHE) < _FIELD_CACHE_MAX:
        _FIELD_CACHE[k] = f
    return f


def record_from_mapping(d: Mapping[str, Any], source: str, line: int | None, rank: int | None = None,
                        fallback_step: int | None = None) -> StepRecord | None:
    """The record of one keyed entry, or None when it holds no training or eval metric (e.g. a CSV row
    of test metrics) or is the Hugging Face Trainer's run summary (``train_runtime`` / ``total_flos``:
    its ``train_loss`` is the mean over the run, never a step's loss; in ``trainer_state.json`` and on
    the console alike).

    Args:
        d: metric name -> value (names per :mod:`datacheck.trace.readers.fields`).
        source, line: where it came from (messages).
        rank: the rank from the file name, used when the entry has no rank key.
        fallback_step: the step to use when the entry names none (then ``step_inferred``); None
            makes an entry without a step a :class:`BadValue`.

    Raises:
        BadValue: a metric value is not a number, or no step is given and there is no fallback.
    """
    if "train_runtime" in d or "total_flos" in d:  # the Trainer's run summary: train_loss is the run's mean
        return None
    vals: dict[str, Any] = {}
    eval_loss = None
    for k, v in d.items():
        f = _FIELD_CACHE.get(k, _MISS)
        if f is _MISS:
            f = _resolve(k)
        if f is None:
            continue
        if f == _EVAL:
            eval_loss = v if type(v) is float else to_float(v, str(k))
            continue
        if f in vals:
            continue
        if f in _INT_FIELDS:
            vals[f] = bounded_int(v, str(k), f) if type(v) is int else to_int(v, str(k))
            if f in ("rank", "step") and vals[f] is not None:
                bounded_int(vals[f], str(k), f)
        else:
            vals[f] = v if type(v) is float else to_float(v, str(k))
    split = "train"
    get = vals.get
    if get("loss") is None and get("grad_norm") is None and get("lr") is None and get("loss_scale") is None:
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


def eval_record_beside(d: Mapping[str, Any], rec: StepRecord) -> StepRecord | None:
    """The eval record of an entry that also holds training metrics (a TensorBoard step with
    ``train/loss`` and ``eval/loss``, a W&B history row): its eval loss at ``rec``'s step, or None."""
    if rec.split != "train":
        return None
    for k, v in d.items():
        f = _FIELD_CACHE.get(k, _MISS)
        if f is _MISS:
            f = _resolve(k)
        if f == _EVAL:
            try:
                loss = v if type(v) is float else to_float(v, str(k))
            except BadValue:
                return None
            if loss is not None:
                return StepRecord(step=rec.step, source=rec.source, line=rec.line, rank=rec.rank, split="eval",
                                  loss=loss, step_inferred=rec.step_inferred)
    return None
