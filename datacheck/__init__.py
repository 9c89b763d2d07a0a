"""datacheck: audit machine-learning training data before it burns GPU hours.

Public API (a gate inside a launch script)::

    import datacheck
    report = datacheck.audit(["data/train"], config="datacheck.toml")
    report.raise_for_policy()      # raises datacheck.PolicyFailed when the gate fails

`datacheck.audit` returns the same report the CLI writes as JSON, as typed objects.
"""
from __future__ import annotations

from datacheck._version import __version__
from datacheck.api import audit
from datacheck.model.config import Config, load_config
from datacheck.model.errors import ConfigError, DatacheckError, PolicyFailed, ReportVersionError, UsageError
from datacheck.model.findings import Example, Finding, Severity
from datacheck.report.model import Report, ShardReport, read_report

__all__ = [
    "__version__",
    "audit",
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
]
