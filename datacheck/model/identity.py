"""The data identity of a training run: the audit's ``index_hash`` and ``config_hash``, logged by the
launch script so that ``datacheck trace`` can tell whether the data it reads is the data the run saw.

The launch script calls :func:`log_data_identity` with the gate's report; it prints (and logs) one line::

    datacheck-data-identity: index_hash=<32 hex> config_hash=<hex>

which the trace finds in a text log (or as ``datacheck_index_hash`` / ``datacheck_config_hash`` keys of
a JSONL metrics line). The line's format is a value both sides share, so it sits at the model layer:
the launch script calls it as ``datacheck.torch.log_data_identity`` and ``datacheck trace`` parses it
(:func:`parse_identity`); neither package imports the other.
"""
from __future__ import annotations

import logging
import re
import sys
from typing import Any, Iterable, TextIO

__all__ = ["IDENTITY_PREFIX", "IDENTITY_RE", "log_data_identity", "parse_identity", "compare_identity"]

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
    def get(key: str) -> Any:
        return report.get(key) if isinstance(report, dict) else getattr(report, key, None)

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


def compare_identity(logged: Iterable[tuple[str, str]], index_hash: str, config_hash: str) -> tuple[str | None, str | None]:
    """Compare the identities a run logged with the data and config a trace reads.

    Args:
        logged: ``(index_hash, config_hash)`` pairs found in the logs (empty: nothing to compare).
        index_hash: the index hash of the data given to the trace (``--data``).
        config_hash: the hash of the config the trace audits the rows under (``--config`` or the one
            looked up as for audit; :meth:`datacheck.model.config.Config.hash`).

    Returns:
        ``(mismatch, warning)``: ``mismatch`` when no logged ``index_hash`` is the data's (other bytes
        than the run trained on: the caller refuses unless told otherwise); ``warning`` when the bytes
        are the run's but its gate audited them under another ``config_hash`` (the same rows, other
        rules: their findings here may differ from the gate's). Either is None when it does not apply.
    """
    pairs = sorted(set(logged))
    if not pairs:
        return None, None
    same_bytes = [p for p in pairs if p[0] == index_hash]
    if not same_bytes:
        return (f"the data's index_hash {index_hash} differs from the one the run logged "
                f"({', '.join(sorted({p[0] for p in pairs}))}): these are not the bytes the run trained on"), None
    if any(p[1] == config_hash for p in same_bytes):
        return None, None
    return None, (f"the data is the bytes the run trained on (index_hash {index_hash}), but the run's gate audited "
                  f"them under config_hash {', '.join(p[1] for p in same_bytes)} and this trace audits them under "
                  f"{config_hash}: other columns, thresholds or checks, so the rows' findings may differ from the "
                  "gate's (give --config the run's datacheck.toml to audit them as the gate did)")
