"""Environment variables datacheck refuses before polars reads them.

``POLARS_MAX_THREADS``: polars reads it once, when its first query builds its thread pool; it panics
on 0 (a ``PanicException`` with a Rust traceback, "Worker threads cannot be set to 0") and silently
ignores anything but a whole number (then every worker runs a pool of every core); datacheck's
workers inherit the variable as it is (:mod:`datacheck.execute.executors` sizes their pools only where
it is unset). :func:`check_polars_threads` refuses such a value before any query: the CLI before any
verb runs (exit 2), :func:`datacheck.audit` before it reads its config. Imports nothing but ``os``
and ``re`` (the CLI calls it before polars is imported).

``DATACHECK_BATCH_ROWS``: the rows of one batch (:func:`datacheck.formats.batches.forced_batch_rows`).
:func:`check_batch_rows` refuses a value that is not a whole number >= 1 at the same two places,
before any shard is read: a shard read with it would fail as ``decode.unreadable``, and that result
would be stored in the cache and replayed by the next run with the variable set right.
:func:`check_spill_rows` refuses a ``DATACHECK_SPILL_ROWS`` that is not a whole number >= 0 (the rule
of :func:`datacheck.io.hashspill.spill_rows`, read by the cross-shard pass after every shard was read)
there too, as a usage error rather than an internal one.
"""
from __future__ import annotations

import os
import re

from datacheck.model.errors import ConfigError

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing on a cached rerun's path (3 ms)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["check_batch_rows", "check_polars_threads", "check_spill_rows"]

#: values of ``POLARS_MAX_THREADS`` polars uses: a whole decimal number >= 1, surrounding blanks and a
#: ``+`` allowed. Polars (1.x, 2.1) panics on 0 when its thread pool is first built and silently
#: ignores anything else ("abc", "-1", "2.5", ""), using every core.
_THREADS_VALUE = re.compile(r"\s*\+?[0-9]+\s*")
#: the most ``POLARS_MAX_THREADS`` datacheck lets polars start: polars starts as many threads as the
#: value says (18446744073709551615, u64's maximum, made ``import polars`` hang) and ignores a value
#: beyond u64 with a warning, using every core
MAX_POLARS_THREADS = 65536


def check_polars_threads(environ: Any = None) -> None:
    """Refuse a ``POLARS_MAX_THREADS`` polars cannot use (see the module docstring); ``environ``: the
    environment to read (None: ``os.environ``).

    Raises:
        ConfigError: naming the variable, its value and what to set instead (the CLI's exit code 2).
    """
    env = os.environ if environ is None else environ
    value = env.get("POLARS_MAX_THREADS")
    if value is None or (_THREADS_VALUE.fullmatch(value) and 1 <= int(value) <= MAX_POLARS_THREADS):
        return
    raise ConfigError(f"POLARS_MAX_THREADS={value!r}: polars needs a whole number of threads from 1 to "
                      f"{MAX_POLARS_THREADS} (it panics on 0, starts as many threads as a larger number says "
                      "and ignores anything else); set it "
                      "to e.g. POLARS_MAX_THREADS=4, or unset it (datacheck then sizes each worker's pool "
                      "to cores // workers)")


def _check_whole_number(name: str, least: int, advice: str, environ: Any) -> None:
    """Refuse the environment variable ``name`` when it is set (not blank) but not a whole number >=
    ``least``; ``advice`` ends the message (what to set instead)."""
    env = os.environ if environ is None else environ
    raw = env.get(name, "").strip()
    if not raw:
        return
    try:
        ok = int(raw) >= least
    except ValueError:
        ok = False
    if not ok:
        raise ConfigError(f"{name}={raw!r}: expected a whole number of rows >= {least} {advice}")


def check_batch_rows(environ: Any = None) -> None:
    """Refuse a ``DATACHECK_BATCH_ROWS`` that is set (not blank) but not a whole number >= 1 (the rule
    of :func:`datacheck.formats.batches.forced_batch_rows`); ``environ``: the environment to read
    (None: ``os.environ``).

    Raises:
        ConfigError: naming the variable and its value (the CLI's exit code 2).
    """
    _check_whole_number("DATACHECK_BATCH_ROWS", 1, "(e.g. DATACHECK_BATCH_ROWS=10000), or unset it "
                        "(batches of about 64 MiB decoded)", environ)


def check_spill_rows(environ: Any = None) -> None:
    """Refuse a ``DATACHECK_SPILL_ROWS`` that is set (not blank) but not a whole number >= 0 (the rule
    of :func:`datacheck.io.hashspill.spill_rows`); ``environ``: the environment to read (None:
    ``os.environ``).

    Raises:
        ConfigError: naming the variable and its value (the CLI's exit code 2).
    """
    _check_whole_number("DATACHECK_SPILL_ROWS", 0, "(rows of row hashes held in memory before they spill "
                        "to $TMPDIR), or unset it (8,000,000)", environ)
