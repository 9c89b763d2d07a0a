"""Default folders of the CLI's stored outputs.

Reports go to ``.datacheck/reports`` and the per-shard result cache to ``.datacheck/cache``, both
relative to the working directory, unless the environment variable ``DATACHECK_DIR`` names another
base folder (then ``$DATACHECK_DIR/reports`` and ``$DATACHECK_DIR/cache``): e.g. a CI workspace
folder, or a test run that must not write into the repository it runs in. ``--report-dir`` and
``--cache-dir`` still win over both.
"""
from __future__ import annotations

import os

from datacheck.model.constants import DEFAULT_REPORT_DIR

__all__ = ["ENV_DIR", "state_dir", "default_report_dir", "default_cache_dir"]

#: Environment variable naming the base folder of the default report and cache folders.
ENV_DIR = "DATACHECK_DIR"
_BASE = ".datacheck"


def state_dir() -> str:
    """``$DATACHECK_DIR`` when set and not blank, else ``.datacheck`` (relative to the working directory)."""
    value = os.environ.get(ENV_DIR, "")
    return value if value.strip() else _BASE


def default_report_dir() -> str:
    """The default ``--report-dir``: ``.datacheck/reports``, or ``$DATACHECK_DIR/reports``."""
    base = state_dir()
    return DEFAULT_REPORT_DIR if base == _BASE else os.path.join(base, "reports")


def default_cache_dir() -> str:
    """The default ``--cache-dir``: ``.datacheck/cache``, or ``$DATACHECK_DIR/cache``."""
    return os.path.join(state_dir(), "cache")
