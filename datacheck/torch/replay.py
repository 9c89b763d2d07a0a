"""Replay one exported batch on a fixed model: train mode, eval mode and fp32, row by row.

``datacheck trace --export FILE`` (and ``datacheck plan --export``, ``datacheck inspect --export``)
writes the rows of a step. This module turns that file into tensors (:func:`batch_from_export`) and
runs the model on them in each mode (:func:`replay_batch`) to answer: does the step go non-finite in
train mode only (dropout, batch-norm statistics), in eval mode too, or only in the run's reduced
precision (fp16/bf16 overflow), and which rows make the per-row loss non-finite.

torch is imported lazily (:func:`datacheck.model.torchdep.require_torch`).
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import polars as pl

from datacheck.model.errors import UsageError
from datacheck.model.torchdep import require_torch

__all__ = ["MODES", "ReplayBatch", "ModeResult", "ReplayResult", "batch_from_export", "replay_batch"]

#: the replay modes, in the order they run
MODES = ("train", "eval", "fp32")
#: the row id columns of the export formats, the first present wins: ``trace --export``'s global row
#: index, ``plan --export``'s global index, ``inspect --export``'s row in its shard
ROW_ID_COLUMNS = ("__dc_row", "_datacheck_global_index", "_datacheck_row")
_META_PREFIXES = ("__dc_", "_datacheck_")


@dataclass
class ReplayBatch:
    """A fixed batch for :func:`replay_batch`.

    Attributes:
        inputs: the model's input, a tensor with the rows on dim 0 (``[B, F]`` float features or
            ``[B, L]`` token ids).
        targets: the loss targets (``[B]`` or ``[B, ...]``), or None when ``loss_fn`` needs none.
        rows: the id of each row (length B): the export's row index (see :data:`ROW_ID_COLUMNS`),
            or the position 0..B-1 for a batch built by hand.
    """

    inputs: Any
    targets: Any
    rows: list[int]


@dataclass
class ModeResult:
    """One mode's outcome.

    Attributes:
        mode: ``train``, ``eval`` or ``fp32``.
        dtype: the compute dtype (``float16`` under autocast, ``float32``, ...).
        loss: the batch loss (the mean of the per-row losses), float (NaN/inf kept).
        finite: whether ``loss`` is finite.
        grad_norm: the global L2 norm of the gradients of this backward (train mode only, else None).
        grad_finite: whether ``grad_norm`` is finite (None outside train mode).
        row_loss: the per-row loss (mean over any non-batch dims), one float per row.
        bad_rows: the ids of the rows whose per-row loss is NaN or inf.
    """

    mode: str
    dtype: str
    loss: float
    finite: bool
    grad_norm: float | None = None
    grad_finite: bool | None = None
    row_loss: list[float] = field(default_factory=list)
    bad_rows: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        def num(x: float | None) -> Any:
            return x if x is None or math.isfinite(x) else str(x)
        return {"mode": self.mode, "dtype": self.dtype, "loss": num(self.loss), "finite": self.finite,
                "grad_norm": num(self.grad_norm), "grad_finite": self.grad_finite,
                "row_loss": [num(x) for x in self.row_loss], "bad_rows": self.bad_rows}


@dataclass
class ReplayResult:
    """Per mode, a :class:`ModeResult`; ``rows`` the batch's row ids in order."""

    modes: dict[str, ModeResult]
    rows: list[int]

    def to_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "modes": {k: v.to_dict() for k, v in self.modes.items()}}


def batch_from_export(path: str | Path, features: Sequence[str], target: str | None = None, *,
                      feature_dtype: str = "float32", target_dtype: str = "int64",
                      step: int | None = None) -> ReplayBatch:
    """Read an export file (``.parquet``/``.pq`` or ``.jsonl``/``.ndjson``, as ``trace``, ``plan`` and
    ``inspect`` write it) into a :class:`ReplayBatch`, rows in file order.

    Args:
        path: the export.
        features: the input columns: several numeric columns stack into ``[B, F]``; one list column
            (token ids) becomes ``[B, L]`` (its lists must have one length: pad them first otherwise).
        target: the target column (``[B]``), or None.
        feature_dtype, target_dtype: torch dtype names of the tensors (default float32 / int64).
        step: keep only this step's rows (``__dc_step`` / ``_datacheck_step``; an export of
            ``trace --window K`` holds several steps); None keeps every row.

    Raises:
        UsageError: the file cannot be read, has no row id column, lacks a named column, holds a
            null in it (the row id is named), or its list column is ragged.
        OptionalDependencyError: torch is not installed.
    """
    torch = require_torch("datacheck.torch.replay")
    p = Path(path)
    name = p.name.lower()
    try:
        if name.endswith((".parquet", ".pq")):
            df = pl.read_parquet(p, glob=False)  # a name holding [, * or ? is a name
        elif name.endswith((".jsonl", ".ndjson")):
            df = pl.read_ndjson(p.read_bytes())  # (read_ndjson expands a path as a glob)
        else:
            raise UsageError(f"{path}: an export is .parquet or .jsonl (as trace/plan/inspect --export write)")
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise UsageError(f"{path}: cannot read the export ({str(exc).splitlines()[0]})") from None
    if step is not None:
        col = next((c for c in ("__dc_step", "_datacheck_step") if c in df.columns), None)
        if col is None:
            raise UsageError(f"{path}: no step column (__dc_step / _datacheck_step) to select step {step} by")
        df = df.filter(pl.col(col) == step)
        if df.height == 0:
            raise UsageError(f"{path}: no row of step {step}")
    id_col = next((c for c in ROW_ID_COLUMNS if c in df.columns), None)
    if id_col is None:
        raise UsageError(f"{path}: no row id column ({', '.join(ROW_ID_COLUMNS)}): not a datacheck export")
    data_cols = [c for c in df.columns if not c.startswith(_META_PREFIXES)]
    for c in [*features, *([target] if target else [])]:
        if c not in df.columns:
            raise UsageError(f"{path}: no column {c!r}; its data columns are {data_cols}")
        nulls = df.filter(pl.col(c).is_null())[id_col].to_list()
        if nulls:
            raise UsageError(f"{path}: column {c!r} is null in row(s) {nulls[:10]}: a replay needs a value "
                             "(fill it as the training collate did, then build the ReplayBatch yourself)")
    rows = [int(r) for r in df[id_col].to_list()]
    fdt = getattr(torch, feature_dtype)
    if len(features) == 1 and isinstance(df.schema[features[0]], (pl.List, pl.Array)):
        lists = df[features[0]].to_list()
        lengths = {len(v) for v in lists}
        if len(lengths) > 1:
            raise UsageError(f"{path}: column {features[0]!r} holds lists of {sorted(lengths)[:5]} lengths: pad "
                             "them as the training collate did, then build the ReplayBatch yourself")
        inputs = torch.tensor(lists, dtype=fdt)
    else:
        for c in features:
            if not df.schema[c].is_numeric():
                raise UsageError(f"{path}: column {c!r} is {df.schema[c]}, not numeric: give numeric feature "
                                 "columns, or one list column of token ids")
        inputs = torch.tensor(df.select(features).to_numpy().astype("float64"), dtype=fdt)
    targets = torch.tensor(df[target].to_list(), dtype=getattr(torch, target_dtype)) if target else None
    return ReplayBatch(inputs=inputs, targets=targets, rows=rows)


def replay_batch(model: Any, batch: ReplayBatch | tuple[Any, Any], loss_fn: Callable[[Any, Any], Any],
                 modes: Sequence[str] = MODES, *, dtype: Any = None) -> ReplayResult:
    """Run ``model`` on one fixed batch in each mode and report loss, grad norm and the rows whose
    per-row loss is non-finite. The model is left as it was: parameters, buffers (batch-norm
    statistics), gradients, train/eval flag and torch's CPU random state are restored, and each mode
    starts from that state (a train-mode forward updates batch-norm statistics: eval does not see them).

    Modes:
        ``train``: ``model.train()``, forward and backward of the mean loss (no optimizer step), under
        ``torch.autocast`` with ``dtype`` when given (the run's mixed precision); ``grad_norm`` is the
        L2 norm of the gradients of this backward alone.
        ``eval``: ``model.eval()``, forward only, same precision as train.
        ``fp32``: a float32 copy of the model in eval mode, float32 inputs, no autocast: a row that is
        finite here and not in eval mode overflows (or underflows) in the reduced precision.

    Args:
        model: a ``torch.nn.Module`` taking ``batch.inputs``.
        batch: a :class:`ReplayBatch` (e.g. from :func:`batch_from_export`) or ``(inputs, targets)``.
        loss_fn: ``loss_fn(outputs, targets)`` -> per-row losses (``reduction="none"``: shape ``[B]``
            or ``[B, ...]``, averaged over the non-batch dims per row).
        modes: a subset of :data:`MODES`.
        dtype: the run's autocast dtype for train and eval (``torch.float16``, ``torch.bfloat16``), or
            None for the model's own precision.

    Raises:
        UsageError: an unknown mode, or ``loss_fn`` does not return one loss per row.
        OptionalDependencyError: torch is not installed.
    """
    torch = require_torch("datacheck.torch.replay_batch")
    bad = [m for m in modes if m not in MODES]
    if bad:
        raise UsageError(f"replay modes {bad} unknown; expected a subset of {MODES}")
    if not isinstance(batch, ReplayBatch):
        inputs, targets = batch
        batch = ReplayBatch(inputs=inputs, targets=targets, rows=list(range(len(inputs))))
    params = list(model.parameters())
    device = params[0].device if params else torch.device("cpu")
    was_training = model.training
    state = copy.deepcopy(model.state_dict())
    grads = [None if q.grad is None else q.grad.detach().clone() for q in params]
    out: dict[str, ModeResult] = {}
    try:
        with torch.random.fork_rng(devices=[]):
            for mode in modes:
                model.load_state_dict(state)  # each mode from the state the model came in with
                x, y = batch.inputs.to(device), None if batch.targets is None else batch.targets.to(device)
                if mode == "fp32":
                    m32 = copy.deepcopy(model).float().eval()
                    if x.is_floating_point():
                        x = x.float()
                    with torch.no_grad():
                        per_row = _per_row(loss_fn(m32(x), y), len(batch.rows))
                    out[mode] = _result(mode, "float32", per_row, None, batch.rows)
                    continue
                cast = torch.autocast(device.type, dtype=dtype) if dtype is not None else _null()
                if mode == "train":
                    model.train()
                    for q in params:
                        q.grad = None
                    with cast:
                        per_row = _per_row(loss_fn(model(x), y), len(batch.rows))
                    per_row.float().mean().backward()
                    norms = [q.grad.detach().float().norm() for q in params if q.grad is not None]
                    gn = float(torch.linalg.vector_norm(torch.stack(norms))) if norms else 0.0
                    out[mode] = _result(mode, _dtype_name(dtype, params), per_row.detach(), gn, batch.rows)
                else:
                    model.eval()
                    with torch.no_grad(), cast:
                        per_row = _per_row(loss_fn(model(x), y), len(batch.rows))
                    out[mode] = _result(mode, _dtype_name(dtype, params), per_row, None, batch.rows)
    finally:
        model.load_state_dict(state)
        for q, g in zip(params, grads):
            q.grad = g
        model.train(was_training)
    return ReplayResult(modes=out, rows=list(batch.rows))


class _null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


def _dtype_name(dtype: Any, params: list[Any]) -> str:
    d = dtype if dtype is not None else (params[0].dtype if params else None)
    return str(d).replace("torch.", "") if d is not None else "float32"


def _per_row(loss: Any, n: int) -> Any:
    if loss.dim() == 0 or loss.shape[0] != n:
        raise UsageError(f"loss_fn returned shape {tuple(loss.shape)}: it must give one loss per row "
                         f"({n} rows; use reduction='none')")
    return loss.reshape(n, -1).float().mean(dim=1) if loss.dim() > 1 else loss.float()


def _result(mode: str, dtype: str, per_row: Any, grad_norm: float | None, rows: list[int]) -> ModeResult:
    vals = [float(v) for v in per_row.tolist()]
    loss = sum(vals) / len(vals) if vals else float("nan")
    return ModeResult(mode=mode, dtype=dtype, loss=loss, finite=math.isfinite(loss), grad_norm=grad_norm,
                      grad_finite=None if grad_norm is None else math.isfinite(grad_norm), row_loss=vals,
                      bad_rows=[r for r, v in zip(rows, vals) if not math.isfinite(v)])
