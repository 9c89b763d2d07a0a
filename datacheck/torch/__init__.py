"""datacheck's torch integration (the ``torch`` extra: ``pip install "torch>=2.2"``, or ``pip install -e ".[torch]"`` in the source folder).

Nothing here imports torch at import time; each feature imports it when used and otherwise raises
:class:`~datacheck.model.errors.OptionalDependencyError` naming the install command.

- :class:`BatchGuard` (:mod:`datacheck.torch.guard`): check every collated batch in the training loop.
- :func:`record_batches` (:mod:`datacheck.torch.record`): record the real step -> row indices order.
- :class:`TokenBudgetBatchSampler` (:mod:`datacheck.model.budget`): token-budget micro-batches
  (fairseq's ``batch_by_size``), sharded over ranks by ``DistributedSampler``.
- :func:`read_ledger` (:mod:`datacheck.io.ledger`): the per-rank ledger format and its reader (OLMo's too).
- :func:`replay_batch`, :func:`batch_from_export` (:mod:`datacheck.torch.replay`): replay an exported
  step on a fixed batch in train mode, eval mode and fp32, and name the rows with a non-finite loss.
- :class:`~datacheck.torch.hf.DatacheckCallback` (:mod:`datacheck.torch.hf`, needs ``transformers``): the
  Hugging Face Trainer callback: data identity, the ledger aligned with ``state.global_step``, and
  stop-or-warn on BatchGuard failures.
- :func:`flush_ledgers` (:mod:`datacheck.torch.record`): write every live recorder's pending lines
  (before a checkpoint save).
- :func:`log_data_identity` (:mod:`datacheck.model.identity`): print and log the audited data's
  ``index_hash``/``config_hash`` from the launch script, so ``datacheck trace`` can tell whether a
  run trained on the audited bytes.

What needs no torch at import lives below the layers that use it: the order torch's
``DistributedSampler``/``BatchSampler`` give (:mod:`datacheck.model.order`, torch imported when
run: the ``batch.*`` checks use it), the token-budget sampler (:mod:`datacheck.model.budget`), the
ledger (:mod:`datacheck.io.ledger`) and the batch plan (:mod:`datacheck.execute.plan`: the dataset's
global row order and ``rows_of_step``).

The names below load on first access (PEP 562 module ``__getattr__``), so ``import datacheck.torch``
loads neither the guard, the recorder, replay, the callback, torch nor transformers.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from datacheck.io.ledger import read_ledger
    from datacheck.model.budget import TokenBudgetBatchSampler
    from datacheck.model.errors import BatchValidationError
    from datacheck.model.identity import log_data_identity
    from datacheck.torch.guard import BatchGuard
    from datacheck.torch.hf import DatacheckCallback
    from datacheck.torch.record import flush_ledgers, record_batches
    from datacheck.torch.replay import batch_from_export, replay_batch

__all__ = ["BatchGuard", "BatchValidationError", "TokenBudgetBatchSampler", "record_batches", "flush_ledgers", "read_ledger", "log_data_identity",
           "replay_batch", "batch_from_export", "DatacheckCallback"]

#: public name -> the module that defines it (imported on first attribute access)
_LAZY = {
    "TokenBudgetBatchSampler": "datacheck.model.budget",
    "BatchGuard": "datacheck.torch.guard",
    "BatchValidationError": "datacheck.model.errors",
    "read_ledger": "datacheck.io.ledger",
    "record_batches": "datacheck.torch.record",
    "flush_ledgers": "datacheck.torch.record",
    "DatacheckCallback": "datacheck.torch.hf",
    "replay_batch": "datacheck.torch.replay",
    "batch_from_export": "datacheck.torch.replay",
    "log_data_identity": "datacheck.model.identity",
}


def __getattr__(name: str) -> Any:
    """Load a public name on first access (PEP 562) and keep it as a module global.

    Raises:
        AttributeError: ``name`` is not one of :data:`__all__` (nor a submodule already imported).
    """
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'datacheck.torch' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
