"""The one place that imports torch (lazily): every torch feature of datacheck calls :func:`require_torch`.

``import datacheck`` and the CLI never import torch; a verb or a check that needs it gets torch here or
an :class:`~datacheck.model.errors.OptionalDependencyError` (exit 2) naming the install command.
"""
from __future__ import annotations

from typing import Any

from datacheck.model.errors import OptionalDependencyError

__all__ = ["require_torch", "INSTALL_HINT", "torch_available"]

#: the exact install command (the ``torch`` extra's requirement; the PyPI name ``datacheck`` is another
#: project's, so no message tells users to install datacheck from PyPI)
INSTALL_HINT = 'pip install "torch>=2.2" (or, in the datacheck source folder, pip install -e ".[torch]")'


def require_torch(feature: str) -> Any:
    """The ``torch`` module.

    Args:
        feature: what needs torch, for the message (e.g. ``"datacheck plan"``).

    Raises:
        OptionalDependencyError: torch is not installed (or fails to import); the message names
            ``pip install "torch>=2.2"`` (the ``torch`` extra).
    """
    try:
        import torch
    except ImportError as exc:
        raise OptionalDependencyError(
            f"{feature} needs torch, which is not installed ({exc}): {INSTALL_HINT}") from None
    return torch


def torch_available() -> bool:
    """Whether torch can be imported (imports it when it can)."""
    try:
        require_torch("datacheck")
    except OptionalDependencyError:
        return False
    return True
