"""The one place that imports torch (lazily): every torch feature of datacheck calls :func:`require_torch`.

``import datacheck`` and the CLI never import torch; a verb or a check that needs it gets torch here or
an :class:`~datacheck.model.errors.OptionalDependencyError` (exit 2) naming the install command.
"""
from __future__ import annotations

from typing import Any

from datacheck.model.errors import OptionalDependencyError

__all__ = ["require_torch", "INSTALL_HINT", "torch_available"]

#: what to install: the ``datacheck[torch]`` extra, named in words, and the commands that work (the extra's
#: requirement, or the extra from datacheck's source folder). The PyPI name ``datacheck`` is another
#: project's, so no message tells users to install datacheck from PyPI
#: (tests/contract/test_install_instructions.py).
INSTALL_HINT = ('the datacheck[torch] extra is not installed: pip install "torch>=2.2" '
                '(or pip install -e ".[torch]" from datacheck\'s source folder)')


def require_torch(feature: str) -> Any:
    """The ``torch`` module.

    Args:
        feature: what needs torch, for the message (e.g. ``"datacheck plan"``).

    Raises:
        OptionalDependencyError: torch is not installed (or fails to import); the message names
            the ``datacheck[torch]`` extra and ``pip install "torch>=2.2"`` (:data:`INSTALL_HINT`).
    """
    try:
        import torch
    except ImportError as exc:
        raise OptionalDependencyError(f"{feature} needs torch ({exc}); {INSTALL_HINT}") from None
    return torch


def torch_available() -> bool:
    """Whether torch can be imported (imports it when it can)."""
    try:
        require_torch("datacheck")
    except OptionalDependencyError:
        return False
    return True
