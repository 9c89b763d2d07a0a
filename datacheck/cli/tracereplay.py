"""``datacheck trace LOG --data DATA --replay module:fn [--checkpoint PATH]``: the first bad step's rows
(the ``--export`` of the trace) replayed on the user's model in train mode, eval mode and fp32
(:func:`datacheck.torch.replay.replay_batch`); the outcome is folded into the verdict
(:func:`datacheck.trace.verdict.replay_conclusion`).

``fn`` is imported from ``module`` (a dotted module on ``sys.path`` or the working folder, or a
``path/to/file.py``) and called with no argument; it returns ``(model, loss_fn)``: a
``torch.nn.Module`` and ``loss_fn(outputs, targets)`` giving one loss per row (``reduction="none"``).
This runs the user's code, as any model does. The batch's inputs are the ``[columns] features`` (or
``input_ids``) of the config, its targets ``[columns] label`` (or ``labels``). ``--checkpoint`` is a
``torch.save``'d state dict (or a dict holding one under ``model`` / ``state_dict``), loaded with
``weights_only=True`` into the model before the replay.
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

from datacheck.model.config import Config
from datacheck.model.errors import UsageError
from datacheck.model.torchdep import require_torch
from datacheck.torch.replay import batch_from_export, replay_batch

__all__ = ["load_replay_fn", "run_replay"]

_DTYPES = ("float16", "bfloat16")


def load_replay_fn(spec: str) -> Any:
    """The callable ``fn`` of ``module:fn`` (or ``file.py:fn``).

    Raises:
        UsageError: not ``module:fn``, the module cannot be imported, or has no callable ``fn``.
    """
    mod_name, sep, fn_name = spec.rpartition(":")
    if not sep or not mod_name or not fn_name:
        raise UsageError(f"--replay {spec!r}: expected module:fn (or path/to/file.py:fn)")
    try:
        if mod_name.endswith(".py"):
            path = Path(mod_name)
            if not path.is_file():
                raise UsageError(f"--replay {spec!r}: no file {mod_name}")
            s = importlib.util.spec_from_file_location(f"_datacheck_replay_{path.stem}", path)
            if s is None or s.loader is None:
                raise UsageError(f"--replay {spec!r}: {mod_name} cannot be loaded as a module")
            mod = importlib.util.module_from_spec(s)
            s.loader.exec_module(mod)
        else:
            if "" not in sys.path and str(Path.cwd()) not in sys.path:
                sys.path.insert(0, str(Path.cwd()))
            mod = importlib.import_module(mod_name)
    except UsageError:
        raise
    except Exception as exc:  # the user's module failed to import: say which and why
        raise UsageError(f"--replay {spec!r}: importing {mod_name} failed: {type(exc).__name__}: {exc}") from None
    fn = getattr(mod, fn_name, None)
    if not callable(fn):
        raise UsageError(f"--replay {spec!r}: {mod_name} has no callable {fn_name}")
    return fn


def run_replay(spec: str, checkpoint: str | None, export: str, cfg: Config, step: int | None,
               dtype: str | None = None) -> dict[str, Any]:
    """Replay the exported rows of ``step`` and return :meth:`datacheck.torch.replay.ReplayResult.to_dict` plus ``step``.

    Raises:
        UsageError: a bad ``--replay`` or ``--checkpoint``, ``fn`` not returning ``(model, loss_fn)``, no
            input columns in the config, or the export cannot be read.
        OptionalDependencyError: torch is not installed.
    """
    torch = require_torch("datacheck trace --replay")
    got = load_replay_fn(spec)()
    if not (isinstance(got, tuple) and len(got) == 2 and callable(got[1])):
        raise UsageError(f"--replay {spec!r}: the function must return (model, loss_fn), got {type(got).__name__}")
    model, loss_fn = got
    if checkpoint is not None:
        try:
            state = torch.load(checkpoint, weights_only=True, map_location="cpu")
        except Exception as exc:  # a file torch cannot read safely
            raise UsageError(f"--checkpoint {checkpoint}: not a state dict torch.load(weights_only=True) reads: "
                             f"{type(exc).__name__}: {exc}") from None
        if isinstance(state, dict):
            state = state.get("model", state.get("state_dict", state))
        try:
            model.load_state_dict(state)
        except Exception as exc:
            raise UsageError(f"--checkpoint {checkpoint}: does not fit the model: {exc}") from None
    cols = cfg.columns
    features = list(cols.features or ([cols.input_ids] if cols.input_ids else []))
    target = cols.label or cols.labels
    if not features:
        raise UsageError("--replay needs the model's input columns: [columns] features (or input_ids) in the config")
    batch = batch_from_export(export, features, target, step=step)
    res = replay_batch(model, batch, loss_fn, dtype=getattr(torch, dtype) if dtype in _DTYPES else None)
    return {"step": step, "spec": spec, "checkpoint": checkpoint, "dtype": dtype or "model", **res.to_dict()}
