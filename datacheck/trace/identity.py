"""The data identity of a training run: the audit's ``index_hash`` and ``config_hash``, logged by the
launch script so that ``datacheck trace`` can tell whether the data it reads is the data the run saw.

The launch script calls :func:`log_data_identity` with the gate's report; it prints (and logs) one line::

    datacheck-data-identity: index_hash=<32 hex> config_hash=<hex>

which the trace finds in a text log (or as ``datacheck_index_hash`` / ``datacheck_config_hash`` keys of
a JSONL metrics line). The issue asks for it as ``datacheck.torch.log_data_identity``; the torch
package is another branch's, so it lives here and ``datacheck.torch`` re-exports it.
"""
from __future__ import annotations

import logging
import re
import sys
from typing import Any, TextIO

__all__ = ["IDENTITY_PREFIX", "IDENTITY_RE", "log_data_identity", "parse_identity"]

IDENTITY_PREFIX = "datacheck-data-identity:"
IDENTITY_RE = re.compile(r"datacheck-data-identity:\s*index_hash=([0-9a-f]+)\s+config_hash=([0-9a-zA-Z:_-]+)")
_log = logging.getLogger("datacheck")


def log_data_identity(report: Any, stream: TextIO | None = None) -> dict[str, str]:
    """Print and log the identity of the audited data (call it in the launch script after the gate).

    Args:
        report: a :class:`datacheck.report.model.Report` (or any object / dict with ``index_hash`` and
            ``config_hash``).
        stream: where the line is printed (default ``sys.stdout``); it is also logged at INFO to the
            ``datacheck`` logger.

    Returns:
        ``{"datacheck_index_hash": ..., "datacheck_config_hash": ...}`` (e.g. for ``wandb.config.update``).

    Raises:
        TypeError: ``report`` has no ``index_hash`` / ``config_hash``.
    """
    get = report.get if isinstance(report, dict) else lambda k: getattr(report, k, None)
    ih, ch = get("index_hash"), get("config_hash")
    if not ih or not ch:
        raise TypeError("log_data_identity needs a datacheck report (with index_hash and config_hash), "
                        f"got {type(report).__name__}")
    line = f"{IDENTITY_PREFIX} index_hash={ih} config_hash={ch}"
    print(line, file=stream or sys.stdout, flush=True)
    _log.info(line)
    return {"datacheck_index_hash": str(ih), "datacheck_config_hash": str(ch)}


def parse_identity(text: str) -> tuple[str, str] | None:
    """``(index_hash, config_hash)`` of an identity line, or None."""
    m = IDENTITY_RE.search(text)
    return (m.group(1), m.group(2)) if m else None
