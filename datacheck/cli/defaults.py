"""Default folders of the CLI's stored outputs.

Reports go to ``.datacheck/reports`` and the per-shard result cache to ``.datacheck/cache``, both
relative to the working directory, unless the environment variable ``DATACHECK_DIR`` names another
base folder (then ``$DATACHECK_DIR/reports`` and ``$DATACHECK_DIR/cache``): e.g. a CI workspace
folder, or a test run that must not write into the repository it runs in. ``--report-dir`` and
``--cache-dir`` still win over both.
"""
from __future__ import annotations

import os

from datacheck.execute.configpath import MAX_CONFIG_LEVELS
from datacheck.model.constants import DEFAULT_REPORT_DIR

__all__ = ["ENV_DIR", "state_dir", "default_report_dir", "default_cache_dir", "config_help"]

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


def config_help(what: str = "", paths: str = "PATH") -> str:
    """The ``--config`` help of every verb that looks its config up from the data: the order of
    :func:`datacheck.execute.configpath.resolve_config_path`, which they all call. ``what``: what the
    verb reads from it (e.g. ``" ([policy] and format)"``); ``paths``: the positional's metavar."""
    return (f"datacheck.toml{what} (default: ./datacheck.toml, else the first datacheck.toml in the folder "
            f"holding every {paths} or in one of its parents: at most {MAX_CONFIG_LEVELS} folders, never "
            "above a repository root nor the home folder)")
