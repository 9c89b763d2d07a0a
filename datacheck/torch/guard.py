"""``BatchGuard``: check each collated batch in the training loop, with the check IDs of CHECKS.md.

Wraps a collate function. After collation the batch (a mapping of tensors, e.g. Hugging Face's
``input_ids`` / ``attention_mask`` / ``labels``; column names from ``[columns]`` when set) is checked:

- ``finite.nan`` / ``finite.inf``: a NaN / +-inf in any floating tensor (per row: first dim = batch);
- ``finite.fp16_overflow``: with ``[numeric] compute_dtype = "fp16"`` a finite |value| > 65504 (the
  largest binary16 number, IEEE 754), with ``"bf16"`` above 3.3895e38;
- ``tokens.out_of_vocab``: an ``input_ids`` value outside ``[0, vocab_size)``;
- ``labels.out_of_range``: a label outside ``[0, vocab_size)`` (token labels, 2-D) or
  ``[0, num_classes)`` (class labels, 1-D) that is not ``ignore_index``;
- ``labels.unexpected_sentinel``: a negative label that is not ``ignore_index`` (reported only here);
- ``mask.non_binary``: an ``attention_mask`` value other than 0 or 1; ``empty.all_padding``: a mask
  row of all zeros;
- ``empty.no_supervised_tokens``: a row whose token labels are all ``ignore_index``;
  ``batch.no_supervised_tokens``: the whole micro-batch has none (mean loss 0/0 = NaN);
- ``length.mismatch``: ``input_ids``, ``attention_mask`` and ``labels`` differ in shape.

Facts that are unset (no ``vocab_size``) leave their check out, as the audit does. Every check is
a vectorized tensor reduction; the results are combined so the batch costs one host sync.
On failure the batch is saved (when ``dump_dir`` is given) as ``batch-<n>.pt`` holding only tensors and
plain values (``torch.load(path, weights_only=True)`` reads it), then ``on_error`` decides: ``"raise"``
:class:`~datacheck.model.errors.BatchValidationError` naming the batch, the checks and the rows;
``"warn"`` a ``RuntimeWarning`` and the batch unchanged; ``"skip"`` the batch without its offending rows
(None when no row is left or the failure is batch-wide).
"""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Callable, Mapping

from datacheck.io.outputs import write_atomic
from datacheck.model.config import Config, config_from_dict, load_config
from datacheck.model.errors import BatchValidationError, UsageError
from datacheck.model.torchdep import require_torch

__all__ = ["BatchGuard", "FP16_MAX", "BF16_MAX"]

#: largest finite IEEE 754 binary16 value
FP16_MAX = 65504.0
#: largest finite bfloat16 value ((2 - 2**-7) * 2**127)
BF16_MAX = 3.3895313892515355e38


def _facts(facts: Config | Mapping[str, Any] | str | Path | None) -> Config:
    if facts is None:
        return Config()
    if isinstance(facts, Config):
        return facts
    if isinstance(facts, Mapping):
        return config_from_dict(dict(facts))
    return load_config(facts)


class BatchGuard:
    """Wrap ``collate_fn`` so every collated batch is checked (see the module docstring).

    Args:
        collate_fn: the collate function to wrap (e.g. a ``DataCollatorForLanguageModeling``); None:
            torch's ``default_collate``.
        facts: a :class:`~datacheck.model.config.Config`, a ``datacheck.toml`` path, or a dict in its
            layout (``{"tokens": {"vocab_size": 50257}, "labels": {"ignore_index": -100}}``).
        on_error: ``"raise"`` | ``"warn"`` | ``"skip"``.
        dump_dir: folder for the failing batches (``batch-<n>.pt``); None: nothing saved.

    Attributes:
        batches: batches checked so far; ``failed``: how many failed.

    Raises:
        UsageError: a bad ``on_error``; ConfigError: bad facts; OptionalDependencyError: no torch.
    """

    def __init__(self, collate_fn: Callable[[list[Any]], Any] | None = None,
                 facts: Config | Mapping[str, Any] | str | Path | None = None, on_error: str = "raise",
                 dump_dir: str | Path | None = None):
        if on_error not in ("raise", "warn", "skip"):
            raise UsageError(f"on_error must be 'raise', 'warn' or 'skip', got {on_error!r}")
        self.torch = require_torch("datacheck.torch.BatchGuard")
        self.collate_fn = collate_fn or self.torch.utils.data.default_collate
        self.cfg = _facts(facts)
        self.on_error = on_error
        self.dump_dir = Path(dump_dir) if dump_dir is not None else None
        cols = self.cfg.columns
        self.ids_key = cols.input_ids or "input_ids"
        self.mask_key = cols.attention_mask or "attention_mask"
        self.labels_key = cols.labels or cols.label or "labels"
        self.batches = 0
        self.failed = 0
        dt = self.cfg.numeric.compute_dtype
        self.overflow = FP16_MAX if dt == "fp16" else BF16_MAX if dt == "bf16" else None

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without the torch module (a module does not pickle), so a DataLoader whose workers
        start with ``spawn`` or ``forkserver`` (macOS' and Windows' default) can send the guard to them."""
        return {k: v for k, v in self.__dict__.items() if k != "torch"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.torch = require_torch("datacheck.torch.BatchGuard")

    def __call__(self, samples: list[Any]) -> Any:
        batch = self.collate_fn(samples)
        n = self.batches
        self.batches += 1
        failures = self.check(batch)
        if not failures:
            return batch
        self.failed += 1
        return self._fail(batch, n, failures)

    def check(self, batch: Any) -> dict[str, list[int]]:
        """check ID -> failing 0-based rows of ``batch`` (``[]``: batch-wide); empty when it passes."""
        torch = self.torch
        if not isinstance(batch, Mapping):
            batch = {str(i): t for i, t in enumerate(batch)} if isinstance(batch, (list, tuple)) else {"batch": batch}
        tensors = {k: v for k, v in batch.items() if isinstance(v, torch.Tensor)}
        ids, mask, labels = (tensors.get(self.ids_key), tensors.get(self.mask_key), tensors.get(self.labels_key))
        shapes = {k: tuple(t.shape) for k, t in ((self.ids_key, ids), (self.mask_key, mask), (self.labels_key, labels))
                  if t is not None and t.dim() >= 2}
        if len(set(shapes.values())) > 1:
            return {"length.mismatch": []}
        first = next(iter(tensors.values()), None)
        if first is None or first.dim() == 0:
            return {}
        b = first.shape[0]
        names: list[str] = []
        flags: list[Any] = []

        def add(cid: str, per_row: Any) -> None:
            names.append(cid)
            flags.append(per_row)

        def rows(t: Any) -> Any:
            return t.reshape(t.shape[0], -1)

        tok, lab = self.cfg.tokens, self.cfg.labels
        ign = lab.ignore
        for t in tensors.values():
            if t.is_floating_point() and t.dim() >= 1 and t.shape[0] == b:
                r = rows(t)
                add("finite.nan", torch.isnan(r).any(1))
                add("finite.inf", torch.isinf(r).any(1))
                if self.overflow is not None:
                    add("finite.fp16_overflow", (r.abs() > self.overflow).logical_and(torch.isfinite(r)).any(1))
        if ids is not None and tok.vocab_size is not None and not ids.is_floating_point():
            r = rows(ids)
            add("tokens.out_of_vocab", ((r < 0) | (r >= tok.vocab_size)).any(1))
        if labels is not None and not labels.is_floating_point():
            r = rows(labels)
            top = tok.vocab_size if labels.dim() >= 2 else lab.num_classes
            ignored = (r == ign) if ign is not None else torch.zeros_like(r, dtype=torch.bool)
            add("labels.unexpected_sentinel", ((r < 0) & ~ignored).any(1))
            if top is not None:
                add("labels.out_of_range", (r >= top).any(1))
            if labels.dim() >= 2:
                sup = (~ignored).sum(1)
                add("empty.no_supervised_tokens", sup == 0)
                add("batch.no_supervised_tokens", (sup.sum() == 0).expand(b))
        if mask is not None and not mask.is_floating_point():
            r = rows(mask)
            add("mask.non_binary", ((r != 0) & (r != 1)).any(1))
            add("empty.all_padding", r.sum(1) == 0)
        if not flags:
            return {}
        table = torch.stack(flags)  # (checks, rows)
        if not bool(table.any()):  # the one host sync of a passing batch
            return {}
        out: dict[str, list[int]] = {}
        for name, row in zip(names, table.cpu()):
            hit = row.nonzero().flatten().tolist()
            if hit:
                merged = sorted(set(out.get(name, [])) | set(hit))
                out[name] = [] if name == "batch.no_supervised_tokens" else merged
        return out

    def _dump(self, batch: Any, n: int, failures: dict[str, list[int]]) -> str | None:
        if self.dump_dir is None:
            return None
        torch = self.torch
        items = batch.items() if isinstance(batch, Mapping) else enumerate(batch if isinstance(batch, (list, tuple)) else [batch])
        tensors = {str(k): v.detach().cpu() for k, v in items if isinstance(v, torch.Tensor)}
        plain = {"batch": n, "failures": {k: list(v) for k, v in failures.items()},
                 "facts": self.cfg.to_dict()}
        path = self.dump_dir / f"batch-{n:06d}.pt"
        write_atomic(path, lambda f: torch.save({"tensors": tensors, "meta": plain}, f))
        return str(path)

    def _fail(self, batch: Any, n: int, failures: dict[str, list[int]]) -> Any:
        dump = self._dump(batch, n, failures)
        parts = [f"{cid} (rows {v[:10]}{' ...' if len(v) > 10 else ''})" if v else f"{cid} (whole batch)"
                 for cid, v in sorted(failures.items())]
        msg = (f"batch {n} fails: " + "; ".join(parts)
               + (f"; saved to {dump} (torch.load(path, weights_only=True))" if dump else "")
               + "; find the rows' source with datacheck plan --step or a record_batches ledger")
        if self.on_error == "raise":
            raise BatchValidationError(msg, batch=n, failures=failures, dump=dump)
        if self.on_error == "warn":
            warnings.warn(msg, RuntimeWarning, stacklevel=2)
            return batch
        bad = sorted({r for v in failures.values() for r in v})
        if any(not v for v in failures.values()) or not isinstance(batch, Mapping):
            return None
        torch = self.torch
        first = next(v for v in batch.values() if isinstance(v, torch.Tensor))
        keep = torch.tensor([i for i in range(first.shape[0]) if i not in set(bad)], dtype=torch.long)
        if keep.numel() == 0:
            return None
        sel = {k: (v.index_select(0, keep) if isinstance(v, torch.Tensor) and v.dim() >= 1
                   and v.shape[0] == first.shape[0] else v) for k, v in batch.items()}
        try:
            return type(batch)(sel)
        except TypeError:
            return sel
