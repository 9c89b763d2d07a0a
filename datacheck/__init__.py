"""datacheck: audit machine-learning training data before it burns GPU hours.

Public API (a gate inside a launch script)::

    import datacheck
    report = datacheck.audit(["data/train"], config="datacheck.toml")
    report.raise_for_policy()      # raises datacheck.PolicyFailed when the gate fails

`datacheck.audit` returns the same report the CLI writes as JSON, as typed objects.

``import datacheck`` is light: the names below are loaded on first use (PEP 562 module
``__getattr__``), so a launch script or a CLI verb pays only for what it touches (no polars, pydantic,
numpy or pyarrow until ``datacheck.audit`` or another name is used; ``tests/contract/test_import_cost.py``).
"""
from __future__ import annotations

import importlib

from datacheck._version import __version__

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing on a cached rerun's path (3 ms)
if TYPE_CHECKING:
    from typing import Any

    from datacheck.api import audit
    from datacheck.model.config import Config, load_config
    from datacheck.model.errors import (
        ConfigError,
        DatacheckError,
        OutOfMemory,
        PolicyFailed,
        ReportVersionError,
        UsageError,
    )
    from datacheck.model.findings import Example, Finding, Severity
    from datacheck.report.model import Report, ShardReport, read_report

#: public name -> the module that defines it (imported on first attribute access)
_LAZY = {
    "audit": "datacheck.api",
    "data_config": "datacheck.api",
    "load_config": "datacheck.model.config",
    "Config": "datacheck.model.config",
    "read_report": "datacheck.report.model",
    "Report": "datacheck.report.model",
    "ShardReport": "datacheck.report.model",
    "Finding": "datacheck.model.findings",
    "Example": "datacheck.model.findings",
    "Severity": "datacheck.model.findings",
    "DatacheckError": "datacheck.model.errors",
    "ConfigError": "datacheck.model.errors",
    "UsageError": "datacheck.model.errors",
    "PolicyFailed": "datacheck.model.errors",
    "ReportVersionError": "datacheck.model.errors",
    "OutOfMemory": "datacheck.model.errors",
}

__all__ = [
    "__version__",
    "audit",
    "data_config",
    "load_config",
    "read_report",
    "Config",
    "Report",
    "ShardReport",
    "Finding",
    "Example",
    "Severity",
    "DatacheckError",
    "ConfigError",
    "UsageError",
    "PolicyFailed",
    "ReportVersionError",
    "OutOfMemory",
]


def __getattr__(name: str) -> Any:
    """Load a public name on first access (PEP 562) and keep it as a module global.

    Raises:
        AttributeError: ``name`` is not one of :data:`__all__` (nor a submodule already imported).
    """
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'datacheck' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
