"""Key names of the metrics formats (JSONL, CSV, TensorBoard tags, ``key=value`` text) -> record fields.

One table for every keyed format, so a key is recognised the same way in all of them. Keys are
compared lower-cased, with the prefixes in :data:`PREFIXES` removed (W&B's ``train/loss``,
TensorBoard's ``train/loss``, Lightning's ``train_loss``).
"""
from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

__all__ = ["FIELD_OF", "EVAL_KEYS", "STEP_KEYS", "field_of", "number_text", "to_float", "to_int", "bounded_int", "count_text", "BadValue",
           "RANK_IN_NAME", "MAX_RANK", "keyed_convention", "lightning_logger_dir", "LIGHTNING_LAYOUT_WHY"]

#: field -> the key names that mean it (after lower-casing and prefix removal).
_ALIASES: dict[str, tuple[str, ...]] = {
    "step": ("step", "global_step", "_step", "iter", "iteration", "iterations", "trainer/global_step", "it",
             "num_steps", "optimizer_step", "steps", "train/step"),
    "loss": ("loss", "train_loss", "lm loss", "lm_loss", "training_loss", "train loss", "loss_step",
             "train_loss_step"),
    "grad_norm": ("grad_norm", "grad norm", "gradient_norm", "gnorm", "grad_norm_total", "total_grad_norm",
                  "grad_l2", "total_norm", "grad_norm_step"),
    "lr": ("lr", "learning_rate", "learning rate", "lr-adamw", "lr-adam", "lr-sgd", "lr_0", "lr-0", "current_lr"),
    "loss_scale": ("loss_scale", "loss scale", "scaler", "grad_scale", "scale"),
    "rank": ("rank", "global_rank", "local_rank_global", "dp_rank"),
    "epoch": ("epoch",),
    "tokens": ("tokens", "num_tokens", "tokens_seen", "consumed_tokens", "num_input_tokens_seen",
               "trained tokens", "consumed samples", "consumed_samples"),
    "wall_time": ("_timestamp", "timestamp", "wall_time", "time", "_runtime"),
    "skipped": ("skipped", "skipped_steps", "skipped_iterations", "number of skipped iterations"),
    "nan_steps": ("number of nan iterations", "nan_iterations"),
    "non_finite_frac": ("frac_non_finite_loss",),  # TRL: the share of a step's losses that were non-finite
}
PREFIXES = ("train/", "train_", "training/", "trainer/", "optim/", "optimizer/", "throughput/",
            "trainiterstats/")  # Coqui TTS's trainer: TrainIterStats/loss, TrainIterStats/current_lr
FIELD_OF: dict[str, str] = {k: f for f, keys in _ALIASES.items() for k in keys}
STEP_KEYS = set(_ALIASES["step"])
#: keys of evaluation metrics: a record holding one of these and no training loss is an eval record.
EVAL_KEYS = ("eval_loss", "val_loss", "valid_loss", "validation_loss", "val/loss", "eval/loss", "val loss",
             "validation/loss", "valid/loss", "lm loss value", "test_loss", "val_loss_epoch", "val_loss_step",
             "evalstats/avg_loss", "evalstats/loss")
#: a rank in a log's file name: ``rank3.log``, ``train-rank-03.jsonl``, ``log_rank_1.txt``
RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)


class BadValue(ValueError):
    """A metric key whose value is not a number (the line is counted as unparsed)."""


def field_of(key: str) -> str | None:
    """The record field ``key`` names, or None. ``"train/loss"`` -> ``"loss"``; ``"val_loss"`` -> None."""
    k = key.strip().lower()
    if k in FIELD_OF:
        return FIELD_OF[k]
    if k.startswith(("lr-", "lr/")):  # Lightning's LearningRateMonitor: lr-AdamW, lr-AdamW/pg1, lr-<name>
        return "lr"
    for p in PREFIXES:
        if k.startswith(p) and k[len(p):] in FIELD_OF:
            return FIELD_OF[k[len(p):]]
    return None


#: non-finite spellings of other C runtimes: MSVC's ``1.#QNAN``, ``1.#SNAN``, ``-1.#IND``, ``1.#INF``
#: (``printf`` before Visual Studio 2015) and C99's ``nan(0x...)`` / ``NaN(...)`` with a payload
_NON_FINITE_ALT = re.compile(r"(?i)^([-+]?)(?:1\.#(qnan|snan|ind|inf)0*|nan\([0-9a-z_]*\)?)$")
#: a PyTorch tensor printed as a metric (``loss tensor(2.31, device='cuda:0', grad_fn=<...>)``): its number
_TENSOR_PREFIX = re.compile(r"^tensor\(\[?")


def number_text(text: str) -> float | None:
    """The number a metric's text spells, or None: Python's ``float`` syntax (``nan``, ``-inf``,
    ``Infinity``, any case), the spellings of :data:`_NON_FINITE_ALT`, and a printed tensor's first
    number (``tensor(nan`` as a ``key value`` reader cuts ``tensor(nan, device='cuda:0')``)."""
    t = _TENSOR_PREFIX.sub("", text.strip()).rstrip(",)]")
    try:
        return float(t)
    except ValueError:
        pass
    m = _NON_FINITE_ALT.match(t)
    if m is None:
        return None
    if (m.group(2) or "").lower() == "inf":
        return -math.inf if m.group(1) == "-" else math.inf
    return math.nan


def to_float(v: Any, key: str) -> float | None:
    """A metric value as float: numbers, numeric strings (:func:`number_text`: ``nan``/``inf`` in any
    case, MSVC's ``1.#QNAN``/``1.#INF``, ``nan(0x...)``, a printed ``tensor(...)``), ``None``/``""`` -> None.

    Raises:
        BadValue: a string or object that is not a number.
    """
    if v is None or v == "":
        return None
    if isinstance(v, bool):
        raise BadValue(f"{key}: {v!r} is not a number")
    if isinstance(v, int):
        try:
            return float(v)
        except OverflowError:  # an integer of hundreds of digits: beyond any float, as 1e400 is
            return math.inf if v > 0 else -math.inf
    if isinstance(v, float):
        return v
    if isinstance(v, str):
        x = number_text(v)
        if x is None:
            raise BadValue(f"{key}: {v[:80]!r} is not a number")
        return x
    raise BadValue(f"{key}: {type(v).__name__} value is not a number")


def to_int(v: Any, key: str) -> int | None:
    """A step/rank/count as int (``"10"``, ``10.0`` accepted; ``10.5``, NaN refused).

    Raises:
        BadValue: not an integral number.
    """
    f = to_float(v, key)
    if f is None:
        return None
    if not math.isfinite(f) or f != int(f):
        raise BadValue(f"{key}: {str(v)[:40]!r} is not an integer")
    return bounded_int(int(f), key)


#: the most ranks a log may name (ranks 0 .. 2**20 - 1): a rank sizes the set of expected ranks
MAX_RANK = 2**20


def bounded_int(v: int, key: str, field: str | None = None) -> int:
    """``v`` when it fits a 64-bit integer (and, for ``field == "rank"``, lies in ``0 .. MAX_RANK - 1``;
    for ``field == "step"``, is not negative: every trainer counts its steps from 0 or 1).

    Raises:
        BadValue: beyond those bounds (the line is counted as unparsed, never used to size anything).
    """
    if not -(2**63) <= v < 2**63:
        raise BadValue(f"{key}: {str(v)[:40]}... is beyond a 64-bit integer")
    if field == "step" and v < 0:
        raise BadValue(f"{key}: {v} is negative, not a training step (steps count from 0 or 1)")
    if field == "rank" and not 0 <= v < MAX_RANK:
        raise BadValue(f"{key}: {v} is not a rank (0 .. {MAX_RANK - 1})")
    return v


#: the most decimal digits of a count read from a log's text: 2**63 - 1 has 19. A longer run of digits
#: (leading zeros aside) is beyond a 64-bit integer before ``int()`` is called: CPython refuses to
#: convert more than 4,300 digits (``sys.get_int_max_str_digits``, a ValueError) and converts fewer in
#: quadratic time.
MAX_COUNT_DIGITS = 19


def count_text(digits: str, key: str, field: str | None = None) -> int:
    """A count a regex captured as a run of decimal digits (an iteration, a rank, a tqdm position) as
    int, by :func:`bounded_int`'s rule.

    Raises:
        BadValue: more than :data:`MAX_COUNT_DIGITS` digits after leading zeros (beyond a 64-bit
            integer), or beyond :func:`bounded_int`'s bounds for ``field``.
    """
    d = digits.strip().lstrip("0")
    if len(d) > MAX_COUNT_DIGITS:
        raise BadValue(f"{key}: {d[:40]}... is beyond a 64-bit integer")  # bounded_int's words
    return bounded_int(int(d or "0"), key, field)


LIGHTNING_WHY = "Lightning: global_step counts the updates done before this one, from 0"
HF_KEY_WHY = "Hugging Face global_step: counted after the update, from 1"


def keyed_convention(keys: Any) -> tuple[int, str] | None:
    """How the logger of a keyed record (JSONL line, CSV header, TensorBoard tags) counts steps, when
    its keys name it: Lightning's (``trainer/global_step``, ``lr-<Optimizer>`` of its
    LearningRateMonitor, ``*_step`` / ``*_epoch`` pairs of ``self.log(on_step, on_epoch)``) from 0;
    Hugging Face's ``global_step`` / ``train/global_step`` from 1; None otherwise."""
    low = {str(k).strip().lower() for k in keys}
    if "trainer/global_step" in low or any(k.startswith("lr-") for k in low) or any(
            k.endswith("_step") and k[:-5] + "_epoch" in low for k in low):
        return 0, LIGHTNING_WHY
    if "global_step" in low or "train/global_step" in low:
        return 1, HF_KEY_WHY
    return None


LIGHTNING_LAYOUT_WHY = ("Lightning Trainer logger (version_N folder, an epoch value with every training record): "
                        "its step is global_step, the updates done before this one, from 0")
#: the folder of one Lightning logger run: ``version_<N>`` (``CSVLogger`` / ``TensorBoardLogger``'s default
#: ``version``; a string ``version`` names the folder freely and is not recognised)
_VERSION_DIR = re.compile(r"version_\d{1,9}")


def lightning_logger_dir(path: Path, kind: str) -> bool:
    """Whether ``path`` lies where a Lightning Trainer's logger writes: ``kind`` ``"csv"``: a
    ``metrics.csv`` in a ``version_<N>`` folder (``CSVLogger``'s ``NAME_METRICS_FILE``); ``"tensorboard"``:
    an event file in a ``version_<N>`` folder that holds ``hparams.yaml`` (``TensorBoardLogger.save``
    writes it; Fabric's loggers, whose step is the caller's own, write no hparams.yaml there and log no
    ``epoch``). The caller also requires the Trainer's ``epoch`` key in the records
    (``_LoggerConnector.log_metrics`` adds it to every training record), so a file merely named so is
    not taken for Lightning's."""
    parent = path.parent
    if _VERSION_DIR.fullmatch(parent.name) is None:
        return False
    if kind == "csv":
        return path.name == "metrics.csv"
    return (parent / "hparams.yaml").is_file()
